//go:build linux

package linux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// stopGrace is how long a run told to stop (SIGTERM, SIGINT, SIGHUP) has
// before its whole process tree is killed.
const stopGrace = 10 * time.Second

// ExitTimeout is the exit code of a run its deadline ended, as timeout(1).
const ExitTimeout = 124

// StartError says the command never ran: bwrap could not build the box, or
// the init could not execute the command. Code is 125, 126 or 127.
type StartError struct {
	Code   int
	Reason string
}

func (e *StartError) Error() string { return e.Reason }

// Run starts s.Argv in the sandbox and waits for it. Signals cordon
// receives (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH)
// go to the init, which passes them to the command. The deadline, a
// cancelled ctx, or cordon's death ends the whole process tree: the init
// is pid 1 of its own pid namespace, and bwrap runs with
// --die-with-parent. A command that never ran returns a *StartError.
func (b *Backend) Run(ctx context.Context, s *sandbox.Spec) (sandbox.Result, error) {
	h, err := b.host(s.Policy)
	if err != nil {
		return sandbox.Result{ExitCode: ExitLaunchFailed}, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	l, err := build(s, h, scratchName(), nil)
	if err != nil {
		return sandbox.Result{ExitCode: ExitLaunchFailed}, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	return b.launch(ctx, s, h, l, nil)
}

// launch runs a built launch. With probe set, the init's probe report is
// stored there.
func (b *Backend) launch(ctx context.Context, s *sandbox.Spec, h hostInfo, l *launch, probe *[]probeResult) (sandbox.Result, error) {
	fail := func(err error) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: ExitLaunchFailed}, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	if err := writeScratch(l, h.uid, h.gid); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(l.scratch)

	fds, err := newLaunchFiles(l)
	if err != nil {
		return fail(err)
	}
	defer fds.close()

	argv := append([]string{l.argv[0], "--args", fmt.Sprint(fdArgs)}, l.argv[l.sep:]...)
	var extra []*os.File
	if s.Policy.Network == policy.NetRestricted {
		if b.opts.Holder == nil {
			return fail(errors.New("network mode restricted is not available in this build"))
		}
		if argv, extra, err = b.opts.Holder.Wrap(s, argv); err != nil {
			return fail(fmt.Errorf("prepare the restricted network: %w", err))
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.ExtraFiles = append([]*os.File{fds.statusW, fds.seccomp, fds.initW, fds.args}, extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if h.uid != os.Getuid() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid), Groups: []uint32{}}
	}
	if s.Policy.Network == policy.NetRestricted {
		b.opts.Holder.SysProcAttr(cmd.SysProcAttr, h.uid, h.gid)
	}
	var cg *runCgroup
	if h.limits.cgroupParent != "" {
		if cg, err = newRunCgroup(h.limits, h.uid, h.gid); err != nil {
			return fail(err)
		}
		defer cg.remove()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.fd.Fd())
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, relayedSignals...)
	defer signal.Stop(sigs)

	// Pdeathsig follows the thread that forked, so the start and the wait
	// share one locked thread.
	started := make(chan error, 1)
	waited := make(chan error, 1)
	begin := time.Now()
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fail(fmt.Errorf("start %s: %w", argv[0], err))
	}
	fds.closeChildEnds()

	st := statusReader{reported: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); st.readBwrap(fds.statusR) }()
	go func() { defer wg.Done(); st.readInit(fds.initR) }()

	if b.opts.Holder != nil && s.Policy.Network == policy.NetRestricted {
		stop, err := b.opts.Holder.Started(ctx, s, cmd.Process.Pid)
		if err != nil {
			_ = cmd.Process.Kill()
			<-waited
			wg.Wait()
			return fail(fmt.Errorf("start the restricted network: %w", err))
		}
		defer stop()
	}

	var deadline <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	kill := func() {
		if pid := st.childPid(); pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		_ = cmd.Process.Kill()
		if cg != nil {
			cg.kill()
		}
	}
	timedOut := false
	reported := st.reported
	var grace <-chan time.Time
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-waited:
			break loop
		case <-reported:
			// The init runs, so bwrap has made every mount: the scratch
			// files are no longer needed, and a killed cordon leaves none.
			_ = os.RemoveAll(l.scratch)
			reported = nil
		case sig := <-sigs:
			if pid := st.childPid(); pid > 0 {
				_ = unix.Kill(pid, sig.(unix.Signal))
			} else if sig != unix.SIGWINCH {
				kill()
			}
			// A command asked to stop gets a grace period, then the
			// whole tree ends, however it (or its init) behaves.
			if grace == nil && (sig == unix.SIGTERM || sig == unix.SIGINT || sig == unix.SIGHUP) {
				grace = time.After(stopGrace)
			}
		case <-grace:
			kill()
		case <-deadline:
			timedOut = true
			kill()
		case <-ctx.Done():
			kill()
			ctx = context.Background()
		}
	}
	wg.Wait()
	res := sandbox.Result{Duration: time.Since(begin)}
	if probe != nil {
		*probe = st.probe
	}
	switch {
	case timedOut:
		res.TimedOut, res.ExitCode, res.Signal = true, ExitTimeout, "SIGKILL"
		return res, nil
	case st.initErr != nil:
		res.ExitCode = st.initErr.Code
		return res, st.initErr
	case st.exit != nil:
		res.ExitCode, res.Signal = st.exit.Code, st.exit.Signal
		return res, nil
	case st.bwrapExit != nil && st.started:
		res.ExitCode = *st.bwrapExit
		return res, nil
	}
	res.ExitCode = ExitLaunchFailed
	reason := "the sandbox did not start"
	if waitErr != nil {
		reason += " (" + waitErr.Error() + ")"
	}
	if msg := st.stderrHint(); msg != "" {
		reason += ": " + msg
	}
	return res, &StartError{Code: ExitLaunchFailed, Reason: reason + "; bwrap's own message, if any, is printed above"}
}

// launchFiles are the descriptors a launch passes bwrap, with the ends
// cordon keeps.
type launchFiles struct {
	statusR, statusW *os.File
	initR, initW     *os.File
	seccomp, args    *os.File
}

// newLaunchFiles creates the status pipes and the memfds holding the
// seccomp program and bwrap's options (its command stays on the command
// line, where bwrap requires it).
func newLaunchFiles(l *launch) (*launchFiles, error) {
	f := &launchFiles{}
	var err error
	if f.statusR, f.statusW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("create status pipe: %w", err)
	}
	if f.initR, f.initW, err = os.Pipe(); err != nil {
		f.close()
		return nil, fmt.Errorf("create status pipe: %w", err)
	}
	if f.seccomp, err = memfd("cordon-seccomp", seccompBytes(l.seccomp)); err != nil {
		f.close()
		return nil, err
	}
	var args strings.Builder
	for _, a := range l.argv[1:l.sep] {
		args.WriteString(a)
		args.WriteByte(0)
	}
	if f.args, err = memfd("cordon-bwrap-args", []byte(args.String())); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// closeChildEnds drops cordon's copies of what only the child uses, so the
// pipes reach EOF when the sandbox ends.
func (f *launchFiles) closeChildEnds() {
	for _, c := range []**os.File{&f.statusW, &f.initW, &f.seccomp, &f.args} {
		if *c != nil {
			(*c).Close()
			*c = nil
		}
	}
}

func (f *launchFiles) close() {
	f.closeChildEnds()
	for _, c := range []*os.File{f.statusR, f.initR} {
		if c != nil {
			c.Close()
		}
	}
}

// memfd returns an anonymous file holding data, positioned at its start.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind %s: %w", name, err)
	}
	return f, nil
}

// statusReader collects what bwrap and the init report.
type statusReader struct {
	// reported is closed at the init's first report.
	reported  chan struct{}
	once      sync.Once
	mu        sync.Mutex
	pid       int
	bwrapExit *int
	started   bool
	initErr   *StartError
	exit      *initExit
	probe     []probeResult
}

// readBwrap reads bwrap's --json-status-fd stream: {"child-pid": N}, then
// {"exit-code": N} when the init ends.
func (r *statusReader) readBwrap(f io.Reader) {
	dec := json.NewDecoder(f)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return
		}
		r.mu.Lock()
		if v, ok := m["child-pid"].(float64); ok {
			r.pid = int(v)
		}
		if v, ok := m["exit-code"].(float64); ok {
			code := int(v)
			r.bwrapExit = &code
		}
		r.mu.Unlock()
	}
}

// readInit reads the init's report lines.
func (r *statusReader) readInit(f io.Reader) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rep initReport
		if json.Unmarshal(sc.Bytes(), &rep) != nil {
			continue
		}
		r.once.Do(func() { close(r.reported) })
		r.mu.Lock()
		switch {
		case rep.Started:
			r.started = true
		case rep.Error != "":
			r.initErr = &StartError{Code: rep.Code, Reason: rep.Error}
		case rep.Exit != nil:
			r.exit = rep.Exit
		case rep.Probe != nil:
			r.started = true
			r.probe = rep.Probe
		}
		r.mu.Unlock()
	}
}

func (r *statusReader) childPid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// stderrHint explains a launch that produced no report at all.
func (r *statusReader) stderrHint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid == 0 {
		return "bwrap failed before creating the sandbox"
	}
	return "bwrap failed while building the sandbox's mounts"
}
