package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriterLater: a record given to Later is not written at once; it goes
// out just before the next Write's record, or on its own after laterDelay,
// or at Close, and the log keeps the order the records were given in.
func TestWriterLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	paths := func() []string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, _, skipped, _ := readAll(t, string(data))
		if len(skipped) > 0 {
			t.Fatalf("unreadable lines: %v", skipped)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.Path)
		}
		return out
	}
	want := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("log holds %q, want %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("log holds %q, want %q", got, want)
			}
		}
	}

	w.Later(Record{Type: TypeClose, Path: "/1"})
	want(paths())
	if err := w.Write(Record{Type: TypeDecision, Path: "/2"}); err != nil {
		t.Fatal(err)
	}
	want(paths(), "/1", "/2")

	w.Later(Record{Type: TypeClose, Path: "/3"})
	w.Later(Record{Type: TypeClose, Path: "/4"})
	deadline := time.Now().Add(5 * time.Second)
	for len(paths()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("Later's records were not written on their own: %q", paths())
		}
		time.Sleep(10 * time.Millisecond)
	}
	want(paths(), "/1", "/2", "/3", "/4")

	w.Later(Record{Type: TypeClose, Path: "/5"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want(paths(), "/1", "/2", "/3", "/4", "/5")
}

// TestWriterSyncs: Sync fsyncs its record and Close fsyncs whatever was
// written since the last fsync, and nothing twice.
func TestWriterSyncs(t *testing.T) {
	for _, c := range []struct {
		name  string
		calls string // w: Write, s: Sync, l: Later
		want  int    // fsyncs, Close's included
	}{
		{"nothing", "", 0},
		{"write", "w", 1},
		{"sync", "s", 1},
		{"sync then write", "sw", 2},
		{"write then sync", "ws", 1},
		{"later", "l", 1},
		{"sync then later", "sl", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), "s")
			if err != nil {
				t.Fatal(err)
			}
			fsyncs := 0
			w.fsync = func(f *os.File) error { fsyncs++; return f.Sync() }
			for _, op := range c.calls {
				r := Record{Type: TypeDecision, Path: "/" + string(op)}
				switch op {
				case 'w':
					err = w.Write(r)
				case 's':
					err = w.Sync(r)
				case 'l':
					w.Later(r)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if fsyncs != c.want {
				t.Errorf("%d fsyncs, want %d", fsyncs, c.want)
			}
		})
	}
}

// TestNewSessionID: ids are 16 hex digits and do not repeat.
func TestNewSessionID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("session id %q is not 16 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("session id %q repeated", id)
		}
		seen[id] = true
	}
}
