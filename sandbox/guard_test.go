package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestGuardRepo(t *testing.T) {
	type tree map[string]string // path -> contents; "dir/" a directory, "@target" a link
	for _, c := range []struct {
		name    string
		tree    tree
		want    []string // each a guarded path, as kind and path
		never   []string // each a path that must not be guarded
		wantErr string
	}{
		{name: "not a repository", tree: tree{"src/": ""}, want: []string{"unborn {ws}/.git"}},
		{name: "config includes", tree: tree{".git/hooks/": "", "team.gitconfig": "",
			".git/config": "[include]\n\tpath = ../team.gitconfig\n[includeIf \"onbranch:x\"]\n\tpath = ../missing.gitconfig\n\tpath = /etc/gitconfig\n"},
			want: []string{"read-only {ws}/.git/config", "read-only {ws}/team.gitconfig", "unmade {ws}/missing.gitconfig"}},
		{name: "repository", tree: tree{".git/config": "", ".git/hooks/": "", ".git/HEAD": ""},
			want: []string{"pinned {ws}/.git", "read-only {ws}/.git/config", "read-only {ws}/.git/hooks", "unmade {ws}/.git/commondir"}},
		// A commondir points git's config and hooks elsewhere: a linked
		// worktree's stays as it is; one in a repository's own git
		// directory is refused (a box may have left it), and none may be
		// made.
		{name: "worktree commondir", tree: tree{".git/config": "", ".git/hooks/": "",
			".git/worktrees/w/commondir": "../..\n", ".git/worktrees/w/gitdir": "/elsewhere/.git\n"},
			want: []string{"read-only {ws}/.git/worktrees/w/commondir", "unmade {ws}/.git/commondir",
				// What holds the read-only commondir cannot be renamed
				// away and replaced.
				"pinned {ws}/.git/worktrees", "pinned {ws}/.git/worktrees/w"}},
		{name: "commondir left", tree: tree{".git/config": "", ".git/hooks/": "", ".git/commondir": "../evil\n"}, wantErr: "remove it if you did not put it there"},
		{name: "linked commondir", tree: tree{".git/config": "", ".git/hooks/": "", ".git/commondir": "@../x"}, wantErr: "remove it if you did not put it there"},
		{name: "submodule commondir left", tree: tree{".git/config": "", ".git/hooks/": "", ".git/modules/a/HEAD": "", ".git/modules/a/commondir": ".."},
			wantErr: "modules/a/commondir exists"},
		{name: "no hooks, no config", tree: tree{".git/HEAD": ""},
			want: []string{"pinned {ws}/.git", "absent-file {ws}/.git/config", "absent-dir {ws}/.git/hooks"}},
		{name: "worktree config", tree: tree{".git/config": "", ".git/hooks/": "", ".git/config.worktree": "", ".git/worktrees/w/config.worktree": ""},
			want: []string{"read-only {ws}/.git/config.worktree", "read-only {ws}/.git/worktrees/w/config.worktree"}},
		{name: "submodules", tree: tree{".git/config": "", ".git/hooks/": "",
			".git/modules/a/HEAD": "", ".git/modules/a/config": "", ".git/modules/a/hooks/": "",
			".git/modules/lib/b/HEAD": "", ".git/modules/lib/b/config": "",
			".git/modules/a/modules/x/HEAD": "", ".git/modules/a/modules/x/config": ""},
			want: []string{"pinned {ws}/.git/modules/a", "read-only {ws}/.git/modules/a/config", "read-only {ws}/.git/modules/a/hooks",
				"pinned {ws}/.git/modules/a/modules/x", "read-only {ws}/.git/modules/a/modules/x/config",
				"pinned {ws}/.git/modules/lib/b", "absent-dir {ws}/.git/modules/lib/b/hooks",
				// nor what holds them
				"pinned {ws}/.git/modules", "pinned {ws}/.git/modules/lib", "pinned {ws}/.git/modules/a/modules"}},
		{name: "linked modules", tree: tree{".git/config": "", ".git/hooks/": "", ".git/modules": "@../mods", "mods/a/HEAD": "", "mods/a/config": ""},
			wantErr: "modules is a symbolic link"},
		{name: "linked worktrees", tree: tree{".git/config": "", ".git/hooks/": "", ".git/worktrees": "@../wts", "wts/w/commondir": "../..\n"},
			wantErr: "worktrees is a symbolic link"},
		{name: "checkout's git directory", tree: tree{".git": "gitdir: meta/modules/sub\n", "meta/modules/sub/config": "", "meta/modules/sub/hooks/": ""},
			want: []string{"pinned {ws}/meta", "pinned {ws}/meta/modules", "pinned {ws}/meta/modules/sub"}},
		{name: "modules too deep", tree: tree{".git/config": "", ".git/hooks/": "", ".git/modules/1/2/3/4/5/6/7/8/9/HEAD": ""},
			wantErr: "too many submodules, or nested too deep"},
		{name: "linked config", tree: tree{".git/config": "@../cfg", "cfg": "", ".git/hooks/": ""}, wantErr: "config is a symbolic link"},
		{name: "linked hooks", tree: tree{".git/config": "", ".git/hooks": "@../h", "h/": ""}, wantErr: "hooks is a symbolic link"},
		{name: "linked .git", tree: tree{".git": "@real", "real/config": ""}, wantErr: ".git is a symbolic link"},
		{name: "gitdir file inside", tree: tree{".git": "gitdir: meta\n", "meta/config": "", "meta/hooks/": ""},
			want: []string{"read-only {ws}/.git", "pinned {ws}/meta", "read-only {ws}/meta/config"}},
		{name: "gitdir file naming what is not there", tree: tree{".git": "gitdir: .git-modules/sub\n"},
			want: []string{"read-only {ws}/.git", "unborn {ws}/.git-modules/sub"}},
		{name: "gitdir file outside", tree: tree{".git": "gitdir: /nonexistent/elsewhere\n"},
			want: []string{"read-only {ws}/.git"}},
		// The hooks directory core.hooksPath names, in the workspace, is
		// guarded as .git/hooks is, with what holds it; a missing one is
		// removed after the run if the run made it.
		{name: "hooks path", tree: tree{".git/config": "[core]\n\thooksPath = .husky/_\n", ".git/hooks/": "", ".husky/_/pre-commit": ""},
			want: []string{"pinned {ws}/.husky", "read-only {ws}/.husky/_", "read-only {ws}/.git/hooks"}},
		{name: "template directory", tree: tree{".git/config": "[init]\n\ttemplateDir = tmpl\n", ".git/hooks/": "", "tmpl/hooks/": ""},
			want: []string{"read-only {ws}/tmpl"}},
		{name: "hooks path, gitdir file inside", tree: tree{".git": "gitdir: meta\n", "meta/config": "[core]\n\thooksPath = hooks2\n", "meta/hooks/": "", "hooks2/": ""},
			want: []string{"read-only {ws}/hooks2"}, never: []string{"{ws}/meta/hooks2"}},
		{name: "hooks path the workspace root", tree: tree{".git/config": "[core]\n\thooksPath = .\n", ".git/hooks/": "", "pre-commit": ""},
			want: []string{"read-only {ws}/pre-commit", "unmade {ws}/post-checkout"}, never: []string{"{ws}"}},
		{name: "hooks path missing", tree: tree{".git/config": "[core]\n\thooksPath = githooks\n", ".git/hooks/": ""},
			want: []string{"unmade {ws}/githooks"}},
		{name: "hooks path absolute, included", tree: tree{".git/config": "[include]\n\tpath = ../team.gitconfig\n", ".git/hooks/": "",
			"team.gitconfig": "[core]\n\thooksPath = {ws}/tools/hooks\n", "tools/hooks/": ""},
			want: []string{"pinned {ws}/tools", "read-only {ws}/tools/hooks"}},
		{name: "hooks path outside", tree: tree{".git/config": "[core]\n\thooksPath = /etc/git-hooks\n\tfsmonitor = ../outside.sh\n", ".git/hooks/": ""},
			want: []string{"read-only {ws}/.git/hooks"}, never: []string{"/etc/git-hooks", "/etc", "outside.sh"}},
		{name: "hooks path linked", tree: tree{".git/config": "[core]\n\thooksPath = .husky/_\n", ".git/hooks/": "", ".husky": "@real", "real/_/": ""},
			wantErr: ".husky is a symbolic link"},
		// So is a program a command key names by a path in the
		// workspace.
		{name: "commands", tree: tree{".git/hooks/": "", "tools/fsmon.sh": "", "scripts/x.sh": "", "bin/": "",
			".git/config": "[core]\n\tfsmonitor = tools/fsmon.sh\n[alias]\n\tx = \"!scripts/x.sh --all\"\n\tst = status\n" +
				"[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n[diff \"bin\"]\n\ttextconv = ./bin/tc\n"},
			want:  []string{"pinned {ws}/tools", "read-only {ws}/tools/fsmon.sh", "pinned {ws}/scripts", "read-only {ws}/scripts/x.sh", "unmade {ws}/bin/tc"},
			never: []string{"{ws}/status", "{ws}/git-lfs"}},
		// And each later word of it that names a file: a script an
		// interpreter runs, in a quoted sh -c script too.
		{name: "command words", tree: tree{".git/hooks/": "", "tools/clean.sh": "", "tools/fsmon.py": "", "run.sh": "", "src/": "", "node_modules/x.js": "",
			".git/config": "[filter \"x\"]\n\tclean = sh tools/clean.sh\n[core]\n\tfsmonitor = python3 tools/fsmon.py\n" +
				"[alias]\n\ty = \"!sh -c 'cd src && sh run.sh && node node_modules/x.js' -\"\n\tz = \"!sh tools/missing.sh cat\"\n"},
			want: []string{"pinned {ws}/tools", "read-only {ws}/tools/clean.sh", "read-only {ws}/tools/fsmon.py", "read-only {ws}/run.sh",
				"pinned {ws}/node_modules", "read-only {ws}/node_modules/x.js", "unmade {ws}/tools/missing.sh"},
			never: []string{"{ws}/src", "{ws}/sh", "{ws}/cat", "{ws}/python3"}},
		{name: "a submodule's hooks path", tree: tree{".git/config": "", ".git/hooks/": "", "a/hooks2/": "",
			".git/modules/a/HEAD": "", ".git/modules/a/config": "[core]\n\tworktree = ../../../a\n\thooksPath = hooks2\n"},
			want: []string{"pinned {ws}/a", "read-only {ws}/a/hooks2"}},
		// With extensions.worktreeConfig on, git reads a config.worktree
		// the box could make.
		{name: "worktree config on", tree: tree{".git/config": "[extensions]\n\tworktreeConfig = true\n", ".git/hooks/": "",
			".git/worktrees/w/commondir": "../..\n"},
			want: []string{"absent-file {ws}/.git/config.worktree", "absent-file {ws}/.git/worktrees/w/config.worktree"}},
		{name: "worktree config off", tree: tree{".git/config": "", ".git/hooks/": "", ".git/worktrees/w/commondir": "../..\n"},
			want:  []string{"read-only {ws}/.git/worktrees/w/commondir"},
			never: []string{"{ws}/.git/config.worktree", "{ws}/.git/worktrees/w/config.worktree"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			t.Setenv("HOME", realTempDir(t))
			t.Setenv("XDG_CONFIG_HOME", "")
			laid := map[string]string{}
			for p, data := range c.tree {
				laid[p] = strings.ReplaceAll(data, "{ws}", ws)
			}
			layTree(t, ws, laid)
			paths, err := GuardRepo(ws)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("GuardRepo = %v, %v; want an error with %q", paths, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := describeGuards(paths, ""); c.want == nil && got != nil {
				t.Errorf("GuardRepo = %q; want nothing", got)
			}
			checkGuards(t, "GuardRepo", paths, ws, c.want, c.never)
			// A git directory comes before what is inside it: a bind
			// mount of it would cover mounts made earlier.
			for i, p := range paths {
				for _, q := range paths[i+1:] {
					if q.Guard == Pinned && Within(p.Path, q.Path) {
						t.Errorf("%s comes before its git directory %s", p.Path, q.Path)
					}
				}
			}
		})
	}
}

func TestGuardWorkspaceReadOnly(t *testing.T) {
	ws := realTempDir(t)
	for _, d := range []string{".git/hooks", ".git/info", ".vscode", ".github/workflows", "real", "deep/b/c"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/config", "Makefile"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("real", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".cordon.yaml"), []byte("read_only: [.vscode]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(readOnly ...string) ([]string, error) {
		paths, err := GuardWorkspace(GuardSpec{Workspace: ws, ReadOnly: readOnly})
		got := describeGuards(paths, ws)
		return got, err
	}
	repo, err := list()
	if err != nil {
		t.Fatal(err)
	}
	// The project file is the next run's policy.
	if !slices.Contains(repo, "read-only .cordon.yaml") {
		t.Errorf("the project file is not guarded: %q", repo)
	}
	for _, c := range []struct {
		readOnly []string
		want     []string // with the repository's own, in any order
		drop     []string // of the repository's own, covered by a read-only path
		err      string
	}{
		{[]string{".vscode", "Makefile"}, []string{"read-only .vscode", "read-only Makefile"}, nil, ""},
		{[]string{".github/workflows/"}, []string{"pinned .github", "read-only .github/workflows"}, nil, ""},
		{[]string{".git/info"}, []string{"read-only .git/info"}, nil, ""}, // .git is pinned once
		{[]string{".vscode", "./.vscode"}, []string{"read-only .vscode"}, nil, ""},
		// A read-only path covers what is under it, whichever comes first:
		// a writable bind after it would open part of it again.
		{[]string{".github", ".github/workflows"}, []string{"read-only .github"}, nil, ""},
		{[]string{".github/workflows", ".github"}, []string{"read-only .github"}, nil, ""},
		{[]string{"deep", "deep/b/c"}, []string{"read-only deep"}, nil, ""}, // not "pinned deep/b"
		{[]string{".git"}, []string{"read-only .git"}, []string{"pinned .git", "read-only .git/config", "read-only .git/hooks", "unmade .git/commondir"}, ""},
		{[]string{"missing", "Makefile/x", ".github/none"}, nil, nil, ""},
		{[]string{"link"}, nil, nil, "link is a symbolic link"},
		{[]string{"link/x"}, nil, nil, "link is a symbolic link"},
		{[]string{"../outside"}, nil, nil, "not inside the workspace"},
	} {
		got, err := list(c.readOnly...)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("read_only %q: %q, %v; want an error with %q", c.readOnly, got, err, c.err)
			}
			continue
		}
		var want []string
		for _, r := range repo {
			if !slices.Contains(c.drop, r) {
				want = append(want, r)
			}
		}
		want = append(want, c.want...)
		if err != nil || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("read_only %q:\n%q, %v\nwant, in any order, %q", c.readOnly, got, err, want)
		}
		// A directory comes before what is under it.
		for i, g := range got {
			for _, h := range got[i+1:] {
				if p, q := strings.Fields(g)[1], strings.Fields(h)[1]; Within(p, q) && p != q {
					t.Errorf("read_only %q: %s comes before %s, which holds it", c.readOnly, p, q)
				}
			}
		}
	}
}

// TestGuardOwnFiles: cordon's own files under a directory the box may
// write (the workspace, a read-write allow_path) are guarded, read-only
// or, missing, an empty file the box cannot create, with the directories
// above them up to that directory pinned; elsewhere they need nothing.
func TestGuardOwnFiles(t *testing.T) {
	base := realTempDir(t)
	ws := filepath.Join(base, "ws")
	for _, d := range []string{"ws/tools/bin", "ws/out", "shared/bin", "opt/bin"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ws/tools/bin/cordon", "shared/bin/cordon", "opt/bin/cordon"} {
		if err := os.WriteFile(filepath.Join(base, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("tools", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		own      []string
		writable []string
		want     []string
		err      string
	}{
		{"in the workspace, with a missing helper", []string{"ws/tools/bin/cordon", "ws/tools/bin/cordon-holder"}, nil,
			[]string{"pinned ws/tools", "pinned ws/tools/bin", "read-only ws/tools/bin/cordon", "absent-file ws/tools/bin/cordon-holder"}, ""},
		{"under a read-write allow_path", []string{"shared/bin/cordon"}, []string{"shared"},
			[]string{"pinned shared/bin", "read-only shared/bin/cordon"}, ""},
		{"under a read-write allow_path inside the workspace: pinned from the workspace", []string{"ws/tools/bin/cordon"}, []string{"ws/tools"},
			[]string{"pinned ws/tools", "pinned ws/tools/bin", "read-only ws/tools/bin/cordon"}, ""},
		{"itself a read-write allow_path", []string{"shared/bin/cordon"}, []string{"shared/bin/cordon"},
			[]string{"read-only shared/bin/cordon"}, ""},
		{"in a missing directory", []string{"ws/gone/cordon-holder"}, nil, []string{"absent-dir ws/gone"}, ""},
		{"where the box cannot write", []string{"opt/bin/cordon", "opt/bin/cordon-holder"}, []string{"shared"}, nil, ""},
		{"behind a symbolic link", []string{"ws/link/bin/cordon"}, nil, nil, "is a symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := GuardSpec{Workspace: ws}
			for _, f := range c.own {
				g.Own = append(g.Own, filepath.Join(base, f))
			}
			for _, w := range c.writable {
				g.Writable = append(g.Writable, filepath.Join(base, w))
			}
			paths, err := GuardWorkspace(g)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("GuardWorkspace = %v, %v; want an error with %q", paths, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// No directory here is a repository: each root has an
			// Unborn guard, which TestGuardUnborn covers, and a Nested
			// or Watched one, which TestAftercareSetsAsideNestedRepositories
			// and TestGuardWatched do.
			paths = slices.DeleteFunc(paths, func(p GuardedPath) bool {
				return p.Guard == Unborn || p.Guard == Nested || p.Guard == Watched
			})
			got := describeGuards(paths, base)
			if !slices.Equal(got, c.want) {
				t.Errorf("GuardWorkspace =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestGuardWatched: each read-write allow_path that is a directory
// outside the workspace is walked after the run (Watched), as the
// workspace is; one inside it is walked with it, and a file is no
// directory to walk.
func TestGuardWatched(t *testing.T) {
	base := realTempDir(t)
	ws := filepath.Join(base, "ws")
	for _, d := range []string{"ws/inner", "cache", "other"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		writable []string
		want     []string
	}{
		{"none", nil, nil},
		{"outside", []string{"cache", "other"}, []string{"watched cache", "watched other"}},
		{"inside the workspace", []string{"ws/inner"}, nil},
		{"a file", []string{"file"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var writable []string
			for _, w := range c.writable {
				writable = append(writable, filepath.Join(base, w))
			}
			paths, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: writable})
			if err != nil {
				t.Fatal(err)
			}
			paths = slices.DeleteFunc(paths, func(p GuardedPath) bool { return p.Guard != Watched })
			if got := describeGuards(paths, base); !slices.Equal(got, c.want) {
				t.Errorf("watched =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestGuardWritableRepository: a read-write allow_path that is a
// repository's root has its git directory guarded as the workspace's is
// (its config and hooks run on the host when anyone runs git there).
func TestGuardWritableRepository(t *testing.T) {
	base := realTempDir(t)
	ws, lib := filepath.Join(base, "ws"), filepath.Join(base, "lib")
	for _, d := range []string{"ws", "lib/.git/hooks"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, ".git", "config"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{lib}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"checkouts lib", "nested ws", "watched lib", "unborn ws/.git", "pinned lib/.git", "unborn lib/.cordon.yaml", "read-only lib/.git/config", "unmade lib/.git/commondir", "read-only lib/.git/hooks"}
	if got := describeGuards(paths, base); !slices.Equal(got, want) {
		t.Errorf("GuardWorkspace =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := os.Remove(filepath.Join(lib, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", filepath.Join(lib, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	if _, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{lib}}); err == nil || !strings.Contains(err.Error(), "read-write path "+lib) {
		t.Errorf("a linked config in a read-write repository: %v; want a refusal naming the path", err)
	}
}

// TestGuardWritableBareRepository: a read-write allow_path that is a bare
// repository (one projects push to) has its config and hooks guarded for
// the run as a .git's are: before, the box wrote a hook there that a
// host's git push to it during the run ran. The path itself is the box's
// mount already, and is not pinned.
func TestGuardWritableBareRepository(t *testing.T) {
	base := realTempDir(t)
	ws, bare := filepath.Join(base, "ws"), filepath.Join(base, "bare.git")
	for _, d := range []string{"ws", "bare.git/hooks", "bare.git/objects", "bare.git/refs"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"config", "HEAD"} {
		if err := os.WriteFile(filepath.Join(bare, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{bare}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nested ws", "watched bare.git", "unborn ws/.git", "unborn bare.git/.git", "read-only bare.git/config", "unmade bare.git/commondir", "read-only bare.git/hooks", "unborn bare.git/.cordon.yaml"}
	if got := describeGuards(paths, base); !slices.Equal(got, want) {
		t.Errorf("GuardWorkspace =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGuardWorkspaceLinkedProjectFile: a project file that is a link
// (policy reads one that leads inside the workspace) cannot be guarded:
// the box could rewrite or rename its target, or replace the link. The
// run is refused, saying how to fix it.
func TestGuardWorkspaceLinkedProjectFile(t *testing.T) {
	ws := realTempDir(t)
	if err := os.MkdirAll(filepath.Join(ws, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "conf", "cordon.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("conf/cordon.yaml", filepath.Join(ws, ".cordon.yaml")); err != nil {
		t.Fatal(err)
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err == nil {
		t.Fatalf("GuardWorkspace = %q, want a refusal", describeGuards(paths, ws))
	}
	for _, want := range []string{filepath.Join(ws, ".cordon.yaml") + " is a symbolic link (to conf/cordon.yaml)", "make .cordon.yaml the file itself"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
}

// A root that is no repository gets an Unborn guard: a repository the
// run makes there is set aside after it, and one the user makes later is
// left alone.
func TestGuardUnborn(t *testing.T) {
	ws := realTempDir(t)
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeGuards(paths, ws); !slices.Contains(got, "unborn .git") {
		t.Fatalf("GuardWorkspace = %q", got)
	}
	if aside := Aftercare(paths).SetAside; aside != nil {
		t.Fatalf("a run that made no repository set aside %q", aside)
	}
	git(t, ws, "init", "-q") // what the run does
	c := Aftercare(paths)
	aside, unchecked := c.SetAside, c.Unchecked
	if len(aside) != 1 || !strings.HasPrefix(aside[0], filepath.Join(ws, ".git.cordon-set-aside-")) || unchecked != nil {
		t.Fatalf("Aftercare set aside %q (unchecked %v), want the run's .git", aside, unchecked)
	}
	if _, err := os.Stat(filepath.Join(aside[0], "config")); err != nil {
		t.Errorf("the set-aside repository lost its contents: %v", err)
	}
}

// A workspace whose .git is neither a directory nor a file (a named pipe
// a repository's archive held) is refused: no guard holds it, the box
// replaced it with a repository of its own, and the walk after the run
// leaves the root's .git alone, so the host's git status ran the box's
// core.fsmonitor.
func TestGuardRepoOddDotGit(t *testing.T) {
	ws := realTempDir(t)
	if err := syscall.Mkfifo(filepath.Join(ws, ".git"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err == nil || !strings.Contains(err.Error(), "is neither a directory nor a file") {
		t.Errorf("GuardWorkspace = %q, %v; want a refusal", describeGuards(paths, ws), err)
	}
}

// describeGuards renders guards as "KIND PATH" lines, each path relative
// to base (unless base is "").
func describeGuards(paths []GuardedPath, base string) []string {
	var out []string
	for _, p := range paths {
		path := p.Path
		if base != "" {
			path = strings.TrimPrefix(path, base+"/")
		}
		out = append(out, []string{"pinned", "read-only", "absent-file", "absent-dir", "unmade", "checkouts", "unborn", "nested", "watched"}[p.Guard]+" "+path)
	}
	return out
}

// FuzzGuardRepoDotGitFile: a .git file is the workspace's to write (a
// cloned project may hold any), and names a git directory. Whatever it
// says, the guard pins and protects nothing outside the workspace: a
// pinned directory is bound read-write, so one outside would hand the box
// a host directory.
func FuzzGuardRepoDotGitFile(f *testing.F) {
	for _, s := range []string{"gitdir: inner", "gitdir: /etc", "gitdir: ../outside", "gitdir:inner\n", "gitdir: ./inner/../inner", "gitdir: " + string(make([]byte, 300)), "nonsense"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		base := realTempDir(t)
		ws := filepath.Join(base, "ws")
		for _, d := range []string{"ws/inner/hooks", "outside/hooks"} {
			if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(ws, ".git"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		paths, err := GuardRepo(ws)
		if err != nil {
			return
		}
		for _, p := range paths {
			if !Within(p.Path, ws) {
				t.Errorf("the guard of a .git file reading %q reaches outside the workspace: %+v", content, p)
			}
		}
	})
}

// TestCheckConfigOutside: cordon's configuration may not lie where the
// command may write, as written or through a symlink.
func TestCheckConfigOutside(t *testing.T) {
	base := realTempDir(t)
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
		// Not made yet (the CA, before its first run), through a link
		// into the workspace: it would be made there.
		{[]string{filepath.Join(conf, "linked", "cordon", "ca")}, []string{ws}, true},
		// ".." after a link leaves the link's target, as the kernel has it.
		{[]string{filepath.Join(conf, "linked") + "/../ca"}, []string{ws}, true},
		{[]string{"relative/config.yaml"}, []string{ws}, false},
		{nil, []string{ws}, false},
	} {
		err := checkConfigOutside(c.config, c.writable)
		if (err != nil) != c.refused {
			t.Errorf("checkConfigOutside(%q, %q) = %v, want refused %v", c.config, c.writable, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "rewrite your next run's policy") {
			t.Errorf("the refusal does not say why: %v", err)
		}
	}
}

// TestCheckCacheOutside: cordon's cache directory may not lie where the
// command may write, as written or through a link (made or not yet),
// unless it is the default one under the user's home, which every run
// hides.
func TestCheckCacheOutside(t *testing.T) {
	base := realTempDir(t)
	ws, caches, linked := filepath.Join(base, "ws"), filepath.Join(base, "caches"), filepath.Join(base, "linked")
	for _, d := range []string{ws, caches, linked} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A home whose .cache is a link into the workspace.
	if err := os.Symlink(filepath.Join(ws, ".cache"), filepath.Join(linked, ".cache")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other") // the user database's home
	if err := os.MkdirAll(filepath.Join(other, ".cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, cache, home string
		writable          []string
		refused           bool
	}{
		{"elsewhere", filepath.Join(caches, "cordon"), other, []string{ws}, false},
		{"in the workspace", filepath.Join(ws, ".cache", "cordon"), other, []string{ws}, true},
		{"in a read-write allow_path", filepath.Join(caches, "cordon"), other, []string{ws, caches}, true},
		{"a read-write allow_path", caches, other, []string{ws, caches}, true},
		{"none", "", other, []string{ws}, false},
		{"relative", "cache/cordon", other, []string{ws}, false},
		// The default place, which every run hides: a read-write
		// ~/.cache may hold it, but not through a link, nor that of
		// another $HOME than the user database's.
		{"the default, in a read-write ~/.cache", DefaultCacheDir(other), other, []string{ws, filepath.Join(other, ".cache")}, false},
		{"the default of another $HOME", DefaultCacheDir(caches), other, []string{caches}, true},
		{"the default, through a link into the workspace", DefaultCacheDir(linked), linked, []string{ws}, true},
	} {
		err := CheckCacheOutside(c.cache, c.home, c.writable)
		if (err != nil) != c.refused {
			t.Errorf("%s: CheckCacheOutside(%q, %q, %q) = %v, want refused %v", c.name, c.cache, c.home, c.writable, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "which removes and sets aside files") {
			t.Errorf("%s: the refusal does not say why: %v", c.name, err)
		}
	}
}

// TestCheckAuditOutside: the audit log's directory may not lie anywhere
// under a directory the command may write, however deep, as written or
// through a link on the way to it (existing or not yet).
func TestCheckAuditOutside(t *testing.T) {
	base := realTempDir(t)
	ws, local, state := filepath.Join(base, "ws"), filepath.Join(base, "home", ".local"), filepath.Join(base, "state")
	for _, d := range []string{ws, filepath.Join(local, "state", "cordon"), state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(ws, "var"), filepath.Join(state, "into-ws")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name            string
		audit, writable []string
		refused         bool
	}{
		{"elsewhere", []string{filepath.Join(state, "cordon")}, []string{ws, local}, false},
		{"the workspace's root", []string{ws}, []string{ws}, true},
		{"two levels into the workspace", []string{filepath.Join(ws, "var", "log")}, []string{ws}, true},
		{"two levels into a read-write path", []string{filepath.Join(local, "state", "cordon")}, []string{ws, local}, true},
		{"through a link into the workspace, not made yet", []string{filepath.Join(state, "into-ws", "log")}, []string{ws}, true},
		{"beside a read-write path", []string{filepath.Join(base, "home", ".localx")}, []string{local}, false},
		{"relative", []string{"var/log"}, []string{ws}, false},
		{"none", nil, []string{ws}, false},
	} {
		err := checkAuditOutside(c.audit, c.writable)
		if (err != nil) != c.refused {
			t.Errorf("%s: checkAuditOutside(%q, %q) = %v, want refused %v", c.name, c.audit, c.writable, err, c.refused)
		}
		if err != nil && (!strings.Contains(err.Error(), "refusing the audit log directory") || !strings.Contains(err.Error(), "point --audit or CORDON_AUDIT elsewhere")) {
			t.Errorf("%s: the refusal does not say what and how to fix it: %v", c.name, err)
		}
	}
}

// TestGuardProjectFilesAbove: a project file above the workspace that lies
// under a directory the box may write is read-only, with the directories
// between that root and it pinned (the next run reads it as policy); one
// outside every such directory needs nothing, and one that is a link
// there is refused.
func TestGuardProjectFilesAbove(t *testing.T) {
	base := realTempDir(t)
	p := filepath.Join(base, "p")
	ws := filepath.Join(p, "sub", "pkg")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(p, ".cordon.yaml"), filepath.Join(p, "sub", ".cordon.yaml"), filepath.Join(base, "real.yaml")} {
		if err := os.WriteFile(f, []byte("network: off\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../real.yaml", filepath.Join(base, "q.yaml")); err != nil {
		t.Fatal(err)
	}
	// Links above the workspace: one into it, one through a link in it,
	// one to a file beside it.
	if err := os.WriteFile(filepath.Join(ws, "policy.yaml"), []byte("network: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(p, "sub", "hard.yaml")
	if err := os.WriteFile(hard, []byte("network: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(hard, filepath.Join(ws, "other-name.yaml")); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(p, "sub", "in.yaml"):      "pkg/policy.yaml",
		filepath.Join(ws, "hop.yaml"):           "../beside.yaml",
		filepath.Join(p, "sub", "through.yaml"): "pkg/hop.yaml",
		filepath.Join(p, "sub", "beside.yaml"):  "../.cordon.yaml",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		projects []string
		writable []string
		want     []GuardedPath // among the guards
		err      string
	}{
		{"at a read-write root", []string{filepath.Join(p, ".cordon.yaml")}, []string{p},
			[]GuardedPath{{Path: filepath.Join(p, ".cordon.yaml"), Guard: ReadOnly}}, ""},
		{"below a read-write root", []string{filepath.Join(p, "sub", ".cordon.yaml")}, []string{p},
			[]GuardedPath{{Path: filepath.Join(p, "sub"), Guard: Pinned, Dir: true}, {Path: filepath.Join(p, "sub", ".cordon.yaml"), Guard: ReadOnly}}, ""},
		{"outside what the box writes", []string{filepath.Join(p, ".cordon.yaml")}, nil, nil, ""},
		{"a link under a read-write root", []string{filepath.Join(base, "q.yaml")}, []string{base}, nil, "symbolic link"},
		{"a link into the workspace", []string{filepath.Join(p, "sub", "in.yaml")}, nil, nil, "is a symbolic link (to pkg/policy.yaml)"},
		{"a link through a link in the workspace", []string{filepath.Join(p, "sub", "through.yaml")}, nil, nil, "is a symbolic link (to pkg/hop.yaml)"},
		{"a link beside the workspace", []string{filepath.Join(p, "sub", "beside.yaml")}, nil, nil, ""},
		{"a hard link in the workspace", []string{hard}, nil, nil, "other-name.yaml is a hard link of " + hard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: tt.writable, Projects: tt.projects})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("GuardWorkspace: %v, want an error saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(g GuardedPath) bool { return g.Path == w.Path && g.Guard == w.Guard }) {
					t.Errorf("%s is not guarded as %v: %+v", w.Path, w.Guard, got)
				}
			}
			if tt.want == nil && slices.ContainsFunc(got, func(g GuardedPath) bool { return strings.HasSuffix(g.Path, ".cordon.yaml") }) {
				t.Errorf("a project file outside what the box writes is guarded: %+v", got)
			}
		})
	}
}

// checkGuards checks that what guard returned (paths) holds each of want,
// as describeGuards writes it, and guards (a checkouts walk aside) none of
// never; "{ws}" in either is the workspace.
func checkGuards(t *testing.T, guard string, paths []GuardedPath, ws string, want, never []string) {
	t.Helper()
	got := describeGuards(paths, "")
	for _, w := range want {
		if w = strings.ReplaceAll(w, "{ws}", ws); !slices.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", guard, w, strings.Join(got, "\n"))
		}
	}
	for _, n := range never {
		n = strings.ReplaceAll(n, "{ws}", ws)
		for _, p := range paths {
			if p.Guard != Checkouts && (p.Path == n || strings.HasSuffix(p.Path, "/"+n)) {
				t.Errorf("%s guards %s:\n%s", guard, n, strings.Join(got, "\n"))
			}
		}
	}
}

// A path the run must not make (an include, a program the config names,
// a git directory a .git file names) that is missing, with a symbolic
// link on the way in the workspace, is refused: aftercare would remove or
// set aside what is there through the link, outside the workspace, though
// the box did not make it (a repository's gd linked to ~/.cache/cordon
// and include.path = ../gd/aftercare had cordon remove its own records of
// owed aftercare, which it had made during the run).
func TestGuardMissingThroughALink(t *testing.T) {
	for name, c := range map[string]struct{ config, dotgit string }{
		"an include":      {config: "[include]\n\tpath = ../gd/aftercare\n"},
		"a program":       {config: "[core]\n\tfsmonitor = gd/fsmon.sh\n"},
		"a git directory": {dotgit: "gitdir: gd/repo\n"},
	} {
		t.Run(name, func(t *testing.T) {
			ws, outside := realTempDir(t), realTempDir(t)
			t.Setenv("HOME", realTempDir(t))
			t.Setenv("XDG_CONFIG_HOME", "")
			if err := os.Symlink(outside, filepath.Join(ws, "gd")); err != nil {
				t.Fatal(err)
			}
			if c.dotgit != "" {
				if err := os.WriteFile(filepath.Join(ws, ".git"), []byte(c.dotgit), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte(c.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			paths, err := GuardRepo(ws)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(ws, "gd")+" is a symbolic link") {
				t.Errorf("GuardRepo = %q, %v; want the link refused", describeGuards(paths, ws), err)
			}
		})
	}
}

// layTree makes tree below root: a path ending in "/" is a directory, a
// content starting with "@" a symbolic link to the rest, anything else a
// file with that content; parents are made as needed, and an absolute
// path is taken as it is.
func layTree(t *testing.T, root string, tree map[string]string) {
	t.Helper()
	for p, data := range tree {
		dir := strings.HasSuffix(p, "/")
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case dir:
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(data, "@"):
			err = os.Symlink(data[1:], p)
		default:
			err = os.WriteFile(p, []byte(data), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// gitWorkspace lays tree in a fresh workspace, with a HOME of its own
// and no XDG_CONFIG_HOME, so that no config of the user's is read.
func gitWorkspace(t *testing.T, tree map[string]string) string {
	t.Helper()
	ws := realTempDir(t)
	t.Setenv("HOME", realTempDir(t))
	t.Setenv("XDG_CONFIG_HOME", "")
	layTree(t, ws, tree)
	return ws
}

// checkGuardRepoTree checks that GuardRepo, in a gitWorkspace laid from
// tree, guards want.
func checkGuardRepoTree(t *testing.T, tree map[string]string, want []string) {
	t.Helper()
	checkGuardRepo(t, gitWorkspace(t, tree), want)
}

// checkGuardRepo checks that GuardRepo(ws) succeeds and guards want.
func checkGuardRepo(t *testing.T, ws string, want []string) {
	t.Helper()
	paths, err := GuardRepo(ws)
	if err != nil {
		t.Fatal(err)
	}
	checkGuards(t, "GuardRepo", paths, ws, want, nil)
}

// TestGuardRepoGitFileSpaces: a .git file's path, and a commondir's, keep
// the spaces at their ends, as git keeps them (it drops only the line's
// end): "gitdir: gd " is the directory "gd ", whose config was left
// writable while cordon guarded a missing gd.
func TestGuardRepoGitFileSpaces(t *testing.T) {
	ws := gitWorkspace(t, map[string]string{
		".git":         "gitdir: gd \r\n",
		"gd /HEAD":     "ref: refs/heads/main\n",
		"gd /config":   "[core]\n\tbare = false\n",
		"gd /hooks/":   "",
		"gd /objects/": "",
		"gd /refs/":    "",
		"wt/commondir": " common\r\n",
	})
	paths, err := GuardRepo(ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := describeGuards(paths, ws); !slices.Contains(got, "read-only gd /config") {
		t.Errorf("GuardRepo = %q; want gd /config read-only", got)
	}
	wt := filepath.Join(ws, "wt")
	if got, ok := commonDir(wt); !ok || got != filepath.Join(wt, " common") {
		t.Errorf("commonDir = %q, %v; want %q", got, ok, filepath.Join(wt, " common"))
	}
}

// A project file the box makes at the root of a read-write allow_path
// would make that path the workspace of a later run from a directory
// below it that has no marker of its own (a sibling project's files then
// the box's to write): it is set aside when the run ends, as a .git made
// there is. One the path had before the run is left alone.
func TestGuardWritableProjectFileUnborn(t *testing.T) {
	ws, shared, kept := realTempDir(t), realTempDir(t), realTempDir(t)
	layTree(t, kept, map[string]string{".cordon.yaml": "network: off\n"})
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws, Writable: []string{shared, kept}})
	if err != nil {
		t.Fatal(err)
	}
	layTree(t, shared, map[string]string{".cordon.yaml": "{}\n"}) // what the run does
	c := Aftercare(paths)
	if len(c.SetAside) != 1 || !strings.HasPrefix(c.SetAside[0], filepath.Join(shared, ".cordon.yaml.cordon-set-aside-")) || c.Unchecked != nil {
		t.Fatalf("Aftercare set aside %q (unchecked %v), want the project file the run made in %s", c.SetAside, c.Unchecked, shared)
	}
	if _, err := os.Stat(filepath.Join(kept, ".cordon.yaml")); err != nil {
		t.Errorf("the project file the path had before the run: %v", err)
	}
}
