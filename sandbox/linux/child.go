//go:build linux

package linux

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// child is a process cordon started: bwrap, or the restricted network's
// holder. It is forked with syscall.ForkExec rather than os/exec: the os
// package checks, before the first child a process starts, that pidfds
// work, by cloning a child that exits at once, and that check alone is
// about half a millisecond of every run's start here. Pdeathsig follows
// the thread that forked, so the fork and the wait share one locked
// thread, which ends with them: the thread may have been confined
// (see startChild), and no other goroutine may run on it.
type child struct {
	pid  int
	done chan struct{} // closed once the process is reaped
	err  error         // how it ended, once done is closed: nil for exit 0
	sig  unix.Signal   // the signal that ended it, once done is closed; 0 for an exit

	// mu orders signals before the reaping: a pid is only signalled
	// while it is still this process's, a zombie at worst.
	mu     sync.Mutex
	reaped bool
}

// startChild starts argv with env, the files as its descriptors 0, 1, 2
// and on (a nil file is closed in the child), and sys. confine, when set,
// runs first on the thread that forks, and what it confines (a Landlock
// domain, say) the child inherits; if it fails, nothing starts.
func startChild(argv, env []string, files []*os.File, sys *syscall.SysProcAttr, confine func() error) (*child, error) {
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = ^uintptr(0)
		if f != nil {
			fds[i] = f.Fd()
		}
	}
	c := &child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		if confine != nil {
			if err := confine(); err != nil {
				started <- err
				return
			}
		}
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env, Files: fds, Sys: sys})
		runtime.KeepAlive(files)
		if err != nil {
			started <- err
			return
		}
		c.pid = pid
		started <- nil
		c.err = c.reap()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// reap waits until the process has ended, marks it reaped, then collects
// it: until then its pid cannot be reused, so signal never reaches
// another process.
func (c *child) reap() error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return fmt.Errorf("wait for pid %d: %w", c.pid, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(c.pid, &ws, 0, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return fmt.Errorf("wait for pid %d: %w", c.pid, err)
		}
	}
	c.reaped = true
	switch {
	case ws.Signaled():
		c.sig = ws.Signal()
		return fmt.Errorf("signal: %v", ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Errorf("exit status %d", ws.ExitStatus())
	}
	return nil
}

// signal sends sig to the process, unless it is reaped already.
func (c *child) signal(sig unix.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		_ = unix.Kill(c.pid, sig)
	}
}

// wait waits for the process to end and says how it did.
func (c *child) wait() error {
	<-c.done
	return c.err
}
