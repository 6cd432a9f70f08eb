package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepStale: a sweep removes a stale directory a killed cordon
// left (its hold gone with it), and nothing else: not one a live process
// holds, not one made a moment ago and not held yet, not a link of that
// name (nor what it names), not a name of another kind, not another
// user's.
func TestSweepStale(t *testing.T) {
	parent := t.TempDir()
	old := time.Now().Add(-2 * StaleAfter)
	mk := func(name string) string {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "file-0"), []byte("x"), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	stale := mk(ScratchPrefix + "stale")
	held := mk(ScratchPrefix + "held")
	release := HoldDir(held)
	defer release()
	fresh := filepath.Join(parent, ScratchPrefix+"fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	target := mk("target")
	link := filepath.Join(parent, ScratchPrefix+"link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	other := mk("cordon-other-stale")
	keep := []string{held, fresh, link, filepath.Join(target, "file-0"), other}
	if os.Geteuid() == 0 { // make test runs as root: another user's, in reach
		theirs := mk(ScratchPrefix + "theirs")
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, theirs)
	}

	SweepStale(parent, ScratchPrefix)

	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale directory %s is still there (%v)", stale, err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the sweep removed %s, which is not a stale directory of its kind: %v", p, err)
		}
	}

	// Once let go (its process ended), the held one is stale too.
	release()
	SweepStale(parent, ScratchPrefix)
	if _, err := os.Lstat(held); !os.IsNotExist(err) {
		t.Errorf("the directory %s, no longer held, is still there (%v)", held, err)
	}
}
