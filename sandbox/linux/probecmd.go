//go:build linux

package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// Probe is the self-test (cordon __probe FD OUTSIDE): run as the command of
// a sandbox built exactly as a run's, it checks from inside what bwrap was
// asked to build (see runProbe) and writes its findings as one JSON array
// on descriptor FD. OUTSIDE is a host directory that is not mounted.
func Probe(args []string) int {
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "cordon %s: want FD OUTSIDE, got %q\n", ProbeCommand, args)
		return ExitLaunchFailed
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "cordon %s: descriptor %q is not a number above 2\n", ProbeCommand, args[0])
		return ExitLaunchFailed
	}
	out := os.NewFile(uintptr(fd), "cordon-probe")
	defer out.Close()
	line, err := json.Marshal(runProbe(args[1]))
	if err == nil {
		_, err = out.Write(append(line, '\n'))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon %s: report: %v\n", ProbeCommand, err)
		return ExitLaunchFailed
	}
	return 0
}
