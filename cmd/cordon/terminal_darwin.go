package main

import (
	"io"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

const (
	ioctlGetTermios = unix.TIOCGETA
	ioctlSetTermios = unix.TIOCSETA
)

// exclusive reports whether the terminal on fd is in exclusive mode:
// macOS cannot tell, and a shell's terminal is not, so it says no.
func exclusive(int) bool { return false }

// startOutput restarts output stopped by tcflow(TCOOFF) or ^S.
func startOutput(fd int) {
	_ = unix.IoctlSetInt(fd, unix.TIOCSTART, 0)
}

// fread is FREAD of <sys/fcntl.h>: TIOCFLUSH's argument for the input.
const fread = 0x1

// flushInput discards what waits to be read on the terminal on fd.
func flushInput(fd int) {
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCFLUSH, fread)
}

// groupMembers lists the processes in process group pgrp.
func groupMembers(pgrp int) []int {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgrp)
	if err != nil {
		return nil
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = int(p.Proc.P_pid)
	}
	return pids
}

// ownFork would say whether process pid is a fork of cordon's that has not
// yet exec'd; macOS has no /proc to tell, and it says no.
func ownFork(int) bool { return false }

// lookProcess reads process pid's parent, process group and state from
// the kernel; false when it is gone.
func lookProcess(pid int) (process, bool) {
	p, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || p.Proc.P_pid != int32(pid) {
		return process{}, false
	}
	return process{parent: int(p.Eproc.Ppid), group: int(p.Eproc.Pgid), ended: p.Proc.P_stat == szomb}, true
}

// szomb is SZOMB of <sys/proc.h>: a process that has exited and waits to
// be reaped.
const szomb = 5

// controllingDevice would name the terminal behind /dev/tty: macOS has no
// TIOCGDEV, so it says 0, and /dev/tty and the terminal's own name count
// as two terminals.
func controllingDevice(any) uint64 { return 0 }

// relay is Linux's alone (relay_linux.go): on macOS the box is handed the
// terminal itself, and what it writes there reaches it unfiltered.
type relay struct{}

func relayTerminal(*sandbox.Spec, func(string), func(string, unix.Signal)) (*relay, error) {
	return nil, nil
}

func (*relay) says() io.Writer { return nil }

func (*relay) boxGone() {}

func (*relay) stop() {}

// terminalCapability says that on macOS a run in the foreground of a
// terminal is handed the terminal itself.
func terminalCapability() sandbox.Capability {
	return sandbox.Capability{Name: capTerminal, Status: sandbox.Degraded,
		Reason: "a run in the foreground of a terminal is handed the terminal itself: what it writes there reaches it unfiltered, OSC 52 (the clipboard) included",
		Fix:    "paste what a run left on the clipboard only after looking at it, or run with stdout and stderr away from the terminal"}
}
