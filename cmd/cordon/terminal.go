//go:build linux || darwin

package main

import (
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// keepTerminal saves the state of stdin, stdout and stderr, and of the
// terminal on them, and returns what puts it back. The sandboxed command
// shares them, and what it changes outlives it:
//
//   - the terminal's settings (echo off, raw mode), which a command ended
//     at its deadline, or killed, leaves so: the shell would be left
//     without echo;
//   - exclusive mode (TIOCEXCL), after which only root can open the
//     terminal: sudo, ssh and gpg, which open /dev/tty to prompt, fail
//     with EBUSY. It is cleared unless it was on before the run;
//   - output stopped (tcflow TCOOFF), which the shell's next write waits
//     on for ever (^Q does not undo it), and a break held on a serial
//     line (TIOCSBRK). Output is restarted and the break ended;
//   - the flags of the open file the command shares with the shell
//     (O_NONBLOCK, with which the shell's next read fails with EAGAIN,
//     O_APPEND, O_ASYNC): they are put back when they changed.
//
// The settings are put back only when they changed and cordon is in the
// terminal's foreground process group: from the background they would
// overwrite those of the job in the foreground, and setting them would
// stop cordon with SIGTTOU. The rest is undone from the background too.
//
// The command cannot make the terminal its own, or take its foreground
// process group: it runs in a session of its own (bwrap --new-session;
// setsid on macOS). The window size it sets is left as it is, as any
// program's is.
func keepTerminal() (restore func()) {
	var flags [3]int // F_GETFL of each, -1 where it is not open
	for fd := range flags {
		f, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			f = -1
		}
		flags[fd] = f
	}
	type terminal struct {
		fd        int
		settings  *unix.Termios
		exclusive bool
	}
	var terminals []terminal
	for _, fd := range []int{0, 1, 2} {
		saved, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			continue
		}
		terminals = append(terminals, terminal{fd: fd, settings: saved, exclusive: exclusive(fd)})
	}
	return func() {
		for fd, saved := range flags {
			if saved < 0 {
				continue
			}
			if now, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && now != saved {
				_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, saved)
			}
		}
		for _, t := range terminals {
			if !t.exclusive {
				_ = unix.IoctlSetInt(t.fd, unix.TIOCNXCL, 0)
			}
			restartOutput(t.fd)
			now, err := unix.IoctlGetTermios(t.fd, ioctlGetTermios)
			if err != nil || *now == *t.settings {
				continue
			}
			if pgrp, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
				continue
			}
			_ = unix.IoctlSetTermios(t.fd, ioctlSetTermios, t.settings)
		}
	}
}

// restartOutput restarts the terminal's output and ends a break. The
// kernel answers a process outside the foreground process group that
// asks with SIGTTOU, unless it ignores the signal; cordon does, for the
// moment it asks.
func restartOutput(fd int) {
	if !signal.Ignored(syscall.SIGTTOU) {
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
	}
	startOutput(fd)
	_ = unix.IoctlSetInt(fd, unix.TIOCCBRK, 0)
}
