package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAftercareSetsAsideReplacedConfig: git on the host replaces a
// guarded config file while the run goes on (git config writes
// config.lock and renames it over config), which detaches the box's
// read-only mount on it, and the box could then write the new file. The
// aftercare sets aside a guarded config file that is no longer the file
// it was when the guard was taken and names something for git to run
// that it did not then; one replaced with nothing new to run, or written
// in place (the guard held: only the host could), or removed, is left.
// Before, nothing looked: the host's next git status ran the planted
// core.fsmonitor.
func TestAftercareSetsAsideReplacedConfig(t *testing.T) {
	// replace writes p as git does: a lock file renamed over it.
	replace := func(t *testing.T, p, data string) {
		t.Helper()
		if err := os.WriteFile(p+".lock", []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".lock", p); err != nil {
			t.Fatal(err)
		}
	}
	appendTo := func(t *testing.T, p, data string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(data); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	read := func(t *testing.T, p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fsmonitor := func(marker string) string { return "[core]\n\tfsmonitor = \"touch " + marker + "; false\"\n" }
	for _, c := range []struct {
		name   string
		before func(t *testing.T, ws string) // the user's, before the guard
		run    func(t *testing.T, ws, marker string)
		want   []string // set aside, relative to ws, up to the suffix
	}{
		{name: "replaced by the host's git, then written by the box",
			run: func(t *testing.T, ws, marker string) {
				git(t, ws, "config", "foo.bar", "baz")
				appendTo(t, filepath.Join(ws, ".git/config"), fsmonitor(marker))
			},
			want: []string{".git/config"}},
		{name: "replaced with a new hooks directory",
			run: func(t *testing.T, ws, marker string) {
				git(t, ws, "config", "core.hooksPath", "hooks")
			},
			want: []string{".git/config"}},
		{name: "replaced with an existing command changed",
			before: func(t *testing.T, ws string) { git(t, ws, "config", "alias.st", "!git status") },
			run: func(t *testing.T, ws, marker string) {
				git(t, ws, "config", "alias.st", "!touch "+marker)
			},
			want: []string{".git/config"}},
		{name: "replaced with nothing new to run",
			before: func(t *testing.T, ws string) { git(t, ws, "config", "core.editor", "vi") },
			run: func(t *testing.T, ws, marker string) {
				git(t, ws, "config", "foo.bar", "baz")
				git(t, ws, "remote", "add", "origin", "https://example.com/x.git")
			}},
		{name: "written in place",
			run: func(t *testing.T, ws, marker string) {
				appendTo(t, filepath.Join(ws, ".git/config"), "[core]\n\teditor = vi\n")
			}},
		{name: "removed",
			run: func(t *testing.T, ws, marker string) {
				if err := os.Remove(filepath.Join(ws, ".git/config")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "replaced by a link",
			run: func(t *testing.T, ws, marker string) {
				p := filepath.Join(ws, "planted")
				if err := os.WriteFile(p, []byte(read(t, filepath.Join(ws, ".git/config"))+fsmonitor(marker)), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(ws, ".git/config"), filepath.Join(ws, "old")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p, filepath.Join(ws, ".git/config")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{".git/config"}},
		{name: "an included file replaced",
			before: func(t *testing.T, ws string) {
				git(t, ws, "config", "include.path", "../shared.gitconfig")
				if err := os.WriteFile(filepath.Join(ws, "shared.gitconfig"), []byte("[user]\n\tname = u\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			run: func(t *testing.T, ws, marker string) {
				replace(t, filepath.Join(ws, "shared.gitconfig"), "[user]\n\tname = u\n"+fsmonitor(marker))
			},
			want: []string{"shared.gitconfig"}},
		{name: "a missing config made",
			before: func(t *testing.T, ws string) {
				if err := os.Remove(filepath.Join(ws, ".git/config")); err != nil {
					t.Fatal(err)
				}
			},
			run: func(t *testing.T, ws, marker string) {
				replace(t, filepath.Join(ws, ".git/config"), fsmonitor(marker))
			},
			want: []string{".git/config"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			git(t, ws, "init", "-q")
			if c.before != nil {
				c.before(t, ws)
			}
			guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "ran")
			c.run(t, ws, marker)
			care := Aftercare(guards)
			var got []string
			for _, p := range care.SetAside {
				rel, _ := filepath.Rel(ws, p)
				before, _, _ := strings.Cut(rel, setAsideInfix)
				got = append(got, before)
			}
			if !slices.Equal(got, c.want) || len(care.Unchecked) > 0 {
				t.Errorf("set aside %q (%v), want %q", got, care.Unchecked, c.want)
			}
			if !slices.Equal(care.Replaced, care.SetAside) {
				t.Errorf("replaced %q, want all set aside, %q, told as replaced", care.Replaced, care.SetAside)
			}
			if statusRuns(ws, marker) {
				t.Error("after Aftercare, the host's git status ran the planted command")
			}
		})
	}
}

// TestConfigCommands: what a git config names for git to run, which a
// replaced config may not gain.
func TestConfigCommands(t *testing.T) {
	config := "[core]\n\teditor = vi\n\tfsmonitor = x\n\thooksPath = h\n\tpager = less\n[alias]\n\tst = status\n\tx = !sh y\n" +
		"[filter \"lfs\"]\n\tclean = git-lfs clean\n[include]\n\tpath = a\n[includeIf \"gitdir:/x\"]\n\tpath = b\n" +
		"[extensions]\n\tworktreeConfig = true\n[remote \"o\"]\n\turl = ext::sh x\n[remote \"p\"]\n\turl = https://x\n[user]\n\tname = u\n[core]\n\teditor = vi\n"
	want := []string{"alias.x=!sh y", "core.editor=vi", "core.fsmonitor=x", "core.hookspath=h", "core.pager=less",
		"extensions.worktreeconfig=true", "filter.lfs.clean=git-lfs clean", "include.path=a", "includeif.gitdir:/x.path=b", "remote.o.url=ext::sh x"}
	if got := configCommands([]byte(config)); !slices.Equal(got, want) {
		t.Errorf("configCommands =\n%q\nwant\n%q", got, want)
	}
}

// TestOweKeepsConfigSeen: an owed aftercare (its cordon killed) checks the
// guarded config files, and the other files kept read-only, as the run's
// own would.
func TestOweKeepsConfigSeen(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	for _, s := range []*ConfigSeen{nil, {Absent: true}, {Dev: 3, Ino: 1 << 40, Commands: []string{"core.fsmonitor=a \"b\"", "include.path=x"}}} {
		guards := []GuardedPath{{Path: filepath.Join(ws, ".git/config"), Guard: ReadOnly, Config: s}, {Path: filepath.Join(ws, "x.sh"), Guard: ReadOnly, ID: &FileID{Dev: 7, Ino: 1 << 50, Run: true}}, {Path: ws, Guard: Nested, Dir: true, Since: time.Unix(5, 0)}}
		paid, err := Owe(ws, guards)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := readOwed(filepath.Join(owedDir(), owedName(ws, os.Getpid())), ws)
		paid()
		if !ok || len(got) != 3 || !sameSeen(got[0].Config, s) || got[0].ID != nil || got[1].Config != nil || *got[1].ID != *guards[1].ID || got[2].Config != nil || got[2].ID != nil {
			t.Errorf("%+v read back as %+v (%t)", s, got, ok)
		}
	}
}

func sameSeen(a, b *ConfigSeen) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Absent == b.Absent && slices.Equal(a.Commands, b.Commands)
}

// TestAftercareSeesToReplacedFiles: a guarded file that is no git config
// (here the script core.fsmonitor runs, and the project file) loses its
// read-only mount too when a tool on the host writes it anew and renames
// it over the old (sed -i, an editor), and the box may then write it; the
// host's git status ran the box's script. A file git runs is set aside
// after the run (a shell prompt would run it before the user read a
// warning), any other is reported. One written in place, or removed, is
// neither.
func TestAftercareSeesToReplacedFiles(t *testing.T) {
	for _, c := range []struct {
		name           string
		run            func(t *testing.T, ws string)
		aside, reports []string // relative to ws
	}{
		{name: "replaced by sed -i",
			run: func(t *testing.T, ws string) {
				for _, f := range []string{"tools/fsmon.sh", ".cordon.yaml"} {
					p := filepath.Join(ws, f)
					if err := os.WriteFile(p+".new", []byte("#!/bin/sh\nexit 1 # edited\n"), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(p+".new", p); err != nil {
						t.Fatal(err)
					}
				}
			},
			aside: []string{"tools/fsmon.sh"}, reports: []string{".cordon.yaml"}},
		{name: "written in place",
			run: func(t *testing.T, ws string) {
				if err := os.WriteFile(filepath.Join(ws, "tools/fsmon.sh"), []byte("#!/bin/sh\nexit 2\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "removed",
			run: func(t *testing.T, ws string) {
				if err := os.Remove(filepath.Join(ws, "tools/fsmon.sh")); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.fsmonitor", "sh tools/fsmon.sh")
			layTree(t, ws, map[string]string{"tools/fsmon.sh": "#!/bin/sh\nexit 1\n", ".cordon.yaml": "version: 1\n"})
			guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			c.run(t, ws)
			care := Aftercare(guards)
			var aside, reports []string
			for _, p := range care.SetAside {
				rel, _ := filepath.Rel(ws, p)
				before, _, _ := strings.Cut(rel, setAsideInfix)
				aside = append(aside, before)
			}
			for _, u := range care.Unchecked {
				rel, _ := filepath.Rel(ws, u.Path)
				reports = append(reports, rel)
			}
			if !slices.Equal(aside, c.aside) || !slices.Equal(reports, c.reports) {
				t.Errorf("set aside %q, reported %q (%v); want %q, %q", aside, reports, care.Unchecked, c.aside, c.reports)
			}
			if !slices.Equal(care.Replaced, care.SetAside) {
				t.Errorf("replaced %q, want all set aside, %q, told as replaced", care.Replaced, care.SetAside)
			}
		})
	}
}
