// Command cordon runs a command, or an agent, in an OS sandbox whose only way
// to the network is a per-session egress proxy.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	_ "github.com/cordon-sandbox/cordon/internal/prefault" // start-up's page faults, taken in bulk
)

func main() {
	err := newRootCmd(os.Args[1:]).Execute()
	if err == nil {
		return
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "cordon:", printableLines(ee.msg))
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "cordon:", printableLines(err.Error()))
	os.Exit(2)
}

// printableLines is msg, an error, with the control characters of each
// of its lines escaped (printable): an error may name what the workspace
// holds (where a link points, a gitlink's path), which a hostile
// repository chose, and whose escape sequences a terminal would act on.
func printableLines(msg string) string {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = printable(l, 0)
	}
	return strings.Join(lines, "\n")
}

// exitError ends the process with a specific code (and an optional message).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }
