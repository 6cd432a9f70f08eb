package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A run whose cordon was killed leaves its aftercare owed; the next run
// pays it, unless the cordon that owes it is still running.
func TestOweAndCollect(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws, lib := realTempDir(t), realTempDir(t)
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{lib}})
	if err != nil {
		t.Fatal(err)
	}
	paid, err := Owe(ws, guards)
	if err != nil {
		t.Fatal(err)
	}
	records, _ := filepath.Glob(filepath.Join(owedDir(), "*.owed"))
	if len(records) != 1 {
		t.Fatalf("records: %v", records)
	}
	git(t, ws, "init", "-q") // what the killed run's box did, and a pipe in its read-write allow path
	if err := syscall.Mkfifo(filepath.Join(lib, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A record of a cordon that is still running (pid 1 is) waits.
	running := filepath.Join(owedDir(), owedName(ws, 1))
	if err := os.Rename(records[0], running); err != nil {
		t.Fatal(err)
	}
	asRunOf(t, running, 1, processStart(1))
	if aside := Collect(ws, nil).SetAside; aside != nil {
		t.Fatalf("a running cordon's aftercare was taken: %q", aside)
	}
	// Once it is gone (here: a pid that is this process's now, so the
	// record's own is long gone), the next run pays it.
	if err := os.Rename(running, records[0]); err != nil {
		t.Fatal(err)
	}
	c := Collect(ws, nil)
	aside, unchecked := c.SetAside, c.Unchecked
	if len(aside) != 1 || !strings.HasPrefix(aside[0], filepath.Join(ws, ".git.cordon-set-aside-")) || unchecked != nil {
		t.Fatalf("Collect set aside %q (unchecked %v), want the killed run's .git", aside, unchecked)
	}
	if len(c.Pipes) != 1 || !strings.HasPrefix(c.Pipes[0], filepath.Join(lib, "pipe.cordon-set-aside-")) {
		t.Fatalf("Collect set aside the pipes %q, want the one in the read-write allow path", c.Pipes)
	}
	if _, err := os.Stat(records[0]); err == nil {
		t.Error("the paid record is still there")
	}
	if aside := Collect(ws, nil).SetAside; aside != nil {
		t.Errorf("a debt was paid twice: %q", aside)
	}
	paid() // nothing left to remove: no harm

	// Another workspace's record is not this one's to pay.
	other := realTempDir(t)
	if _, err := Owe(other, nil); err != nil {
		t.Fatal(err)
	}
	if c := Collect(ws, nil); c.Removed != nil || c.SetAside != nil || c.Unchecked != nil {
		t.Errorf("another workspace's record was paid here: %+v", c)
	}
	// A record that is not one is reported, not trusted.
	bad := filepath.Join(owedDir(), owedName(ws, 999999999))
	if err := os.WriteFile(bad, []byte(owedHeader+"guard x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u := Collect(ws, nil).Unchecked; len(u) != 1 {
		t.Errorf("an unreadable record: unchecked %v", u)
	}
}

// Two runs that begin at once after a killed cordon pay its aftercare
// once: the one that claims the record pays it while the other waits,
// and finds it paid. Both paid it: the second set aside again what the
// first had set aside, or reported what the first had moved as what it
// could not see to.
func TestCollectPaidOnce(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const repos = 20
	for round := range 5 {
		ws := realTempDir(t)
		guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Owe(ws, guards); err != nil { // this process's: no longer running, as Collect sees it
			t.Fatal(err)
		}
		for i := range repos { // what the killed run's box did
			sub := filepath.Join(ws, fmt.Sprint("sub", i))
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, sub, "init", "-q")
		}
		var cares [2]Care
		var wg sync.WaitGroup
		for i := range cares {
			wg.Go(func() { cares[i] = Collect(ws, nil) })
		}
		wg.Wait()
		c := cares[0].Add(cares[1])
		if len(c.SetAside) != repos || c.Unchecked != nil {
			t.Fatalf("round %d: the two runs set aside %d (want %d), unchecked %v", round, len(c.SetAside), repos, c.Unchecked)
		}
	}
}

// TestOweLeavesNoPartRecord: a record Owe could not write whole (a full
// disk; here a write to /dev/full) is not left behind, where the next run
// would take it for a killed run's unreadable record.
func TestOweLeavesNoPartRecord(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	if err := os.MkdirAll(owedDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(owedDir(), owedName(ws, os.Getpid()))
	if err := os.Symlink("/dev/full", p); err != nil {
		t.Fatal(err)
	}
	if _, err := Owe(ws, nil); err == nil {
		t.Fatal("Owe wrote its record to a full disk")
	}
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("the record Owe could not write is left at %s", p)
	}
	if c := Collect(ws, nil); c.Unchecked != nil {
		t.Errorf("the next run reports %v", c.Unchecked)
	}
}

// What a repository's index hid when the run was built is in its record:
// the next run, paying a killed run's aftercare, tells only what that
// run hid.
func TestOweKeepsHidden(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	for _, h := range []*Hidden{nil, {}, {Count: 3, Digest: "ab12", Paths: []string{"a b", "c\"d\n"}}, {Untracked: "cd34"}} {
		guards := []GuardedPath{{Path: ws, Guard: Checkouts, Dir: true, Hidden: h}, {Path: ws, Guard: Nested, Dir: true, Since: time.Unix(5, 0)}}
		paid, err := Owe(ws, guards)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := readOwed(filepath.Join(owedDir(), owedName(ws, os.Getpid())), ws)
		paid()
		if !ok || len(got) != 2 || !sameHidden(got[0].Hidden, h) || got[1].Hidden != nil {
			t.Errorf("%+v read back as %+v (%t)", h, got, ok)
		}
	}
}

func sameHidden(a, b *Hidden) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Count == b.Count && a.Digest == b.Digest && slices.Equal(a.Paths, b.Paths) && a.Untracked == b.Untracked
}

// TestCollectPaysADebtWhosePidIsAnothers: a killed run's debt is skipped
// while its process runs, and paid once its pid is another process's:
// the record names when its process started. A pid alone kept every later
// run from paying the debt while another process held it (red team,
// round 6), and they built on what the killed run's box left.
func TestCollectPaysADebtWhosePidIsAnothers(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	pid := sleeper.Process.Pid
	start := processStart(pid)
	if start == "" {
		t.Fatalf("no start time for pid %d", pid)
	}
	for _, c := range []struct {
		name, start string
		paid        bool
	}{
		{"its own process, still running", start, false},
		{"another process with its pid", start + "1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			paid, err := Owe(ws, guards)
			if err != nil {
				t.Fatal(err)
			}
			// The record as the run in process pid would have written it.
			theirs := filepath.Join(owedDir(), owedName(ws, pid))
			if err := os.Rename(filepath.Join(owedDir(), owedName(ws, os.Getpid())), theirs); err != nil {
				t.Fatal(err)
			}
			asRunOf(t, theirs, pid, c.start)
			paid()
			sub := filepath.Join(ws, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, sub, "init", "-q")
			got := Collect(ws, nil)
			if (len(got.SetAside) == 1) != c.paid || got.Unchecked != nil {
				t.Errorf("set aside %q, unchecked %v; want the debt paid: %v", got.SetAside, got.Unchecked, c.paid)
			}
		})
	}
}

// asRunOf rewrites the owed record at p as the run in process pid, which
// started at start, would have written it.
func asRunOf(t *testing.T, p string, pid int, start string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("pid %d %q", os.Getpid(), processStart(os.Getpid()))
	if !strings.Contains(string(data), mine) {
		t.Fatalf("no line %q in %s", mine, data)
	}
	data = []byte(strings.Replace(string(data), mine, fmt.Sprintf("pid %d %q", pid, start), 1))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
