package main

import "golang.org/x/sys/unix"

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
