//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestGuardArgs(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, paths, err := guardArgs(sandbox.GuardSpec{Workspace: ws}, "/scratch/empty"); err != nil || a != nil || len(paths) != 2 ||
		paths[0].Guard != sandbox.Nested || paths[1].Guard != sandbox.Unborn {
		t.Fatalf("no repository: %q, %v, %v; want no mount, and the Nested and Unborn guards", a, paths, err)
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
	a, paths, err := guardArgs(sandbox.GuardSpec{Workspace: ws}, "/scratch/empty")
	if err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(ws, ".git")
	want := strings.Join([]string{
		"--bind", g, g,
		"--ro-bind", "/scratch/empty", g + "/config",
		"--perms", "0555", "--tmpfs", g + "/hooks", "--remount-ro", g + "/hooks",
		"--bind", g + "/modules", g + "/modules", // what holds a git directory is pinned too
		"--bind", g + "/modules/m", g + "/modules/m",
		"--ro-bind", g + "/modules/m/config", g + "/modules/m/config",
		"--ro-bind", g + "/modules/m/hooks", g + "/modules/m/hooks",
	}, " ")
	if got := strings.Join(a, " "); got != want {
		t.Errorf("guardArgs =\n%s\nwant\n%s", got, want)
	}
	// No mount forbids making a commondir: those are to be removed after
	// the run, if it made them.
	var unmade []string
	for _, p := range paths {
		if p.Guard == sandbox.Unmade {
			unmade = append(unmade, p.Path)
		}
	}
	if wantUnmade := []string{g + "/commondir", g + "/modules/m/commondir"}; !slices.Equal(unmade, wantUnmade) {
		t.Errorf("guardArgs unmade = %q, want %q", unmade, wantUnmade)
	}
	made := filepath.Join(ws, ".git", "commondir")
	if err := os.WriteFile(made, []byte("../evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if removed := sandbox.Aftercare(paths).Removed; !slices.Equal(removed, []string{made}) {
		t.Errorf("Aftercare removed %q, want %q", removed, made)
	}
	if _, err := os.Lstat(made); err == nil {
		t.Error("the commondir the run made is still there")
	}
	// A directory made there would only break git; it goes too.
	if err := os.MkdirAll(filepath.Join(made, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if removed := sandbox.Aftercare(paths).Removed; !slices.Equal(removed, []string{made}) {
		t.Errorf("Aftercare removed a directory as %q, want %q", removed, made)
	}
}
