//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// stuckEnv makes this test binary, run again, block at once: "eventfd"
// and "pipe" read one that nothing will ever write, "parent" runs itself
// as such a reader in a pid namespace of its own and waits for it.
const stuckEnv = "CORDON_TEST_STUCK"

// init acts on stuckEnv before the test flags are parsed: the stand-ins
// run under a bwrap's command line, which the flags would refuse.
func init() {
	mode := os.Getenv(stuckEnv)
	switch mode {
	case "":
		return
	case "eventfd", "pipe":
		fd, err := unix.Eventfd(0, 0)
		if mode == "pipe" {
			var p [2]int
			err = unix.Pipe(p[:])
			fd = p[0]
		}
		if err == nil {
			var b [8]byte
			_, _ = unix.Read(fd, b[:])
		}
	case "parent":
		cmd := exec.Command(os.Args[0])
		cmd.Args = os.Args
		cmd.Env = []string{stuckEnv + "=eventfd"}
		cmd.SysProcAttr = newPidNS()
		_ = cmd.Run()
	}
	os.Exit(1)
}

// newPidNS starts a child as pid 1 of new user and pid namespaces.
func newPidNS() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
}

// TestSweepOrphans: the sweep kills a process that looks, to every check,
// like the init a killed bwrap left (named bwrap, cordon's command line,
// pid 1 of its namespace, a parent that is no bwrap), waiting on its
// eventfd or not, telling which, and none that differs in one of them.
// The stand-ins are this test binary run under the name bwrap; the sweep
// reads the real /proc.
//
// Another test process of this user's may sweep meanwhile (in make unit,
// cmd/cordon's doctor tests run beside this package's) and end a
// stand-in first, which this sweep then does not report. A round whose
// stand-in ended unreported (one of this sweep's kills is always
// reported) is played again, three rounds at most.
func TestSweepOrphans(t *testing.T) {
	for round := 1; ; round++ {
		problems, disturbed := sweepStandIns(t)
		if disturbed != "" && round < 3 {
			t.Logf("round %d: %s; again", round, disturbed)
			continue
		}
		for _, p := range problems {
			t.Error(p)
		}
		if disturbed != "" {
			t.Errorf("in each of %d rounds, a stand-in was ended by a sweep not this test's: %s", round, disturbed)
		}
		return
	}
}

// sweepStandIns is one round of TestSweepOrphans: what was wrong, and
// why the round was disturbed ("" when it was not).
func sweepStandIns(t *testing.T) (problems []string, disturbed string) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bwrap := filepath.Join(t.TempDir(), "bwrap")
	if err := os.Symlink(self, bwrap); err != nil {
		t.Fatal(err)
	}
	cordons := []string{"--args", strconv.Itoa(fdArgs), "--", "/usr/bin/true"}
	start := func(mode string, args []string) *exec.Cmd {
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{stuckEnv + "=" + mode}
		if mode != "parent" {
			cmd.SysProcAttr = newPidNS()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	stuck := start("eventfd", cordons)
	running := start("pipe", cordons) // as a command would, reading
	others := map[string]*exec.Cmd{
		"another command line": start("eventfd", []string{"--unshare-all", "--", "/usr/bin/true"}),
	}
	parent := start("parent", cordons)
	// Each blocked in read(2) before the sweep looks.
	reading := func(pid int) bool {
		sc, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
		return err == nil && strings.Fields(string(sc))[0] == readSyscallNr[runtime.GOARCH]
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if kids, err := os.ReadFile("/proc/" + strconv.Itoa(parent.Process.Pid) + "/task/" + strconv.Itoa(parent.Process.Pid) + "/children"); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(kids)))
		}
		ready := child > 0 && reading(child) && reading(stuck.Process.Pid) && reading(running.Process.Pid)
		for _, c := range others {
			ready = ready && reading(c.Process.Pid)
		}
		if ready {
			break
		}
		if gone := endedOf(stuck, running, parent); gone != "" {
			return nil, gone + " before the sweep"
		}
		if time.Now().After(deadline) {
			t.Fatal("the stand-ins did not all block in read(2) within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A process of the running stand-in's namespace whose parent is this
	// test: the stand-in, killed, ends only once this test has reaped it,
	// 300 ms on, as a box's init ends only once its command has freed
	// what it held.
	reaped, err := inNamespaceOf(running.Process.Pid, 300*time.Millisecond)
	if err != nil {
		if gone := endedOf(running); gone != "" {
			return nil, gone + " before the sweep"
		}
		t.Fatal(err)
	}
	killed := sweepOrphans(runtime.GOARCH, os.Getuid())
	<-reaped
	for _, want := range []sandbox.LeftBox{{Pid: stuck.Process.Pid, Waiting: true}, {Pid: running.Process.Pid}} {
		if !slices.Contains(killed, want) {
			if unix.Kill(want.Pid, 0) != nil || zombie(want.Pid) {
				return nil, fmt.Sprintf("%d ended, not by this sweep", want.Pid)
			}
			fail("%+v not among those killed: %v", want, killed)
		}
	}
	// Ended by the time the sweep returns: zombies, waiting for this test
	// to reap them (the one with memory to free first).
	for _, c := range []*exec.Cmd{running, stuck} {
		if !zombie(c.Process.Pid) {
			fail("%d had not ended when the sweep returned", c.Process.Pid)
		}
	}
	if slices.ContainsFunc(killed, func(l sandbox.LeftBox) bool { return l.Lingers }) {
		fail("a stand-in was told to linger: %+v", killed)
	}
	for _, c := range []*exec.Cmd{stuck, running} {
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			fail("%d ended with %v, want killed", c.Process.Pid, err)
		}
	}
	if text := orphansText(killed); !strings.Contains(text, "; ended box init pid "+strconv.Itoa(stuck.Process.Pid)+": the init of a box that a killed cordon left waiting") ||
		!strings.Contains(text, "; ended box init pid "+strconv.Itoa(running.Process.Pid)+": the init of a box whose cordon was killed as it let the command start") {
		fail("doctor is told %q", text)
	}
	others["a bwrap's child"] = &exec.Cmd{Process: &os.Process{Pid: child}}
	for name, c := range others {
		if slices.ContainsFunc(killed, func(l sandbox.LeftBox) bool { return l.Pid == c.Process.Pid }) || unix.Kill(c.Process.Pid, 0) != nil {
			fail("%s: killed (or gone), want it left alone", name)
		}
	}
	return problems, ""
}

// endedOf names the first of cmds whose process has ended (a zombie),
// "" when none has.
func endedOf(cmds ...*exec.Cmd) string {
	for _, c := range cmds {
		if zombie(c.Process.Pid) {
			return fmt.Sprintf("stand-in %d ended", c.Process.Pid)
		}
	}
	return ""
}

// zombie says whether process pid, a child of this test's, has ended and
// waits to be reaped.
func zombie(pid int) bool {
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z")
}

// TestOrphanLeft: each condition of left is needed.
func TestOrphanLeft(t *testing.T) {
	base := orphan{uid: 1000, comm: "bwrap", parentComm: "systemd", nsInit: true,
		args: []string{"--args", strconv.Itoa(fdArgs), "--", "make"}}
	if !base.left(1000) {
		t.Fatalf("%+v is not left", base)
	}
	for name, change := range map[string]func(p *orphan){
		"another user's":         func(p *orphan) { p.uid = 1001 },
		"not bwrap":              func(p *orphan) { p.comm = "sh" },
		"a bwrap's child":        func(p *orphan) { p.parentComm = "bwrap" },
		"not a namespace's init": func(p *orphan) { p.nsInit = false },
		"options of its own":     func(p *orphan) { p.args = []string{"--unshare-all", "--", "make"} },
		"another fd":             func(p *orphan) { p.args[1] = "7" },
		"no command line":        func(p *orphan) { p.args = nil },
	} {
		p := base
		p.args = slices.Clone(base.args)
		change(&p)
		if p.left(1000) {
			t.Errorf("%s: %+v taken for left", name, p)
		}
	}
}

// inNamespaceOf starts a process in the pid namespace of process pid, a
// child of this test's, which it reaps after delay once that process has
// ended, as the returned channel then says.
func inNamespaceOf(pid int, delay time.Duration) (<-chan struct{}, error) {
	type result struct {
		cmd *exec.Cmd
		err error
	}
	started := make(chan result)
	go func() {
		// setns(CLONE_NEWPID) takes effect for the calling thread's next
		// children: the thread forks the process, and is then let go.
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err == nil {
			err = unix.Setns(int(ns.Fd()), unix.CLONE_NEWPID)
			ns.Close()
		}
		cmd := exec.Command("/bin/sleep", "60")
		if err == nil {
			err = cmd.Start()
		}
		started <- result{cmd, err}
		// The thread is left locked, and ends with this goroutine: its
		// pid namespace is no longer this process's.
	}()
	r := <-started
	if r.err != nil {
		return nil, fmt.Errorf("start a process in the pid namespace of %d: %w", pid, r.err)
	}
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for range 100 { // until it has ended (a zombie), 10 s at most
			if zombie(r.cmd.Process.Pid) || unix.Kill(r.cmd.Process.Pid, 0) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(delay)
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}()
	return reaped, nil
}
