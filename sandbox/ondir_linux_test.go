package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAftercareFollowsNoLinkSwappedIn: a second box in the same workspace,
// still running when the first run's aftercare walks it, swaps (renameat2
// RENAME_EXCHANGE, over and over) the directory holding the pipes the first
// run made with a link it made to a directory of the host's that holds
// files of the same names. cordon found the pipes, then renamed (or, in a
// .git, removed) them by their paths again: through the link, it renamed
// the host's files, moved the box's pipes in among them, or removed them.
// Now each rename or removal goes through descriptors of the directories
// it checked, and a link made during the run is refused and reported.
func TestAftercareFollowsNoLinkSwappedIn(t *testing.T) {
	const pipes = 400
	for _, tc := range []struct{ name, dir string }{
		{"a pipe set aside", "d"},
		{"a pipe in .git removed", filepath.Join(".git", "refs", "heads")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, victim := realTempDir(t), realTempDir(t)
			git(t, ws, "init", "-q")
			names := make([]string, pipes)
			for i := range names {
				names[i] = fmt.Sprintf("p%04d", i)
				if err := os.WriteFile(filepath.Join(victim, names[i]), []byte("the host's"), 0o644); err != nil {
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
				if err := syscall.Mkfifo(filepath.Join(dir, n), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			stop, swapped := make(chan struct{}), make(chan int)
			go func() {
				n := 0
				defer func() { swapped <- n }()
				for ; n < 50_000_000; n++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("swap: %v", err)
						return
					}
				}
			}()
			c := Aftercare(guards)
			close(stop)
			t.Logf("%d swaps; %d set aside, %d removed, %d refused", <-swapped, len(c.Pipes), len(c.GitPipes), len(c.Unchecked))
			entries, err := os.ReadDir(victim)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				if !e.Type().IsRegular() {
					t.Errorf("%s in the host's directory is no regular file: a pipe moved in", e.Name())
				}
				got = append(got, e.Name())
			}
			if strings.Join(got, " ") != strings.Join(names, " ") {
				t.Errorf("the host's directory holds %d entries, %d of the %d it had: cordon renamed or removed through the link", len(got), countIn(got, names), pipes)
			}
			for _, u := range c.Unchecked {
				if !strings.Contains(u.Reason.Error(), "on the way to it, is a symbolic link made during the run") {
					t.Errorf("unchecked %s: %v; want the link reported", u.Path, u.Reason)
				}
			}
		})
	}
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
