//go:build linux || darwin

package main

import (
	"golang.org/x/sys/unix"
)

// keepTerminal saves the settings of the terminal on stdin, stdout or
// stderr (the first that is one) and returns what puts them back. The
// sandboxed command can change them through the descriptors it is given
// (echo off, raw mode), and a command ended at its deadline, or killed,
// leaves them so; the user's shell would then be left without echo.
// They are put back only when they changed and cordon is in the
// terminal's foreground process group (from the background, setting
// them would stop cordon with SIGTTOU).
func keepTerminal() (restore func()) {
	for _, fd := range []int{0, 1, 2} {
		saved, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			continue
		}
		return func() {
			now, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
			if err != nil || *now == *saved {
				return
			}
			if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
				return
			}
			_ = unix.IoctlSetTermios(fd, ioctlSetTermios, saved)
		}
	}
	return func() {}
}
