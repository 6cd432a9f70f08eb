// Command floor is the least a launcher written in Go can do: it forks the
// program its arguments name (an absolute path, then that program's
// arguments), waits for it, and exits as it did. make bench times it
// starting bare bwrap, beside bare bwrap and cordon run, so that the cost
// of a Go process's own start is measured in the same run as the rest.
package main

import (
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: floor /absolute/program [arg]...\n")
		os.Exit(2)
	}
	pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		os.Stderr.WriteString("floor: " + err.Error() + "\n")
		os.Exit(2)
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}
