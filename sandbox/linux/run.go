//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
)

// unreportedGrace is how long bwrap's init has to report the command's
// end once the command has ended, before the run ends the tree itself.
const unreportedGrace = 2 * time.Second

// watchDelay is how long a run with no scratch files waits before it
// looks for the command to watch its end. A command that stops the init
// and ends sooner keeps the run going until a deadline or a signal, as a
// command that never ends would.
const watchDelay = 100 * time.Millisecond

// stopGrace is how long a run told to stop (SIGTERM, SIGINT, SIGHUP) has
// before its whole process tree is killed.
const stopGrace = 10 * time.Second

// ExitTimeout is the exit code of a run its deadline ended, as timeout(1).
const ExitTimeout = 124

// ExitLaunchFailed is the exit code of a run whose sandbox never started;
// the restricted network's holder exits with it too.
const ExitLaunchFailed = holder.ExitFailed

// relayedSignals are passed from cordon to the command.
var relayedSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH,
}

// StartError says the command never ran: bwrap could not build the box.
// Code is ExitLaunchFailed.
type StartError struct {
	Code   int
	Reason string
}

func (e *StartError) Error() string { return e.Reason }

// Run starts s.Argv in the sandbox and waits for it. Signals cordon
// receives (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH)
// go to the command. The deadline, a cancelled ctx, or cordon's death
// ends the whole process tree: bwrap's init is pid 1 of the sandbox's pid
// namespace, and bwrap runs with --die-with-parent. A sandbox that never
// started returns a *StartError; a command that could not be executed
// ends with 126 or 127, as in a shell.
func (b *Backend) Run(ctx context.Context, s *sandbox.Spec) (sandbox.Result, error) {
	h, err := b.host(s.Policy)
	if err != nil {
		return sandbox.Result{ExitCode: ExitLaunchFailed}, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	// The cgroups earlier runs left when their cordon was killed are
	// swept beside the run, and told of with its aftercare.
	swept := make(chan []sandbox.LeftCgroup, 1)
	go func() {
		var left []sandbox.LeftCgroup
		if s.Sweep {
			if parent, err := cgroupParent(); err == nil {
				left = sweepCgroups(parent)
			}
		}
		swept <- left
	}()
	res, err := b.run(ctx, s, h)
	res.Cgroups = append(res.Cgroups, <-swept...)
	return res, err
}

// run is Run once the host is known.
func (b *Backend) run(ctx context.Context, s *sandbox.Spec, h hostInfo) (sandbox.Result, error) {
	// What an earlier run, whose cordon was killed, left unchecked is
	// seen to first: built on, it would be guarded as the user's own.
	// A box such a run left running is ended first: it would go on
	// writing the workspace as the aftercare looks.
	var owed sandbox.Result
	if ws, err := realPath(s.Workspace); err == nil {
		owed.Care = sandbox.Collect(ws, func() sandbox.Care {
			return sandbox.Care{Boxes: sweepOrphans(h.goarch, h.uid)}
		})
	}
	l, err := build(s, h, scratchName(h), nil)
	if err != nil {
		owed.ExitCode = ExitLaunchFailed
		return owed, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	if l.cannot != nil {
		// As a shell answers: the launch is recorded, the box not built.
		if err := commit(s); err != nil {
			owed.ExitCode = ExitLaunchFailed
			return owed, err
		}
		// The message may name a script's interpreter, which the
		// script's first line, in the workspace, chose.
		fmt.Fprintf(s.Stderr, "cordon: %s\n", termtext.Printable(l.cannot.msg, 0))
		owed.ExitCode = l.cannot.code
		return owed, nil
	}
	l.owes = true
	res, err := b.launch(ctx, s, h, l, nil)
	res.Care = owed.Care.Add(sandbox.Aftercare(l.guarded))
	if l.paid != nil {
		l.paid()
	}
	return res, err
}

// commit is s.Committed, a failure of which is a start failure.
func commit(s *sandbox.Spec) error {
	if err := s.Committed(); err != nil {
		return &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	return nil
}

// launch runs a built launch. With probe set, the self-test's findings
// are stored there.
func (b *Backend) launch(ctx context.Context, s *sandbox.Spec, h hostInfo, l *launch, probe *[]probeResult) (sandbox.Result, error) {
	fail := func(err error) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: ExitLaunchFailed}, &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
	}
	unhold, err := writeScratch(l, h.uid, h.gid)
	if err != nil {
		return fail(err)
	}
	defer unhold()
	if l.scratch != "" {
		defer os.RemoveAll(l.scratch)
	}

	fds, err := newLaunchFiles(l, probe != nil)
	if err != nil {
		return fail(err)
	}
	defer fds.close()
	over, err := overmounts(l.argv[1:l.sep])
	if err != nil {
		return fail(err)
	}
	mounts, err := watchOvermounts(over)
	if err != nil {
		return fail(err)
	}
	defer mounts.close()

	argv := append([]string{l.argv[0], "--args", fmt.Sprint(fdArgs)}, l.argv[l.sep:]...)
	// Notify starts the threads that take signals, about a millisecond
	// here, so it runs beside the set-up below; the go-ahead waits for it.
	// A signal that arrives before the loop below waits in sigs.
	sigs := make(chan os.Signal, 16)
	notified := make(chan struct{})
	go func() { signal.Notify(sigs, relayedSignals...); close(notified) }()
	// Stopping costs as much again, and nothing after the run needs it
	// done: it goes on beside whatever follows.
	defer func() { go func() { <-notified; signal.Stop(sigs) }() }()
	var c *child
	var cg *runCgroup
	begin := time.Now()
	if s.Policy.Network == policy.NetRestricted {
		if b.opts.Holder == nil {
			return fail(errors.New("network mode restricted is not available in this build"))
		}
		hd := b.takePrepared(s)
		if hd == nil {
			if hd, err = b.opts.Holder.start(h); err != nil {
				return fail(fmt.Errorf("prepare the restricted network: %w", err))
			}
		}
		defer hd.close()
		stdio, done, err := stdioFiles(s.Stdin, s.Stdout, s.Stderr)
		if err != nil {
			return fail(err)
		}
		defer done()
		passed := []int{fdStatus, fdSeccomp, fdArgs, fdBuilt}
		files := []*os.File{fds.statusW, fds.seccomp, fds.args, fds.builtR}
		if probe != nil {
			passed, files = append(passed, fdProbe), append(files, fds.probeW)
		}
		// The launch goes first: the holder execs bwrap as soon as the
		// network is up, and the box is built while cordon takes the
		// network's sockets; the command waits for the go-ahead.
		if err := hd.launch(argv, stdio, files, passed); err != nil {
			// A holder that failed has said why on stderr.
			return fail(fmt.Errorf("start the restricted network: the holder did not take the launch: %w", err))
		}
		if err := hd.attach(ctx, s.Network); err != nil {
			hd.kill()
			return fail(fmt.Errorf("start the restricted network: %w", err))
		}
		c, cg = hd.child, hd.cg
		if cg != nil {
			defer cg.remove()
		}
	} else {
		stdio, done, err := stdioFiles(s.Stdin, s.Stdout, s.Stderr)
		if err != nil {
			return fail(err)
		}
		defer done()
		// A nil entry (the probe's descriptor, in a run) is closed in
		// bwrap, so the command inherits nothing but its stdio.
		files := append(stdio[:], fds.statusW, fds.seccomp, fds.probeW, fds.args, fds.builtR)
		sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if h.uid != os.Getuid() {
			sys.Credential = &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid), Groups: []uint32{}}
		}
		if h.limits.cgroupParent != "" {
			if cg, err = newRunCgroup(h.limits, h.uid, h.gid); err != nil {
				return fail(err)
			}
			defer cg.remove()
			sys.UseCgroupFD, sys.CgroupFD = true, int(cg.fd.Fd())
		}
		closeInherited()
		// bwrap gets no environment: the command's is set with --clearenv
		// and --setenv, and bwrap's own process stays in the sandbox as its
		// pid 1, whose environ and memory the command can read.
		var confine func() error
		if s.Policy.Network == policy.NetOpen {
			// The host's network namespace comes with its abstract
			// unix sockets, which only Landlock closes.
			confine = scopeAbstractUnix
		}
		if c, err = startChild(argv, []string{}, files, sys, confine); err != nil {
			return fail(fmt.Errorf("start %s: %w", argv[0], err))
		}
	}
	waited := c.done
	fds.closeChildEnds()
	<-notified

	st := newStatusReader()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.readBwrap(fds.statusR) }()
	if probe != nil {
		wg.Add(1)
		go func() { defer wg.Done(); st.readProbe(fds.probeR) }()
	}
	ended := make(chan struct{})
	defer close(ended)
	released := make(chan error, 1)
	go func() { released <- release(s, h, l, st, fds) }()
	var startErr error
	// A watcher finds the command and watches its end (commandEnded
	// below): as soon as it runs when it has scratch files, which go
	// then; otherwise after watchDelay, which most short runs end before,
	// sparing them the look through /proc.
	found := make(chan *process)
	// The channel is passed: the loop below sets found to nil once it
	// has looked itself.
	go func(found chan<- *process) {
		if l.scratch == "" {
			select {
			case <-time.After(watchDelay):
			case <-ended:
				return
			}
		}
		c := st.findCommand(ended)
		select {
		case found <- c:
		case <-ended:
			c.close()
		}
	}(found)

	// The box's init, held once bwrap reports it: the run ends only once
	// it has (see waitBoxGone).
	inits := make(chan *process, 1)
	go func() { inits <- initOf(st.waitInit(), c.pid) }()

	var deadline <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	// boxInit is the init once held (inits); kill holds it itself if it
	// comes first.
	var boxInit *process
	kill := func() {
		// Through a pidfd, as every signal here: the init is bwrap's
		// child, and once bwrap has reaped it its pid may be another's.
		if init := boxInit; init != nil {
			init.signal(unix.SIGKILL)
		} else if init := initOf(st.initPid(), c.pid); init != nil {
			init.signal(unix.SIGKILL)
			init.close()
		}
		// bwrap leads its own process group, and its sandbox child stays
		// in it until the go-ahead. That child has no parent-death signal
		// yet (bwrap's init sets one only once it runs), so a box killed
		// before it reports its pid is ended through the group, at once,
		// rather than when cordon's end of the seccomp pipe closes.
		// The group's number, bwrap's pid, is not another's while bwrap
		// is unreaped or the group has a process in it, and the loop
		// ends once bwrap is reaped.
		_ = unix.Kill(-c.pid, unix.SIGKILL)
		c.signal(unix.SIGKILL)
		if cg != nil {
			cg.kill()
		}
	}
	var running *process
	defer func() { running.close() }()
	// commandEnded is closed once the command has ended, and unreported
	// fires if bwrap's init has not reported that end by then: the init
	// reports within milliseconds, unless the command stopped or altered
	// it (it may: same user; a PTRACE_ATTACH whose tracer exits leaves
	// it stopped), which would otherwise keep the run, and every daemon
	// the command left, going until a deadline or a signal. The run then
	// ends the tree itself, with the code the command ended with
	// (orphaned), read from its zombie.
	var commandEnded <-chan struct{}
	var unreported <-chan time.Time
	var orphaned *int
	unreportedEnd := false
	watch := func(c *process) {
		if c != nil && commandEnded == nil {
			commandEnded = c.ended(ended)
		}
	}
	timedOut := false
	var grace <-chan time.Time
	var waitErr error
	// stopped says why cordon ended the box itself, when no deadline did
	// and the command's end may never be reported.
	var stopped string
	// exited is the command's result once bwrap has reported its end;
	// no deadline or signal changes it after that.
	var exited *sandbox.Result
	exitKnown := st.exitKnown
	// recorded is closed once s.Exited has returned: it runs (an fsync,
	// for cordon run) beside bwrap's teardown, and the run waits for it.
	var recorded chan struct{}
	defer func() {
		if recorded != nil {
			<-recorded
		}
	}()
loop:
	for {
		select {
		case <-waited:
			waitErr = c.err
			break loop
		case <-exitKnown:
			exitKnown = nil
			if startErr == nil {
				res := commandResult(*st.exitCode(), timedOut, time.Since(begin))
				exited, deadline, grace, unreported = &res, nil, nil, nil
				if s.Exited != nil {
					recorded = make(chan struct{})
					go func() { defer close(recorded); s.Exited(res) }()
				}
			}
		case boxInit = <-inits:
			inits = nil
		case err := <-released:
			released = nil
			if err != nil {
				startErr = err
				kill()
			}
		case running = <-found:
			// The command runs, so bwrap has made every mount: the
			// scratch files are no longer needed, and a killed cordon
			// leaves none. What an earlier cordon, killed sooner, left
			// is swept now too, beside the command, off the run's start
			// (and only by a run with scratch files, as it was).
			if l.scratch != "" {
				_ = os.RemoveAll(l.scratch)
				go sandbox.SweepTemp()
			}
			found = nil
			watch(running)
		case <-commandEnded:
			commandEnded = nil
			if exited == nil {
				unreported = time.After(unreportedGrace)
			}
		case o := <-mounts.lostMount():
			if exited == nil && stopped == "" {
				stopped = o.lostReason()
				kill()
			}
		case <-unreported:
			unreported = nil
			orphaned, unreportedEnd = running.exitCode(), true
			kill()
		case sig := <-sigs:
			if running == nil {
				// The watcher may not have looked since the
				// command started.
				if running = commandOf(st.initPid()); running != nil && found != nil {
					if l.scratch != "" {
						_ = os.RemoveAll(l.scratch)
					}
					found = nil
				}
				watch(running)
			}
			if running != nil {
				if sig == unix.SIGINT || sig == unix.SIGQUIT {
					init := initOf(st.initPid(), c.pid)
					running.signalJob(sig.(unix.Signal), init)
					init.close()
				} else {
					running.signal(sig.(unix.Signal))
				}
			} else if sig != unix.SIGWINCH {
				stopped = fmt.Sprintf("cordon received %s before the command could be sent it, and ended the box", unix.SignalName(sig.(unix.Signal)))
				kill()
			}
			// A command asked to stop gets a grace period, then the
			// whole tree ends, however it behaves.
			if grace == nil && (sig == unix.SIGTERM || sig == unix.SIGINT || sig == unix.SIGHUP) {
				grace = time.After(stopGrace)
			}
		case <-grace:
			stopped = fmt.Sprintf("the command was still running %s after cordon passed it the signal to stop, and cordon ended the box", stopGrace)
			kill()
		case <-deadline:
			timedOut = true
			kill()
		case <-ctx.Done():
			stopped = "the run was cancelled, and cordon ended the box"
			kill()
			ctx = context.Background()
		}
	}
	// bwrap is gone, but the rest of the box may not be yet.
	if inits != nil {
		boxInit = <-inits
	}
	waitBoxGone(boxInit)
	// The sandbox is gone; the copies of its output, waited for on
	// return, may need the terminal it shared put back first.
	if s.Ended != nil {
		s.Ended()
	}
	wg.Wait()
	if released != nil {
		// bwrap ended first; its stream is closed, so release returns.
		if err := <-released; err != nil && startErr == nil {
			startErr = err
		}
	}
	if probe != nil {
		*probe = st.probe
	}
	switch {
	case exited != nil:
		return *exited, nil
	case timedOut:
		return commandResult(0, true, time.Since(begin)), nil
	case st.exitCode() != nil && startErr == nil:
		return commandResult(*st.exitCode(), false, time.Since(begin)), nil
	case orphaned != nil && startErr == nil:
		return commandResult(*orphaned, false, time.Since(begin)), nil
	case unreportedEnd && startErr == nil:
		return sandbox.Result{Duration: time.Since(begin), ExitCode: ExitLaunchFailed},
			&StartError{Code: ExitLaunchFailed, Reason: "the command ended, but the sandbox's init (which the command may have stopped or altered) neither reported nor kept its exit code; cordon ended the sandbox"}
	}
	res := sandbox.Result{Duration: time.Since(begin), ExitCode: ExitLaunchFailed}
	if startErr != nil {
		return res, startErr
	}
	if cause := endedUnreported(l.wentAhead, stopped, c.sig); cause != "" {
		// The command had been let start, and the box ended before bwrap
		// could report its end: its init died, and with it, by SIGKILL,
		// everything in the box.
		return sandbox.Result{Duration: time.Since(begin), ExitCode: 128 + int(unix.SIGKILL), Signal: "SIGKILL", Cause: cause}, nil
	}
	if stopped != "" {
		return res, &StartError{Code: ExitLaunchFailed, Reason: stopped + ", before the command started"}
	}
	reason := "the sandbox did not start"
	if waitErr != nil {
		reason += " (" + waitErr.Error() + ")"
	}
	if msg := st.stderrHint(); msg != "" {
		reason += ": " + msg
	}
	return res, &StartError{Code: ExitLaunchFailed, Reason: reason + "; bwrap's own message, if any, is printed above"}
}

// endedUnreported says why a command let start (wentAhead) ended with no
// report of its end from bwrap: cordon ended the box (stopped says why),
// or a signal from outside ended bwrap (launcher). It is empty for a box
// that never got the go-ahead, or whose launcher exited on its own.
func endedUnreported(wentAhead bool, stopped string, launcher unix.Signal) string {
	switch {
	case !wentAhead:
		return ""
	case stopped != "":
		return stopped
	case launcher != 0:
		return fmt.Sprintf("the box's launcher (bwrap) was ended by %s from outside cordon while the command ran, and the box ended with it", unix.SignalName(launcher))
	}
	return ""
}

// release lets the built sandbox start the command: the launch is
// recorded (s.Commit), the rlimits go on the sandbox's init (the command
// inherits them when the init forks it), and then, once bwrap has built
// the box (awaitBuilt), the go-ahead (giveGoAhead). If cordon dies first,
// the command never starts, and the sandbox ends. A nil error with no
// go-ahead given means bwrap ended before it made the sandbox (or its
// init died first).
func release(s *sandbox.Spec, h hostInfo, l *launch, st *statusReader, fds *launchFiles) error {
	if err := commit(s); err != nil {
		return err
	}
	// Before the command starts, the run owes its aftercare; a record
	// that cannot be written leaves only a killed cordon's debt unpaid.
	if l.owes {
		l.paid, _ = sandbox.Owe(l.workspace, l.guarded)
	}
	if len(l.rlimits) > 0 {
		pid := st.waitInit()
		if pid == 0 {
			return nil
		}
		err := setRlimitsAs(pid, h.uid, h.gid, l.rlimits)
		switch {
		case errors.Is(err, unix.ESRCH):
			return nil // the init is gone: bwrap failed, and Run says why
		case err != nil:
			return &StartError{Code: ExitLaunchFailed, Reason: err.Error()}
		}
	}
	if !fds.awaitBuilt() {
		return nil // bwrap ended before it built the box (or the launch did), and Run says why
	}
	switch err := fds.giveGoAhead(); {
	case errors.Is(err, syscall.EPIPE):
		return nil // bwrap ended before it read the program, and Run says why
	case err != nil:
		return &StartError{Code: ExitLaunchFailed, Reason: fmt.Sprintf("let the sandbox start the command: %v", err)}
	}
	l.wentAhead = true // read by Run once it has this call's result
	return nil
}

// goAheadText says, for --dry-run, what happens before the go-ahead.
func goAheadText(l *launch) string {
	var b strings.Builder
	b.WriteString("the seccomp pipe, which is the go-ahead: bwrap builds the box and waits to read the program here; cordon fsyncs the launch line, sets these limits on the sandbox's init, waits for bwrap to read fd " + strconv.Itoa(fdBuilt) + " (--block-fd, read once the box is built), then writes the program, and the init starts the command under it, which inherits them (if cordon dies first, the pipe ends empty and bwrap exits without starting it):\n")
	for _, r := range l.rlimits {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// stdioFiles gives the command's stdin, stdout and stderr as files, as
// exec.Cmd would: a pipe, a socket or a character device (a terminal,
// /dev/null) as it is (handedOver), nil as /dev/null, anything else,
// a regular file or a directory among them, through a pipe and a
// goroutine that copies (one pipe when stdout and stderr are the same
// writer, or the same file). done closes cordon's copies of the
// command's ends and waits until the command's output is copied (its side
// closes when the sandbox ends).
func stdioFiles(in io.Reader, out, errw io.Writer) (files [3]*os.File, done func(), err error) {
	var ends []*os.File
	var copies sync.WaitGroup
	done = func() {
		for _, f := range ends {
			f.Close()
		}
		copies.Wait()
	}
	for i, v := range []any{in, out, errw} {
		if f, ok := v.(*os.File); ok && f != nil && handedOver(f) {
			files[i] = f
			continue
		}
		if i == 2 && (sameWriter(errw, out) || sandbox.SameFile(errw, out)) {
			// One pipe for both, as exec.Cmd does: two copies into one
			// writer would race.
			files[2] = files[1]
			continue
		}
		if v == nil {
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				done()
				return files, nil, err
			}
			files[i], ends = null, append(ends, null)
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			done()
			return files, nil, err
		}
		if i == 0 {
			// Not waited for: it ends at the reader's end, or when the
			// command is gone and the pipe breaks.
			files[i], ends = r, append(ends, r)
			go func() { io.Copy(w, in); w.Close() }()
			continue
		}
		files[i], ends = w, append(ends, w)
		copies.Add(1)
		go func(dst io.Writer) { defer copies.Done(); io.Copy(dst, r); r.Close() }(v.(io.Writer))
	}
	return files, done, nil
}

// sameWriter reports whether a and b are the same writer; writers of a
// type that cannot be compared are not.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// handedOver says whether the command may hold f itself: a pipe, a
// socket or a character device (a terminal, /dev/null). Any other file
// the box could open anew through /proc/self/fd, with whatever access
// the user has and beyond the box's mounts: a file given as stdin
// (cordon run … < ~/notes.txt) rewritten, one given as stdout (>> a log)
// read whole, and a directory (< /) the root of every host path, read
// and written through openat. Such a file goes through a pipe instead.
func handedOver(f *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR:
		return true
	}
	return false
}

// closeInherited marks every descriptor above stderr close-on-exec: cordon
// opens its own so, but one it inherited open (from a shell, a terminal
// multiplexer, an agent's launcher) would otherwise pass through bwrap to
// the command. The launch's own descriptors are handed over explicitly.
// One close_range call does it (Linux 5.11); older kernels have each
// descriptor in /proc/self/fd marked.
func closeInherited() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// exitSignal names the signal an exit code above 128 stands for, as bwrap
// and shells encode it (128+N); "" for other codes.
func exitSignal(code int) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	return unix.SignalName(unix.Signal(code - 128))
}

// launchFiles are the descriptors a launch passes bwrap, with the ends
// cordon keeps.
type launchFiles struct {
	statusR, statusW *os.File
	probeR, probeW   *os.File
	args             *os.File
	// seccomp is the sandbox's end of the seccomp pipe (--seccomp);
	// goAhead is cordon's, where it writes program as the go-ahead (see
	// giveGoAhead).
	seccomp, goAhead *os.File
	program          []byte
	// builtR is the sandbox's end of the pipe that says the box is built
	// (--block-fd), builtW cordon's (see newBuiltNotice).
	builtR, builtW *os.File
}

// newLaunchFiles creates bwrap's status pipe, the self-test's pipe (probe
// launches only), the seccomp pipe, the pipe that says the box is built,
// and the memfd holding bwrap's options (its command stays on the command
// line, where bwrap requires it).
func newLaunchFiles(l *launch, probe bool) (*launchFiles, error) {
	f := &launchFiles{program: seccompBytes(l.seccomp)}
	// The go-ahead must reach bwrap whole or not at all: one write of at
	// most PIPE_BUF bytes to a pipe is never split.
	if len(f.program) > pipeBuf {
		return nil, fmt.Errorf("the seccomp program is %d bytes, over the %d a pipe takes in one write", len(f.program), pipeBuf)
	}
	var err error
	if f.statusR, f.statusW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("create status pipe: %w", err)
	}
	if probe {
		if f.probeR, f.probeW, err = os.Pipe(); err != nil {
			f.close()
			return nil, fmt.Errorf("create the self-test's pipe: %w", err)
		}
	}
	if f.seccomp, f.goAhead, err = os.Pipe(); err != nil {
		f.close()
		return nil, fmt.Errorf("create the seccomp pipe: %w", err)
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
	if f.builtR, f.builtW, err = newBuiltNotice(); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// newBuiltNotice makes the pipe through which cordon learns that bwrap has
// built the box: bwrap reads its --block-fd once every mount is made, just
// before the seccomp program. The pipe has one slot (a page) and keeps
// each write a packet of its own (O_DIRECT), which no later write joins;
// one packet is written here, so bwrap's read of a byte takes it at once.
// A second packet (awaitBuilt) waits for the slot, which that read frees.
func newBuiltNotice() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_DIRECT); err != nil {
		return nil, nil, fmt.Errorf("create the pipe that says the box is built: %w", err)
	}
	r, w = os.NewFile(uintptr(p[0]), "|0"), nil
	_, err = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, unix.Getpagesize())
	if err == nil {
		_, err = unix.Write(p[1], []byte{1})
	}
	if err == nil {
		// Non-blocking, so the runtime's poller waits for the slot and
		// Close ends the wait.
		err = unix.SetNonblock(p[1], true)
	}
	w = os.NewFile(uintptr(p[1]), "|1")
	if err != nil {
		r.Close()
		w.Close()
		return nil, nil, fmt.Errorf("prepare the pipe that says the box is built: %w", err)
	}
	return r, w, nil
}

// awaitBuilt returns once bwrap has built the box and read the first
// packet of the built notice (newBuiltNotice), true, or false when the
// launch ended first (close). Once bwrap has read, it closes its end: the
// second packet then finds the pipe with no reader (EPIPE), as it does if
// bwrap died before it read; either way the go-ahead may go (it reaches
// no one in the second case, which Run reports). The sandbox's init has no
// parent-death signal until it has read the seccomp program and forked
// the command (bubblewrap sets it only then): a go-ahead written while
// the box was still being built (seconds, with a thousand masks) left
// that long a time in which a cordon killed outright took bwrap with it
// but not the init, which then read the program and ran the command on
// with no deadline, no exit line and no aftercare. Given after this, it
// leaves the init the few system calls between its read of the program
// and its prctl.
func (f *launchFiles) awaitBuilt() bool {
	_, err := f.builtW.Write([]byte{1})
	return err == nil || errors.Is(err, syscall.EPIPE)
}

// pipeBuf is PIPE_BUF on Linux: a write of up to this many bytes to a
// pipe is atomic.
const pipeBuf = 4096

// giveGoAhead lets the built sandbox start the command. bwrap reads its
// seccomp program only once the box is built, up to the pipe's end, and
// only then starts the command, under it: the program, written at once
// and followed by the pipe's end, is the go-ahead. A pipe that ends with
// no program (cordon died first) gives bwrap an empty filter, which the
// kernel refuses (EINVAL); bwrap then exits without starting the
// command, and nothing is left waiting.
func (f *launchFiles) giveGoAhead() error {
	_, err := f.goAhead.Write(f.program)
	if cerr := f.goAhead.Close(); err == nil {
		err = cerr
	}
	f.goAhead = nil
	return err
}

// closeChildEnds drops cordon's copies of what only the child uses, so the
// pipes reach EOF when the sandbox ends.
func (f *launchFiles) closeChildEnds() {
	for _, c := range []**os.File{&f.statusW, &f.probeW, &f.seccomp, &f.args, &f.builtR} {
		if *c != nil {
			(*c).Close()
			*c = nil
		}
	}
}

func (f *launchFiles) close() {
	f.closeChildEnds()
	for _, c := range []*os.File{f.statusR, f.probeR, f.goAhead, f.builtW} {
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

// statusReader collects what bwrap and the self-test report.
type statusReader struct {
	mu sync.Mutex
	// pid is bwrap's init (pid 1 inside), as the host sees it.
	pid int
	// reported is closed once pid is known, or bwrap's stream has ended.
	reported chan struct{}
	once     sync.Once
	// exit is the command's exit code, reported only for a command that
	// bwrap got as far as executing; exitKnown is closed once it is.
	exit      *int
	exitKnown chan struct{}
	probe     []probeResult
}

func newStatusReader() *statusReader {
	return &statusReader{reported: make(chan struct{}), exitKnown: make(chan struct{})}
}

// readBwrap reads bwrap's --json-status-fd stream: {"child-pid": N, ...},
// then {"exit-code": N} when the command ends, one object per line.
func (r *statusReader) readBwrap(f io.Reader) {
	defer r.once.Do(func() { close(r.reported) })
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && (err != io.EOF || len(line) == 0) {
			return
		}
		fields, ok := statusFields(bytes.TrimSuffix(line, []byte("\n")))
		if !ok {
			return
		}
		r.mu.Lock()
		if v, ok := fields["child-pid"]; ok && r.pid == 0 {
			r.pid = int(v)
			r.once.Do(func() { close(r.reported) })
		}
		if v, ok := fields["exit-code"]; ok && r.exit == nil {
			code := int(v)
			r.exit = &code
			close(r.exitKnown)
		}
		r.mu.Unlock()
	}
}

// statusFields reads one line of bwrap's status: a JSON object whose
// values are all integers, as bwrap writes them, and nothing else. It is
// read by hand: encoding/json's first use costs about 0.3 ms here, on the
// way to the go-ahead.
func statusFields(line []byte) (map[string]int64, bool) {
	s := string(line)
	skip := func() { s = strings.TrimLeft(s, " \t\r") }
	take := func(c byte) bool {
		skip()
		if s == "" || s[0] != c {
			return false
		}
		s = s[1:]
		return true
	}
	if !take('{') {
		return nil, false
	}
	fields := map[string]int64{}
	if take('}') {
		skip()
		return fields, s == ""
	}
	for {
		if !take('"') {
			return nil, false
		}
		end := strings.IndexAny(s, "\"\\")
		if end < 0 || s[end] != '"' || strings.ContainsFunc(s[:end], func(r rune) bool { return r < 0x20 || r == utf8.RuneError }) {
			return nil, false
		}
		key := s[:end]
		s = s[end+1:]
		if !take(':') {
			return nil, false
		}
		skip()
		n := strings.IndexFunc(s, func(r rune) bool { return r != '-' && (r < '0' || r > '9') })
		if n < 0 {
			n = len(s)
		}
		digits := strings.TrimPrefix(s[:n], "-")
		if digits == "" || (len(digits) > 1 && digits[0] == '0') {
			return nil, false
		}
		v, err := strconv.ParseInt(s[:n], 10, 64)
		if err != nil {
			return nil, false
		}
		fields[key] = v
		s = s[n:]
		if take('}') {
			skip()
			return fields, s == ""
		}
		if !take(',') {
			return nil, false
		}
	}
}

// readProbe reads the self-test's findings.
func (r *statusReader) readProbe(f io.Reader) {
	var found []probeResult
	if json.NewDecoder(f).Decode(&found) != nil {
		return
	}
	r.mu.Lock()
	r.probe = found
	r.mu.Unlock()
}

// waitInit waits for bwrap to report its init; 0 if it ended first.
func (r *statusReader) waitInit() int {
	<-r.reported
	return r.initPid()
}

// exitCode is the command's exit code, nil until bwrap has reported it.
func (r *statusReader) exitCode() *int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exit
}

// commandResult is the result of a command that ended with code, or was
// ended by the deadline. A code no process ends with (outside 0 to 255)
// was written to the init's eventfd by the box itself, pretending to be
// the init: cordon's own exit keeps only the low byte, so 256 read as a
// failure in the log and exited 0. It ends the run with ExitLaunchFailed,
// saying so.
func commandResult(code int, timedOut bool, d time.Duration) sandbox.Result {
	switch {
	case timedOut:
		return sandbox.Result{TimedOut: true, ExitCode: ExitTimeout, Signal: "SIGKILL", Duration: d}
	case code < 0 || code > 255:
		return sandbox.Result{ExitCode: ExitLaunchFailed, Duration: d,
			Cause: fmt.Sprintf("bwrap reported exit status %d, which no process ends with: the box wrote it to the sandbox init's eventfd itself", code)}
	}
	return sandbox.Result{ExitCode: code, Signal: exitSignal(code), Duration: d}
}

func (r *statusReader) initPid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

// stderrHint explains a launch that never ran the command.
func (r *statusReader) stderrHint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pid == 0 {
		return "bwrap failed before creating the sandbox"
	}
	return "bwrap failed while building the sandbox's mounts"
}

// process is the sandboxed command's process, or the sandbox's init,
// held by a pidfd so a signal can never reach a process that took over
// its pid.
type process struct {
	pid  int
	fd   int
	once sync.Once
}

// findCommand waits for bwrap's init to start the command (pid 2 inside)
// and returns it; nil if the sandbox ended first. The command exists only
// once every mount is made: bwrap's init forks it last.
func (r *statusReader) findCommand(ended <-chan struct{}) *process {
	wait := time.Millisecond
	for {
		if init := r.initPid(); init > 0 {
			if c := commandOf(init); c != nil {
				return c
			}
		}
		select {
		case <-ended:
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// commandOf returns init's child whose pid inside the sandbox is 2, or nil.
func commandOf(init int) *process {
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", init, init))
	if err != nil {
		return nil
	}
	for _, field := range strings.Fields(string(children)) {
		pid, err := strconv.Atoi(field)
		if err != nil || !isCommand(pid, init) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// The pidfd names whatever held pid when it was opened: make sure
		// that is still the command.
		if !isCommand(pid, init) {
			unix.Close(fd)
			continue
		}
		return &process{pid: pid, fd: fd}
	}
	return nil
}

// isCommand says whether host pid is init's child and pid 2 inside.
func isCommand(pid, init int) bool {
	status := procStatus(strconv.Itoa(pid))
	ns := strings.Fields(status["NSpid"])
	return status["PPid"] == strconv.Itoa(init) && len(ns) > 0 && ns[len(ns)-1] == "2"
}

// initOf holds the sandbox's init, host pid init, whose parent is
// bwrap, launcher; nil if there is none, or it has ended (and been
// reaped, so the pid may be another's now).
func initOf(init, launcher int) *process {
	if init <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(init, 0)
	if err != nil {
		return nil
	}
	// As in commandOf: the pidfd names whatever held the pid when it was
	// opened.
	status := procStatus(strconv.Itoa(init))
	ns := strings.Fields(status["NSpid"])
	if status["PPid"] != strconv.Itoa(launcher) || len(ns) == 0 || ns[len(ns)-1] != "1" {
		unix.Close(fd)
		return nil
	}
	return &process{pid: init, fd: fd}
}

// waitBoxGone ends the sandbox's init, once bwrap has ended, and waits
// until it has: the kernel lets a pid namespace's init end only once
// every other process in the namespace is gone. bwrap's end alone does
// not say so: its init dies of it (its parent-death signal), but first
// frees its memory, which the command may have made it fill (same
// user: ptrace), and until then the box's other processes run on, and
// a daemon among them could plant in the workspace what the aftercare
// that follows had already looked for. A nil init (bwrap ended before
// it reported one, or after the init ended) is no wait.
func waitBoxGone(init *process) {
	if init == nil {
		return
	}
	defer init.close()
	init.signal(unix.SIGKILL)
	fds := []unix.PollFd{{Fd: int32(init.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}

// signal sends sig to the process.
func (c *process) signal(sig unix.Signal) {
	_ = unix.PidfdSendSignal(c.fd, sig, nil, 0)
}

// signalJob sends sig to the command c and to the rest of the box's job,
// as a terminal sends Ctrl-C's SIGINT to its foreground job: the
// processes of the process group of the box's init, which the command and
// the children that did not leave it share (bwrap's init made the
// session). Each goes through a pidfd, and a process is signalled only if
// it is still of the group once its pidfd is open. init itself is left
// out (a namespace's init takes only the signals it handles), and nothing
// but c is signalled when init is gone: the group's number, its pid, may
// be another's then.
func (c *process) signalJob(sig unix.Signal, init *process) {
	c.signal(sig)
	if init == nil || unix.PidfdSendSignal(init.fd, 0, nil, 0) != nil {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == init.pid || pid == c.pid || !inGroup(pid, init.pid) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if inGroup(pid, init.pid) {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		unix.Close(fd)
	}
}

// inGroup says whether process pid is in process group pgid, both as
// cordon numbers them.
func inGroup(pid, pgid int) bool {
	g, err := unix.Getpgid(pid)
	return err == nil && g == pgid
}

// ended returns a channel closed once the command has ended (its pidfd
// polls readable), or never if stop is closed first. It polls a copy of
// the pidfd, which close does not reach.
func (c *process) ended(stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.Dup(c.fd)
	if err != nil {
		return done
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if n, err := unix.Poll(fds, 100); n > 0 {
				close(done)
				return
			} else if err != nil && err != unix.EINTR {
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return done
}

// exitCode reads the ended command's exit code, as bwrap reports one (the
// status, or 128+N for signal N), from its zombie's /proc stat; nil if its
// parent, the init, has reaped it already.
func (c *process) exitCode() *int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.pid))
	// The pidfd reaching the process still means the pid was not
	// reused: the file read was the command's.
	if err != nil || unix.PidfdSendSignal(c.fd, 0, nil, 0) != nil {
		return nil
	}
	status, ok := statExitStatus(string(stat))
	if !ok {
		return nil
	}
	code := status.ExitStatus()
	if status.Signaled() {
		code = 128 + int(status.Signal())
	}
	return &code
}

// statExitStatus is the exit_code field (the 52nd) of a /proc/PID/stat
// line: the wait status of a process that has ended. The fields are
// counted after the command name, which may hold spaces and parentheses.
func statExitStatus(stat string) (syscall.WaitStatus, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(stat[i+1:])
	const exitCodeField = 52 - 3 // fields[0] is the third, the state
	if len(fields) <= exitCodeField {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[exitCodeField], 10, 32)
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(v), true
}

// close releases the pidfd; a nil command is fine.
func (c *process) close() {
	if c != nil {
		c.once.Do(func() { unix.Close(c.fd) })
	}
}
