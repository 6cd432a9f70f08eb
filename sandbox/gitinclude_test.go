package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestIncludePaths(t *testing.T) {
	config := `[core]
	path = not-an-include
[include]
	path = a.gitconfig
	PATH = "b c.gitconfig" ; a comment
[includeIf "gitdir:~/work/"]
	path = ~/work.gitconfig   # another
[Include] path = d.gitconfig
[user]
	name = "x"
[includeif "onbranch:main"]
	path = "e\"q.gitconfig"
	path=f.gitconfig
	other = g
[user]
	name = x\
[include]
	path = no.gitconfig
[include]
	x = y\
[user]
	path = "h\
.gitconfig"
`
	// A value ending in a backslash takes the next line, a section
	// header included: no.gitconfig is user.path, h.gitconfig an include.
	want := []string{"a.gitconfig", "b c.gitconfig", "~/work.gitconfig", "d.gitconfig", `e"q.gitconfig`, "f.gitconfig", "h.gitconfig"}
	if got := includePaths([]byte(config)); !slices.Equal(got, want) {
		t.Errorf("includePaths =\n%q\nwant\n%q", got, want)
	}
	if got := includePaths([]byte("[user] [include] path = one.gitconfig\n[includeIf \"gitdir:a]\"][include]path=two.gitconfig\n")); !slices.Equal(got, []string{"one.gitconfig", "two.gitconfig"}) {
		t.Errorf("includePaths after headers on one line = %q, want one.gitconfig, two.gitconfig", got)
	}
	if got := includePaths([]byte("\ufeff[include]\n\tpath = bom.gitconfig\n")); !slices.Equal(got, []string{"bom.gitconfig"}) {
		t.Errorf("includePaths after a byte order mark = %q, want bom.gitconfig", got)
	}
	for in, want := range map[string]string{
		` plain `:          "plain",
		`" spaced "`:       " spaced ",
		`a\tb`:             "a\tb",
		`fs\b.sh`:          "fs\b.sh", // a backspace, as git reads \b
		"hk\tdir \r":       "hk dir",  // unquoted blanks are spaces
		`"" .githooks`:     ".githooks",
		`a "" `:            "a ",
		`x # comment`:      "x",
		`"x # not" # is`:   "x # not",
		`a;b`:              "a",
		`"unterminated`:    "unterminated",
		`trailing\`:        `trailing\`,
		`mixed "q" tail  `: "mixed q tail",
	} {
		if got := configValue(in); got != want {
			t.Errorf("configValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// Includes are followed from the including file's directory, from home
// for ~/, to git's depth, and once each.
func TestConfigIncludes(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "repo", ".git", "config"), "[include]\npath = ../team.gitconfig\npath = ~/mine.gitconfig\n")
	write(filepath.Join(dir, "repo", "team.gitconfig"), "[include]\npath = sub/more.gitconfig\npath = team.gitconfig\n")
	got := configIncludes(filepath.Join(dir, "repo", ".git", "config"), home)
	want := []string{
		filepath.Join(dir, "repo", "team.gitconfig"),
		filepath.Join(dir, "repo", "sub", "more.gitconfig"),
		filepath.Join(dir, "repo", "team.gitconfig"), // listed again, not followed again
		filepath.Join(home, "mine.gitconfig"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("configIncludes =\n%q\nwant\n%q", got, want)
	}
	// An include that is a named pipe is listed, not read: the read would
	// wait for a writer forever.
	if err := os.Mkdir(filepath.Join(dir, "repo", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "repo", "sub", "more.gitconfig"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string, 1)
	go func() { done <- configIncludes(filepath.Join(dir, "repo", ".git", "config"), home) }()
	select {
	case got := <-done:
		if !slices.Equal(got, want) {
			t.Errorf("with a named pipe: configIncludes =\n%q\nwant\n%q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("configIncludes waits on an include that is a named pipe")
	}
}

// Whatever a config holds, includePaths finds every include path git
// reads in it (one it missed would be a file git reads that the guard
// does not know of), and none empty. git is the oracle: `git config
// --file` reads the config as git reads any, and does not follow the
// includes.
func FuzzIncludePaths(f *testing.F) {
	f.Add([]byte("[include]\n\tpath = \"a b\" ; c\n[includeIf \"gitdir:x\"] path=y\n"))
	f.Add([]byte("[x] [include] path = a\\\nb\n[includeif.gitdir:y]\n\tPATH=\"\\tq\"\x00z\n"))
	file := filepath.Join(f.TempDir(), "config")
	f.Fuzz(func(t *testing.T, config []byte) {
		got := includePaths(config)
		if slices.Contains(got, "") {
			t.Fatalf("an empty include path from %q", config)
		}
		if err := os.WriteFile(file, config, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "config", "--file", file, "--null", "--get-regexp", `^include(if\..*)?\.path$`)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.Output()
		if err != nil {
			return // no include, or a config git does not read
		}
		for _, kv := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			key, value, ok := strings.Cut(kv, "\n")
			if ok && value != "" && !slices.Contains(got, value) {
				t.Fatalf("git reads %s = %q in %q; includePaths found %q", key, value, config, got)
			}
		}
	})
}
