package sandbox

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

// TestProtectedHomeDeniedReading holds that every store refused outright
// is a default deny_read entry too: it reads as empty in a tree exposed
// around it on every platform, and the run is refused when a file in it
// has a second name the box could read it through.
func TestProtectedHomeDeniedReading(t *testing.T) {
	deny := policy.Defaults().DenyRead
	for _, p := range ProtectedHome {
		if !slices.Contains(deny, "~/"+p) {
			t.Errorf("protected ~/%s is not a default deny_read entry (%q)", p, deny)
		}
	}
}

func TestAuditDirs(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	state, ws, other := mk("state"), mk("ws/logs"), mk("other")
	link := func(target, name string) string {
		p := filepath.Join(other, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	loopA := filepath.Join(other, "loop-a")
	link(loopA, "loop-b")
	link(filepath.Join(other, "loop-b"), "loop-a")
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"a plain file", filepath.Join(state, "audit.jsonl"), []string{state}},
		{"not there yet", filepath.Join(state, "new.jsonl"), []string{state}},
		{"a symlink", link(filepath.Join(ws, "audit.jsonl"), "abs.jsonl"), []string{other, ws}},
		{"a relative symlink", link("../ws/logs/audit.jsonl", "rel.jsonl"), []string{other, ws}},
		{"a chain", link("rel.jsonl", "chain.jsonl"), []string{other, ws}},
		{"a loop ends", loopA, []string{other}},
		// The kernel leaves the link's target at "..", not the link's
		// directory: the log is written in ws/, which the text of the
		// path, cleaned, never names.
		{"a link then ..", link(ws, "d") + "/../audit.jsonl", []string{other, filepath.Dir(ws)}},
		{"a link then .. then a link", link(filepath.Join(state, "audit.jsonl"), "d2") + "/../x.jsonl", []string{other, state}},
	} {
		if got := AuditDirs(tc.path); !slices.Equal(got, tc.want) {
			t.Errorf("%s: AuditDirs(%s) = %v, want %v", tc.name, tc.path, got, tc.want)
		}
	}
}

// TestCheckAuditOpened: a log opened where AuditDirs did not judge it is
// refused; one opened where it did is not, nor one the kernel names no
// place for.
func TestCheckAuditOpened(t *testing.T) {
	root := t.TempDir()
	ws, other := filepath.Join(root, "ws"), filepath.Join(root, "other")
	for _, d := range []string{filepath.Join(ws, "sub"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(ws, "sub"), filepath.Join(other, "d")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(other, "d") + "/../a.jsonl"
	if err := CheckAuditOpened(path, filepath.Join(ws, "a.jsonl")); err != nil {
		t.Errorf("the log opened where AuditDirs put it was refused: %v", err)
	}
	if err := CheckAuditOpened(path, ""); err != nil {
		t.Errorf("a log the kernel names no place for was refused: %v", err)
	}
	err := CheckAuditOpened(filepath.Join(other, "a.jsonl"), filepath.Join(ws, "a.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "opened in "+ws) {
		t.Errorf("a log opened elsewhere than judged was not refused: %v", err)
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		child, parent string
		want          bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/anything", "/", true},
	}
	for _, tt := range tests {
		if got := Within(tt.child, tt.parent); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.child, tt.parent, got)
		}
	}
}

// TestCacheDir: cordon's cache is under $XDG_CACHE_HOME or the home
// directory, and a relative $HOME, which put it in the directory cordon
// started in (a run's workspace, where its box planted records the next
// run acted on) and which no check of where it lies saw, counts for
// none: the password database's home is used. A relative $XDG_CACHE_HOME
// is ignored (red team, round 6: it left cordon with no cache, and cordon
// proxy asked for the variable to be set).
func TestCacheDir(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, xdg, home, want string }{
		{"home", "", "/h", DefaultCacheDir("/h")},
		{"xdg", "/x/cache", "/h", "/x/cache/cordon"},
		{"relative xdg, ignored as the XDG specification says", "cache", "/h", DefaultCacheDir("/h")},
		{"relative home", "", "rel", DefaultCacheDir(u.HomeDir)},
		{"dot home", "", ".", DefaultCacheDir(u.HomeDir)},
	} {
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		t.Setenv("HOME", c.home)
		if runtime.GOOS == "darwin" && c.xdg != "" {
			continue // macOS's cache is under the home whatever $XDG_CACHE_HOME says
		}
		if got := CacheDir(); got != c.want {
			t.Errorf("%s: CacheDir() = %q, want %q", c.name, got, c.want)
		}
	}
}
