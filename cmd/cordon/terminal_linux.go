package main

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/procstat"
)

const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)

// exclusive reports whether the terminal on fd is in exclusive mode.
func exclusive(fd int) bool {
	on, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL)
	return err == nil && on != 0
}

// startOutput undoes tcflow(TCOOFF), and only that: output the user
// stopped with ^S stays stopped.
//
// The box cannot change the line discipline (its seccomp filter refuses
// TIOCSETD). What tcflow(TCIOFF) did is not undone: it sends a STOP
// character, which on a pseudo-terminal only reaches the emulator, and
// the START character that would undo it on a serial line would be a
// stray byte in the output of every run.
func startOutput(fd int) {
	_ = unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOON)
}

// flushInput discards what waits to be read on the terminal on fd.
func flushInput(fd int) {
	_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
}

// groupMembers lists the processes in process group pgrp that cordon can
// see.
func groupMembers(pgrp int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if g, err := unix.Getpgid(pid); err == nil && g == pgrp {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ownFork says whether process pid is a fork of cordon's that has not yet
// exec'd (it runs cordon's own program): the capability check's bwrap
// --version between its fork and its setpgid, which comes with the exec.
func ownFork(pid int) bool {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return false
	}
	exe, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && os.SameFile(self, exe)
}

// lookProcess reads process pid's state, parent and process group from
// /proc/PID/stat (its third to fifth fields); false when it is gone.
func lookProcess(pid int) (process, bool) {
	fields := procstat.Fields(pid)
	if len(fields) < 3 {
		return process{}, false
	}
	parent, err1 := strconv.Atoi(fields[1])
	group, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil {
		return process{}, false
	}
	return process{parent: parent, group: group, ended: fields[0] == "Z"}, true
}

// ttyDevice is the device number of /dev/tty, major 5, minor 0.
const ttyDevice = 5 << 8

// controllingDevice is the device number of the terminal v is when v is
// cordon's controlling terminal, by its own name or as /dev/tty; 0 when
// it is not. fstat tells /dev/tty apart from the terminal it stands for;
// TIOCGDEV names that terminal's device through either. A terminal by its
// own name counts only when it is the controlling one (the kernel answers
// TIOCGPGRP for no other): /dev/pts/0 of another devpts instance (a
// container's) has the same number as ours, and a pseudo-terminal's
// master (whose own device, /dev/ptmx, TIOCGDEV does not name) writes to
// its input.
func controllingDevice(v any) uint64 {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return 0
	}
	fd := int(f.Fd())
	dev, err := unix.IoctlGetUint32(fd, unix.TIOCGDEV)
	if err != nil {
		return 0
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0
	}
	switch st.Rdev {
	case ttyDevice:
		return uint64(dev)
	case uint64(dev):
		if _, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil {
			return uint64(dev)
		}
	}
	return 0
}
