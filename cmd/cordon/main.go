// Command cordon runs a command, or an agent, in an OS sandbox whose only way
// to the network is a per-session egress proxy.
package main

import (
	"errors"
	"fmt"
	"os"

	_ "github.com/cordon-sandbox/cordon/internal/prefault" // start-up's page faults, taken in bulk
	"github.com/cordon-sandbox/cordon/internal/termtext"
)

func main() {
	err := newRootCmd(os.Args[1:]).Execute()
	if err == nil {
		return
	}
	// An error may name what the workspace holds (where a link points, a
	// gitlink's path), which a hostile repository chose: its lines are
	// printed escaped.
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "cordon:", termtext.Lines(ee.msg))
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "cordon:", termtext.Lines(err.Error()))
	os.Exit(2)
}

// exitError ends the process with a specific code (and an optional message).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }
