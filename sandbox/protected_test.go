package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
	} {
		if got := AuditDirs(tc.path); !slices.Equal(got, tc.want) {
			t.Errorf("%s: AuditDirs(%s) = %v, want %v", tc.name, tc.path, got, tc.want)
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
		if got := Within(tt.child, tt.parent); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.child, tt.parent, got)
		}
	}
}

// TestCheckConfigOutside: cordon's configuration may not lie where the
// command may write, as written or through a symlink.
func TestCheckConfigOutside(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, conf := filepath.Join(base, "ws"), filepath.Join(base, "conf")
	for _, d := range []string{ws, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(ws, "cfg"), filepath.Join(conf, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config, writable []string
		refused          bool
	}{
		{[]string{filepath.Join(conf, "config.yaml"), filepath.Join(conf, "ca")}, []string{ws}, false},
		{[]string{filepath.Join(ws, ".xdg", "cordon", "config.yaml")}, []string{ws}, true},
		{[]string{filepath.Join(conf, "ca")}, []string{ws, conf}, true},
		{[]string{filepath.Join(conf, "linked")}, []string{ws}, true}, // a link into the workspace
		{[]string{"relative/config.yaml"}, []string{ws}, false},
		{nil, []string{ws}, false},
	} {
		err := CheckConfigOutside(c.config, c.writable)
		if (err != nil) != c.refused {
			t.Errorf("CheckConfigOutside(%q, %q) = %v, want refused %v", c.config, c.writable, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "rewrite your next run's policy") {
			t.Errorf("the refusal does not say why: %v", err)
		}
	}
}
