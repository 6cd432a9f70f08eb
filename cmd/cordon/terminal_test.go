//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// newPseudoTerminal opens a pseudo-terminal and returns its master and
// its terminal's name; the caller opens the terminal, so that it is not
// the test's controlling terminal.
func newPseudoTerminal(t *testing.T) (master *os.File, name string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	return master, fmt.Sprintf("/dev/pts/%d", n)
}

// openWriteOnly opens the terminal name for writing alone, blocking, as
// a shell hands cordon its stdout and stderr.
func openWriteOnly(t *testing.T, name string) *os.File {
	t.Helper()
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return os.NewFile(uintptr(fd), name)
}

// TestShareTerminalOneWriterPerTerminal: the command's stdout and stderr
// on one terminal it does not get (another pane's, cordon run … >
// /dev/pts/N 2>&1) reach it through one Display, and what cordon says on
// that terminal while the command runs (the proxy's warnings) goes
// through it too (its Aside). Through a writer each, a write of one the
// kernel cut short (non-blocking, as a program sharing the terminal may
// leave it, with its buffer full; or one a signal interrupts, whose rest
// the other's write can precede) left the terminal in the middle of a
// sequence it passed, which the other's next write ended: the command's
// stdout cut after ESC [ and its stderr 6n made a cursor position
// report, typed to that pane's shell; cordon's line after it, ESC [ c,
// a device attributes query, or after a cut ESC, ESC c, a reset. The
// command fills the terminal with a colour reset, each try cut
// somewhere, until a cut lands in a sequence (a bounded number of tries).
func TestShareTerminalOneWriterPerTerminal(t *testing.T) {
	for _, c := range []struct {
		name string
		next string
		// writer is the writer of next, of s's command or of cordon.
		writer func(s *sandbox.Spec, says io.Writer) io.Writer
	}{
		{"the command's stderr", "6n", func(s *sandbox.Spec, _ io.Writer) io.Writer { return s.Stderr }},
		{"cordon's line", "cordon: warning", func(_ *sandbox.Spec, says io.Writer) io.Writer { return says }},
	} {
		t.Run(c.name, func(t *testing.T) {
			const tries = 30
			inSequence := 0
			for try := range tries {
				master, name := newPseudoTerminal(t)
				out, errw, cordonErr := openWriteOnly(t, name), openWriteOnly(t, name), openWriteOnly(t, name)
				s := &sandbox.Spec{Stdout: out, Stderr: errw}
				held, says := shareTerminal(s, cordonErr, nil)
				if held {
					t.Fatal("the command was given a terminal it may not read")
				}
				if says == nil {
					t.Fatal("cordon's own lines do not go through the command's Display")
				}
				if err := unix.SetNonblock(int(out.Fd()), true); err != nil {
					t.Fatal(err)
				}
				fill := strings.Repeat("x", try%3) + strings.Repeat("\x1b[m", 100000)
				if _, err := s.Stdout.Write([]byte(fill)); err == nil {
					t.Fatal("the terminal took the whole write: no cut to test")
				}
				if err := unix.SetNonblock(int(out.Fd()), false); err != nil {
					t.Fatal(err)
				}
				got := make(chan string, 1)
				go func() { b, _ := io.ReadAll(master); got <- string(b) }()
				if _, err := c.writer(s, says).Write([]byte(c.next)); err != nil {
					t.Fatal(err)
				}
				for _, f := range []*os.File{out, errw, cordonErr} {
					f.Close()
				}
				tail := strings.TrimLeft(strings.ReplaceAll(<-got, "\x1b[m", ""), "x")
				if strings.Contains(tail, "\x1b["+c.next) || strings.Contains(tail, "\x1b"+c.next) {
					t.Fatalf("try %d: the terminal was asked: it got %q after the colour resets", try, tail)
				}
				if strings.HasPrefix(tail, "\x1b") {
					inSequence++
				}
			}
			if inSequence == 0 {
				t.Fatalf("none of %d cuts landed in a sequence", tries)
			}
		})
	}
}

// twoNamesEnv names, to the test binary run again by
// TestShareTerminalOneTerminalTwoNames, the terminal that is its
// controlling one.
const twoNamesEnv = "CORDON_TEST_CONTROLLING_TERMINAL"

// TestShareTerminalOneTerminalTwoNames: cordon run … >/dev/pts/N
// 2>/dev/tty &, /dev/pts/N being cordon's controlling terminal (or the
// other way round), hands the command stdout and stderr on one terminal
// under two names, which fstat tells apart: each reached it through a
// Display of its own, and a write of one cut short left the terminal in
// the middle of a sequence the other's text then ended (a question,
// answered to the shell). They now share one Display, and another
// terminal by its own name is still another. The test binary runs again
// in a session of its own whose controlling terminal is a new
// pseudo-terminal, in the background of it.
func TestShareTerminalOneTerminalTwoNames(t *testing.T) {
	if name := os.Getenv(twoNamesEnv); name != "" {
		shareTerminalInTheBackground(t, name)
		return
	}
	_, name := newPseudoTerminal(t)
	slave, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShareTerminalOneTerminalTwoNames$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), twoNamesEnv+"="+name)
	cmd.Stdin = slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("in a session whose controlling terminal is %s: %v\n%s", name, err, out)
	}
}

// shareTerminalInTheBackground is TestShareTerminalOneTerminalTwoNames in
// the session whose controlling terminal is name: it puts another process
// group in the terminal's foreground, as a shell does for its next job
// after cordon run … &, and has shareTerminal judge the command's stdout
// and stderr.
func shareTerminalInTheBackground(t *testing.T, name string) {
	tty := openWriteOnly(t, "/dev/tty")
	defer tty.Close()
	fg := exec.Command("sleep", "60")
	fg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: int(tty.Fd())}
	if err := fg.Start(); err != nil {
		t.Fatalf("start a job in the foreground: %v", err)
	}
	defer func() { fg.Process.Kill(); fg.Wait() }()
	if pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP); err != nil || pgrp == unix.Getpgrp() {
		t.Fatalf("not in the background of %s: its foreground process group is %d (%v), ours %d", name, pgrp, err, unix.Getpgrp())
	}
	_, other := newPseudoTerminal(t)
	for _, c := range []struct {
		name        string
		out, stderr string
		one         bool
	}{
		{"its own name, then /dev/tty", name, "/dev/tty", true},
		{"/dev/tty, then its own name", "/dev/tty", name, true},
		{"its own name twice", name, name, true},
		{"another terminal and /dev/tty", other, "/dev/tty", false},
	} {
		out, errw := openWriteOnly(t, c.out), openWriteOnly(t, c.stderr)
		s := &sandbox.Spec{Stdout: out, Stderr: errw}
		if held, _ := shareTerminal(s, io.Discard, nil); held {
			t.Errorf("%s: the command was given a terminal it may not read", c.name)
		}
		_, kept := s.Stderr.(throughCordon)
		if one := s.Stderr == s.Stdout; !kept || one != c.one {
			t.Errorf("%s: stderr through cordon %v, with stdout %v; want with stdout %v", c.name, kept, one, c.one)
		}
		out.Close()
		errw.Close()
	}
}

// TestTerminalCapability: doctor says a run in the foreground of a
// terminal gets a terminal of its own when one opens, as here.
func TestTerminalCapability(t *testing.T) {
	if c := terminalCapability(); c.Name != capTerminal || c.Status != sandbox.Ready {
		t.Errorf("terminalCapability() = %+v, want %s READY", c, capTerminal)
	}
}

// TestOwnFork: sharesJob passes over a fork of cordon's before its exec
// (it runs cordon's own program: the capability check's bwrap --version
// between its fork and its setpgid), and no other process: a pager the
// shell forked for a process substitution is cordon's child too.
func TestOwnFork(t *testing.T) {
	if !ownFork(os.Getpid()) {
		t.Error("this process is not taken for one running its own program")
	}
	other := exec.Command("/bin/sleep", "10")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	// Start returns once the child has exec'd.
	if ownFork(other.Process.Pid) {
		t.Error("a child running another program is taken for a fork of this one")
	}
}

// TestSharesJob: cordon shares its job with a program its shell runs
// beside it in its process group (a pager), not with the processes it
// runs under, nor with a fork of its own: before the exec, which runs
// cordon's program, or after it, when the fork has left the group, nor
// with one that has exited. Under load, a run kept its terminal from the
// box for the capability check's bwrap --version, listed between its
// fork and its setpgid and looked at once it ran bwrap, and for the fork
// with which Go's runtime checks clone(CLONE_PIDFD), found exited and not
// yet reaped.
func TestSharesJob(t *testing.T) {
	const self, shell, pgrp, other = 10, 5, 10, 20
	for _, c := range []struct {
		name  string
		procs map[int]fakeProcess
		want  bool
	}{
		{"cordon alone", nil, false},
		{"a pager beside it", map[int]fakeProcess{other: {process: process{parent: shell, group: pgrp}}}, true},
		{"a pager it forked before it was cordon", map[int]fakeProcess{other: {process: process{parent: self, group: pgrp}}}, true},
		{"a fork of cordon's before its exec", map[int]fakeProcess{other: {process: process{parent: self, group: pgrp}, ownFork: true}}, false},
		{"a fork of cordon's that left the group since it was listed", map[int]fakeProcess{other: {process: process{parent: self, group: other}}}, false},
		{"a fork of cordon's that exited", map[int]fakeProcess{other: {process: process{parent: self, group: pgrp, ended: true}}}, false},
		{"a pager that exited", map[int]fakeProcess{other: {process: process{parent: shell, group: pgrp, ended: true}}}, false},
		{"one gone since it was listed", map[int]fakeProcess{other: {gone: true}}, false},
		{"the script it runs under", map[int]fakeProcess{shell: {process: process{parent: 1, group: pgrp}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			procs := map[int]fakeProcess{self: {process: process{parent: shell, group: pgrp}}}
			members := []int{self}
			for pid, p := range c.procs {
				procs[pid] = p
				members = append(members, pid)
			}
			ps := processes{
				members: func(g int) []int {
					if g != pgrp {
						t.Fatalf("members of group %d, want %d", g, pgrp)
					}
					return members
				},
				look: func(pid int) (process, bool) {
					p, ok := procs[pid]
					return p.process, ok && !p.gone
				},
				ownFork: func(pid int) bool { return procs[pid].ownFork },
			}
			if got := ps.sharesJob(self, shell, pgrp); got != c.want {
				t.Errorf("sharesJob = %v, want %v", got, c.want)
			}
		})
	}
}

// fakeProcess is what TestSharesJob's processes say of one.
type fakeProcess struct {
	process
	ownFork, gone bool
}

// TestLookProcess: this process's parent and group, as /proc has them,
// and a child that has exited and is not yet reaped is seen as ended.
func TestLookProcess(t *testing.T) {
	if p, ok := lookProcess(os.Getpid()); !ok || p.parent != os.Getppid() || p.group != unix.Getpgrp() || p.ended {
		t.Errorf("lookProcess(self) = %+v, %v; want parent %d, group %d, running", p, ok, os.Getppid(), unix.Getpgrp())
	}
	child := exec.Command("/bin/true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	for range 200 {
		if p, ok := lookProcess(child.Process.Pid); ok && p.ended {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("an exited child was not seen as ended within 2 s")
}

// TestDrained: once the box is gone, cordon waits for its last output as
// long as the terminal takes some of it every drainWait, drainMost at
// most; a fixed 2 s lost the end of a run's output on a terminal that
// drained slowly (red team, round 7). The clock is the test's: each
// drainWait passes at once, and drainMost once the copy has been looked
// at mostAfter times.
func TestDrained(t *testing.T) {
	for _, c := range []struct {
		name             string
		grows, doneAfter int // looks at the copy that find it grown; the look after which it is done
		mostAfter        int
		want             bool
	}{
		{"done at once", 0, 0, 100, true},
		{"slow but steady", 50, 50, 100, true},
		{"stalled", 3, 100, 100, false},
		{"steady past drainMost", 1000, 1000, 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			done, most := make(chan struct{}), make(chan time.Time)
			looks := 0
			copied := func() int64 {
				looks++
				if looks == c.doneAfter+1 {
					close(done)
				}
				if looks == c.mostAfter+1 {
					close(most)
				}
				return int64(min(looks, c.grows+1))
			}
			after := func(d time.Duration) <-chan time.Time {
				if d == drainMost {
					return most
				}
				tick := make(chan time.Time, 1)
				select {
				case <-done:
				case <-most:
				default:
					tick <- time.Time{}
				}
				return tick
			}
			if got := drained(done, copied, after); got != c.want {
				t.Errorf("drained = %v after %d looks, want %v", got, looks, c.want)
			}
		})
	}
}
