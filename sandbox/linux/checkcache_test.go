//go:build linux

package linux

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestMemoised(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	key := memoKey("test", nil, []byte("policy A"))
	runs := 0
	probe := func(status sandbox.Status) func(func(sandbox.Capability)) map[string]probeResult {
		return func(add func(sandbox.Capability)) map[string]probeResult {
			runs++
			add(sandbox.Capability{Name: "box", Status: status})
			return map[string]probeResult{"x": {Name: "x", OK: status != sandbox.Blocked}}
		}
	}
	var got []sandbox.Capability
	add := func(c sandbox.Capability) { got = append(got, c) }
	ctx := context.Background()

	memoised(ctx, key, add, probe(sandbox.Ready))
	r := memoised(ctx, key, add, probe(sandbox.Ready))
	if runs != 1 || len(got) != 2 || !r["x"].OK {
		t.Fatalf("a fresh pass was not reused: runs %d, caps %v, results %v", runs, got, r)
	}
	memoised(sandbox.Fresh(ctx), key, add, probe(sandbox.Ready))
	if runs != 2 {
		t.Fatalf("sandbox.Fresh did not probe anew: runs %d", runs)
	}
	other := memoKey("test", nil, []byte("policy B"))
	memoised(ctx, other, add, probe(sandbox.Blocked))
	memoised(ctx, other, add, probe(sandbox.Blocked))
	if runs != 4 {
		t.Fatalf("a BLOCKED verdict was reused: runs %d", runs)
	}

	// Only the user's own, private, fresh record with this key is trusted.
	path := memoPath(key)
	for name, spoil := range map[string]func(){
		"group-writable": func() { os.Chmod(path, 0o620) },
		"expired":        func() { writeMemo(path, memo{Key: key, Time: time.Now().Add(-2 * memoTTL)}) },
		"other key":      func() { writeMemo(path, memo{Key: other, Time: time.Now()}) },
		"future":         func() { writeMemo(path, memo{Key: key, Time: time.Now().Add(time.Hour)}) },
	} {
		writeMemo(path, memo{Key: key, Time: time.Now(), Results: map[string]probeResult{"x": {OK: true}}})
		os.Chmod(path, 0o600)
		spoil()
		if _, ok := readMemo(path, key); ok {
			t.Errorf("%s: a record that must not be trusted was read", name)
		}
	}
}

// Writing a record removes those past their TTL and keeps fresh ones.
func TestWriteMemoPrunes(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	old, fresh := memoPath(memoKey("test", nil, []byte("old"))), memoPath(memoKey("test", nil, []byte("fresh")))
	writeMemo(old, memo{Key: "old", Time: time.Now()})
	writeMemo(fresh, memo{Key: "fresh", Time: time.Now()})
	past := time.Now().Add(-2 * memoTTL)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	writeMemo(memoPath(memoKey("test", nil, []byte("new"))), memo{Key: "new", Time: time.Now()})
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("an expired record survived: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh record was removed: %v", err)
	}
}
