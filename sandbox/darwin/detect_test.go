package darwin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// TestDetectFindsTheRepository: the workspace's repository reaches the
// Machine, so Render (which reads nothing from disk) can guard it, and a
// repository that cannot be guarded refuses the launch.
func TestDetectFindsTheRepository(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &sandbox.Spec{Workspace: ws}
	m, err := Detect(s, filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Guarded) == 0 || m.Guarded[0].Path != filepath.Join(ws, ".git") || m.Guarded[0].Guard != sandbox.Pinned {
		t.Errorf("Detect found the repository as %+v", m.Guarded)
	}
	if err := os.Symlink("elsewhere", filepath.Join(ws, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(s, ""); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Detect with a linked config: %v; want a refusal", err)
	}
}
