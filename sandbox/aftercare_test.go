package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A submodule checkout present when the run is built is guarded; one the
// run fills or registers is set aside afterwards, and a plain git status
// on the host then runs nothing the run planted.
func TestAftercareSetsAsideCheckouts(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	marker := filepath.Join(base, "planted-command-ran")
	nested := func(dir string, fsmonitor bool) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q")
		git(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
		if fsmonitor {
			git(t, dir, "config", "core.fsmonitor", "touch "+marker+"; true")
		}
		return git(t, dir, "rev-parse", "HEAD")
	}
	nested(ws, false)
	kept := nested(filepath.Join(ws, "kept"), false)
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+kept+",kept")
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+kept+",empty")

	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	got := describeGuards(paths, base)
	for _, want := range []string{"checkouts ws", "checkouts ws/kept", "pinned ws/kept", "pinned ws/kept/.git", "read-only ws/kept/.git/config"} {
		if !slices.Contains(got, want) {
			t.Errorf("the guard lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}

	// What the run does: it registers a repository of its own, and fills
	// the checkout that was registered but empty.
	planted := nested(filepath.Join(ws, "planted"), true)
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+planted+",planted")
	nested(filepath.Join(ws, "empty"), true)
	git(t, ws, "status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the host's git status did not run the planted command, so this test shows nothing: %v", err)
	}
	os.Remove(marker)

	removed, aside, unchecked := Aftercare(paths)
	if len(removed) != 0 || len(unchecked) != 0 {
		t.Errorf("Aftercare removed %q, left unchecked %v", removed, unchecked)
	}
	slices.Sort(aside)
	if len(aside) != 2 || !strings.HasPrefix(aside[0], filepath.Join(ws, "empty", ".git.cordon-set-aside-")) ||
		!strings.HasPrefix(aside[1], filepath.Join(ws, "planted", ".git.cordon-set-aside-")) {
		t.Errorf("set aside %q, want empty/.git and planted/.git", aside)
	}
	if _, err := os.Stat(filepath.Join(ws, "kept", ".git")); err != nil {
		t.Errorf("the guarded checkout was set aside: %v", err)
	}
	git(t, ws, "status")
	if _, err := os.Stat(marker); err == nil {
		t.Error("after Aftercare, the host's git status still ran the planted command")
	}
}
