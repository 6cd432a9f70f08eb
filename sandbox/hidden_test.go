package sandbox

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// What a run hides from git status and git diff (an index entry it flags
// skip-worktree or assume-unchanged, the exclude file it changes, a
// .gitignore it makes that hides itself and what is beside it) is
// reported after it, and so is an attributes file it writes in .git/info
// (-diff, binary: git diff shows no content), in each index version and
// in a split index; flags
// that were there when the run was built (a sparse checkout's), or that
// it cleared, are not. The same holds in a repository nested in the
// workspace, whose index no guard read before the run.
func TestAftercareReportsHiddenChanges(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup [][]string
		// A split index's entries that replace its shared index's have
		// no names: the worktree is named instead.
		unnamed bool
		// nested is the repository's directory under the workspace,
		// "" for the workspace's own.
		nested string
	}{
		{"version 2", [][]string{{"update-index", "--index-version", "2"}}, false, ""},
		{"version 4", [][]string{{"update-index", "--index-version", "4"}}, false, ""},
		{"split", [][]string{{"update-index", "--split-index"}}, true, ""},
		{"nested, version 2", [][]string{{"update-index", "--index-version", "2"}}, false, "sub"},
		{"nested, split", [][]string{{"update-index", "--split-index"}}, true, "sub"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := realTempDir(t)
			ws := filepath.Join(top, c.nested)
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, ws, "init", "-q")
			for _, f := range []string{"Makefile", "b", "kept", "sparse"} {
				if err := os.WriteFile(filepath.Join(ws, f), []byte(f+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(t, ws, "add", ".")
			git(t, ws, "commit", "-q", "-m", "first")
			for _, args := range c.setup {
				git(t, ws, args...)
			}
			// The user's own: a sparse checkout's flag, and one kept.
			git(t, ws, "update-index", "--skip-worktree", "sparse")
			git(t, ws, "update-index", "--assume-unchanged", "kept")
			guards := guardRun(t, top)

			// The run's: it changes two files and hides them, excludes a
			// file it adds, and clears the user's flag.
			for _, f := range []string{"Makefile", "b", "conftest.py"} {
				if err := os.WriteFile(filepath.Join(ws, f), []byte("evil\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(t, ws, "update-index", "--skip-worktree", "Makefile")
			git(t, ws, "update-index", "--assume-unchanged", "b")
			git(t, ws, "update-index", "--no-skip-worktree", "sparse")
			exclude := filepath.Join(ws, ".git", "info", "exclude")
			f, err := os.OpenFile(exclude, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, "conftest.py")
			f.Close()
			// And an attributes file, which git status does not show
			// either, whose -diff has git diff say "Binary files differ".
			attributes := filepath.Join(ws, ".git", "info", "attributes")
			if err := os.WriteFile(attributes, []byte("* -diff\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// And a directory whose .gitignore hides itself and what is
			// beside it; pytest's cache, whose .gitignore pytest writes
			// alike, is not reported.
			ignore := filepath.Join(ws, "d", ".gitignore")
			for _, d := range []string{filepath.Dir(ignore), filepath.Join(ws, ".pytest_cache")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, data := range map[string]string{ignore: "*\n", filepath.Join(ws, "d", "conftest.py"): "evil\n",
				filepath.Join(ws, ".pytest_cache", ".gitignore"): "# Created by pytest automatically.\n*\n"} {
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if out := git(t, ws, "status", "--porcelain"); out != "" {
				t.Fatalf("git status shows %q, so this test shows nothing", out)
			}

			care := Aftercare(guards)
			if len(care.Unchecked) != 0 {
				t.Errorf("left unchecked: %v", care.Unchecked)
			}
			want := []HiddenPath{
				{filepath.Join(ws, "Makefile"), HiddenFlagged},
				{filepath.Join(ws, "b"), HiddenFlagged},
				{exclude, HiddenExcluded},
				{attributes, HiddenAttributes},
				{ignore, HiddenIgnoring},
			}
			if c.unnamed {
				want = []HiddenPath{{ws, HiddenUnnamed}, {exclude, HiddenExcluded}, {attributes, HiddenAttributes}, {ignore, HiddenIgnoring}}
			}
			byPath := func(a, b HiddenPath) int { return strings.Compare(a.Path, b.Path) }
			slices.SortFunc(care.Hidden, byPath)
			slices.SortFunc(want, byPath)
			if !slices.Equal(care.Hidden, want) {
				t.Errorf("reported hidden %v, want %v", care.Hidden, want)
			}
		})
	}
}

// Hidden.Since names what an index flags that it did not, and says when
// it cannot name them all.
func TestHiddenSince(t *testing.T) {
	hidden := func(paths ...string) Hidden {
		var h Hidden
		for _, p := range paths {
			h.add([]byte(p))
		}
		h.done()
		return h
	}
	many := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%05d", prefix, i))
		}
		return out
	}
	sparse := many("s/", maxHiddenNamed+5)
	for _, c := range []struct {
		name          string
		before, after Hidden
		want          []string
		all           bool
	}{
		{"none", hidden(), hidden(), nil, true},
		{"unchanged", hidden("a", "b"), hidden("a", "b"), nil, true},
		{"added", hidden("a"), hidden("a", "m"), []string{"m"}, true},
		{"cleared", hidden("a", "b"), hidden("a"), nil, true},
		{"sparse unchanged", hidden(sparse...), hidden(sparse...), nil, true},
		{"sparse, one more past the bound", hidden(sparse...), hidden(append(slices.Clone(sparse), "z")...), nil, false},
		{"sparse, one more within the bound", hidden(sparse...), hidden(append([]string{"a"}, sparse...)...), []string{"a"}, false},
		{"split, flags changed on an entry with no name", hidden("a", ""), hidden("a", "", ""), nil, false},
		{"split, unchanged", hidden("a", ""), hidden("a", ""), nil, true},
		{"made sparse", hidden(), hidden(sparse...), sparse[:maxHiddenNamed], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, all := c.before.Since(c.after)
			if !slices.Equal(got, c.want) || all != c.all {
				t.Errorf("Since = %q, %t; want %q, %t", got, all, c.want, c.all)
			}
		})
	}
}

// A paused rebase, am, cherry-pick or revert the run started or changed
// is set aside (the user's next --continue would run the exec lines of
// the box's todo list), in the workspace's repository, in a linked
// worktree's git directory, and in a nested repository's; one the user
// paused before the run, which it did not touch, stays.
func TestAftercareSetsAsideSequencerState(t *testing.T) {
	places := []struct {
		name string
		// repo makes, in the workspace ws, the repository to rebase in,
		// and returns where to run git and its git directory.
		repo func(t *testing.T, ws string) (work, gitDir string)
	}{
		{"workspace", func(t *testing.T, ws string) (string, string) {
			return ws, filepath.Join(ws, ".git")
		}},
		{"linked worktree", func(t *testing.T, ws string) (string, string) {
			wt := filepath.Join(realTempDir(t), "wt")
			git(t, ws, "worktree", "add", "-q", "-b", "side", wt)
			return wt, filepath.Join(ws, ".git", "worktrees", "wt")
		}},
		{"nested repository", func(t *testing.T, ws string) (string, string) {
			sub := filepath.Join(ws, "sub")
			git(t, ws, "init", "-q", sub)
			for i := range 3 {
				git(t, sub, "commit", "-q", "--allow-empty", "-m", fmt.Sprint(i))
			}
			return sub, filepath.Join(sub, ".git")
		}},
	}
	for _, place := range places {
		for _, c := range []struct {
			name       string
			before     bool // the user paused the rebase before the run
			runChanges bool // the run adds an exec line to its todo list
			aside      bool
		}{
			{"the user's, untouched", true, false, false},
			{"the user's, changed", true, true, true},
			{"the run's", false, true, true},
		} {
			t.Run(place.name+"/"+c.name, func(t *testing.T) {
				ws := realTempDir(t)
				git(t, ws, "init", "-q")
				for i := range 3 {
					git(t, ws, "commit", "-q", "--allow-empty", "-m", fmt.Sprint(i))
				}
				work, gitDir := place.repo(t, ws)
				rebase := func() {
					git(t, work, "-c", "sequence.editor=sed -i 1s/^pick/edit/", "rebase", "-q", "-i", "HEAD~2")
				}
				if c.before {
					rebase()
				}
				guards := guardRun(t, ws)
				if !c.before {
					rebase()
				}
				todo := filepath.Join(gitDir, "rebase-merge", "git-rebase-todo")
				if c.runChanges {
					f, err := os.OpenFile(todo, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintln(f, "exec touch ran")
					f.Close()
				}

				care := Aftercare(guards)
				if len(care.Unchecked) != 0 {
					t.Errorf("left unchecked: %v", care.Unchecked)
				}
				_, err := os.Stat(todo)
				switch aside := len(care.SetAside) == 1 && IsSequencerState(care.SetAside[0]) &&
					strings.HasPrefix(care.SetAside[0], filepath.Join(gitDir, "rebase-merge.cordon-set-aside-")); {
				case c.aside && (!aside || err == nil):
					t.Errorf("set aside %q, and the todo list is still there (%v)", care.SetAside, err)
				case !c.aside && (len(care.SetAside) != 0 || err != nil):
					t.Errorf("set aside %q, the user's own rebase (%v)", care.SetAside, err)
				}
			})
		}
	}
}

// A file the run changed whose index entry it rewrote to record the
// file's new status with the old object name (git status, git diff then
// say nothing of it) is reported after the run, in either object format;
// where attributes could explain the difference it is reported as not
// checked; an entry git itself refreshed in the run (a git add, a git
// status with core.autocrlf) is not reported.
func TestAftercareReportsForgedIndexEntries(t *testing.T) {
	for _, c := range []struct {
		name  string
		init  []string
		setup func(t *testing.T, ws string)
		run   func(t *testing.T, ws string)
		want  HiddenKind
		none  bool
	}{
		{name: "sha1", init: []string{"init", "-q"}, run: forgeMakefile, want: HiddenForged},
		{name: "sha256", init: []string{"init", "-q", "--object-format=sha256"}, run: forgeMakefile, want: HiddenForged},
		{name: "attributes", init: []string{"init", "-q"}, setup: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, ".gitattributes"), "*.bin filter=lfs\n")
		}, run: forgeMakefile, want: HiddenUnverified},
		// Where git does not compare the change time, a file rewritten
		// in place, its size kept and its modification time set back, is
		// hidden with no entry rewritten.
		{name: "trustctime off", init: []string{"init", "-q"}, setup: func(t *testing.T, ws string) {
			git(t, ws, "config", "core.trustctime", "false")
			makeOld(t, filepath.Join(ws, "Makefile"))
		}, run: rewriteInPlace, want: HiddenForged},
		{name: "checkStat minimal", init: []string{"init", "-q"}, setup: func(t *testing.T, ws string) {
			git(t, ws, "config", "core.checkStat", "minimal")
			makeOld(t, filepath.Join(ws, "Makefile"))
		}, run: rewriteInPlace, want: HiddenForged},
		{name: "committed", init: []string{"init", "-q"}, run: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "Makefile"), "all:\n\tfalse\n")
			git(t, ws, "commit", "-q", "-a", "-m", "second")
		}, none: true},
		{name: "autocrlf refreshed", init: []string{"init", "-q"}, setup: func(t *testing.T, ws string) {
			git(t, ws, "config", "core.autocrlf", "true")
			writeFile(t, filepath.Join(ws, "crlf"), "a\r\nb\r\n")
			git(t, ws, "add", "crlf")
			git(t, ws, "commit", "-q", "-m", "crlf")
		}, run: func(t *testing.T, ws string) {
			p := filepath.Join(ws, "crlf")
			writeFile(t, p, "a\r\nb\r\n")
			ago := time.Now().Add(-time.Minute) // not racily clean
			if err := os.Chtimes(p, ago, ago); err != nil {
				t.Fatal(err)
			}
			git(t, ws, "status", "--porcelain")
		}, none: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			git(t, ws, c.init...)
			writeFile(t, filepath.Join(ws, "Makefile"), "all:\n\ttrue\n")
			if c.setup != nil {
				c.setup(t, ws)
			}
			git(t, ws, "add", ".")
			git(t, ws, "commit", "-q", "-m", "first")
			guards := guardRun(t, ws)
			c.run(t, ws)
			if out := git(t, ws, "status", "--porcelain"); out != "" {
				t.Fatalf("git status shows %q, so this test shows nothing", out)
			}
			care := Aftercare(guards)
			if len(care.Unchecked) != 0 {
				t.Errorf("left unchecked: %v", care.Unchecked)
			}
			want := []HiddenPath{{filepath.Join(ws, "Makefile"), c.want}}
			if c.none {
				want = nil
			}
			if !slices.Equal(care.Hidden, want) {
				t.Errorf("reported hidden %v, want %v", care.Hidden, want)
			}
		})
	}
}

// forgeMakefile changes ws's Makefile and has git record its new status
// (git add), then puts the old object name back in its index entry, as
// a box can: git then takes the file for unchanged.
func forgeMakefile(t *testing.T, ws string) {
	old := git(t, ws, "rev-parse", ":Makefile")
	p := filepath.Join(ws, "Makefile")
	writeFile(t, p, "all:\n\ttouch ran\n")
	// Older than the index, so not racily clean (git would record no
	// size); its change time is the run's.
	ago := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, ago, ago); err != nil {
		t.Fatal(err)
	}
	git(t, ws, "add", "Makefile")
	forgeIndexEntry(t, ws, git(t, ws, "rev-parse", ":Makefile"), old)
}

// makeOld sets p's times a minute back, so that git, recording its
// status, does not take it for racily clean.
func makeOld(t *testing.T, p string) {
	ago := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, ago, ago); err != nil {
		t.Fatal(err)
	}
}

// rewriteInPlace rewrites ws's Makefile in place (same inode, same size)
// and sets its modification time back to what it was: git, comparing no
// change time, takes it for unchanged with no index entry rewritten.
func rewriteInPlace(t *testing.T, ws string) {
	p := filepath.Join(ws, "Makefile")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("all:\n\tfals\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// forgeIndexEntry replaces the object name from with to in ws's index,
// and writes its checksum again.
func forgeIndexEntry(t *testing.T, ws, from, to string) {
	p := filepath.Join(ws, ".git", "index")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := hex.DecodeString(strings.TrimSpace(from))
	o, _ := hex.DecodeString(strings.TrimSpace(to))
	h := sha1.New()
	if len(o) == sha256.Size {
		h = sha256.New()
	}
	body := bytes.Replace(data[:len(data)-h.Size()], f, o, 1)
	h.Write(body)
	if err := os.WriteFile(p, h.Sum(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to p.
func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mkdirs makes each directory of ps and those above it.
func mkdirs(t *testing.T, ps ...string) {
	t.Helper()
	for _, p := range ps {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// writeUnder writes data to p, making the directories above it.
func writeUnder(t *testing.T, p, data string) {
	t.Helper()
	mkdirs(t, filepath.Dir(p))
	writeFile(t, p, data)
}

// An untracked cache (the index's UNTR extension) the run added or
// rewrote is reported: git status takes the untracked files from it,
// and the box could have written one that leaves out a file it added.
// One the user had, which the run left as it was, is not.
func TestAftercareReportsUntrackedCache(t *testing.T) {
	cache := func(t *testing.T, ws string) {
		git(t, ws, "update-index", "--untracked-cache")
		git(t, ws, "status", "--porcelain")
	}
	for _, c := range []struct {
		name        string
		before, run func(t *testing.T, ws string)
		reported    bool
	}{
		{"added by the run", nil, cache, true},
		{"the user's, left alone", cache, func(*testing.T, string) {}, false},
		{"the user's, rewritten", cache, func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, "conftest.py"), "evil\n")
			// Git writes the cache it updates where the configuration
			// asks it to keep one.
			git(t, ws, "-c", "core.untrackedCache=true", "status", "--porcelain")
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := realTempDir(t)
			git(t, ws, "init", "-q")
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "first")
			if c.before != nil {
				c.before(t, ws)
			}
			guards := guardRun(t, ws)
			c.run(t, ws)
			care := Aftercare(guards)
			if len(care.Unchecked) != 0 {
				t.Errorf("left unchecked: %v", care.Unchecked)
			}
			var want []HiddenPath
			if c.reported {
				want = []HiddenPath{{ws, HiddenUntrackedCache}}
			}
			if !slices.Equal(care.Hidden, want) {
				t.Errorf("reported hidden %v, want %v", care.Hidden, want)
			}
		})
	}
}
