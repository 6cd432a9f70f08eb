package sandbox

import (
	"os"
	"path/filepath"
	"slices"
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
