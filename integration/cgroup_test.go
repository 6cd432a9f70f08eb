//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestRunRemovesLeftoverCgroups: a cordon killed mid-run (SIGKILL, out of
// memory, a crash) leaves its run's cgroup in the user's delegated
// cgroup, and nothing removed it. The next run removes each such
// leftover, killing first what of its box still runs there, and says so
// on stderr and in the log; cordon doctor does the same and reports it.
// A live run's cgroup (held), one made a moment ago, another user's and
// one of another name are left alone. The leftovers are made as a killed
// cordon leaves them: this machine's cgroup v2 has no memory or pids
// controller for a run to make its own (TestSweepAfterKilledRun kills one
// that has).
func TestRunRemovesLeftoverCgroups(t *testing.T) {
	b := newBox(t)
	parent, leaf := delegatedCgroup(t)
	uid, gid, _ := testUser(t)
	old := time.Now().Add(-2 * time.Minute)
	left := func(name string, owner int, stale bool) string {
		t.Helper()
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// The maker owns the cgroup and each of its files.
		paths, _ := filepath.Glob(filepath.Join(d, "*"))
		for _, p := range append(paths, d) {
			if err := os.Chown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		if stale {
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	user := int(uid)
	empty := left("cordon-run-00000000000a", user, true)
	legacy := left("cordon-00000000000b", user, true)
	withBox := left("cordon-run-00000000000c", user, true)
	live := left("cordon-run-00000000000d", user, true)
	young := left("cordon-run-00000000000e", user, false)
	roots := left("cordon-run-00000000000f", 0, true)
	other := left("cordon-it-other", user, true)
	holdLocked(t, live)
	// A process of the killed run's box, which outlived its cordon.
	box := exec.Command("sleep", "600")
	box.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}, Setpgid: true,
		UseCgroupFD: true, CgroupFD: openCgroup(t, withBox)}
	if err := box.Start(); err != nil {
		t.Fatal(err)
	}
	boxEnded := make(chan struct{})
	go func() { box.Wait(); close(boxEnded) }()
	t.Cleanup(func() { box.Process.Kill(); <-boxEnded })

	cmd := b.cmd("--net", "off", "--", "true")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, leaf
	r := runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	for _, d := range []string{empty, legacy, withBox} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the leftover cgroup %s outlived the next run: %v", d, err)
		}
	}
	for _, d := range []string{live, young, roots, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the run removed %s, no leftover of a killed run: %v", d, err)
		}
	}
	select {
	case <-boxEnded:
	case <-time.After(10 * time.Second):
		t.Errorf("the process left in %s still runs after the next run", withBox)
	}
	said := map[string]string{
		empty:   "cordon: removed " + empty + ": the cgroup of an earlier run, left empty when its cordon was killed",
		legacy:  "cordon: removed " + legacy + ": ",
		withBox: "cordon: killed the processes left in " + withBox + ": 1 process of an earlier run's box was still in its cgroup",
	}
	recs := b.records()
	for d, line := range said {
		if !strings.Contains(r.stderr, line) {
			t.Errorf("the run did not say %q:\n%s", line, r.stderr)
		}
		if !slices.ContainsFunc(recs, func(rec audit.Record) bool { return rec.Type == audit.TypeRemoved && rec.Path == d }) {
			t.Errorf("no removed line in the log for %s: %+v", d, recs)
		}
	}

	// cordon doctor sweeps alike, and says what it removed.
	again := left("cordon-run-0000000000aa", user, true)
	doc := cordonIn(t, b.ws, b.env(), "doctor")
	doc.SysProcAttr.UseCgroupFD, doc.SysProcAttr.CgroupFD = true, leaf
	dr := runResult(t, runTimeout, doc)
	if want := "removed " + again; !strings.Contains(dr.stdout, want) {
		t.Errorf("cordon doctor did not say %q:\n%s%s", want, dr.stdout, dr.stderr)
	}
	if _, err := os.Stat(again); !os.IsNotExist(err) {
		t.Errorf("the leftover cgroup %s outlived cordon doctor: %v", again, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("cordon doctor removed the live run's cgroup %s: %v", live, err)
	}
}

// delegatedCgroup makes a cgroup v2 delegated to the test user, as
// systemd delegates one (the directory, its cgroup.procs, cgroup.threads
// and cgroup.subtree_control are the user's), with a leaf in it for
// cordon to run in: cordon's delegated parent is the first, and leaf a
// descriptor of the second, for SysProcAttr.CgroupFD. What is left in
// either is killed and removed at the test's end.
func delegatedCgroup(t *testing.T) (parent string, leaf int) {
	t.Helper()
	uid, gid, _ := testUser(t)
	parent = filepath.Join(cgroup2Root(t), "cordon-it-"+strings.ToLower(t.Name()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupTree(parent) })
	for _, p := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(parent, p), int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(parent, "cordon-it-self")
	if err := os.Mkdir(self, 0o755); err != nil {
		t.Fatal(err)
	}
	return parent, openCgroup(t, self)
}

// openCgroup opens cgroup dir for SysProcAttr.CgroupFD, until the test's
// end.
func openCgroup(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// removeCgroupTree kills what is in cgroup dir and below, and removes
// them, innermost first, within a bounded wait.
func removeCgroupTree(dir string) {
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	eventually(5*time.Second, func() bool { err := os.Remove(dir); return err == nil || os.IsNotExist(err) })
}

// cgroup2Root is where the cgroup v2 hierarchy is mounted.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		// "id parent dev root mountpoint opts... - fstype source opts"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 && f[3] == "/" {
			return f[4]
		}
	}
	t.Fatal("no cgroup v2 hierarchy is mounted: the tests of a run's cgroup need one")
	return ""
}
