package main

import "golang.org/x/sys/unix"

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
