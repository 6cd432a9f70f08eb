//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestLeftCgroupAction(t *testing.T) {
	stale := 2 * sandbox.StaleAfter
	dead := leftCgroup{name: "cordon-run-0123456789ab", own: true, age: stale}
	with := func(f func(*leftCgroup)) leftCgroup { c := dead; f(&c); return c }
	for _, tt := range []struct {
		name string
		c    leftCgroup
		want cgroupAction
	}{
		{"a killed run's, empty", dead, removeCgroup},
		{"a killed run's, its box still in it", with(func(c *leftCgroup) { c.populated = true }), killCgroup},
		{"a live run's (held)", with(func(c *leftCgroup) { c.held = true; c.populated = true }), keepCgroup},
		{"a live run's, held, between its making and its first process", with(func(c *leftCgroup) { c.held = true }), keepCgroup},
		{"a run's just made, not held yet", with(func(c *leftCgroup) { c.age = time.Second }), keepCgroup},
		{"a run's just made, with its first process", with(func(c *leftCgroup) { c.age = time.Second; c.populated = true }), keepCgroup},
		{"another user's", with(func(c *leftCgroup) { c.own = false }), keepCgroup},
		{"an older cordon's, empty", with(func(c *leftCgroup) { c.name = "cordon-0123456789ab" }), removeCgroup},
		{"an older cordon's, with processes (maybe its live run)", with(func(c *leftCgroup) { c.name = "cordon-0123456789ab"; c.populated = true }), keepCgroup},
		{"not cordon's: another name", with(func(c *leftCgroup) { c.name = "app.slice" }), keepCgroup},
		{"not cordon's: cordon's prefix, other digits", with(func(c *leftCgroup) { c.name = "cordon-run-0123456789AB" }), keepCgroup},
		{"not cordon's: cordon's prefix, more digits", with(func(c *leftCgroup) { c.name = "cordon-run-0123456789abc" }), keepCgroup},
		{"not cordon's: a scope of its own", with(func(c *leftCgroup) { c.name = "cordon-0123456789ab.scope" }), keepCgroup},
	} {
		if got := tt.c.action(); got != tt.want {
			t.Errorf("%s: %+v.action() = %d, want %d", tt.name, tt.c, got, tt.want)
		}
	}
}

// cgroupHelperEnv makes this test binary a cordon whose run has made its
// cgroup (newRunCgroup) in the parent the variable names; with
// cgroupHelperBox set, a process of its box (sleep) is in it too. It
// prints the cgroup's path and waits to be killed.
const (
	cgroupHelperEnv = "CORDON_TEST_CGROUP_PARENT"
	cgroupHelperBox = "CORDON_TEST_CGROUP_BOX"
)

// TestSweepAfterKilledRun: a cordon killed (SIGKILL) mid-run leaves its
// cgroup, empty, or with a process of its box that outlived it; a later
// sweep removes the first, kills what is in the second and removes it,
// and leaves a live run's alone, empty as it is between its making and
// its first process. On a real cgroup v2.
func TestSweepAfterKilledRun(t *testing.T) {
	if parent := os.Getenv(cgroupHelperEnv); parent != "" {
		cgroupHelper(t, parent)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test makes cgroups; run it as root, as make test does")
	}
	parent := testCgroupParent(t)
	start := func(box bool) (*exec.Cmd, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSweepAfterKilledRun$", "-test.count=1")
		cmd.Env = append(os.Environ(), cgroupHelperEnv+"="+parent)
		if box {
			cmd.Env = append(cmd.Env, cgroupHelperBox+"=1")
		}
		l := firstLine(t, cmd, "the helper made no cgroup")
		if !strings.HasPrefix(l, parent+"/") {
			t.Fatalf("the helper said %q, not its cgroup", l)
		}
		return cmd, strings.TrimSuffix(l, "\n")
	}
	killed, empty := start(false)
	outlived, withBox := start(true)
	_, live := start(false)
	for _, cmd := range []*exec.Cmd{killed, outlived} {
		cmd.Process.Kill()
		cmd.Wait()
	}
	boxPids := readProcs(t, withBox)
	if len(boxPids) != 1 {
		t.Fatalf("the box that outlived its cordon: %v in %s, want one process", boxPids, withBox)
	}
	old := time.Now().Add(-2 * sandbox.StaleAfter)
	for _, d := range []string{empty, withBox, live} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	got := sweepCgroups(parent)
	want := []sandbox.LeftCgroup{{Path: empty, Removed: true}, {Path: withBox, Procs: 1, Removed: true}}
	slices.SortFunc(got, func(a, b sandbox.LeftCgroup) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(want, func(a, b sandbox.LeftCgroup) int { return strings.Compare(a.Path, b.Path) })
	if !slices.Equal(got, want) {
		t.Errorf("the sweep did %+v, want %+v", got, want)
	}
	for _, d := range []string{empty, withBox} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the sweep: %v", d, err)
		}
	}
	// Gone, or a zombie its new parent has yet to reap.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", boxPids[0])); err == nil {
		if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) == 0 || f[0] != "Z" {
			t.Errorf("the box's process %d, which outlived its cordon, is still running: %s", boxPids[0], st)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the sweep took the live run's cgroup %s: %v", live, err)
	}
}

// cgroupHelper is TestSweepAfterKilledRun's cordon: it makes a run's
// cgroup in parent as a run does, and, asked to, starts its box's
// process in it (a sleep with no parent-death signal, as a box escaped
// from bwrap's would be).
func cgroupHelper(t *testing.T, parent string) {
	cg, err := newRunCgroup(limitPlan{cgroupParent: parent}, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(cgroupHelperBox) != "" {
		box := exec.Command("sleep", "600")
		box.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.fd.Fd()), Setpgid: true}
		if err := box.Start(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println(cg.dir)
	io.Copy(io.Discard, os.Stdin) // until killed
	select {}
}

// testCgroupParent makes a cgroup for the test to make runs' cgroups in,
// at the root of the cgroup v2 hierarchy, and removes it (and what is
// still below it) at the test's end.
func testCgroupParent(t *testing.T) string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mount, err := cgroup2Mount(mi)
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(mount, sandbox.RandomName("cordon-test-"))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() {
				(&runCgroup{dir: filepath.Join(parent, e.Name())}).remove()
			}
		}
		os.Remove(parent)
	})
	return parent
}

// readProcs lists the processes in cgroup dir.
func readProcs(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		var pid int
		fmt.Sscan(f, &pid)
		pids = append(pids, pid)
	}
	return pids
}

// TestSweepStaysInTheParent: the sweep looks at the delegated parent's
// own entries only. A dead run's name one level down (in a cgroup of
// another program's, which holds nothing) is never reached, and its
// processes run on, however stale and unheld it is.
func TestSweepStaysInTheParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes cgroups; run it as root, as make test does")
	}
	parent := testCgroupParent(t)
	other := filepath.Join(parent, "app.slice")
	below := filepath.Join(other, sandbox.RandomName(runCgroupPrefix))
	for _, d := range []string{other, below} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		(&runCgroup{dir: below}).remove()
		os.Remove(other)
	})
	proc := sleepIn(t, below)
	old := time.Now().Add(-2 * sandbox.StaleAfter)
	for _, d := range []string{other, below} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if got := sweepCgroups(parent); len(got) != 0 {
		t.Errorf("the sweep did %+v, want nothing", got)
	}
	if pids := readProcs(t, below); !slices.Contains(pids, proc.Process.Pid) {
		t.Errorf("the process in %s is gone: %v", below, pids)
	}
}

// TestSweepRemovesCgroupsBelow: a dead run's cgroup in which the user
// made cgroups of their own, one holding a process, is swept whole: the
// process is counted and killed, and the cgroups below are removed with
// it. Before, the count saw only the cgroup's own members (0) and rmdir
// failed on the one below, and the sweep said it had removed an empty
// cgroup.
func TestSweepRemovesCgroupsBelow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes cgroups; run it as root, as make test does")
	}
	parent := testCgroupParent(t)
	dead := filepath.Join(parent, sandbox.RandomName(runCgroupPrefix))
	deeper := filepath.Join(dead, "a", "b")
	if err := os.MkdirAll(deeper, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dead, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	proc := sleepIn(t, deeper)
	old := time.Now().Add(-2 * sandbox.StaleAfter)
	if err := os.Chtimes(dead, old, old); err != nil {
		t.Fatal(err)
	}
	got := sweepCgroups(parent)
	want := []sandbox.LeftCgroup{{Path: dead, Procs: 1, Removed: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the sweep did %+v, want %+v", got, want)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there: %v", dead, err)
	}
	if err := proc.Wait(); err == nil {
		t.Error("the process in the cgroup below ran to its end: it was not killed")
	}
}

// sleepIn starts a process in cgroup dir that sleeps until the test ends.
func sleepIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	fd, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	proc := exec.Command("sleep", "600")
	proc.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd()), Setpgid: true}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
	return proc
}
