package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAftercareSetsAsideGitDirsRenamedIntoPlace plays two runs in a row in
// one workspace (the record of git directories made before the first
// run's command, as Owe makes it, and each run's Aftercare): a git
// directory staged in one run, every piece born then under names git does
// not use, and renamed into place in the next, is set aside after that
// next run, and the host's git status there runs nothing of the box's
// (red team, round 6: it ran the core.fsmonitor staged the run before);
// so is one a repository's own content held, renamed into place by the
// first run. The user's own repositories, used in both runs, made
// between them, or renamed back by the user once set aside, are left.
func TestAftercareSetsAsideGitDirsRenamedIntoPlace(t *testing.T) {
	mv := func(t *testing.T, from, to string) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	// repo is a repository made at dir; planted, one with a
	// core.fsmonitor that makes marker.
	repo := func(t *testing.T, dir string) {
		t.Helper()
		mkdirs(t, dir)
		git(t, dir, "init", "-q")
	}
	// decoy makes dir look like a git directory: HEAD, objects, refs.
	decoy := func(t *testing.T, dir string) {
		t.Helper()
		mkdirs(t, filepath.Join(dir, "objects"), filepath.Join(dir, "refs"))
		writeFile(t, filepath.Join(dir, "HEAD"), "ref: refs/heads/main\n")
	}
	planted := func(t *testing.T, dir, marker string) {
		t.Helper()
		repo(t, dir)
		git(t, dir, "config", "core.fsmonitor", "touch "+marker+"; false")
	}
	// staged is a bare git directory at dir with HEAD named HEAD.x, a
	// worktree one level up and a core.fsmonitor: no git directory yet.
	staged := func(t *testing.T, dir, marker string) {
		t.Helper()
		mkdirs(t, filepath.Dir(dir))
		git(t, filepath.Dir(dir), "init", "-q", "--bare", filepath.Base(dir))
		git(t, dir, "config", "core.bare", "false")
		git(t, dir, "config", "core.fsmonitor", "touch "+marker+"; false")
		mv(t, filepath.Join(dir, "HEAD"), filepath.Join(dir, "HEAD.x"))
	}
	for _, c := range []struct {
		name          string
		before, run1  func(t *testing.T, ws, marker string) // the user's; the first run's box
		between, run2 func(t *testing.T, ws, marker string) // the user's; the second run's box
		want1, want2  []string                              // set aside after each run, relative to ws
		gitIn         string                                // where the host's git status ran the box's command
	}{
		{name: "a .git staged in one run, renamed into place in the next",
			run1: func(t *testing.T, ws, marker string) { staged(t, filepath.Join(ws, "nest/dotgit"), marker) },
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "nest/dotgit"), filepath.Join(ws, "nest/.git"))
				mv(t, filepath.Join(ws, "nest/.git/HEAD.x"), filepath.Join(ws, "nest/.git/HEAD"))
			},
			want2: []string{"nest/.git"}, gitIn: "nest"},
		{name: "a layout staged in one run, its HEAD renamed into place in the next",
			before: func(t *testing.T, ws, marker string) {
				writeUnder(t, filepath.Join(ws, "src/pkg/main.go"), "package main\n")
			},
			run1: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "src/objects"))
				mkdirs(t, filepath.Join(ws, "src/refs/heads"))
				writeUnder(t, filepath.Join(ws, "src/HEAD.x"), "ref: refs/heads/main\n")
				writeUnder(t, filepath.Join(ws, "src/config"), "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch "+marker+"; false\"\n")
			},
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "src/HEAD.x"), filepath.Join(ws, "src/HEAD"))
			},
			want2: []string{"src/HEAD"}, gitIn: "src/pkg"},
		{name: "a submodule's git directory staged in one run, renamed into place in the next",
			run1: func(t *testing.T, ws, marker string) { staged(t, filepath.Join(ws, ".git/modules/evil.x"), marker) },
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, ".git/modules/evil.x"), filepath.Join(ws, ".git/modules/evil"))
				mv(t, filepath.Join(ws, ".git/modules/evil/HEAD.x"), filepath.Join(ws, ".git/modules/evil/HEAD"))
			},
			want2: []string{".git/modules/evil"}},
		{name: "a repository's own content renamed into place by the first run",
			before: func(t *testing.T, ws, marker string) {
				staged(t, filepath.Join(ws, "nest/dotgit"), marker)
				mv(t, filepath.Join(ws, "nest/dotgit/HEAD.x"), filepath.Join(ws, "nest/dotgit/HEAD"))
			},
			run1: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "nest/dotgit"), filepath.Join(ws, "nest/.git"))
			},
			want1: []string{"nest/.git"}, gitIn: "nest"},
		{name: "a repository made inside a git directory left in place, moved out in the next run",
			before: func(t *testing.T, ws, marker string) { repo(t, filepath.Join(ws, "lib")) },
			run1:   func(t *testing.T, ws, marker string) { planted(t, filepath.Join(ws, "lib/.git/x/nest"), marker) },
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "lib/.git/x/nest"), filepath.Join(ws, "nest"))
			},
			want2: []string{"nest/.git"}, gitIn: "nest"},
		{name: "a repository made in a bare repository's object store, moved out in the next run by a directory above it",
			before: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "testdata"))
				git(t, filepath.Join(ws, "testdata"), "init", "-q", "--bare", "repo.git")
			},
			run1: func(t *testing.T, ws, marker string) {
				planted(t, filepath.Join(ws, "testdata/repo.git/objects/x/nest"), marker)
			},
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "testdata/repo.git/objects/x"), filepath.Join(ws, "x"))
			},
			want2: []string{"x/nest/.git"}, gitIn: "x/nest"},
		// The walk goes on below a git directory by another name, but for
		// its stores: it stopped there, and a repository planted below
		// one (here a bare repository's) was left to the next run to
		// catch if it was moved, and never if it was not.
		// A directory made to look like a git directory, by pieces staged
		// the run before and renamed into place, above a repository
		// planted in the same run: the walk stopped at it (red team,
		// round 8), at the workspace's root too.
		{name: "a git directory's layout renamed into a directory above a repository planted then",
			run1: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "build/cache/o"), filepath.Join(ws, "build/cache/r"), filepath.Join(ws, "src/pkg"))
				writeFile(t, filepath.Join(ws, "build/cache/h"), "ref: refs/heads/main\n")
			},
			run2: func(t *testing.T, ws, marker string) {
				for from, to := range map[string]string{"h": "HEAD", "o": "objects", "r": "refs"} {
					mv(t, filepath.Join(ws, "build/cache", from), filepath.Join(ws, "src", to))
				}
				planted(t, filepath.Join(ws, "src/pkg/evil"), marker)
			},
			want2: []string{"src/HEAD", "src/pkg/evil/.git"}, gitIn: "src/pkg/evil"},
		{name: "a git directory's layout renamed into the workspace's root, above a repository planted then",
			run1: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, ".cache/x"), filepath.Join(ws, "src/pkg"))
				for _, n := range []string{"h", "o", "r"} {
					writeFile(t, filepath.Join(ws, ".cache/x", n), "")
				}
			},
			run2: func(t *testing.T, ws, marker string) {
				for from, to := range map[string]string{"h": "HEAD", "o": "objects", "r": "refs"} {
					mv(t, filepath.Join(ws, ".cache/x", from), filepath.Join(ws, to))
				}
				planted(t, filepath.Join(ws, "src/pkg/evil"), marker)
			},
			want2: []string{"src/pkg/evil/.git"}, gitIn: "src/pkg/evil"},
		// Walked below, a git directory by another name is not walked
		// in its stores: the worktrees/ of the user's bare repository,
		// whose HEAD git makes anew at each checkout there, are left.
		{name: "the user's bare repository and its linked worktree, used in both runs",
			before: func(t *testing.T, ws, marker string) {
				git(t, ws, "init", "-q", "--bare", "proj.git")
				bare := filepath.Join(ws, "proj.git")
				tree := git(t, bare, "mktree")
				git(t, bare, "update-ref", "refs/heads/main", git(t, bare, "commit-tree", tree, "-m", "one"))
				git(t, bare, "worktree", "add", "-q", "../wt", "main")
			},
			run1: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "wt"), "checkout", "-q", "-b", "two")
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "wt"), "checkout", "-q", "-b", "three")
			}},
		// Its stores are walked too unless an earlier walk left it in
		// place as a git directory: a repository planted in a decoy's
		// modules/ (a Terraform project's name) was left, its HEAD set
		// aside and the walk gone past (the round's second look).
		{name: "a git directory's layout made in a run, above a repository planted in its modules",
			run2: func(t *testing.T, ws, marker string) {
				decoy(t, filepath.Join(ws, "infra"))
				planted(t, filepath.Join(ws, "infra/modules/vpc"), marker)
			},
			want2: []string{"infra/HEAD", "infra/modules/vpc/.git"}, gitIn: "infra/modules/vpc"},
		// A decoy set aside in one run is in the record (a set-aside
		// git directory renamed back is the user's), and pinned in the
		// next: a HEAD made anew there, and a repository planted in its
		// modules, were passed by as a git directory's own (the round's
		// third look).
		{name: "a git directory's layout set aside in one run, made again in the next above a repository planted in its modules",
			run1: func(t *testing.T, ws, marker string) {
				decoy(t, filepath.Join(ws, "infra"))
			},
			want1: []string{"infra/HEAD"},
			run2: func(t *testing.T, ws, marker string) {
				writeFile(t, filepath.Join(ws, "infra/HEAD"), "ref: refs/heads/main\n")
				planted(t, filepath.Join(ws, "infra/modules/vpc"), marker)
			},
			want2: []string{"infra/modules/vpc/.git"}, gitIn: "infra/modules/vpc"},
		// Its config written in the next run (a core.pager that git log
		// there runs): the pinned layout is set aside.
		{name: "a git directory's layout set aside in one run, given a config in the next",
			run1: func(t *testing.T, ws, marker string) {
				decoy(t, filepath.Join(ws, "infra"))
			},
			want1: []string{"infra/HEAD"},
			run2: func(t *testing.T, ws, marker string) {
				writeFile(t, filepath.Join(ws, "infra/HEAD"), "ref: refs/heads/main\n")
				writeFile(t, filepath.Join(ws, "infra/config"), "[core]\n\tpager = touch "+marker+"\n")
			},
			want2: []string{"infra/HEAD"}},
		// A submodule's git directory by its layout below a decoy's
		// modules, of old pieces (a directory and a file of the user's,
		// made between the runs, which no rename check takes for the
		// box's), its commondir rewritten to name a common directory
		// whose config has a core.pager: git log there ran it (the
		// round's fourth look).
		{name: "a submodule's git directory of old pieces below a decoy, its commondir naming a config the run wrote",
			between: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "st/x"), filepath.Join(ws, ".common/objects"), filepath.Join(ws, ".common/refs"))
				writeFile(t, filepath.Join(ws, "st/c"), "old\n")
			},
			run2: func(t *testing.T, ws, marker string) {
				decoy(t, filepath.Join(ws, "D"))
				mkdirs(t, filepath.Join(ws, "D/modules"))
				mv(t, filepath.Join(ws, "st/x"), filepath.Join(ws, "D/modules/x"))
				mv(t, filepath.Join(ws, "st/c"), filepath.Join(ws, "D/modules/x/commondir"))
				writeFile(t, filepath.Join(ws, "D/modules/x/commondir"), "../../../.common\n")
				writeFile(t, filepath.Join(ws, "D/modules/x/HEAD"), "ref: refs/heads/main\n")
				writeFile(t, filepath.Join(ws, ".common/config"), "[core]\n\tpager = touch "+marker+"\n")
			},
			want2: []string{"D/HEAD", "D/modules/x/HEAD"}},
		{name: "a git directory's layout renamed into the workspace's root, above a repository planted in its modules",
			run1: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, ".cache/x/o"), filepath.Join(ws, ".cache/x/r"))
				writeFile(t, filepath.Join(ws, ".cache/x/h"), "ref: refs/heads/main\n")
			},
			run2: func(t *testing.T, ws, marker string) {
				for from, to := range map[string]string{"h": "HEAD", "o": "objects", "r": "refs"} {
					mv(t, filepath.Join(ws, ".cache/x", from), filepath.Join(ws, to))
				}
				planted(t, filepath.Join(ws, "modules/x"), marker)
			},
			want2: []string{"modules/x/.git"}, gitIn: "modules/x"},
		// Git makes a HEAD anew at every checkout, and a linked
		// worktree's refs/ at a bisect: a nested repository's worktree,
		// a separate git directory, were set aside for a branch switched
		// to (the round's fifth look).
		{name: "the user's nested repository's linked worktree, a branch switched to in it",
			before: func(t *testing.T, ws, marker string) {
				repo(t, filepath.Join(ws, "n"))
				git(t, filepath.Join(ws, "n"), "commit", "-q", "--allow-empty", "-m", "one")
				git(t, filepath.Join(ws, "n"), "worktree", "add", "-q", "../nwt")
			},
			run1: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "nwt"), "checkout", "-q", "-b", "topic")
				git(t, filepath.Join(ws, "nwt"), "bisect", "start")
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "nwt"), "bisect", "reset")
				git(t, filepath.Join(ws, "nwt"), "checkout", "-q", "-b", "topic2")
			}},
		{name: "the user's repository with a separate git directory, a branch switched to in it",
			before: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "meta"), filepath.Join(ws, "proj"))
				git(t, filepath.Join(ws, "proj"), "init", "-q", "--separate-git-dir", "../meta/proj.git")
				git(t, filepath.Join(ws, "proj"), "commit", "-q", "--allow-empty", "-m", "one")
			},
			run1: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "proj"), "checkout", "-q", "-b", "topic")
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "proj"), "checkout", "-q", "-b", "topic2")
			}},
		// A bare repository's worktree git directory moved below a
		// directory of links to the old store and a config of the box's,
		// reached through a link where the bare repository was: the
		// worktree's commondir named that config, which nothing looked at
		// (the round's fifth look).
		{name: "a bare repository's worktree moved under a config of the box's, reached through a link",
			before: func(t *testing.T, ws, marker string) {
				git(t, ws, "init", "-q", "--bare", "proj.git")
				bare := filepath.Join(ws, "proj.git")
				git(t, bare, "update-ref", "refs/heads/main", git(t, bare, "commit-tree", git(t, bare, "mktree"), "-m", "one"))
				git(t, bare, "worktree", "add", "-q", "../wt1", "main")
			},
			run2: func(t *testing.T, ws, marker string) {
				mv(t, filepath.Join(ws, "proj.git"), filepath.Join(ws, "P"))
				mkdirs(t, filepath.Join(ws, "E/worktrees"))
				mv(t, filepath.Join(ws, "P/worktrees/wt1"), filepath.Join(ws, "E/worktrees/wt1"))
				for _, n := range []string{"objects", "refs"} {
					if err := os.Symlink("../P/"+n, filepath.Join(ws, "E", n)); err != nil {
						t.Fatal(err)
					}
				}
				writeFile(t, filepath.Join(ws, "E/config"), "[core]\n\tbare = true\n\tfsmonitor = \"touch "+marker+"; false\"\n")
				if err := os.Symlink("E", filepath.Join(ws, "proj.git")); err != nil {
					t.Fatal(err)
				}
			},
			want2: []string{"E/worktrees/wt1/HEAD"}, gitIn: "wt1"},
		// A directory made a git directory by a HEAD alone, its objects,
		// refs and config (a core.pager) staged the run before: HEAD's
		// birth no longer tells, the rename rule does (the directory
		// changed in the run, and no walk named it).
		{name: "a directory made a git directory by a new HEAD beside a config staged the run before",
			run1: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "lib/objects"), filepath.Join(ws, "lib/refs"))
				writeFile(t, filepath.Join(ws, "lib/config"), "[core]\n\tpager = touch "+marker+"\n")
			},
			run2: func(t *testing.T, ws, marker string) {
				writeFile(t, filepath.Join(ws, "lib/HEAD"), "ref: refs/heads/main\n")
			},
			want2: []string{"lib/HEAD"}},
		{name: "a repository made inside a bare repository",
			before: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "testdata"))
				git(t, filepath.Join(ws, "testdata"), "init", "-q", "--bare", "repo.git")
			},
			run2: func(t *testing.T, ws, marker string) {
				planted(t, filepath.Join(ws, "testdata/repo.git/x/nest"), marker)
			},
			want2: []string{"testdata/repo.git/x/nest/.git"}, gitIn: "testdata/repo.git/x/nest"},
		{name: "the user's nested repository, moved by the user between the runs and used in the second",
			before: func(t *testing.T, ws, marker string) { repo(t, filepath.Join(ws, "lib")) },
			between: func(t *testing.T, ws, marker string) {
				mkdirs(t, filepath.Join(ws, "vendor"))
				mv(t, filepath.Join(ws, "lib"), filepath.Join(ws, "vendor/lib"))
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "vendor/lib"), "commit", "-q", "--allow-empty", "-m", "one")
			}},
		{name: "the user's nested repository, used in both runs",
			before: func(t *testing.T, ws, marker string) { repo(t, filepath.Join(ws, "lib")) },
			run1: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "lib"), "commit", "-q", "--allow-empty", "-m", "one")
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "lib"), "commit", "-q", "--allow-empty", "-m", "two")
				git(t, filepath.Join(ws, "lib"), "status")
			}},
		{name: "a repository the user cloned between the runs, used in the second",
			between: func(t *testing.T, ws, marker string) { repo(t, filepath.Join(ws, "dep")) },
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "dep"), "commit", "-q", "--allow-empty", "-m", "one")
			}},
		{name: "a repository the box made, set aside, renamed back by the user and used again",
			run1:  func(t *testing.T, ws, marker string) { repo(t, filepath.Join(ws, "made")) },
			want1: []string{"made/.git"},
			between: func(t *testing.T, ws, marker string) {
				m, _ := filepath.Glob(filepath.Join(ws, "made", ".git.cordon-set-aside-*"))
				if len(m) != 1 {
					t.Fatalf("set aside: %q", m)
				}
				mv(t, m[0], filepath.Join(ws, "made/.git"))
			},
			run2: func(t *testing.T, ws, marker string) {
				git(t, filepath.Join(ws, "made"), "commit", "-q", "--allow-empty", "-m", "one")
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			base := realTempDir(t)
			ws, marker := filepath.Join(base, "ws"), filepath.Join(base, "ran")
			mkdirs(t, ws)
			git(t, ws, "init", "-q")
			run := func(n int, box func(t *testing.T, ws, marker string), want []string) {
				t.Helper()
				guards := guardRun(t, ws)
				if err := rememberGitDirs(guards); err != nil {
					t.Fatal(err)
				}
				if box != nil {
					box(t, ws, marker)
				}
				// The run that planted the repository there shows it runs.
				_, noGit := os.Stat(filepath.Join(ws, c.gitIn, ".git"))
				if c.gitIn != "" && want != nil && noGit == nil && !statusRuns(filepath.Join(ws, c.gitIn), marker) {
					t.Fatal("the host's git status did not run the box's command, so this test shows nothing")
				}
				got := Aftercare(guards)
				if got.Unchecked != nil || got.Removed != nil {
					t.Errorf("run %d: unchecked %v, removed %q", n, got.Unchecked, got.Removed)
				}
				var aside []string
				for _, a := range got.SetAside {
					rel, _ := filepath.Rel(ws, a[:max(0, strings.LastIndex(a, ".cordon-set-aside-"))])
					aside = append(aside, rel)
				}
				slices.Sort(aside)
				if !slices.Equal(aside, want) {
					t.Errorf("run %d set aside %q, want %q", n, aside, want)
				}
			}
			if c.before != nil {
				c.before(t, ws, marker)
			}
			run(1, c.run1, c.want1)
			time.Sleep(2 * clockSlack)
			if c.between != nil {
				c.between(t, ws, marker)
			}
			run(2, c.run2, c.want2)
			if c.gitIn != "" && statusRuns(filepath.Join(ws, c.gitIn), marker) {
				t.Error("after Aftercare, the host's git status ran the box's command")
			}
		})
	}
}

// TestAftercareTakesNothingMadeJustBeforeTheRun: what the user made just
// before a run (git init && cordon run) is not taken for the run's, and
// what the run makes at once still is: a run's start is the kernel's
// coarse clock, which file times come from, not the time less 50 ms,
// which reported the user's fresh .git/info/exclude as one the box had
// made to hide files from git status (red team, round 6). Within a tick
// of that clock (10 ms at most here; a file's time may be finer than the
// clock's) the two cannot be told apart, hence the 25 ms between.
func TestAftercareTakesNothingMadeJustBeforeTheRun(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for range 5 {
		ws := realTempDir(t)
		git(t, ws, "init", "-q")
		time.Sleep(25 * time.Millisecond)
		guards, err := GuardWorkspace(GuardSpec{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(ws, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, sub, "init", "-q") // the run's, made at once
		c := Aftercare(guards)
		if c.Hidden != nil || c.Unchecked != nil {
			t.Errorf("hidden %v, unchecked %v: the user's repository, made just before the run, taken for the run's", c.Hidden, c.Unchecked)
		}
		if len(c.SetAside) != 1 || !strings.HasPrefix(c.SetAside[0], filepath.Join(sub, ".git.cordon-set-aside-")) {
			t.Errorf("set aside %q, want sub/.git, made by the run at once", c.SetAside)
		}
	}
}

// TestAftercareSetsAsideWhatAnotherRootStaged: a repository staged by a
// run in a workspace inside another (a directory with a .cordon.yaml of
// its own), and moved into place by a run of the outer workspace, was
// born after the outer root's record was made, so the outer walk took it
// for one the user made between its runs (red team, round 6). When a box
// last wrote in a root is the latest walk of any root that overlaps it.
func TestAftercareSetsAsideWhatAnotherRootStaged(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	base := realTempDir(t)
	outer, marker := filepath.Join(base, "p1"), filepath.Join(base, "ran")
	inner := filepath.Join(outer, "sub")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, outer, "init", "-q")
	writeFile(t, filepath.Join(inner, ".cordon.yaml"), "network: off\n")
	run := func(ws string, box func()) Care {
		t.Helper()
		guards := guardRun(t, ws)
		if err := rememberGitDirs(guards); err != nil {
			t.Fatal(err)
		}
		box()
		return Aftercare(guards)
	}
	run(outer, func() {})
	staged := filepath.Join(inner, "dotgit")
	c := run(inner, func() {
		git(t, inner, "init", "-q", "--bare", "dotgit")
		git(t, staged, "config", "core.bare", "false")
		git(t, staged, "config", "core.fsmonitor", "touch "+marker+"; false")
		if err := os.Rename(filepath.Join(staged, "HEAD"), filepath.Join(staged, "HEAD.x")); err != nil {
			t.Fatal(err)
		}
	})
	if c.SetAside != nil {
		t.Fatalf("the staging run set aside %q: this test stages what no walk tells from the user's", c.SetAside)
	}
	nest := filepath.Join(outer, "nest")
	c = run(outer, func() {
		if err := os.Mkdir(nest, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(staged, filepath.Join(nest, ".git")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(nest, ".git/HEAD.x"), filepath.Join(nest, ".git/HEAD")); err != nil {
			t.Fatal(err)
		}
		if !statusRuns(nest, marker) {
			t.Fatal("the host's git status did not run the box's command, so this test shows nothing")
		}
	})
	if len(c.SetAside) != 1 || !strings.HasPrefix(c.SetAside[0], filepath.Join(nest, ".git.cordon-set-aside-")) {
		t.Errorf("set aside %q, want nest/.git", c.SetAside)
	}
	if statusRuns(nest, marker) {
		t.Error("after Aftercare, the host's git status ran the box's command")
	}
}

// TestAftercareWalksBelowAPinnedGitDirLayout: a directory the run pins
// (here one above a read_only path), which the box made look like a git
// directory (HEAD, objects and refs) in the run, is set aside (its HEAD)
// and walked below: its change was never looked at, as a pinned
// directory's, and the walk stopped there, so the repository planted
// below it ran its core.fsmonitor at the host's git status (red team,
// round 8).
func TestAftercareWalksBelowAPinnedGitDirLayout(t *testing.T) {
	base := realTempDir(t)
	ws, marker := filepath.Join(base, "ws"), filepath.Join(base, "ran")
	mkdirs(t, filepath.Join(ws, "src/pkg"))
	git(t, ws, "init", "-q")
	writeFile(t, filepath.Join(ws, "src/pkg/a.go"), "package a\n")
	guards, err := GuardWorkspace(GuardSpec{Workspace: ws, ReadOnly: []string{"src/pkg/a.go"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(guards, func(g GuardedPath) bool { return g.Path == filepath.Join(ws, "src") && g.Guard == Pinned }) {
		t.Fatalf("src is not pinned: %+v", guards)
	}
	time.Sleep(2 * clockSlack)
	// The box.
	mkdirs(t, filepath.Join(ws, "src/objects"), filepath.Join(ws, "src/refs"), filepath.Join(ws, "src/evil"))
	writeFile(t, filepath.Join(ws, "src/HEAD"), "ref: refs/heads/main\n")
	git(t, filepath.Join(ws, "src/evil"), "init", "-q")
	git(t, filepath.Join(ws, "src/evil"), "config", "core.fsmonitor", "touch "+marker+"; false")
	if !statusRuns(filepath.Join(ws, "src/evil"), marker) {
		t.Fatal("the host's git status did not run the box's command, so this test shows nothing")
	}
	got := Aftercare(guards)
	var aside []string
	for _, a := range got.SetAside {
		rel, _ := filepath.Rel(ws, a[:max(0, strings.LastIndex(a, ".cordon-set-aside-"))])
		aside = append(aside, rel)
	}
	slices.Sort(aside)
	if want := []string{"src/HEAD", "src/evil/.git"}; !slices.Equal(aside, want) {
		t.Errorf("set aside %q, want %q (unchecked %v)", aside, want, got.Unchecked)
	}
	if statusRuns(filepath.Join(ws, "src/evil"), marker) {
		t.Error("after Aftercare, the host's git status ran the box's command")
	}
}
