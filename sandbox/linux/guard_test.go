//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestGuardArgs(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, err := guardArgs(sandbox.GuardSpec{Workspace: ws}); err != nil || a != nil {
		t.Fatalf("no repository: %q, %v; want nothing", a, err)
	}
	// A repository with no config and no hooks directory: every kind of guard.
	if err := os.MkdirAll(filepath.Join(ws, ".git", "modules", "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".git/HEAD", ".git/modules/m/HEAD", ".git/modules/m/config"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, ".git", "modules", "m", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := guardArgs(sandbox.GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(ws, ".git")
	want := strings.Join([]string{
		"--bind", g, g,
		"--ro-bind", "/dev/null", g + "/config",
		"--perms", "0555", "--tmpfs", g + "/hooks", "--remount-ro", g + "/hooks",
		"--bind", g + "/modules/m", g + "/modules/m",
		"--ro-bind", g + "/modules/m/config", g + "/modules/m/config",
		"--ro-bind", g + "/modules/m/hooks", g + "/modules/m/hooks",
	}, " ")
	if got := strings.Join(a, " "); got != want {
		t.Errorf("guardArgs =\n%s\nwant\n%s", got, want)
	}
}
