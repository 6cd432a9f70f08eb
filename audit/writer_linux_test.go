package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriterRealPath: RealPath names the file the kernel opened, which
// for a path with ".." after a link is not the path cleaned as text.
func TestWriterRealPath(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Fatalf("RealPath reads /proc/self/fd, which this Linux machine should have: %v", err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub, other := filepath.Join(root, "ws", "sub"), filepath.Join(root, "other")
	for _, d := range []string{sub, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(sub, filepath.Join(other, "d")); err != nil {
		t.Fatal(err)
	}
	w, err := Open(filepath.Join(other, "d")+"/../a.jsonl", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, want := w.RealPath(), filepath.Join(root, "ws", "a.jsonl"); got != want {
		t.Errorf("RealPath() = %q, want %q", got, want)
	}
}
