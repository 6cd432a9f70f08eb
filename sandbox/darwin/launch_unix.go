//go:build unix

package darwin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// probeTimeout bounds one sandbox-exec probe.
const probeTimeout = 10 * time.Second

// waitDelay bounds how long Run waits, once the command has exited, for
// output still held open by its descendants before it ends them.
const waitDelay = time.Second

// runProbe runs /usr/bin/true under profile and returns what sandbox-exec
// printed.
func runProbe(ctx context.Context, exe, profile string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-p", profile, "--", "/usr/bin/true")
	// In a process group of its own, as the sandbox's: a program in
	// cordon's is one the user's shell runs beside it (sharesJob).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// launch starts the plan in a session and process group of its own,
// forwards cordon's termination signals to the group, and kills the group
// at the deadline, when ctx ends, and once the command has exited.
func launch(ctx context.Context, s *sandbox.Spec, plan *sandbox.Plan) (sandbox.Result, error) {
	cmd := exec.Command(plan.Argv[0], plan.Argv[1:]...)
	cmd.Env = append([]string{}, s.Env...) // never nil: nil would hand over cordon's own environment
	cmd.Dir = workdir(s)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	// A new session: no controlling terminal, so no TIOCSTI into the
	// user's shell, and one group to signal for the whole tree.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = waitDelay

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	if err := s.Committed(); err != nil {
		return sandbox.Result{ExitCode: exitLaunch}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sandbox.Result{ExitCode: exitLaunch}, fmt.Errorf("start %s: %w", plan.Argv[0], err)
	}
	group := -cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var deadline <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	cancelled := ctx.Done()
	res := sandbox.Result{}
	var waitErr, ctxErr error
wait:
	for {
		select {
		case waitErr = <-done:
			break wait
		case sig := <-sigs:
			_ = syscall.Kill(group, sig.(syscall.Signal))
		case <-deadline:
			res.TimedOut, deadline = true, nil
			_ = syscall.Kill(group, syscall.SIGKILL)
		case <-cancelled:
			ctxErr, cancelled = ctx.Err(), nil
			_ = syscall.Kill(group, syscall.SIGKILL)
		}
	}
	// Whatever the command left running in its group ends with it.
	_ = syscall.Kill(group, syscall.SIGKILL)
	res.Duration = time.Since(start)

	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("wait for %s: %w", plan.Argv[0], waitErr)
	}
	if ctxErr != nil {
		return res, fmt.Errorf("run cancelled: %w", ctxErr)
	}
	return res, nil
}
