package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guardRun guards ws as a run does, after waiting long enough that all the
// test made before is older than the run (which begins a slack before its guard).
func guardRun(t *testing.T, ws string) []GuardedPath {
	t.Helper()
	time.Sleep(2 * clockSlack)
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return guards
}

// A submodule checkout present when the run is built is guarded; one the
// run fills or registers is set aside afterwards, and a plain git status
// on the host then runs nothing the run planted.
func TestAftercareSetsAsideCheckouts(t *testing.T) {
	base := realTempDir(t)
	ws := filepath.Join(base, "ws")
	marker := filepath.Join(base, "planted-command-ran")
	nested := func(dir string, fsmonitor bool) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q")
		git(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
		if fsmonitor {
			git(t, dir, "config", "core.fsmonitor", "touch "+marker+"; true")
		}
		return git(t, dir, "rev-parse", "HEAD")
	}
	nested(ws, false)
	kept := nested(filepath.Join(ws, "kept"), false)
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+kept+",kept")
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+kept+",empty")

	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	got := describeGuards(paths, base)
	for _, want := range []string{"checkouts ws", "checkouts ws/kept", "pinned ws/kept", "pinned ws/kept/.git", "read-only ws/kept/.git/config"} {
		if !slices.Contains(got, want) {
			t.Errorf("the guard lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}

	// What the run does: it registers a repository of its own, and fills
	// the checkout that was registered but empty.
	planted := nested(filepath.Join(ws, "planted"), true)
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+planted+",planted")
	nested(filepath.Join(ws, "empty"), true)
	git(t, ws, "status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the host's git status did not run the planted command, so this test shows nothing: %v", err)
	}
	os.Remove(marker)

	c := Aftercare(paths)
	removed, aside, unchecked := c.Removed, c.SetAside, c.Unchecked
	if len(removed) != 0 || len(unchecked) != 0 {
		t.Errorf("Aftercare removed %q, left unchecked %v", removed, unchecked)
	}
	slices.Sort(aside)
	if len(aside) != 2 || !strings.HasPrefix(aside[0], filepath.Join(ws, "empty", ".git.cordon-set-aside-")) ||
		!strings.HasPrefix(aside[1], filepath.Join(ws, "planted", ".git.cordon-set-aside-")) {
		t.Errorf("set aside %q, want empty/.git and planted/.git", aside)
	}
	if _, err := os.Stat(filepath.Join(ws, "kept", ".git")); err != nil {
		t.Errorf("the guarded checkout was set aside: %v", err)
	}
	git(t, ws, "status")
	if _, err := os.Stat(marker); err == nil {
		t.Error("after Aftercare, the host's git status still ran the planted command")
	}
}

// A repository the run makes below the workspace root, or one whose config
// or hooks it changes, is set aside after it; one it only commits in, or
// does not touch, is left alone.
func TestAftercareSetsAsideNestedRepositories(t *testing.T) {
	ws := realTempDir(t)
	repo := func(rel string) string {
		t.Helper()
		dir := filepath.Join(ws, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q")
		git(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
		return dir
	}
	repo("untouched")
	used := repo("used")
	committed := repo("committed")
	hooked := repo("hooked")
	paths := guardRun(t, ws)

	// The run.
	git(t, used, "config", "core.fsmonitor", "touch /tmp/x; true")
	git(t, committed, "commit", "-q", "--allow-empty", "-m", "y")
	if err := os.WriteFile(filepath.Join(hooked, ".git", "hooks", "post-checkout"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	repo(filepath.Join("deep", "down", "made"))

	c := Aftercare(paths)
	aside, unchecked := c.SetAside, c.Unchecked
	if unchecked != nil {
		t.Fatalf("unchecked: %v", unchecked)
	}
	var got []string
	for _, a := range aside {
		rel, _ := filepath.Rel(ws, a)
		got = append(got, strings.SplitAfter(rel, ".git")[0])
	}
	slices.Sort(got)
	want := []string{"deep/down/made/.git", "hooked/.git", "used/.git"}
	if !slices.Equal(got, want) {
		t.Errorf("set aside %q, want %q", got, want)
	}
	for _, kept := range []string{"untouched", "committed"} {
		if _, err := os.Stat(filepath.Join(ws, kept, ".git")); err != nil {
			t.Errorf("%s was set aside: %v", kept, err)
		}
	}
}

// The git directories inside a .git, which the walk for nested
// repositories does not enter, are looked at too: a nested repository's
// submodule config the run changed (the host's git status in the nested
// repository ran its core.fsmonitor, recursing into the checkout), and a
// submodule's git directory the run made under the workspace's own
// .git/modules, registered with no checkout (the host's next git
// submodule update took it up, and ran its hook and core.fsmonitor).
// Each is set aside; an untouched one is left alone.
func TestAftercareSetsAsideInnerGitDirectories(t *testing.T) {
	base := realTempDir(t)
	ws := filepath.Join(base, "ws")
	marker := filepath.Join(base, "planted-command-ran")
	repo := func(dir string) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q")
		git(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
		return git(t, dir, "rev-parse", "HEAD")
	}
	repo(ws)
	src := filepath.Join(base, "src")
	head := repo(src)
	sub := filepath.Join(ws, "sub")
	repo(sub)
	for _, m := range []string{"m", "kept"} {
		git(t, sub, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, m)
	}
	paths := guardRun(t, ws)

	// The run: a core.fsmonitor in the nested repository's submodule
	// config, and a submodule of its own, with a hook, registered in the
	// workspace's index and left without a checkout.
	git(t, filepath.Join(sub, "m"), "config", "core.fsmonitor", "touch "+marker+"; false")
	evil := filepath.Join(ws, ".git", "modules", "evil")
	git(t, ws, "clone", "-q", "--bare", src, evil)
	git(t, ws, "config", "-f", filepath.Join(evil, "config"), "core.bare", "false")
	git(t, ws, "config", "-f", filepath.Join(evil, "config"), "core.worktree", "../../../evil")
	if err := os.WriteFile(filepath.Join(evil, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".gitmodules"), []byte("[submodule \"evil\"]\n\tpath = evil\n\turl = "+filepath.Join(base, "nowhere")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",evil")
	git(t, sub, "status", "--short")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the host's git status did not run the planted command, so this test shows nothing: %v", err)
	}
	os.Remove(marker)

	c := Aftercare(paths)
	if len(c.Unchecked) != 0 || len(c.Removed) != 0 {
		t.Errorf("Aftercare removed %q, left unchecked %v", c.Removed, c.Unchecked)
	}
	var got []string
	for _, a := range c.SetAside {
		rel, _ := filepath.Rel(ws, a)
		got = append(got, strings.Split(rel, ".cordon-set-aside-")[0])
	}
	slices.Sort(got)
	if want := []string{".git/modules/evil", "sub/.git/modules/m"}; !slices.Equal(got, want) {
		t.Errorf("set aside %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(sub, ".git", "modules", "kept", "HEAD")); err != nil {
		t.Errorf("the untouched submodule was set aside: %v", err)
	}
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = sub
	cmd.Run() // the checkout's git directory is gone: git may fail, and must run nothing
	cmd = exec.Command("git", "submodule", "update", "--init")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_ALLOW_PROTOCOL=file")
	cmd.Run() // the URL leads nowhere: it fails, and must run nothing
	if _, err := os.Stat(marker); err == nil {
		t.Error("after Aftercare, the host's git still ran a command the run planted")
	}
}

// What a run sets aside is kept in place by the guards of later runs in
// the workspace (read-only, the directories above it pinned): a later
// box renamed a nested repository's set-aside .git back, and the walk
// after its run took the old repository for the user's own. What the
// user renames back, or removes, is no longer kept.
func TestAftercareSetAsideStaysAside(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	sub := filepath.Join(ws, "a", "sub")
	aside := setAsideNested(t, GuardSpec{Workspace: ws}, sub)
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	got := describeGuards(guards, ws)
	for _, want := range []string{"pinned a", "pinned a/sub", "read-only " + strings.TrimPrefix(aside, ws+"/")} {
		if !slices.Contains(got, want) {
			t.Errorf("the next run's guard lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	// The user looks, and renames it back.
	if err := os.Rename(aside, filepath.Join(sub, ".git")); err != nil {
		t.Fatal(err)
	}
	guards, err = GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeGuards(guards, ws); slices.Contains(got, "pinned a/sub") {
		t.Errorf("what the user renamed back is still kept:\n%s", strings.Join(got, "\n"))
	}
}

// A record of what runs set aside that is too large to read refuses the
// next run, where it was read as a record of nothing: a box that set
// aside enough (some 350 repositories under names of 3,000 bytes) had
// the next run keep nothing in place, and that run's box rename back a
// .git an earlier run had set aside.
func TestAftercareSetAsideRecordTooLarge(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws := realTempDir(t)
	aside := setAsideNested(t, GuardSpec{Workspace: ws}, filepath.Join(ws, "sub"))
	// What the box set aside besides, the record's bound over.
	more := slices.Repeat([]string{aside}, maxAsideRecord/len(aside)+1)
	if err := rememberSetAside(ws, more); err != nil {
		t.Fatal(err)
	}
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err == nil {
		t.Fatalf("the next run was not refused; its guard:\n%s", strings.Join(describeGuards(guards, ws), "\n"))
	}
	if !strings.Contains(err.Error(), "too large to read") || !strings.Contains(err.Error(), asideRecord(ws)) {
		t.Errorf("refused with %q; want the record named, too large to read", err)
	}
}

// TestAftercareSetAsideStaysAsideInAllowPath: what a run sets aside in a
// read-write allow_path is kept by the next run from another workspace
// with that allow_path too (its record is the allow_path's as well as the
// workspace's).
func TestAftercareSetAsideStaysAsideInAllowPath(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ws, other, lib := realTempDir(t), realTempDir(t), realTempDir(t)
	aside := setAsideNested(t, GuardSpec{Workspace: ws, Writable: []string{lib}}, filepath.Join(lib, "sub"))
	for _, w := range []string{ws, other} {
		guards, err := GuardWorkspace(GuardSpec{Workspace: w, Writable: []string{lib}})
		if err != nil {
			t.Fatal(err)
		}
		got := describeGuards(guards, lib)
		for _, want := range []string{"pinned sub", "read-only " + strings.TrimPrefix(aside, lib+"/")} {
			if !slices.Contains(got, want) {
				t.Errorf("the next run's guard from %s lacks %q:\n%s", w, want, strings.Join(got, "\n"))
			}
		}
	}
}

// What a run set aside is kept by later runs whose workspace, or
// read-write allow path, lies above or below the first run's workspace
// (its record is under another key): a run from a directory inside the
// workspace, as in a monorepo, read only its own record, and its box
// could rename back what a run in the workspace had set aside.
func TestAftercareSetAsideStaysAsideAboveAndBelow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second GuardSpec // relative to a temporary directory
	}{
		{"in ws, then from a", GuardSpec{Workspace: "."}, GuardSpec{Workspace: "a"}},
		{"from a, then in ws", GuardSpec{Workspace: "a"}, GuardSpec{Workspace: "."}},
		{"from a, then allowing ws", GuardSpec{Workspace: "a"}, GuardSpec{Workspace: "other", Writable: []string{"."}}},
		{"allowing a, then from a/b", GuardSpec{Workspace: "other", Writable: []string{"a"}}, GuardSpec{Workspace: "a/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			ws := realTempDir(t)
			sub := filepath.Join(ws, "a", "b", "sub")
			for _, d := range []string{sub, filepath.Join(ws, "other")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			at := func(s GuardSpec) GuardSpec {
				s.Workspace = filepath.Join(ws, s.Workspace)
				for i, w := range s.Writable {
					s.Writable[i] = filepath.Join(ws, w)
				}
				return s
			}
			guards, err := GuardWorkspace(at(tc.first))
			if err != nil {
				t.Fatal(err)
			}
			git(t, sub, "init", "-q") // the run's
			c := Aftercare(guards)
			if len(c.SetAside) != 1 || len(c.Unchecked) != 0 {
				t.Fatalf("set aside %q, unchecked %v; want sub/.git set aside", c.SetAside, c.Unchecked)
			}
			guards, err = GuardWorkspace(at(tc.second))
			if err != nil {
				t.Fatal(err)
			}
			got := describeGuards(guards, ws)
			for _, want := range []string{"pinned a/b/sub", "read-only " + strings.TrimPrefix(c.SetAside[0], ws+"/")} {
				if !slices.Contains(got, want) {
					t.Errorf("the next run's guard lacks %q:\n%s", want, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// A named pipe the run made, renamed or wrote to in the workspace is set
// aside (git opens a .gitignore without asking whether it is a regular
// file, and waited for ever on one that was a pipe); one the run did not
// touch is left alone.
func TestAftercareSetsAsidePipes(t *testing.T) {
	ws := realTempDir(t)
	git(t, ws, "init", "-q")
	old := filepath.Join(ws, "old-pipe")
	guards := guardAfterPipe(t, ws, old)
	pipe := filepath.Join(ws, "sub", ".gitignore")
	if err := os.Mkdir(filepath.Dir(pipe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Aftercare(guards)
	if len(c.Pipes) != 1 || !strings.HasPrefix(c.Pipes[0], pipe+".cordon-set-aside-") || len(c.SetAside) != 0 || len(c.Unchecked) != 0 {
		t.Fatalf("set aside pipes %q, repositories %q, unchecked %v; want the run's pipe alone", c.Pipes, c.SetAside, c.Unchecked)
	}
	if _, err := os.Lstat(old); err != nil {
		t.Errorf("the pipe the run did not touch was moved: %v", err)
	}
	if err := gitStatusAnswers(t, ws); err != nil {
		t.Errorf("git status: %v", err)
	}
}

// TestAftercareRemovesGitPipes: a named pipe the run left where git reads
// or writes its files, in the workspace's own .git (a branch's ref, a
// loose object, HEAD's log, a rebase's state, a submodule's git
// directory) and in a nested repository's (its HEAD), is removed, and so are a unix
// socket and symbolic links to a pipe (a ref, a loose object) or to
// nothing, and a directory of loose objects that is a link: the host's
// git status, and git log, then answer. A pipe that was there before the
// run stays, and so does one in git-lfs's store, where git does not read.
func TestAftercareRemovesGitPipes(t *testing.T) {
	ws := realTempDir(t)
	git(t, ws, "init", "-q")
	git(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	first := strings.TrimSpace(git(t, ws, "rev-parse", "HEAD"))
	git(t, ws, "commit", "-q", "--allow-empty", "-m", "two")
	nested := filepath.Join(ws, "nested")
	git(t, ws, "init", "-q", nested)
	git(t, nested, "commit", "-q", "--allow-empty", "-m", "one")
	module := filepath.Join(ws, ".git", "modules", "sm")
	for _, d := range []string{filepath.Join(module, "objects", "ef"), filepath.Join(module, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(module, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(ws, ".git", "info", "old-pipe")
	guards := guardAfterPipe(t, ws, old)
	objects := filepath.Join(ws, ".git", "objects")
	ref := filepath.Join(ws, ".git", "refs", "heads", "main")
	head := filepath.Join(nested, ".git", "HEAD")
	loose := filepath.Join(objects, first[:2], first[2:])
	for _, p := range []string{ref, head, loose} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Where git writes, what git status reads in a rebase, and a
	// submodule's git directory.
	if err := os.MkdirAll(filepath.Join(ws, ".git", "rebase-merge"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := []string{filepath.Join(ws, ".git", "logs", "HEAD"), filepath.Join(ws, ".git", "rebase-merge", "head-name"),
		filepath.Join(module, "index"), filepath.Join(module, "objects", "ef", "0123")}
	for _, p := range state {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	linkRef := filepath.Join(ws, ".git", "refs", "heads", "link")
	linkLoose := filepath.Join(objects, "ab", "cdef")
	dangling := filepath.Join(objects, "ab", "0123")
	// A directory name no object of the two commits has (their hashes
	// are new each run).
	linkDir := filepath.Join(objects, "cd")
	for i := 0xce; ; i++ {
		if _, err := os.Lstat(linkDir); errors.Is(err, fs.ErrNotExist) {
			break
		}
		linkDir = filepath.Join(objects, fmt.Sprintf("%02x", i&0xff))
	}
	socket := filepath.Join(objects, "ab", "4567")
	if err := os.MkdirAll(filepath.Dir(linkLoose), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{linkRef: old, linkLoose: old, dangling: "/nonexistent/pipe", linkDir: filepath.Dir(old)} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	lfs := filepath.Join(ws, ".git", "lfs", "objects", "ab", "cd", "abcd")
	if err := os.MkdirAll(filepath.Dir(lfs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(lfs, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Aftercare(guards)
	want := append([]string{ref, head, loose, linkRef, linkLoose, dangling, linkDir, socket}, state...)
	if !slices.Equal(slices.Sorted(slices.Values(c.GitPipes)), slices.Sorted(slices.Values(want))) || len(c.Unchecked) != 0 {
		t.Fatalf("removed %q, unchecked %v; want %q", c.GitPipes, c.Unchecked, want)
	}
	for _, p := range []string{old, lfs} { // older than the run; where git does not read
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v; want it left", p, err)
		}
	}
	for _, dir := range []string{ws, nested} {
		gitStatusAnswers(t, dir)
	}
	log := exec.Command("timeout", "20", "git", "log", "--oneline")
	log.Dir = ws
	if out, err := log.CombinedOutput(); log.ProcessState.ExitCode() == 124 {
		t.Errorf("git log waits on the loose object's pipe: %v %s", err, out)
	}
}

// TestAftercareRemovesGitLinks: a symbolic link the run made in a git
// directory is removed, whatever it leads to, for git writes through it:
// a ref's log that was a link to a file of the host's had the host's next
// git checkout append a line holding the box's branch name to it (a
// shell's rc file, which the next shell ran), COMMIT_EDITMSG its next
// commit replace it with the message, and a directory of logs its
// commit write a file of its own among the host's. So in a git directory
// by another name, which a .git file names (git init --separate-git-dir),
// which the walk passed through as any directory. A HEAD as git makes
// one (core.preferSymlinkRefs) stays, as does a link from before the run.
func TestAftercareRemovesGitLinks(t *testing.T) {
	for _, c := range []struct {
		name, link string
		to         func(host string) string
		kept       bool
		gitDir     string // the git directory, if not .git
	}{
		{name: "a ref's log to a host file", link: "logs/HEAD", to: func(host string) string { return filepath.Join(host, "rc") }},
		{name: "the commit message to a host file", link: "COMMIT_EDITMSG", to: func(host string) string { return filepath.Join(host, "rc") }},
		{name: "a directory of logs to a host directory", link: "logs/refs/heads", to: func(host string) string { return host }},
		{name: "HEAD as git makes it", link: "HEAD", to: func(string) string { return "refs/heads/main" }, kept: true},
		{name: "a ref's log in a git directory by another name", link: "logs/HEAD", to: func(host string) string { return filepath.Join(host, "rc") }, gitDir: "gd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, host := realTempDir(t), realTempDir(t)
			rc := filepath.Join(host, "rc")
			if err := os.WriteFile(rc, []byte("true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gitDir := filepath.Join(ws, ".git")
			if c.gitDir == "" {
				git(t, ws, "init", "-q")
			} else {
				gitDir = filepath.Join(ws, c.gitDir)
				git(t, ws, "init", "-q", "--separate-git-dir", gitDir)
			}
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
			git(t, ws, "checkout", "-q", "-b", "x;touch${IFS}ran;#")
			// One from before the run, as git-new-workdir makes.
			old := filepath.Join(gitDir, "info", "old")
			if err := os.Symlink(rc, old); err != nil {
				t.Fatal(err)
			}
			guards := guardRun(t, ws)
			link := filepath.Join(gitDir, filepath.FromSlash(c.link))
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.to(host), link); err != nil {
				t.Fatal(err)
			}
			got := Aftercare(guards)
			want := []string{link}
			if c.kept {
				want = nil
			}
			if !slices.Equal(got.GitPipes, want) || len(got.Unchecked) != 0 {
				t.Fatalf("removed %q, unchecked %v; want %q", got.GitPipes, got.Unchecked, want)
			}
			for _, p := range []string{old, link} {
				if _, err := os.Lstat(p); (err == nil) != (p == old || c.kept) {
					t.Errorf("%s: %v after the run", p, err)
				}
			}
			// What the user does next on the host.
			git(t, ws, "checkout", "-q", "main")
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "two")
			if b, err := os.ReadFile(rc); err != nil || string(b) != "true\n" {
				t.Errorf("the host's file holds %q (%v); want it as it was", b, err)
			}
			if es, err := os.ReadDir(host); err != nil || len(es) != 1 {
				t.Errorf("the host's directory holds %v (%v); want its rc alone", es, err)
			}
		})
	}
}

// TestNestedChangesBound: a walk stays within its bound: a directory that
// is another walk's root is left to that walk, and a walk that reads
// more entries than its bound says so, an error, rather than look
// through the rest in silence or for as long as the tree goes on.
func TestNestedChangesBound(t *testing.T) {
	root := t.TempDir()
	since := time.Now().Add(-clockSlack)
	for i := range 10 {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"d0/pipe", "d1/pipe"} {
		if err := syscall.Mkfifo(filepath.Join(root, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inner := filepath.Join(root, "d1")
	for _, c := range []struct {
		name    string
		bound   walkBound
		pipes   []string
		tooMany bool
	}{
		{"unbounded", walkBound{}, []string{"d0/pipe", "d1/pipe"}, false},
		{"another walk's root", walkBound{Roots: map[string]bool{root: true, inner: true}}, []string{"d0/pipe"}, false},
		{"within", walkBound{MaxEntries: 100}, []string{"d0/pipe", "d1/pipe"}, false},
		{"past it", walkBound{MaxEntries: 5}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := nestedChanges(root, since, nil, c.bound)
			if tooMany := err != nil && strings.Contains(err.Error(), fmt.Sprintf("more than %d entries", c.bound.MaxEntries)); tooMany != c.tooMany || err != nil && !tooMany {
				t.Fatalf("err = %v, want the bound's: %t", err, c.tooMany)
			}
			if c.tooMany {
				return // what was walked before the bound depends on the workers
			}
			var want []string
			for _, p := range c.pipes {
				want = append(want, filepath.Join(root, p))
			}
			if !slices.Equal(w.pipes, want) {
				t.Errorf("pipes = %q, want %q", w.pipes, want)
			}
		})
	}
}

// BenchmarkNestedChanges walks a workspace of 10,000 directories (and a
// nested repository), as every run's end does.
func BenchmarkNestedChanges(b *testing.B) {
	ws := b.TempDir()
	for i := range 10_000 {
		if err := os.MkdirAll(filepath.Join(ws, fmt.Sprintf("d%02d/e%03d", i/100, i%100)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	git(b, filepath.Join(ws, "d00"), "init", "-q")
	since := time.Now()
	for b.Loop() {
		if w, err := nestedChanges(ws, since, nil, walkBound{}); err != nil || len(w.found) != 0 {
			b.Fatal(w.found, err)
		}
	}
}

// What the run made that must not exist is removed, and one that cannot
// be is reported, never passed over in silence.
func TestAftercareRemovesWhatTheRunMade(t *testing.T) {
	for _, c := range []struct {
		name              string
		made              bool
		fail              error
		removed, reported bool
	}{
		{name: "not made"},
		{name: "made", made: true, removed: true},
		{name: "made, cannot be removed", made: true, fail: fs.ErrPermission, reported: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			p := filepath.Join(ws, "commondir")
			if c.made {
				if err := os.WriteFile(p, []byte("../evil\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.fail != nil {
				removeAll = func(string) error { return c.fail }
				t.Cleanup(func() { removeAll = os.RemoveAll })
			}
			got := Aftercare([]GuardedPath{{Path: p, Guard: Unmade}})
			if removed := len(got.Removed) == 1 && got.Removed[0] == p; removed != c.removed || len(got.Removed) > 1 {
				t.Errorf("removed %q, want removed %v", got.Removed, c.removed)
			}
			if reported := len(got.Unchecked) == 1 && got.Unchecked[0].Path == p; reported != c.reported || len(got.Unchecked) > 1 {
				t.Errorf("reported %v, want reported %v", got.Unchecked, c.reported)
			}
			if _, err := os.Lstat(p); (err == nil) != (c.made && !c.removed) {
				t.Errorf("after Aftercare, Lstat = %v", err)
			}
		})
	}
}

// openedUp gives back, for as long as op takes, the permissions a box may
// have taken from its own directories to keep what it made from being
// removed or set aside, and then puts the modes back.
func TestOpenedUp(t *testing.T) {
	for _, c := range []struct {
		name   string
		modes  map[string]fs.FileMode // directory (relative) -> mode before
		inside bool
		want   map[string]fs.FileMode // directory -> the permission bits it has during op
	}{
		{name: "parent read-only", modes: map[string]fs.FileMode{"ws/.git": 0o555},
			want: map[string]fs.FileMode{"ws/.git": 0o300}},
		{name: "above unsearchable", modes: map[string]fs.FileMode{"ws": 0o600, "ws/.git": 0o000},
			want: map[string]fs.FileMode{"ws": 0o100, "ws/.git": 0o300}},
		{name: "inside closed", modes: map[string]fs.FileMode{"ws/.git/made": 0o500, "ws/.git/made/deep": 0o000}, inside: true,
			want: map[string]fs.FileMode{"ws/.git/made": 0o700, "ws/.git/made/deep": 0o700}},
		{name: "inside left alone for a rename", modes: map[string]fs.FileMode{"ws/.git/made/deep": 0o000},
			want: map[string]fs.FileMode{"ws/.git/made/deep": 0o000, "ws/.git": 0o300}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := realTempDir(t)
			if err := os.MkdirAll(filepath.Join(base, "ws/.git/made/deep"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error { os.Chmod(p, 0o755); return nil })
			})
			// Deepest first: a closed directory hides what is below it.
			var dirs []string
			for d := range c.modes {
				dirs = append(dirs, d)
			}
			slices.Sort(dirs)
			for _, d := range slices.Backward(dirs) {
				if err := os.Chmod(filepath.Join(base, d), c.modes[d]); err != nil {
					t.Fatal(err)
				}
			}
			ran := false
			err := openedUp(filepath.Join(base, "ws/.git/made"), c.inside, time.Now(), func() error {
				ran = true
				for d, bits := range c.want {
					fi, err := os.Lstat(filepath.Join(base, d))
					switch {
					case err != nil:
						t.Errorf("during op: %v", err)
					case bits == 0 && fi.Mode().Perm() != 0:
						t.Errorf("during op, %s is %v; want it left closed", d, fi.Mode().Perm())
					case fi.Mode().Perm()&bits != bits:
						t.Errorf("during op, %s is %v; want %v at least", d, fi.Mode().Perm(), bits)
					}
				}
				return nil
			})
			if err != nil || !ran {
				t.Fatalf("openedUp = %v (op ran: %v)", err, ran)
			}
			for _, d := range dirs {
				if fi, err := os.Lstat(filepath.Join(base, d)); err != nil || fi.Mode().Perm() != c.modes[d] {
					t.Errorf("after op, %s: %v, %v; want the mode put back, %v", d, fi.Mode().Perm(), err, c.modes[d])
				}
			}
		})
	}
}

// Git takes any directory with a HEAD, objects/ and refs/ (or a
// commondir) for a git directory, and finds one above where it runs
// before the workspace's own .git: one the run made so, or whose config or
// hooks it changed, loses its HEAD (set aside), and git run below it on
// the host then runs nothing of the run's. A repository the run made
// under a name of cordon's set-aside ones is found like any other.
func TestAftercareSetsAsideGitDirectories(t *testing.T) {
	layout := func(t *testing.T, dir, config string) {
		t.Helper()
		writeUnder(t, filepath.Join(dir, "HEAD"), "ref: refs/heads/main\n")
		for _, d := range []string{"objects", "refs/heads"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeUnder(t, filepath.Join(dir, "config"), config)
	}
	for _, c := range []struct {
		name   string
		before func(t *testing.T, ws string) // the user's, older than the run
		run    func(t *testing.T, ws, marker string)
		want   []string // set aside, relative to ws, up to the suffix
		gitIn  string   // where the host's git status ran the run's command, and runs nothing after
	}{
		{name: "an old directory made a git directory",
			before: func(t *testing.T, ws string) { writeUnder(t, filepath.Join(ws, "src/pkg/main.go"), "package main\n") },
			run: func(t *testing.T, ws, marker string) {
				layout(t, filepath.Join(ws, "src"), "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch "+marker+"; false\"\n")
			},
			want: []string{"src/HEAD"}, gitIn: "src/pkg"},
		{name: "a new bare repository",
			run:  func(t *testing.T, ws, marker string) { git(t, ws, "init", "-q", "--bare", "made.git") },
			want: []string{"made.git/HEAD"}},
		{name: "a HEAD and a commondir",
			run: func(t *testing.T, ws, marker string) {
				writeUnder(t, filepath.Join(ws, "wt/HEAD"), "ref: refs/heads/main\n")
				writeUnder(t, filepath.Join(ws, "wt/commondir"), "../made.git\n")
			},
			want: []string{"wt/HEAD"}},
		{name: "an old bare repository, untouched or pushed to",
			before: func(t *testing.T, ws string) {
				git(t, ws, "init", "-q", "--bare", "old.git")
				git(t, ws, "init", "-q", "--bare", "pushed.git")
				git(t, ws, "init", "-q", "work")
				git(t, filepath.Join(ws, "work"), "commit", "-q", "--allow-empty", "-m", "x")
			},
			run: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "work"), "push", "-q", filepath.Join(ws, "pushed.git"), "HEAD:refs/heads/main")
			}},
		{name: "an old bare repository's config changed",
			before: func(t *testing.T, ws string) { git(t, ws, "init", "-q", "--bare", "old.git") },
			run: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "old.git"), "config", "core.fsmonitor", "touch "+marker)
			},
			want: []string{"old.git/HEAD"}},
		{name: "no refs, so no git directory",
			before: func(t *testing.T, ws string) { writeUnder(t, filepath.Join(ws, "build/objects/a.o"), "") },
			run: func(t *testing.T, ws, marker string) {
				writeUnder(t, filepath.Join(ws, "build/HEAD"), "ref: refs/heads/main\n")
			}},
		{name: "a repository under a set-aside name",
			run: func(t *testing.T, ws, marker string) {
				dir := filepath.Join(ws, ".git.cordon-set-aside-000000000000", "r")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				git(t, dir, "init", "-q")
				git(t, dir, "config", "core.fsmonitor", "touch "+marker+"; false")
				if err := os.Symlink(".git.cordon-set-aside-000000000000/r", filepath.Join(ws, "lib")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{".git.cordon-set-aside-000000000000/r/.git"}, gitIn: "lib"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := realTempDir(t)
			ws, marker := filepath.Join(base, "ws"), filepath.Join(base, "ran")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, ws, "init", "-q")
			if c.before != nil {
				c.before(t, ws)
			}
			paths := guardRun(t, ws)
			c.run(t, ws, marker)
			status := func() bool { return statusRuns(filepath.Join(ws, c.gitIn), marker) }
			if c.gitIn != "" && !status() {
				t.Fatal("the host's git status did not run the planted command, so this test shows nothing")
			}

			got := Aftercare(paths)
			if got.Unchecked != nil || got.Removed != nil {
				t.Errorf("unchecked %v, removed %q", got.Unchecked, got.Removed)
			}
			var aside []string
			for _, a := range got.SetAside {
				rel, _ := filepath.Rel(ws, a[:max(0, strings.LastIndex(a, ".cordon-set-aside-"))])
				aside = append(aside, rel)
			}
			slices.Sort(aside)
			if !slices.Equal(aside, c.want) {
				t.Errorf("set aside %q, want %q", aside, c.want)
			}
			if c.gitIn != "" && status() {
				t.Error("after Aftercare, the host's git status still ran the planted command")
			}
		})
	}
}

// A linked worktree outside the workspace whose directory under
// .git/worktrees is gone still names it: one the run makes there, with a
// commondir naming a config of its own, is set aside after the run, and
// git in that worktree then runs nothing of the run's. So is the
// directory of a worktree the run added; one there before it is left.
func TestAftercareSetsAsideWorktreesTheRunMade(t *testing.T) {
	base := realTempDir(t)
	ws, marker := filepath.Join(base, "ws"), filepath.Join(base, "ran")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, ws, "init", "-q")
	git(t, ws, "commit", "-q", "--allow-empty", "-m", "x")
	git(t, ws, "worktree", "add", "-q", filepath.Join(base, "kept"))
	git(t, ws, "worktree", "add", "-q", filepath.Join(base, "stale"))
	stale := filepath.Join(ws, ".git", "worktrees", "stale")
	head, err := os.ReadFile(filepath.Join(stale, "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(stale); err != nil { // removed by hand
		t.Fatal(err)
	}
	paths := guardRun(t, ws)

	// The run: a repository of its own for the stale worktree, and a
	// worktree of its own in the workspace.
	evil := filepath.Join(ws, "evil")
	git(t, ws, "init", "-q", "--bare", evil)
	git(t, evil, "config", "core.fsmonitor", "touch "+marker+"; false")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"HEAD": string(head), "commondir": evil + "\n", "gitdir": filepath.Join(base, "stale", ".git") + "\n"} {
		if err := os.WriteFile(filepath.Join(stale, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, ws, "worktree", "add", "-q", filepath.Join(ws, "inside"))
	status := func() bool { return statusRuns(filepath.Join(base, "stale"), marker) }
	if !status() {
		t.Fatal("git status in the stale worktree did not run the planted command, so this test shows nothing")
	}

	c := Aftercare(paths)
	if c.Unchecked != nil {
		t.Errorf("unchecked: %v", c.Unchecked)
	}
	var got []string
	for _, a := range c.SetAside {
		rel, _ := filepath.Rel(ws, a[:max(0, strings.LastIndex(a, ".cordon-set-aside-"))])
		got = append(got, rel)
	}
	slices.Sort(got)
	if want := []string{".git/worktrees/inside", ".git/worktrees/stale", "evil/HEAD", "inside/.git"}; !slices.Equal(got, want) {
		t.Errorf("set aside %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "worktrees", "kept")); err != nil {
		t.Errorf("the worktree there before the run was set aside: %v", err)
	}
	if status() {
		t.Error("after Aftercare, git status in the stale worktree still ran the planted command")
	}
}

// A submodule checkout whose git directory under .git/modules is gone
// still names it in its .git file: one the run makes there is set aside
// after the run, and the host's git status, which recurses into the
// checkout, then runs nothing of the run's.
func TestAftercareSetsAsideAMissingModuleTheRunMade(t *testing.T) {
	base := realTempDir(t)
	ws, src, marker := filepath.Join(base, "ws"), filepath.Join(base, "src"), filepath.Join(base, "ran")
	for _, d := range []string{ws, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, d, "init", "-q")
		git(t, d, "commit", "-q", "--allow-empty", "-m", "x")
	}
	git(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "sub")
	git(t, ws, "commit", "-q", "-m", "sub")
	module := filepath.Join(ws, ".git", "modules", "sub")
	if err := os.Rename(module, filepath.Join(base, "module")); err != nil { // gone
		t.Fatal(err)
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeGuards(paths, ws); !slices.Contains(got, "unborn .git/modules/sub") {
		t.Fatalf("GuardWorkspace = %q", got)
	}

	// The run makes the module's git directory anew, with a config of its own.
	if err := os.Rename(filepath.Join(base, "module"), module); err != nil {
		t.Fatal(err)
	}
	git(t, module, "config", "core.fsmonitor", "touch "+marker+"; false")
	status := func() bool { return statusRuns(ws, marker) }
	if !status() {
		t.Fatal("the host's git status did not run the planted command, so this test shows nothing")
	}
	c := Aftercare(paths)
	if len(c.SetAside) != 1 || !strings.HasPrefix(c.SetAside[0], module+".cordon-set-aside-") || c.Unchecked != nil {
		t.Errorf("set aside %q (unchecked %v), want the module's git directory", c.SetAside, c.Unchecked)
	}
	if status() {
		t.Error("after Aftercare, the host's git status still ran the planted command")
	}
}

// statusRuns runs the host's git status in dir, as the user would next,
// and says whether it ran the command that creates marker (which it
// removes).
func statusRuns(dir, marker string) bool {
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = dir
	// Without optional locks, git status writes no index: a look that
	// changed the repository would change what the walk after it sees.
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0")
	cmd.Run()
	_, err := os.Stat(marker)
	os.Remove(marker)
	return err == nil
}

// TestAftercareRemovesNothingThroughALinkTheRunMade: a path that must not
// exist is removed where it is, never through a symbolic link the box put
// on the way to it (a hooks directory's parent swapped for a link to a
// directory of the host's); a link that was there before the run is
// followed.
func TestAftercareRemovesNothingThroughALinkTheRunMade(t *testing.T) {
	base := t.TempDir()
	ws, victim, old := filepath.Join(base, "ws"), filepath.Join(base, "victim"), filepath.Join(base, "old")
	for _, d := range []string{filepath.Join(ws, ".husky"), filepath.Join(victim, "_", "keep"), filepath.Join(old, "_")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(victim, "_", "keep", "data"), []byte("precious"), 0o644)
	// A link from before the run: followed.
	if err := os.Symlink(old, filepath.Join(ws, "before")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * clockSlack)
	began := time.Now().Add(-clockSlack) // as GuardWorkspace takes it
	guards := []GuardedPath{
		{Path: filepath.Join(ws, ".husky", "_"), Guard: Unmade, Dir: true},
		{Path: filepath.Join(ws, "before", "_"), Guard: Unmade, Dir: true},
		{Path: ws, Guard: Nested, Dir: true, Since: began},
	}
	// The run: .husky swapped for a link to the host's directory.
	if err := os.Rename(filepath.Join(ws, ".husky"), filepath.Join(ws, ".husky-old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(ws, ".husky")); err != nil {
		t.Fatal(err)
	}
	c := Aftercare(guards)
	if _, err := os.Stat(filepath.Join(victim, "_", "keep", "data")); err != nil {
		t.Fatalf("the host's directory behind the link was removed: %v", err)
	}
	if len(c.Unchecked) != 1 || !strings.Contains(c.Unchecked[0].Reason.Error(), filepath.Join(ws, ".husky")+", on the way to it, is a symbolic link") {
		t.Errorf("unchecked %v, want the link reported", c.Unchecked)
	}
	if _, err := os.Stat(filepath.Join(old, "_")); !os.IsNotExist(err) || !slices.Contains(c.Removed, filepath.Join(ws, "before", "_")) {
		t.Errorf("through a link from before the run: removed %v, %v", c.Removed, err)
	}
}

// A .git file naming a git directory in the workspace that is missing
// (gitdir: gd/repo) has a run that makes it set it aside; but a run that
// makes gd a link to a directory of the host's (the user's home) made
// cordon rename the host's gd/repo, which the box could not even see.
// Nothing is set aside through a link the run made: it is reported.
func TestAftercareSetsAsideNothingThroughALinkTheRunMade(t *testing.T) {
	base := realTempDir(t)
	ws, victim := filepath.Join(base, "ws"), filepath.Join(base, "victim")
	for _, d := range []string{ws, filepath.Join(victim, "repo")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: gd/repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := GuardWorkspace(GuardSpec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeGuards(paths, ws); !slices.Contains(got, "unborn gd/repo") {
		t.Fatalf("GuardWorkspace = %q", got)
	}
	time.Sleep(2 * clockSlack)
	// The run: gd, missing, made a link to the host's directory.
	if err := os.Symlink(victim, filepath.Join(ws, "gd")); err != nil {
		t.Fatal(err)
	}
	c := Aftercare(paths)
	if _, err := os.Stat(filepath.Join(victim, "repo")); err != nil || c.SetAside != nil {
		t.Fatalf("the host's directory behind the link was set aside (%v): %v", c.SetAside, err)
	}
	if len(c.Unchecked) != 1 || !strings.Contains(c.Unchecked[0].Reason.Error(), filepath.Join(ws, "gd")+", on the way to it, is a symbolic link made during the run; nothing is set aside through it") {
		t.Errorf("unchecked %v, want the link reported", c.Unchecked)
	}
}

// guardAfterPipe makes a named pipe at old, lets the clock pass it, and
// guards ws as a run starting then would: the pipe is older than the run.
func guardAfterPipe(t *testing.T, ws, old string) []GuardedPath {
	t.Helper()
	if err := syscall.Mkfifo(old, 0o600); err != nil {
		t.Fatal(err)
	}
	guards := guardRun(t, ws)
	return guards
}

// gitStatusAnswers runs git status in dir and fails t if it has not
// answered within 20 s (it waits for ever on a pipe where it reads a
// file); it returns how git exited.
func gitStatusAnswers(t *testing.T, dir string) error {
	t.Helper()
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = dir
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Errorf("git status in %s waits on a pipe the run left", dir)
		return nil
	}
}

// BenchmarkGitPipes looks through a git directory with all 256
// directories of loose objects, none changed since, as every run's end
// does for the workspace's repository.
func BenchmarkGitPipes(b *testing.B) {
	ws := b.TempDir()
	git(b, ws, "init", "-q")
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(ws, ".git", "objects", fmt.Sprintf("%02x", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	since := time.Now()
	for b.Loop() {
		if found, _, err := gitPipes(filepath.Join(ws, ".git"), since); err != nil || len(found) != 0 {
			b.Fatal(found, err)
		}
	}
}

// TestAftercareClosesWhatTheRunOpened: what the run made writable by other
// local users (with a umask of 0: a directory, a file in it, a file in a
// directory of the user's, a ref and a directory of loose objects in the
// workspace's repository) has that permission taken off; what the user
// had made so before the run keeps its mode, even where the run wrote to
// it, and a link is never followed.
func TestAftercareClosesWhatTheRunOpened(t *testing.T) {
	ws := realTempDir(t)
	git(t, ws, "init", "-q")
	userDir, userFile := filepath.Join(ws, "shared"), filepath.Join(ws, "open-file")
	if err := os.Mkdir(userDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, m := range map[string]fs.FileMode{userDir: 0o777, userFile: 0o666} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	guards := guardRun(t, ws)
	newDir := filepath.Join(ws, "new")
	objects := filepath.Join(ws, ".git", "objects", "ab")
	opened := map[string]fs.FileMode{
		newDir: 0o777, filepath.Join(newDir, "f"): 0o666, filepath.Join(userDir, "f"): 0o646,
		filepath.Join(ws, ".git", "refs", "heads", "x"): 0o666, objects: 0o777,
	}
	dirs := map[string]bool{newDir: true, objects: true}
	for _, p := range slices.Sorted(maps.Keys(opened)) {
		var err error
		if dirs[p] {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err == nil {
			err = os.Chmod(p, opened[p])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(userFile, []byte("written in the run"), 0o666); err != nil {
		t.Fatal(err)
	}
	c := Aftercare(guards)
	if want := slices.Sorted(maps.Keys(opened)); !slices.Equal(slices.Sorted(slices.Values(c.Closed)), want) || len(c.Unchecked) != 0 {
		t.Fatalf("closed %q, unchecked %v; want %q", c.Closed, c.Unchecked, want)
	}
	for p, m := range opened {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != m&^WriteClosed {
			t.Errorf("%s: %v %v; want %v", p, fi.Mode(), err, m&^WriteClosed)
		}
	}
	for p, m := range map[string]fs.FileMode{userDir: 0o777, userFile: 0o666} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != m {
			t.Errorf("the user's %s: %v %v; want %v, as it was", p, fi.Mode(), err, m)
		}
	}
	link := filepath.Join(ws, "link")
	if err := os.Symlink(userFile, link); err != nil {
		t.Fatal(err)
	}
	if err := takeWrite(link, WriteClosed); err == nil {
		t.Error("takeWrite changed a symbolic link's mode")
	}
	if fi, _ := os.Stat(userFile); fi.Mode().Perm() != 0o666 {
		t.Errorf("takeWrite followed a link: %s is %v", userFile, fi.Mode())
	}
}

// BenchmarkNestedChangesMadeFiles walks a workspace of 100 directories of
// 100 files each that the run made (as an install of packages does): each
// file's mode is read, to find what the run opened to other users.
func BenchmarkNestedChangesMadeFiles(b *testing.B) {
	ws := b.TempDir()
	since := time.Now().Add(-clockSlack)
	for i := range 10_000 {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("f%02d", i%100))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if w, err := nestedChanges(ws, since, nil, walkBound{}); err != nil || len(w.opened) != 0 {
			b.Fatal(w.opened, err)
		}
	}
}

// setAsideNested has a run guarded by spec make a repository in sub (a
// new directory), which its aftercare sets aside, and returns the one
// path it set aside.
func setAsideNested(t *testing.T, spec GuardSpec, sub string) string {
	t.Helper()
	guards, err := GuardWorkspace(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, sub, "init", "-q") // the run's
	c := Aftercare(guards)
	if len(c.SetAside) != 1 || len(c.Unchecked) != 0 {
		t.Fatalf("set aside %q, unchecked %v; want %s/.git set aside", c.SetAside, c.Unchecked, sub)
	}
	return c.SetAside[0]
}
