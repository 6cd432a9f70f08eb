// Package survive keeps one connection's failure from ending cordon. A
// panic on a goroutine nothing recovers (one cordon starts for a
// connection, or one of net/http's Transport, which calls the readers
// cordon hands it) ends the process, and with it cordon run before its
// exit line and its aftercare, which sets aside what the box planted for
// the host's git. Code that serves one connection on such a goroutine
// defers Recover, and the panic becomes that connection's error.
package survive

import (
	"fmt"
	"os"
	"runtime/debug"
)

// Recover, deferred by a function with a named error result whose
// address it is given, turns a panic into that error, which says what
// was being done, and prints the panic's stack on stderr.
func Recover(err *error, doing string) {
	p := recover()
	if p == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "cordon: a panic %s, which ends only that: %v\n%s", doing, p, debug.Stack())
	*err = fmt.Errorf("cordon failed %s: %v", doing, p)
}
