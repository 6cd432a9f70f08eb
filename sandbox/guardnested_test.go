package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Repositories nested in the workspace when the run is built are guarded
// as the workspace's own.
func TestGuardNested(t *testing.T) {
	type tree map[string]string // path -> contents; "dir/" a directory, "@target" a link
	for _, c := range []struct {
		name  string
		tree  tree
		want  []string
		never []string
	}{
		{name: "hooks path and include", tree: tree{"sub/.git/HEAD": "", "sub/.git/hooks/": "", "sub/.husky/pre-commit": "",
			"sub/.git/config": "[core]\n\thooksPath = .husky\n\tfsmonitor = sh tools/x.sh\n[include]\n\tpath = ../extra.gitconfig\n", "sub/tools/x.sh": ""},
			want: []string{"pinned sub", "pinned sub/.git", "read-only sub/.git/config", "read-only sub/.git/hooks", "read-only sub/.husky",
				"unmade sub/extra.gitconfig", "read-only sub/tools/x.sh", "unmade sub/.git/commondir"}},
		{name: "deeper, a .git file", tree: tree{"a/b/c/.git": "gitdir: ../../../gd\n", "gd/HEAD": "", "gd/config": "[core]\n\thooksPath = h\n", "a/b/c/h/": ""},
			want: []string{"pinned a", "pinned a/b", "read-only a/b/c/.git", "pinned gd", "read-only gd/config", "read-only a/b/c/h"}},
		{name: "nested in nested", tree: tree{"x/.git/config": "", "x/y/.git/config": "[core]\n\thooksPath = hooks\n", "x/y/hooks/": ""},
			want: []string{"read-only x/.git/config", "read-only x/y/.git/config", "read-only x/y/hooks"}},
		{name: "a link where a guard goes is left to the check after the run", tree: tree{"l/.git/config": "[core]\n\thooksPath = .husky\n", "l/.husky": "@real", "l/real/": ""},
			never: []string{"l/.git/config", "l/.git"}},
		{name: "not into git directories", tree: tree{".git/config": "", ".git/x/.git/config": ""},
			never: []string{".git/x/.git/config"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			t.Setenv("HOME", realTempDir(t))
			t.Setenv("XDG_CONFIG_HOME", "")
			for p, data := range c.tree {
				full := filepath.Join(ws, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				switch {
				case strings.HasSuffix(p, "/"):
					err = os.MkdirAll(full, 0o755)
				case strings.HasPrefix(data, "@"):
					err = os.Symlink(data[1:], full)
				default:
					err = os.WriteFile(full, []byte(data), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			paths := guardNested(ws, nil)
			got := describeGuards(paths, ws)
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("guardNested lacks %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
			for _, n := range c.never {
				for _, p := range paths {
					if p.Path == filepath.Join(ws, n) {
						t.Errorf("guardNested guards %s:\n%s", n, strings.Join(got, "\n"))
					}
				}
			}
		})
	}
}

// BenchmarkGuardNested walks a workspace of 10,000 directories, one of
// them a nested repository, as each run's start does.
func BenchmarkGuardNested(b *testing.B) {
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		if err := os.MkdirAll(filepath.Join(ws, fmt.Sprintf("d%02d/e%03d", i/100, i%100)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	git(b, filepath.Join(ws, "d00"), "init", "-q")
	for b.Loop() {
		if got := guardNested(ws, nil); len(got) == 0 {
			b.Fatal("the nested repository is not guarded")
		}
	}
}
