// Command cordon runs a command, or an agent, in an OS sandbox whose only way
// to the network is a per-session egress proxy.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	_ "github.com/cordon-sandbox/cordon/internal/prefault" // start-up's page faults, taken in bulk
	"github.com/cordon-sandbox/cordon/internal/termtext"
)

func main() {
	if err := newRootCmd(os.Args[1:]).Execute(); err != nil {
		os.Exit(printError(os.Stderr, err))
	}
}

// exitError ends the process with a specific code (and an optional
// message, and the fix for what it says).
type exitError struct {
	code     int
	msg, fix string
}

func (e exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

// runError is the error of a command's run (see oneLineErrors), as
// opposed to one cobra found in the command line before it.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// printError writes err to w and returns the exit code it calls for. An
// error of a command's run may quote what a hostile repository or a
// sandboxed command chose (a project file's text, where a link there
// points, a file's name): it is printed escaped and on one line, its
// newlines too, so that nothing of theirs starts a line of its own that
// looks like cordon's ("cordon: fix: run cordon network open"). The fix
// of an exitError, cordon's own, has a line of its own. Cobra's errors,
// which name only what was typed, keep their lines (the suggestions
// after an unknown command).
func printError(w io.Writer, err error) int {
	var re runError
	if !errors.As(err, &re) {
		fmt.Fprintln(w, "cordon:", termtext.Lines(err.Error()))
		return 2
	}
	var ee exitError
	if !errors.As(err, &ee) {
		fmt.Fprintln(w, "cordon:", termtext.Printable(err.Error(), 0))
		return 2
	}
	if ee.msg != "" {
		fmt.Fprintln(w, "cordon:", termtext.Printable(ee.msg, 0))
	}
	if ee.fix != "" {
		fmt.Fprintln(w, "cordon: fix:", termtext.Printable(ee.fix, 0))
	}
	return ee.code
}
