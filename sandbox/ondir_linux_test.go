package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAftercareFollowsNoLinkSwappedIn: a second box in the same workspace,
// still running when the first run's aftercare walks it, swaps (renameat2
// RENAME_EXCHANGE, over and over) the directory holding the pipes the first
// run made with a link it made to a directory of the host's that holds
// files of the same names. cordon found the pipes, then renamed (or, in a
// .git, removed) them by their paths again: through the link, it renamed
// the host's files, moved the box's pipes in among them, or removed them;
// so with the files the run made writable by other users, whose write
// permission cordon took off the host's files instead.
// Now each rename or removal goes through descriptors of the directories
// it checked, and a link made during the run is refused and reported.
func TestAftercareFollowsNoLinkSwappedIn(t *testing.T) {
	const pipes = 400
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o600) }
	open := func(p string) error {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return err
		}
		return os.Chmod(p, 0o666)
	}
	for _, tc := range []struct {
		name, dir string
		make      func(p string) error
	}{
		{"a pipe set aside", "d", fifo},
		{"a pipe in .git removed", filepath.Join(".git", "refs", "heads"), fifo},
		{"a file opened to others closed", "d", open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, victim := realTempDir(t), realTempDir(t)
			git(t, ws, "init", "-q")
			names := make([]string, pipes)
			for i := range names {
				names[i] = fmt.Sprintf("p%04d", i)
				if err := open(filepath.Join(victim, names[i])); err != nil {
					t.Fatal(err)
				}
			}
			guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			// The runs: the first makes the pipes, the second the link.
			dir := filepath.Join(ws, tc.dir)
			link := dir + "-link"
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if err := tc.make(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			stop := swapping(t, dir, link, victim)
			c := Aftercare(guards)
			t.Logf("%d swaps; %d set aside, %d removed, %d closed, %d refused", stop(), len(c.Pipes), len(c.GitPipes), len(c.Closed), len(c.Unchecked))
			entries, err := os.ReadDir(victim)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				if !e.Type().IsRegular() {
					t.Errorf("%s in the host's directory is no regular file: a pipe moved in", e.Name())
				} else if fi, err := e.Info(); err != nil || fi.Mode().Perm() != 0o666 {
					t.Errorf("the host's %s: %v, %v; want -rw-rw-rw-, as it was", e.Name(), fi.Mode(), err)
				}
				got = append(got, e.Name())
			}
			if strings.Join(got, " ") != strings.Join(names, " ") {
				t.Errorf("the host's directory holds %d entries, %d of the %d it had: cordon renamed or removed through the link", len(got), countIn(got, names), pipes)
			}
			for _, u := range c.Unchecked {
				// The walk may also find a pipe's directory a link where it
				// looks at what the run opened to other users.
				if !strings.Contains(u.Reason.Error(), "symbolic link") {
					t.Errorf("unchecked %s: %v; want the link reported", u.Path, u.Reason)
				}
			}
		})
	}
}

// TestAftercareWalkFollowsNoLinkSwappedIn: the walk after a run opened
// each directory by its path, following links: a second box in the same
// workspace, swapping the directory holding a repository the first run
// made (a core.fsmonitor in its config) with a link to an empty directory
// of the host's, had the walk read the host's directory in its place, and
// the repository was neither set aside nor reported; the second run's own
// walk takes it for older than that run. Now a directory whose descriptor
// is not the directory the walk named is reported.
func TestAftercareWalkFollowsNoLinkSwappedIn(t *testing.T) {
	ws, victim := realTempDir(t), realTempDir(t)
	git(t, ws, "init", "-q")
	dir, link := filepath.Join(ws, "d"), filepath.Join(ws, "d-link")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		// The runs: the first makes the repository, the second the link.
		repo := filepath.Join(dir, fmt.Sprintf("r%d", i))
		git(t, ws, "init", "-q", repo)
		os.Remove(link)
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		stop := swapping(t, dir, link, victim)
		c := Aftercare(guards)
		stop()
		// Leave d the directory and d-link the link, whichever they are.
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
		}
		_, err = os.Lstat(filepath.Join(repo, ".git"))
		// Reported: the swapped directory, or what the walk could not
		// open under either of its names.
		reported := slices.ContainsFunc(c.Unchecked, func(u Unchecked) bool {
			why := u.Reason.Error()
			return strings.Contains(why, "while cordon looked at it") || strings.Contains(why, dir+"/") || strings.Contains(why, link+"/") ||
				u.Path != ws && (Within(repo, u.Path) || Within(strings.Replace(repo, dir, link, 1), u.Path))
		})
		if err == nil && !reported {
			t.Fatalf("attempt %d: %s, made in the run, neither set aside nor reported (set aside %q, unchecked %v)", i, repo, c.SetAside, c.Unchecked)
		}
	}
}

// swapping swaps a and b (renameat2 RENAME_EXCHANGE) over and over, as a
// second box in the workspace can, until the function it returns is
// called, which says how many swaps were made. One of them is a link to
// victim: removed (aftercare removes a link the run made in a .git), it
// is made again, as that box would.
func swapping(t *testing.T, a, b, victim string) (stop func() int) {
	done, swapped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for ; n < 50_000_000; n++ {
			select {
			case <-done:
				return
			default:
			}
			err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
			if errors.Is(err, unix.ENOENT) {
				err = relink(victim, a, b)
			}
			if err != nil {
				t.Errorf("swap: %v", err)
				return
			}
		}
	}()
	return func() int {
		close(done)
		return <-swapped
	}
}

// relink makes whichever of a and b is missing a link to victim.
func relink(victim, a, b string) error {
	for _, p := range []string{a, b} {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return os.Symlink(victim, p)
		}
	}
	return nil
}

// countIn counts the names of got that are among want.
func countIn(got, want []string) int {
	n := 0
	for _, g := range got {
		for _, w := range want {
			if g == w {
				n++
				break
			}
		}
	}
	return n
}

// TestOpenedUpFollowsNoLinkSwappedIn: to set aside what the run left in a
// directory the box had made read-only (mkdir with a umask of 0, mode
// 0557), openedUp gave it its owner's write and put its mode back, both
// by path: a second box swapping that directory with a link to a host
// directory (the user's ~/.ssh, 0700) had cordon give the host's
// directory the box's mode, 0757, open to every local user's writes.
func TestOpenedUpFollowsNoLinkSwappedIn(t *testing.T) {
	ws, victim := realTempDir(t), realTempDir(t)
	if err := os.Chmod(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	began := time.Now().Add(-clockSlack)
	dir, link := filepath.Join(ws, "d"), filepath.Join(ws, "d-link")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o557); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	stop := swapping(t, dir, link, victim)
	defer stop()
	for i := range 2000 {
		openedUp(filepath.Join(dir, "pipe"), false, began, func() error { return nil })
		if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("attempt %d: the host's directory is %v (%v); want 0700, as it was", i, fi.Mode().Perm(), err)
		}
	}
}
