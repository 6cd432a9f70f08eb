//go:build linux

package linux

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestGuardCheck(t *testing.T) {
	f := newFixture(t)
	symlink(t, f.home, filepath.Join(f.root, "home-link"))
	cache := filepath.Join(f.root, "xdg-cache", "cordon")
	g := newGuard([]string{filepath.Join(f.root, "home-link"), ""}, f.audit, cache)
	tests := []struct {
		path string
		want string // "" means allowed
	}{
		{f.home, "your home directory"},
		{filepath.Join(f.root, "home-link"), "your home directory"},
		{f.root, "contains your home directory"},
		{"/", "contains your home directory"},
		{filepath.Join(f.home, ".ssh"), "holds credentials"},
		{filepath.Join(f.home, ".ssh", "id_ed25519"), "holds credentials"},
		{filepath.Join(f.home, ".gnupg"), "holds credentials"},
		{filepath.Join(f.home, ".aws", "credentials"), "holds credentials"},
		{filepath.Join(f.home, ".kube"), "holds credentials"},
		{filepath.Join(f.home, ".docker", "config.json"), "holds credentials"},
		{filepath.Join(f.home, ".config", "gh"), "holds credentials"},
		{filepath.Join(f.home, ".config", "cordon", "config.yaml"), "holds credentials"},
		{filepath.Join(f.home, ".local", "share", "keyrings"), "holds credentials"},
		{filepath.Join(f.home, ".cache", "cordon", "bundles"), "holds credentials"},
		{filepath.Join(f.home, ".cache"), ""},
		{cache, "cordon's cache directory"},
		{filepath.Join(cache, "bundles", "x.pem"), "cordon's cache directory"},
		{filepath.Dir(cache), ""},
		{filepath.Dir(f.audit), "audit log directory"},
		{f.audit, "audit log directory"},
		{filepath.Join(f.home, ".config"), ""},
		{filepath.Join(f.home, ".cargo"), ""},
		{filepath.Join(f.home, ".sshx"), ""},
		{filepath.Join(f.root, "work"), ""},
		{"/opt", ""},
	}
	for _, tt := range tests {
		err := g.check("expose", tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("check(%s) = %v, want allowed", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("check(%s) = %v, want %q", tt.path, err, tt.want)
		}
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
		if got := within(tt.child, tt.parent); got != tt.want {
			t.Errorf("within(%q, %q) = %v", tt.child, tt.parent, got)
		}
	}
}

func TestEnvironment(t *testing.T) {
	got, err := environment([]string{"PATH", "LANG", "MISSING"}, []string{"PATH=/p", "LANG=C", "OTHER=x"}, "/home/u", "u", []string{"HTTPS_PROXY=http://p", "LANG=fr"})
	if err != nil {
		t.Fatal(err)
	}
	want := "PATH=/p LANG=fr HOME=/home/u TMPDIR=/tmp USER=u LOGNAME=u HTTPS_PROXY=http://p"
	if strings.Join(got, " ") != want {
		t.Fatalf("environment = %q, want %q", got, want)
	}
	got, _ = environment(nil, nil, "/h", "u", nil)
	if got[0] != "PATH="+fallbackPath {
		t.Fatalf("no host PATH: %q", got)
	}
	if _, err := environment(nil, nil, "/h", "u", []string{"NOEQUALS"}); err == nil {
		t.Fatal("an extra entry without = was accepted")
	}
}
