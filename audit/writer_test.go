package audit

import (
	"os"
	"path/filepath"
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
