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
func TestSweepOrphans(t *testing.T) {
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
		if time.Now().After(deadline) {
			t.Fatal("the stand-ins did not all block in read(2) within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A process of the running stand-in's namespace whose parent is this
	// test: the stand-in, killed, ends only once this test has reaped it,
	// 300 ms on, as a box's init ends only once its command has freed
	// what it held.
	reaped := inNamespaceOf(t, running.Process.Pid, 300*time.Millisecond)
	killed := sweepOrphans(runtime.GOARCH, os.Getuid())
	<-reaped
	for _, want := range []sandbox.LeftBox{{Pid: stuck.Process.Pid, Waiting: true}, {Pid: running.Process.Pid}} {
		if !slices.Contains(killed, want) {
			t.Errorf("%+v not among those killed: %v", want, killed)
		}
	}
	// Ended by the time the sweep returns: zombies, waiting for this test
	// to reap them (the one with memory to free first).
	for _, c := range []*exec.Cmd{running, stuck} {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); i < 0 || !strings.HasPrefix(string(stat[i:]), ") Z") {
			t.Errorf("%d had not ended when the sweep returned: %q", c.Process.Pid, stat)
		}
	}
	if slices.ContainsFunc(killed, func(l sandbox.LeftBox) bool { return l.Lingers }) {
		t.Errorf("a stand-in was told to linger: %+v", killed)
	}
	for _, c := range []*exec.Cmd{stuck, running} {
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("%d ended with %v, want killed", c.Process.Pid, err)
		}
	}
	if text := orphansText(killed); !strings.Contains(text, "; ended box init pid "+strconv.Itoa(stuck.Process.Pid)+": the init of a box that a killed cordon left waiting") ||
		!strings.Contains(text, "; ended box init pid "+strconv.Itoa(running.Process.Pid)+": the init of a box whose cordon was killed as it let the command start") {
		t.Errorf("doctor is told %q", text)
	}
	others["a bwrap's child"] = &exec.Cmd{Process: &os.Process{Pid: child}}
	for name, c := range others {
		if slices.ContainsFunc(killed, func(l sandbox.LeftBox) bool { return l.Pid == c.Process.Pid }) || unix.Kill(c.Process.Pid, 0) != nil {
			t.Errorf("%s: killed (or gone), want it left alone", name)
		}
	}
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
func inNamespaceOf(t *testing.T, pid int, delay time.Duration) <-chan struct{} {
	t.Helper()
	started := make(chan *exec.Cmd)
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
		if err != nil {
			t.Error(err)
			cmd = nil
		}
		started <- cmd
		// The thread is left locked, and ends with this goroutine: its
		// pid namespace is no longer this process's.
	}()
	cmd := <-started
	reaped := make(chan struct{})
	if cmd == nil {
		close(reaped)
		return reaped
	}
	go func() {
		defer close(reaped)
		for range 100 { // until it has ended (a zombie), 10 s at most
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err != nil || strings.Contains(string(stat), ") Z") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	return reaped
}
