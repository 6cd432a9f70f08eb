package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

// TestMissingDenyRead: a deny_read entry in the workspace that does not
// exist is listed, to be told to the user; one that exists, or lies
// outside the workspace, is not.
func TestMissingDenyRead(t *testing.T) {
	base := realTempDir(t)
	ws, out := filepath.Join(base, "ws"), filepath.Join(base, "out")
	for _, d := range []string{filepath.Join(ws, "secrets"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "secrets", "prod.key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "gone"), filepath.Join(out, "into-ws")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, entry string
		missing     bool
	}{
		{"present", filepath.Join(ws, "secrets", "prod.key"), false},
		{"moved away", filepath.Join(ws, "secrets", "other.key"), true},
		{"its directory moved away", filepath.Join(ws, "config", "db.key"), true},
		{"relative", "secrets/gone.key", true},
		{"relative, present", "secrets/prod.key", false},
		{"outside the workspace", filepath.Join(out, "absent.key"), false},
		{"through a link into the workspace", filepath.Join(out, "into-ws", "x.key"), true},
		{"the home's usual stores", "/nonexistent-home/.aws", false},
	}
	for _, tt := range tests {
		got := MissingDenyRead(&policy.Policy{DenyRead: []string{tt.entry}}, ws)
		if (len(got) == 1) != tt.missing || len(got) > 1 {
			t.Errorf("%s: MissingDenyRead(%s) = %q, want missing %v", tt.name, tt.entry, got, tt.missing)
		}
		if tt.missing && len(got) == 1 && !slices.Contains(got, filepath.Clean(filepath.Join(ws, tt.entry))) && got[0] != tt.entry {
			t.Errorf("%s: named %q, want the entry as written (from the workspace)", tt.name, got)
		}
	}
}
