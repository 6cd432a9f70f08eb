package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A workspace inside a larger repository (a monorepo's frontend/) is that
// repository's worktree to git: what its config names there is guarded.
func TestGuardEnclosing(t *testing.T) {
	type tree map[string]string // under the outer directory: path -> contents; "dir/" a directory
	repo := tree{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", "ws/": ""}
	for _, c := range []struct {
		name  string
		tree  tree
		want  []string // kind and path, {ws} the workspace
		never []string
	}{
		{name: "hooks path in the workspace", tree: tree{".git/config": "[core]\n\thooksPath = ws/.husky\n", "ws/.husky/pre-commit": ""},
			want: []string{"read-only {ws}/.husky"}},
		{name: "hooks path deeper, command words, include", tree: tree{
			".git/config": "[core]\n\thooksPath = ws/a/hooks\n\tfsmonitor = sh ws/tools/fsmon.sh\n[include]\n\tpath = ../ws/extra.gitconfig\n",
			"ws/a/hooks/": "", "ws/tools/fsmon.sh": "", "ws/extra.gitconfig": "[filter \"x\"]\n\tclean = python3 ws/tools/clean.py\n", "ws/tools/clean.py": ""},
			want: []string{"pinned {ws}/a", "read-only {ws}/a/hooks", "pinned {ws}/tools", "read-only {ws}/tools/fsmon.sh",
				"read-only {ws}/extra.gitconfig", "read-only {ws}/tools/clean.py"}},
		{name: "missing", tree: tree{".git/config": "[core]\n\thooksPath = ws/githooks\n[include]\n\tpath = ../ws/missing.gitconfig\n"},
			want: []string{"unmade {ws}/githooks", "unmade {ws}/missing.gitconfig"}},
		{name: "hooks path is the workspace", tree: tree{".git/config": "[core]\n\thooksPath = ws\n", "ws/pre-commit": ""},
			want: []string{"read-only {ws}/pre-commit", "unmade {ws}/post-commit"}, never: []string{"{ws}"}},
		{name: "named outside the workspace", tree: tree{".git/config": "[core]\n\thooksPath = .husky\n\tfsmonitor = tools/x.sh\n", ".husky/": "", "tools/x.sh": ""},
			never: []string{".husky", "tools/x.sh"}},
		{name: "the workspace's own repository first", tree: tree{".git/config": "[core]\n\thooksPath = ws/.husky\n", "ws/.husky/": "", "ws/.git/HEAD": ""},
			never: []string{"{ws}/.husky"}},
		{name: "a .git that is a link", tree: tree{".git": "@store/repo.git", "store/repo.git/HEAD": "", "store/repo.git/objects/": "", "store/repo.git/refs/": "",
			"store/repo.git/config": "[core]\n\thooksPath = ws/hooks\n", "ws/hooks/": ""},
			want: []string{"read-only {ws}/hooks"}},
		{name: "a linked worktree's .git file", tree: tree{".git": "gitdir: main/.git/worktrees/w\n",
			"main/.git/worktrees/w/commondir": "../..\n", "main/.git/worktrees/w/HEAD": "", "main/.git/config": "[core]\n\thooksPath = ws/hooks\n", "ws/hooks/": ""},
			want: []string{"read-only {ws}/hooks"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			outer := realTempDir(t)
			ws := filepath.Join(outer, "ws")
			t.Setenv("HOME", realTempDir(t))
			t.Setenv("XDG_CONFIG_HOME", "")
			files := tree{}
			for p, d := range repo {
				files[p] = d
			}
			if _, ok := c.tree[".git"]; ok { // a .git of the case's own
				files = tree{"ws/": ""}
			}
			for p, d := range c.tree {
				files[p] = d
			}
			for p, data := range files {
				full := filepath.Join(outer, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if strings.HasSuffix(p, "/") {
					err = os.MkdirAll(full, 0o755)
				} else if strings.HasPrefix(data, "@") {
					err = os.Symlink(data[1:], full)
				} else {
					err = os.WriteFile(full, []byte(data), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			paths, err := GuardEnclosing(ws)
			if err != nil {
				t.Fatal(err)
			}
			checkGuards(t, "GuardEnclosing", paths, ws, c.want, c.never)
			for _, p := range paths {
				if !Within(p.Path, ws) {
					t.Errorf("GuardEnclosing guards %s, outside the workspace", p.Path)
				}
			}
		})
	}
}

// A read-write allow_path inside a repository is guarded the same way,
// and so is the workspace inside another.
func TestGuardWorkspaceEnclosing(t *testing.T) {
	t.Setenv("HOME", realTempDir(t))
	t.Setenv("XDG_CONFIG_HOME", "")
	mono, other := realTempDir(t), realTempDir(t)
	ws, lib := filepath.Join(mono, "frontend"), filepath.Join(other, "lib")
	layTree(t, "", map[string]string{
		mono + "/.git/HEAD": "", mono + "/.git/objects/": "", mono + "/.git/refs/": "", mono + "/.git/config": "[core]\n\thooksPath = frontend/.husky\n",
		ws + "/.husky/pre-commit": "",
		other + "/.git/HEAD":      "", other + "/.git/objects/": "", other + "/.git/refs/": "", other + "/.git/config": "[core]\n\thooksPath = lib/hooks\n",
		lib + "/hooks/pre-push": "",
	})
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{lib}})
	if err != nil {
		t.Fatal(err)
	}
	got := describeGuards(paths, "")
	for _, w := range []string{"read-only " + ws + "/.husky", "read-only " + lib + "/hooks", "unborn " + ws + "/.git"} {
		if !slices.Contains(got, w) {
			t.Errorf("GuardWorkspace lacks %q:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// A repository above the workspace that another user owns (their .git in
// /tmp, above a workspace in /tmp) is refused as git refuses it
// (safe.directory): its config does not choose what cordon guards in the
// workspace, and removes after the run when the run made it.
func TestGuardEnclosingOthersRepository(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives a repository to another user, which needs root: run the tests as root, as make test does")
	}
	t.Setenv("HOME", realTempDir(t))
	t.Setenv("XDG_CONFIG_HOME", "")
	outer := realTempDir(t)
	ws := filepath.Join(outer, "ws")
	layTree(t, outer, map[string]string{
		".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "",
		".git/config": "[core]\n\thooksPath = ws/hooks\n[include]\n\tpath = ../ws/work.txt\n", "ws/": "",
	})
	for _, c := range []struct {
		owner int
		want  []string
	}{
		{0, []string{"unmade {ws}/hooks", "unmade {ws}/work.txt"}},
		{12345, nil},
	} {
		if err := filepath.Walk(filepath.Join(outer, ".git"), func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, c.owner, c.owner)
		}); err != nil {
			t.Fatal(err)
		}
		paths, err := GuardEnclosing(ws)
		if err != nil {
			t.Fatal(err)
		}
		if c.want == nil && len(paths) > 0 {
			t.Errorf("a repository of uid %d above the workspace: GuardEnclosing guards %s", c.owner, describeGuards(paths, ws))
			continue
		}
		checkGuards(t, fmt.Sprintf("GuardEnclosing (owner %d)", c.owner), paths, ws, c.want, nil)
	}
}
