//go:build linux || darwin

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
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

// The box may read a terminal it is handed, whichever job has the
// terminal's foreground: it runs in a session of its own, out of reach of
// the job control (SIGTTIN) that stops a shell's background jobs when they
// read, and a descriptor of the terminal for writing alone (stdout) opens
// it anew for reading through /proc/self/fd. So the box holds the terminal
// only while cordon's job has the foreground (a shell takes it back when
// the job stops, or gives it none, cordon run … &): otherwise it would
// read what is typed to the shell, a sudo or ssh password among it.
// shareTerminal and endOnSuspend keep to that.

// shareTerminal gives s the terminals on its stdin, stdout and stderr
// unless one is cordon's controlling terminal and another process group
// has its foreground, and says whether it did. Then (started in the
// background) the command's stdin is /dev/null and its output reaches the
// terminal through a pipe that cordon copies. Of a terminal it does not
// control (a pseudo-terminal a program hands it, setsid cordon run) cordon
// cannot tell who else reads it: it is handed over.
func shareTerminal(s *sandbox.Spec) (held bool) {
	var terminals []*os.File
	for _, v := range []any{s.Stdin, s.Stdout, s.Stderr} {
		if f, ok := v.(*os.File); ok && f != nil {
			if _, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios); err == nil {
				terminals = append(terminals, f)
			}
		}
	}
	background := false
	for _, f := range terminals {
		if pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP); err == nil && pgrp != unix.Getpgrp() {
			background = true
		}
	}
	if !background {
		return len(terminals) > 0
	}
	for _, f := range terminals {
		switch {
		case s.Stdin == io.Reader(f):
			s.Stdin = nil
		case s.Stdout == io.Writer(f):
			s.Stdout = throughCordon{f}
		case s.Stderr == io.Writer(f):
			s.Stderr = throughCordon{f}
		}
	}
	return false
}

// throughCordon hides a file from the backend, which then hands the
// command a pipe and copies what comes through it to the file.
type throughCordon struct{ io.Writer }

// suspendSignals stop a job from its terminal: Ctrl-Z, and a background
// job's read or write.
var suspendSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}

// endOnSuspend returns ctx ended, instead of cordon stopped, when one of
// suspendSignals comes: a run whose box holds the terminal ends when its
// job is stopped. The shell would take the foreground back while the box,
// which no signal to cordon's job stops, went on reading the terminal.
// suspended says which signal came, if one did (0 if none); stop stops
// listening.
func endOnSuspend(ctx context.Context) (_ context.Context, suspended func() syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, suspendSignals...)
	var got atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			got.Store(int32(sig.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	suspended = func() syscall.Signal { return syscall.Signal(got.Load()) }
	return ctx, suspended, func() {
		cancel()
		<-done
		signal.Stop(sigs)
	}
}

// suspendedResult is the result of a run that sig, one of suspendSignals,
// ended, the backend's own result (a tree killed, or a sandbox that did
// not start, had the kill come early) aside: exit status 128+N, as a shell
// reports a job that stopped, the reason as its Cause, and no error.
func suspendedResult(res sandbox.Result, sig syscall.Signal) sandbox.Result {
	res.ExitCode, res.Signal, res.TimedOut = 128+int(sig), unix.SignalName(sig), false
	res.Cause = fmt.Sprintf("the run's job was stopped from the terminal (%s; Ctrl-Z sends it), which ends the process tree of a run that holds the terminal: the shell takes the terminal back, and the sandbox would read what is typed to it", res.Signal)
	return res
}
