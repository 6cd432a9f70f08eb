package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// asideRecorded lists the entries of ws's record of what runs set aside.
func asideRecorded(t *testing.T, ws string) []string {
	t.Helper()
	data, err := os.ReadFile(asideRecord(ws))
	if err != nil {
		t.Fatal(err)
	}
	return asideEntries(data)
}

// makeFiles makes a file at each of paths.
func makeFiles(t *testing.T, paths []string) {
	t.Helper()
	for _, p := range paths {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// namesIn is n paths in dir, named prefix and a number.
func namesIn(dir, prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = filepath.Join(dir, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// The record of what runs set aside drops, when the next run reads it,
// the entries whose paths are no longer there (renamed back, or removed),
// and keeps the others, which that run still keeps in place: it grew for
// ever, and a workspace used for years reached the bound that refuses a
// run (TestAftercareSetAsideRecordTooLarge).
func TestAftercareSetAsideRecordPruned(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	aside := setAsideNested(t, GuardSpec{Workspace: ws}, filepath.Join(ws, "sub"))
	// Years of runs: what they set aside, since renamed back or removed,
	// under long names, 800 KiB of them, and some still there.
	long := strings.Repeat("d", 200)
	gone := namesIn(ws, long+".git"+setAsideInfix, 3000)
	live := namesIn(ws, "live.git"+setAsideInfix, 20)
	makeFiles(t, live)
	for _, paths := range [][]string{gone[:1500], live[:10], gone[1500:], live[10:]} {
		if err := rememberSetAside(ws, paths); err != nil {
			t.Fatal(err)
		}
	}
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{aside}, live...)
	if got := asideRecorded(t, ws); !slices.Equal(got, want) {
		t.Errorf("the record after the next run has %d entries (%d vanished); want the %d still there", len(got), len(got)-len(want), len(want))
	}
	if got := describeGuards(guards, ws); !slices.Contains(got, "read-only "+strings.TrimPrefix(aside, ws+"/")) {
		t.Errorf("the run that pruned the record does not keep what is still set aside:\n%s", strings.Join(got, "\n"))
	}
	// Runs go on setting aside as much, and none is refused.
	for range 3 {
		if err := rememberSetAside(ws, gone); err != nil {
			t.Fatal(err)
		}
		if _, err := GuardWorkspace(GuardSpec{Workspace: ws}); err != nil {
			t.Fatal(err)
		}
	}
}

// Two runs at once in one workspace: one adds what it set aside to the
// record while another prunes it (each rewrite drops a vanished entry).
// No entry whose path is there is lost, and the vanished ones are gone.
func TestAftercareSetAsideRecordConcurrent(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	const rounds = 200
	live := namesIn(ws, "live"+setAsideInfix, rounds)
	makeFiles(t, live)
	gone := namesIn(ws, "gone"+setAsideInfix, rounds)
	var wg sync.WaitGroup
	errs := make(chan error, 3*rounds)
	wg.Go(func() {
		for _, p := range live {
			errs <- rememberSetAside(ws, []string{p})
		}
	})
	wg.Go(func() {
		for _, p := range gone {
			errs <- rememberSetAside(ws, []string{p})
			_, err := setAsideEarlier(ws) // prunes p
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := setAsideEarlier(ws); err != nil {
		t.Fatal(err)
	}
	got := asideRecorded(t, ws)
	slices.Sort(got)
	slices.Sort(live)
	if !slices.Equal(got, live) {
		lost := slices.DeleteFunc(slices.Clone(live), func(p string) bool { return slices.Contains(got, p) })
		t.Errorf("the record has %d entries; want the %d live ones (lost %d)", len(got), len(live), len(lost))
	}
}
