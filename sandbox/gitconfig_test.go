package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestConfigEntries(t *testing.T) {
	for _, c := range []struct {
		config string
		want   []string // section, subsection, key = value
	}{
		{"[core]\n\thooksPath = .husky/_\n", []string{"core..hookspath=.husky/_"}},
		{"[Core]\n\tHooksPath=\"a b\" # comment\n", []string{"core..hookspath=a b"}},
		{"[alias]\n\tx = \"!tools/x.sh --all\"\n\tst = status ; comment\n", []string{"alias..x=!tools/x.sh --all", "alias..st=status"}},
		{"[filter \"Lfs\"]\n\tclean = git-lfs clean -- %f\n", []string{"filter.Lfs.clean=git-lfs clean -- %f"}},
		{"[filter \"a]b\\\"c\"]\n\tsmudge = ./s\n", []string{"filter.a]b\"c.smudge=./s"}},
		{"[diff.Bin]\n\ttextconv = ./bin/tc\n", []string{"diff.bin.textconv=./bin/tc"}},
		{"[extensions]\n\tworktreeConfig\n", []string{"extensions..worktreeconfig= (bare)"}},
		{"[core] fsmonitor = ./f\n", []string{"core..fsmonitor=./f"}},
		// A form feed, vertical tab or Unicode space ending a value is
		// part of it; a NUL ends it; a backslash ending the file is
		// dropped: as git reads them.
		{"[core]\n\thooksPath = vt\v\n\tpager = ff\f\n\teditor = nb\u00a0\n", []string{"core..hookspath=vt\v", "core..pager=ff\f", "core..editor=nb\u00a0"}},
		{"[core]\n\thooksPath = nul\x00x\n\tfsmonitor = eob\\\n", []string{"core..hookspath=nul", "core..fsmonitor=eob"}},
		{"[core]\n\thooksPath = sp \x00\n", []string{"core..hookspath=sp "}}, // the blank before the NUL is kept
		{"[core]\n\tfsmonitor = eob\\", []string{"core..fsmonitor=eob"}},
		// Headers one after another on a line, as git reads them.
		{"[x] [core] fsmonitor = ./f\n[a \"b]\"][Core]hooksPath=h\n[y][diff \"t\"]\ttextconv = ./t\n", []string{"core..fsmonitor=./f", "core..hookspath=h", "diff.t.textconv=./t"}},
		{"\ufeff[core]\n\tfsmonitor = ./f\n", []string{"core..fsmonitor=./f"}}, // a byte order mark, which git skips
		{"# comment\nkey = before any section\n[broken\n\tx = 1\n", nil},
		// A value whose line ends in a backslash goes on into the next.
		{"[core]\n\tfsmonitor = sh tools/\\\nfsmon.sh\n\tpager = \"less \\\n-R\" # c \\\n[alias]\n\tx = y \\\\\n", []string{"core..fsmonitor=sh tools/fsmon.sh", "core..pager=less -R", "alias..x=y \\"}},
		{"[core]\n\teditor = vi # not \\\nhooksPath = h\n", []string{"core..editor=vi", "core..hookspath=h"}},
	} {
		var got []string
		for _, e := range configEntries([]byte(c.config)) {
			s := fmt.Sprintf("%s.%s.%s=%s", e.section, e.sub, e.key, e.value)
			if e.bare {
				s += " (bare)"
			}
			got = append(got, s)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("configEntries(%q) = %q, want %q", c.config, got, c.want)
		}
	}
}

func TestCommandPath(t *testing.T) {
	for _, c := range []struct {
		section, sub, key, value, want string
	}{
		{"core", "", "fsmonitor", "tools/fsmon.sh", "tools/fsmon.sh"},
		{"core", "", "fsmonitor", "true", ""},
		{"core", "", "fsmonitor", ".git/hooks/fsmonitor-watchman", ".git/hooks/fsmonitor-watchman"},
		{"core", "", "sshcommand", "'./bin/ssh wrap' -v", "./bin/ssh"},
		{"core", "", "editor", "vim", ""},
		{"alias", "", "x", "!scripts/x.sh --all", "scripts/x.sh"},
		{"alias", "", "st", "status --short ./dir", ""}, // a git command
		{"filter", "lfs", "clean", "git-lfs clean -- %f", ""},
		{"filter", "fmt", "process", "./tools/filter", "./tools/filter"},
		{"diff", "bin", "textconv", "~/bin/tc", "~/bin/tc"},
		{"credential", "", "helper", "!/opt/helper get", "/opt/helper"},
		{"pager", "", "log", "./pager.sh", "./pager.sh"},
		{"user", "", "name", "a/b", ""}, // no command
		{"mergetool", "mine", "path", "tools/merge", "tools/merge"},
		{"remote", "origin", "uploadpack", "./up.sh", "./up.sh"},
	} {
		if got := commandPath(configEntry{section: c.section, sub: c.sub, key: c.key, value: c.value}); got != c.want {
			t.Errorf("commandPath(%s.%s.%s = %q) = %q, want %q", c.section, c.sub, c.key, c.value, got, c.want)
		}
	}
}

func TestCommandWords(t *testing.T) {
	for _, c := range []struct {
		section, sub, key, value string
		want                     []string // a leading "1:" marks the program itself
	}{
		{"core", "", "fsmonitor", "tools/fsmon.sh", []string{"1:tools/fsmon.sh"}},
		{"core", "", "fsmonitor", "sh tools/fsmon.sh", []string{"tools/fsmon.sh"}},
		{"filter", "x", "clean", "python3 scripts/x.py --in %f", []string{"scripts/x.py", "--in", "%f"}},
		{"filter", "x", "smudge", "node ./tools/x.js", []string{"./tools/x.js"}},
		{"alias", "", "x", "!sh -c 'sh tools/a.sh && ./b.sh' -", []string{"-c", "sh", "tools/a.sh", "./b.sh", "-"}},
		{"alias", "", "y", "!f() { ./run.sh \"$1\"; }; f", []string{"./run.sh", "1", "f"}},
		{"core", "", "pager", "LESS=tools/less.cfg less", []string{"tools/less.cfg", "less"}},
		{"core", "", "sshcommand", "'./bin/ssh wrap' -v", []string{"1:./bin/ssh", "wrap", "-v"}},
		{"alias", "", "st", "status --short ./dir", nil}, // a git command
		{"user", "", "name", "sh a/b", nil},              // no command
		{"core", "", "editor", "vim", nil},
		// Commands git runs at a signed commit, a --trailer, a submodule
		// update, a fetch or push: each guarded as the others.
		{"gpg", "ssh", "defaultkeycommand", "sh tools/key.sh", []string{"tools/key.sh"}},
		{"trailer", "sign", "cmd", "sh tools/tr.sh", []string{"tools/tr.sh"}},
		{"submodule", "lib", "update", "!sh tools/up.sh", []string{"tools/up.sh"}},
		{"submodule", "lib", "update", "rebase", nil},
		{"core", "", "alternaterefscommand", "tools/refs.sh", []string{"1:tools/refs.sh"}},
		{"core", "", "gitproxy", "tools/proxy.sh for example.com", []string{"1:tools/proxy.sh", "for", "example.com"}},
		{"sendemail", "", "tocmd", "./tools/to.sh", []string{"1:./tools/to.sh"}},
		// An ext:: URL is a command git runs at a fetch or push, as a
		// remote's URL or as what an insteadOf rewrites one to.
		{"remote", "origin", "url", "ext::sh tools/fetch.sh %S", []string{"tools/fetch.sh", "%S"}},
		{"remote", "origin", "pushurl", "ext::./tools/push%%.sh", []string{"1:./tools/push%.sh"}},
		{"url", "ext::sh tools/gh.sh ", "insteadof", "https://github.com/", []string{"tools/gh.sh"}},
		{"remote", "origin", "url", "https://example.com/ext::sh/x.sh", nil},
		{"url", "https://mirror/", "insteadof", "ext::sh a/b", nil},
		// What quotes or a backslash split, the shell joins.
		{"core", "", "fsmonitor", "sh tools/fs''mon.sh", []string{"tools/fs", "mon.sh", "tools/fsmon.sh"}},
		{"alias", "", "zz", `!sh tools/z\z.sh "a"'b'\ c`, []string{`tools/z\z.sh`, "a", "b", `\`, "c", "tools/zz.sh", "ab"}},
		{"alias", "", "y", `!sh -c 'sh tools/"a".sh'`, []string{"-c", "sh", "tools/", "a", ".sh", "tools/a.sh"}},
		{"alias", "", "w", `!sh -c "sh -c 'sh t/\"b\".sh'"`, []string{"-c", "sh", "-c", "sh", `t/\`, `b\`, ".sh", "t/", "b", "t/b.sh"}},
	} {
		var got []string
		for _, w := range commandWords(configEntry{section: c.section, sub: c.sub, key: c.key, value: c.value}) {
			if w.first {
				w.path = "1:" + w.path
			}
			got = append(got, w.path)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("commandWords(%s.%s.%s = %q) = %q, want %q", c.section, c.sub, c.key, c.value, got, c.want)
		}
	}
}

// The user's global config, and the system's, name hooks for every
// repository: a relative core.hooksPath there is each repository's own
// directory.
func TestGuardRepoGlobalHooksPath(t *testing.T) {
	for _, where := range []string{"global", "system"} {
		t.Run(where, func(t *testing.T) {
			ws, home := realTempDir(t), realTempDir(t)
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", "")
			t.Setenv("GIT_CONFIG_GLOBAL", "")
			t.Setenv("GIT_CONFIG_SYSTEM", "")
			config := filepath.Join(home, ".gitconfig")
			if where == "system" {
				config = filepath.Join(realTempDir(t), "gitconfig")
				old := systemGitConfig
				systemGitConfig = config
				t.Cleanup(func() { systemGitConfig = old })
			}
			for _, d := range []string{".git/hooks", ".githooks"} {
				if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(config, []byte("[core]\n\thooksPath = .githooks\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			paths, err := GuardRepo(ws)
			if err != nil {
				t.Fatal(err)
			}
			if got := describeGuards(paths, ws); !slices.Contains(got, "read-only .githooks") {
				t.Errorf("GuardRepo = %q; want .githooks read-only", got)
			}
		})
	}
}

// A workspace that is a linked worktree of a repository outside it takes
// its config from there; a relative core.hooksPath in it is the
// workspace's own directory.
func TestGuardRepoLinkedWorktreeHooksPath(t *testing.T) {
	base := realTempDir(t)
	t.Setenv("HOME", realTempDir(t))
	t.Setenv("XDG_CONFIG_HOME", "")
	main, ws := filepath.Join(base, "main"), filepath.Join(base, "ws")
	for _, d := range []string{"main/.git/hooks", "main/.git/worktrees/ws", "ws/.husky/_"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		"main/.git/config":                 "[core]\n\thooksPath = .husky/_\n[extensions]\n\tworktreeConfig = true\n",
		"main/.git/worktrees/ws/commondir": "../..\n",
		"ws/.git":                          "gitdir: " + filepath.Join(main, ".git/worktrees/ws") + "\n",
	} {
		if err := os.WriteFile(filepath.Join(base, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := GuardRepo(ws)
	if err != nil {
		t.Fatal(err)
	}
	got := describeGuards(paths, ws)
	if !slices.Contains(got, "read-only .husky/_") {
		t.Errorf("GuardRepo = %q; want .husky/_ read-only", got)
	}
	for _, p := range paths {
		if !Within(p.Path, ws) {
			t.Errorf("GuardRepo guards %s, outside the workspace", p.Path)
		}
	}
}

// A git config file, or one it includes, longer than cordon reads
// (maxGitFileSize) refuses the run rather than being read whole: an
// include may name any file of the host (/proc/self/pagemap reads on for
// hundreds of gigabytes, a sparse file for as long as it says), and what
// it names for git to run is unknown.
func TestGuardRepoGitFileBounded(t *testing.T) {
	for _, c := range []struct{ name, config, global string }{
		{"an include", "[include]\n\tpath = big.gitconfig\n", ""},
		{"the global config", "", "[include]\n\tpath = big.gitconfig\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, home := realTempDir(t), realTempDir(t)
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", "")
			if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
				t.Fatal(err)
			}
			big := filepath.Join(ws, ".git", "big.gitconfig")
			if c.global != "" {
				big = filepath.Join(home, "big.gitconfig")
			}
			for p, data := range map[string]string{
				filepath.Join(ws, ".git", "config"): c.config,
				filepath.Join(home, ".gitconfig"):   c.global,
				big:                                 "[core]\n\tfsmonitor = tools/fsmon.sh\n",
			} {
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Truncate(big, 4*maxGitFileSize); err != nil { // sparse: nothing is written
				t.Fatal(err)
			}
			paths, err := GuardRepo(ws)
			if !errors.Is(err, errGitFileTooLarge) || !strings.Contains(err.Error(), big) {
				t.Errorf("GuardRepo = %q, %v; want an error naming %s as too large", describeGuards(paths, ws), err, big)
			}
		})
	}
}

// Git reads a config line of any length: a key after a long one (a
// comment of more than a megabyte) is read all the same, so what it names
// is guarded, and what an include after it includes.
func TestGuardRepoAfterALongLine(t *testing.T) {
	long := "# " + strings.Repeat("x", 2<<20) + "\n"
	checkGuardRepoTree(t, map[string]string{
		".git/hooks/": "", ".githooks/": "", "tools/": "",
		".git/config":          long + "[core]\n\thooksPath = .githooks\n" + long + "[include]\n\tpath = ../more.gitconfig\n",
		"more.gitconfig":       long + "[core]\n\tfsmonitor = tools/fsmon.sh\n",
		"tools/fsmon.sh":       "#!/bin/sh\n",
		".githooks/pre-commit": "#!/bin/sh\n",
	}, []string{"read-only {ws}/.githooks", "read-only {ws}/more.gitconfig", "read-only {ws}/tools/fsmon.sh"})
}

// A value whose line ends in a backslash goes on into the next line, for
// git: what it names there is guarded.
func TestGuardRepoContinuedValue(t *testing.T) {
	checkGuardRepoTree(t, map[string]string{
		".git/hooks/": "", ".githooks/": "", "tools/": "",
		".git/config":          "[core]\n\thooksPath = .git\\\nhooks\n\tfsmonitor = sh tools/\\\nfsmon.sh\n",
		"tools/fsmon.sh":       "#!/bin/sh\n",
		".githooks/pre-commit": "#!/bin/sh\n",
	}, []string{"read-only {ws}/.githooks", "read-only {ws}/tools/fsmon.sh"})
}

// A path from a user's home, "~user/", is that user's home directory's,
// as git (include.path, core.hooksPath) and the shell (a command) take
// it, not a directory "~user" of the worktree.
func TestGuardRepoUserHomePath(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(me.HomeDir)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := os.MkdirTemp(real, "cordon-test-") // under the home ~name/ names
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	t.Setenv("HOME", t.TempDir()) // ~name/ is looked up, not taken from $HOME
	t.Setenv("XDG_CONFIG_HOME", "")
	from := "~" + me.Username + "/" + filepath.Base(ws)
	layTree(t, ws, map[string]string{
		".git/hooks/": "", ".githooks/": "", "tools/": "",
		".git/config":          "[core]\n\thooksPath = " + from + "/.githooks\n\tfsmonitor = sh " + from + "/tools/fsmon.sh\n[include]\n\tpath = " + from + "/more.gitconfig\n",
		"more.gitconfig":       "[user]\n\tname = x\n",
		"tools/fsmon.sh":       "#!/bin/sh\n",
		".githooks/pre-commit": "#!/bin/sh\n",
	})
	checkGuardRepo(t, ws, []string{"read-only {ws}/.githooks", "read-only {ws}/tools/fsmon.sh", "read-only {ws}/more.gitconfig"})
}

// A command's $HOME is the shell's to expand: a script named from it in
// the workspace is guarded as one named from ~/.
func TestGuardRepoHomeVariable(t *testing.T) {
	home := realTempDir(t)
	ws := filepath.Join(home, "proj")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	layTree(t, ws, map[string]string{
		".git/hooks/": "", "tools/": "",
		".git/config":    "[core]\n\tfsmonitor = sh $HOME/proj/tools/fsmon.sh\n[alias]\n\tx = !sh ${HOME}/proj/tools/x.sh\n",
		"tools/fsmon.sh": "#!/bin/sh\n",
		"tools/x.sh":     "#!/bin/sh\n",
	})
	checkGuardRepo(t, ws, []string{"read-only {ws}/tools/fsmon.sh", "read-only {ws}/tools/x.sh"})
}

// An ext:: URL runs its command at the user's next fetch or push (an
// editor's automatic fetch, say), where protocol.ext.allow lets it: as a
// remote's URL, or as the base an insteadOf rewrites a URL to.
func TestGuardRepoExtURL(t *testing.T) {
	checkGuardRepoTree(t, map[string]string{
		".git/hooks/": "", "tools/": "",
		".git/config": "[protocol \"ext\"]\n\tallow = always\n[remote \"origin\"]\n\turl = ext::sh tools/fetch.sh %S\n" +
			"[url \"ext::sh tools/gh.sh \"]\n\tinsteadOf = https://github.com/\n",
		"tools/fetch.sh": "#!/bin/sh\n",
		"tools/gh.sh":    "#!/bin/sh\n",
	}, []string{"read-only {ws}/tools/fetch.sh", "read-only {ws}/tools/gh.sh"})
}

// $PWD in a git config command is where git runs it, the worktree, as
// the shell expands it, and so are $(pwd) and $(git rev-parse
// --show-toplevel): sh $PWD/tools/fsmon.sh runs the workspace's.
func TestGuardRepoPWDVariable(t *testing.T) {
	checkGuardRepoTree(t, map[string]string{
		".git/hooks/": "", "tools/": "",
		".git/config": "[core]\n\tfsmonitor = sh $PWD/tools/fsmon.sh\n[alias]\n\tx = !sh ${PWD}/tools/x.sh\n" +
			"\tt = !sh \\\"$(git rev-parse --show-toplevel)/tools/t.sh\\\"\n\tp = !sh `pwd`/tools/p.sh\n",
		"tools/fsmon.sh": "#!/bin/sh\n",
		"tools/x.sh":     "#!/bin/sh\n",
		"tools/t.sh":     "#!/bin/sh\n",
		"tools/p.sh":     "#!/bin/sh\n",
	}, []string{"read-only {ws}/tools/fsmon.sh", "read-only {ws}/tools/x.sh", "read-only {ws}/tools/t.sh", "read-only {ws}/tools/p.sh"})
}

// A repository's core.worktree is where git runs its hooks and commands
// from: a relative core.hooksPath is from there, not from the directory
// holding .git.
func TestGuardRepoCoreWorktree(t *testing.T) {
	checkGuardRepoTree(t, map[string]string{
		".git/hooks/":              "",
		".git/config":              "[core]\n\tworktree = ../sub\n\thooksPath = .githooks\n",
		"sub/.githooks/pre-commit": "#!/bin/sh\n",
	}, []string{"read-only {ws}/sub/.githooks"})
}

// A pattern in a command is matched when git runs it, so the box could
// add a match (sh tools/fs*.sh ran the box's tools/0.sh): the directory
// it is matched in is read-only, and one matched in the workspace root is
// refused.
func TestGuardRepoCommandPattern(t *testing.T) {
	for _, c := range []struct{ command, want, wantErr string }{
		{command: "sh tools/fs*.sh", want: "read-only {ws}/tools"},
		{command: "sh tools/sub/fs?mon.sh", want: "read-only {ws}/tools/sub"},
		{command: "sh tools/[f]smon.sh", want: "read-only {ws}/tools"},
		{command: "sh *.sh", wantErr: "names a pattern"},
	} {
		t.Run(c.command, func(t *testing.T) {
			ws := gitWorkspace(t, map[string]string{
				".git/hooks/": "", "tools/sub/": "",
				".git/config":    "[core]\n\tfsmonitor = " + c.command + "\n",
				"tools/fsmon.sh": "#!/bin/sh\n",
			})
			paths, err := GuardRepo(ws)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("GuardRepo = %v, %v; want an error with %q", describeGuards(paths, ws), err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGuards(t, "GuardRepo", paths, ws, []string{c.want}, nil)
		})
	}
}
