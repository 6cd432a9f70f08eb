package sandbox

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Aftercare does, once a run has ended (every process of it), what no
// mount or profile rule could do beforehand for the guards of its
// workspace (GuardWorkspace). It removes each Unmade path the command
// made. It sets aside (renames, with a random suffix, so that git no
// longer runs there and nothing is lost) the .git of: a repository the
// command made where an Unborn guard stands; each submodule checkout a
// Checkouts repository's index names that was not guarded when the run
// was built (the command filled or registered it; the symbolic link on
// the way, if any, is what moves); and each repository nested in a
// Nested workspace that the command made, or whose config or hooks it
// changed; and the HEAD of each directory there that git takes for a git
// directory by its layout, which the command made so or whose config or
// hooks it changed (see nestedChanges); and each linked worktree's and
// submodule's git directory in the Nested workspace's .git, or in a
// nested repository's, that the command made or whose config or hooks it
// changed (innerGitDirsChangedSince); and each named pipe (FIFO) the
// command made, renamed or wrote to in the Nested workspace, which held
// the host's git, and any other program that opened it, for ever (see
// nestedChanges); and it removes each named pipe, socket, or symbolic
// link (but a HEAD as git makes one) the command made or used in a .git
// directory there, where git reads and writes its files, and writes
// through a link (see gitPipes);
// it lists what the command hid from git status and git diff in each
// Checkouts repository (see hiddenSince), and each .gitignore it made or
// changed in the Nested workspace, reporting them, undoing nothing;
// and, last, once the pipes in it are removed, it sets aside the state
// of each paused rebase, git am, cherry-pick or revert the command
// started or changed in such a repository's git directory, in a linked
// worktree's, or in a nested repository's left in place, whose todo
// list's exec lines the user's next --continue would run
// (sequencersSince);
// and, before all that, it takes the write permission for
// other local users (WriteClosed) off each file or directory the command
// made with it there, where it looks (see openedSince). What it does in
// the Nested workspace by walking it, it does in each Watched read-write
// allow_path too, by the same walk (walkCare), within maxWatchedEntries.
// What it sets aside is recorded for
// the guards of later runs in the Nested workspace, which keep it in
// place (guardSetAside). It also sets aside each guarded git config file
// that is no longer the file it was when its guard was taken (the host's
// git replaced it, which detached the guard) and that now names
// something for git to run that it did not then (configCare), and each
// other file kept read-only that is no longer the file it was: one git
// runs (a script a config names) is set aside, any other reported
// (replacedCare). It returns what it did.
func Aftercare(guards []GuardedPath) Care {
	var c Care
	guarded, roots := walkedRoots(guards)
	// The run began no later than its walked guards were taken.
	var began time.Time
	for _, g := range guards {
		if walked(g.Guard) && (began.IsZero() || g.Since.Before(began)) {
			began = g.Since
		}
	}
	for _, g := range guards {
		switch g.Guard {
		case Unmade:
			made, err := removeMade(g.Path, began)
			if made {
				c.Removed = append(c.Removed, g.Path)
			}
			if err != nil {
				c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: fmt.Errorf("it must not exist (git would take config and hooks from it), and could not be removed: %w", err)})
			}
		case Unborn:
			switch _, err := lstatOpened(g.Path, began); {
			case err == nil:
				c.putAside(g.Path, began)
			case !errors.Is(err, fs.ErrNotExist):
				c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: err})
			}
		case Checkouts:
			c = c.Add(repoCare(g, guarded, began))
		case ReadOnly, AbsentFile:
			if g.Config != nil {
				c = c.Add(configCare(g, began))
			}
			if g.ID != nil {
				c = c.Add(replacedCare(g, began))
			}
		}
	}
	// Last, as what is set aside above is no .git any more; the walk
	// leaves it alone.
	for _, p := range c.SetAside {
		guarded[p] = true
	}
	var nestedGitDirs []string // for the paused operations below
	for _, g := range guards {
		if walked(g.Guard) {
			wc, gitDirs := walkCare(g, walkBound{Roots: roots, MaxEntries: maxEntries(g.Guard)}, guarded, began)
			c = c.Add(wc)
			nestedGitDirs = append(nestedGitDirs, gitDirs...)
		}
	}
	// Later runs keep what is set aside where it is (guardSetAside).
	c.Unchecked = append(c.Unchecked, rememberSetAsideIn(guards, c.SetAside)...)
	// After the walk, which removed the pipes in them where they were.
	var paused Care
	for _, g := range guards {
		if g.Guard != Checkouts {
			continue
		}
		if dir, ok := repoGitDir(g.Path); ok { // else reported by repoCare
			paused = paused.Add(pausedCare(g.Path, dir, began))
		}
	}
	for _, dir := range nestedGitDirs {
		paused = paused.Add(pausedCare(dir, dir, began))
	}
	paused.Unchecked = append(paused.Unchecked, rememberSetAsideIn(guards, paused.SetAside)...)
	return c.Add(paused)
}

// walked says whether a guard of kind k is walked after the run
// (walkCare): the workspace, and the read-write allow_paths outside it.
func walked(k Guard) bool { return k == Nested || k == Watched }

// maxEntries is how many entries the walk of a guard of kind k reads at
// most (walkBound), 0 for no bound: the workspace is walked whole.
func maxEntries(k Guard) int {
	if k == Watched {
		return maxWatchedEntries
	}
	return 0
}

// walkCare walks g.Path (nestedChanges, within bound) and sees to what
// the run left there, through no link made since began: it takes other
// users' write off what the run opened to them, sets aside the
// repositories it made or changed and the named pipes, removes the traps
// in git directories, and lists the .gitignore files it made or changed.
// It also returns the git directories the walk looked through and left in
// place, whose paused operations Aftercare sees to last.
func walkCare(g GuardedPath, bound walkBound, guarded map[string]bool, began time.Time) (Care, []string) {
	var c Care
	record, remembered := readGitDirs(g.Path)
	walkedAt := time.Now()
	bound.Known = func(d string) bool {
		id, ok := gitDirIdentity(d)
		return remembered && ok && record.ids[id.key()]
	}
	w, err := nestedChanges(g.Path, g.Since, guarded, bound)
	more, left, err2 := innerGitDirsChangedSince(filepath.Join(g.Path, ".git"), g.Since, guarded)
	err = errors.Join(err, err2)
	// A git directory moved into place during the run is set aside as
	// one made during it (see gitdirs.go): a .git or a submodule's or
	// worktree's git directory whole, a directory git takes for one by
	// its layout by its HEAD.
	trust := trustFrom(g.Path)
	if record.made.After(trust) {
		trust = record.made
	}
	renamed := func(d string) bool { return remembered && record.movedInto(g.Path, d, g.Since, trust) }
	var inPlace []string
	for _, d := range w.gitDirs {
		switch {
		case !renamed(d):
			inPlace = append(inPlace, d)
		case filepath.Base(d) == ".git":
			more = append(more, d)
		default:
			more = append(more, filepath.Join(d, "HEAD"))
		}
	}
	w.gitDirs = slices.Clone(inPlace)
	for _, d := range append(w.innerLeft, left...) {
		if renamed(d) {
			more = append(more, d)
		} else {
			inPlace = append(inPlace, d)
		}
	}
	// First, as what is set aside below moves what is under it; never
	// through a link made during the run (onDir), where the mode the
	// box chose would be taken off a host file of the same name.
	for _, p := range w.opened {
		closeUp := func(at string) error { return takeWrite(at, WriteClosed) }
		if err := onDir(p, began, "closed", closeUp); err != nil {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: p, Reason: fmt.Errorf("it was made writable by other local users, and that could not be taken back: %w", err)})
		} else {
			c.Closed = append(c.Closed, p)
		}
	}
	// The next walk's record: the git directories left in place, and
	// those set aside, by the paths they had (a user who renames one back
	// has it taken for theirs again).
	var ids []gitDirID
	for _, p := range append(w.found, more...) {
		id, isDir := gitDirIdentity(gitDirOf(p))
		n := len(c.SetAside)
		c.putAside(p, began)
		if isDir && len(c.SetAside) > n {
			ids = append(ids, id)
		}
	}
	for _, d := range inPlace {
		if id, ok := gitDirIdentity(d); ok {
			ids = append(ids, id)
		}
	}
	// Written even after a walk that did not read everything: a record
	// kept from before would take what this run's box made for what was
	// made between the runs.
	if err := errors.Join(writeGitDirs(g.Path, walkedAt, ids), noteWalk(g.Path, walkedAt)); err != nil {
		c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: fmt.Errorf("remembering its git directories for the next run: %w", err)})
	}
	for _, p := range w.pipes {
		if to, err := setAside(p, began); err != nil {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: filepath.Dir(p), Reason: err})
		} else {
			c.Pipes = append(c.Pipes, to)
		}
	}
	for _, p := range w.gitFifos {
		if err := removeTrap(p, began); err != nil {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: p, Reason: err})
		} else {
			c.GitPipes = append(c.GitPipes, p)
		}
	}
	for _, p := range w.ignores {
		if g.Guard == Nested && !toolCaches[filepath.Base(filepath.Dir(p))] {
			c.Hidden = append(c.Hidden, HiddenPath{Path: p, Kind: HiddenIgnoring})
		}
	}
	if err != nil {
		c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: fmt.Errorf("looking for repositories the run made: %w", err)})
	}
	if g.Guard == Nested {
		for _, dir := range w.gitDirs {
			if filepath.Base(dir) == ".git" {
				c = c.Add(nestedHiddenCare(filepath.Dir(dir), dir, began))
			}
		}
	}
	return c, w.gitDirs
}

// nestedHiddenCare lists what the run hid from git status in a repository
// nested in the workspace and left in place (its worktree root, its
// .git directory dir), or in a linked worktree (dir is its worktrees/NAME),
// whose index no guard read when the run was built: the flagged files it
// changed (flaggedChangedSince), its exclude and attributes files, and
// the index entries it forged (forgedSince). Its untracked cache is not
// looked at: what it held before the run is not known.
func nestedHiddenCare(root, dir string, began time.Time) Care {
	var c Care
	unchecked := func(err error) {
		if err != nil {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: root, Reason: fmt.Errorf("looking for what the run hid from git status: %w", err)})
		}
	}
	_, hidden, err := repoGitlinks(dir, began)
	var bad *badGitlinksError
	if err != nil && !errors.As(err, &bad) {
		unchecked(err)
		return c
	}
	flagged, err := flaggedChangedSince(root, filepath.Join(dir, "index"), hidden, began)
	c.Hidden = append(c.Hidden, flagged...)
	unchecked(err)
	// A linked worktree's info/ files are its common directory's, seen to
	// with the repository they belong to.
	if _, linked := commonDir(dir); !linked {
		excluded, err := hiddenSince(root, dir, nil, hidden, began)
		c.Hidden = append(c.Hidden, excluded...)
		unchecked(err)
	}
	forged, err := forgedSince(root, dir, hidden.recorded, hashSizeOf(dir))
	c.Hidden = append(c.Hidden, forged...)
	unchecked(err)
	return c
}

// toolCaches are the directories whose .gitignore (of '*') the tools
// that make them write, on every first run (pytest, mypy, ruff): git
// review passes them by, and no tool runs code from them, so reporting
// each would only teach the user to skip the warnings. A .gitignore
// outside the workspace (a read-write allow_path) is not reported either:
// the review the report serves is of the workspace.
var toolCaches = map[string]bool{".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true}

// putAside sets p aside (setAside), adding what it did to c. A .git
// file may name a git directory in the workspace that is missing, under a
// directory the box could make a link (gitdir: gd/repo, and gd a link to
// the user's home): the rename would have moved the host's directory of
// that name. setAside goes through no link made since began.
func (c *Care) putAside(p string, began time.Time) {
	to, err := setAside(p, began)
	if err != nil {
		c.Unchecked = append(c.Unchecked, Unchecked{Path: filepath.Dir(p), Reason: err})
		return
	}
	c.SetAside = append(c.SetAside, to)
}

// repoCare sees to the repository whose worktree is g.Path (Checkouts):
// it sets aside the submodule checkouts the run filled or registered
// (setAsideCheckouts), and lists what the run hid from git status there
// (hiddenSince).
func repoCare(g GuardedPath, guarded map[string]bool, began time.Time) Care {
	var c Care
	unchecked := func(err error) {
		if err != nil {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: err})
		}
	}
	dir, ok := repoGitDir(g.Path)
	if !ok {
		if _, err := lstatOpened(filepath.Join(g.Path, ".git"), began); err != nil && !errors.Is(err, fs.ErrNotExist) {
			unchecked(err)
		}
		return c // no repository any more, so nothing git runs
	}
	links, hidden, odd := repoGitlinks(dir, began)
	before := g.Hidden
	var bad *badGitlinksError
	if odd != nil && !errors.As(odd, &bad) {
		before = nil // unread: what it flags is not known
	} else {
		aside, err := setAsideCheckouts(g.Path, links, guarded, began)
		c.SetAside = append(c.SetAside, aside...)
		unchecked(err)
	}
	hid, err := hiddenSince(g.Path, dir, before, hidden, began)
	c.Hidden = append(c.Hidden, hid...)
	unchecked(err)
	forged, err := forgedSince(g.Path, dir, hidden.recorded, hashSizeOf(dir))
	c.Hidden = append(c.Hidden, forged...)
	unchecked(err)
	for _, wt := range linkedWorktrees(dir, g.Path) {
		c = c.Add(nestedHiddenCare(wt.root, wt.dir, began))
	}
	// An odd gitlink is reported once the others are seen to.
	unchecked(odd)
	return c
}

// linkedWorktree is a linked worktree of a repository: its root, and its
// own git directory (worktrees/NAME, which keeps its index).
type linkedWorktree struct{ root, dir string }

// linkedWorktrees lists the linked worktrees of the repository whose git
// directory is dir that lie under top (git worktree add wt): each has an
// index of its own, which the run could write as the main worktree's.
// One counts only where its .git file names its git directory back, as
// git requires.
func linkedWorktrees(dir, top string) []linkedWorktree {
	entries, _ := readDirLent(filepath.Join(dir, "worktrees"))
	var out []linkedWorktree
	for _, e := range entries {
		wdir := filepath.Join(dir, "worktrees", e.Name())
		b, err := readRegular(filepath.Join(wdir, "gitdir"))
		if !e.IsDir() || err != nil {
			continue
		}
		dotgit := gitFilePath(b)
		if !filepath.IsAbs(dotgit) || filepath.Base(dotgit) != ".git" || !Within(dotgit, top) {
			continue
		}
		if back, ok := gitdirOf(dotgit); ok && back == wdir {
			out = append(out, linkedWorktree{root: filepath.Dir(dotgit), dir: wdir})
		}
	}
	return out
}

// pausedCare sets aside the paused operations' states the run made or
// changed in the git directory dir, and in its linked worktrees', of the
// repository at root (a Checkouts guard's worktree, or a nested
// repository's git directory; see sequencersSince).
func pausedCare(root, dir string, began time.Time) Care {
	var c Care
	states, err := sequencersSince(dir, began)
	for _, p := range states {
		to, err2 := setAside(p, began)
		if err2 != nil {
			err = errors.Join(err, err2)
			continue
		}
		c.SetAside = append(c.SetAside, to)
	}
	if err != nil {
		c.Unchecked = append(c.Unchecked, Unchecked{Path: root, Reason: err})
	}
	return c
}

// setAsideCheckouts sets aside the populated checkouts of the gitlinks
// links of root's index whose .git is not among guarded, through no link
// made since began.
func setAsideCheckouts(root string, links []string, guarded map[string]bool, began time.Time) ([]string, error) {
	var aside []string
	for _, l := range links {
		dotgit := filepath.Join(root, filepath.FromSlash(l), ".git")
		if _, err := os.Stat(dotgit); err != nil || guarded[dotgit] {
			continue // not checked out (git follows links, as Stat does), or guarded
		}
		// The first symbolic link on the way is what to move: what it
		// points at may lie outside anything the box could write.
		target := dotgit
		p := root
		for _, name := range strings.Split(l+"/.git", "/") {
			p = filepath.Join(p, name)
			if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				target = p
				break
			}
		}
		to, err := setAside(target, began)
		if err != nil {
			return aside, err
		}
		aside = append(aside, to)
	}
	return aside, nil
}

// setAsideInfix is what setAside puts between a name and its random
// suffix.
const setAsideInfix = ".cordon-set-aside-"

// setAside renames p with a random suffix (the box cannot have made the
// new name ready), and returns the new name. Where the box took the
// permission to do so away (see openedUp), it is given back for as long
// as the rename takes. Nothing is renamed through a symbolic link on the
// way to p made or changed since began (onDir).
func setAside(p string, began time.Time) (string, error) {
	to := RandomName(p + setAsideInfix)
	rename := func() error {
		return onDir(p, began, "set aside", func(at string) error {
			return os.Rename(at, filepath.Join(filepath.Dir(at), filepath.Base(to)))
		})
	}
	err := rename()
	if errors.Is(err, fs.ErrPermission) {
		err = openedUp(p, false, began, rename)
	}
	if err != nil {
		return "", fmt.Errorf("set aside %s: %w", p, err)
	}
	return to, nil
}

// removeTrap removes the pipe, socket or symbolic link gitPipes found at
// p, never a directory: another box in the workspace may have swapped one
// in for it since. Where the box took the permission to do so away (mode
// 111 on its directory), it is given back for as long as the removal
// takes (openedUp). Nothing is removed through a symbolic link on the way
// to p made or changed since began (onDir).
func removeTrap(p string, began time.Time) error {
	remove := func() error { return onDir(p, began, "removed", unlinkTrap) }
	err := remove()
	if errors.Is(err, fs.ErrPermission) {
		err = openedUp(p, false, began, remove)
	}
	return err
}

// unlinkTrap removes what is at at, unless it is a directory.
func unlinkTrap(at string) error {
	err := syscall.Unlink(at)
	if err == nil {
		return nil
	}
	// Linux says EISDIR, macOS EPERM and the directory is there.
	if fi, err2 := os.Lstat(at); errors.Is(err, syscall.EISDIR) || err2 == nil && fi.IsDir() {
		return fmt.Errorf("remove %s: a directory now, where cordon found a pipe, a socket or a symbolic link (swapped since): left", at)
	}
	return err
}

// removeMade removes p, if it exists, and says whether it did: a file
// (or directory) the run made that must not exist. Where the box took the
// permission to do so away (see openedUp), it is given back for as long
// as the removal takes. Nothing is removed through a symbolic link on the
// way to p that was made or changed since began (the run's start): the
// box may have put it there to send the removal to a directory of the
// host's.
func removeMade(p string, began time.Time) (bool, error) {
	remove := func() error {
		return onDir(p, began, "removed", func(at string) error {
			if _, err := os.Lstat(at); err != nil {
				return err
			}
			return removeAll(at)
		})
	}
	err := remove()
	if errors.Is(err, fs.ErrPermission) {
		err = openedUp(p, true, began, remove)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// lstatOpened is os.Lstat of p, through directories above it the box
// made unsearchable (openedUp, through no link made since began).
func lstatOpened(p string, began time.Time) (fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrPermission) {
		err = openedUp(p, false, began, func() error { fi, err = os.Lstat(p); return err })
	}
	return fi, err
}

// ownDir says whether this user owns the directory fi describes.
func ownDir(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// removeAll is os.RemoveAll (a test makes it fail).
var removeAll = os.RemoveAll

// openedUp runs op (a removal or a rename of p) with the permissions it
// needs given back, and then puts back the modes it changed. The box owns
// the workspace's directories, as cordon's user does, and may have taken
// the permission to write one (chmod 555 .git, or the workspace root)
// before it ended, so that what it made could be neither removed nor set
// aside: each directory above p that this user owns is made searchable,
// p's own directory writable too, and, with inside, every directory
// under p (to remove what is in it) readable, writable and searchable.
// Each is changed, and put back, through a name for it that stays that
// directory (dirHandle: no link made since began is followed): by path,
// a second box that swapped the directory with a link to a host
// directory had cordon give the host's directory the box's mode.
func openedUp(p string, inside bool, began time.Time, op func() error) error {
	type mode struct {
		handle  string
		mode    fs.FileMode
		release func()
	}
	var restore []mode
	defer func() {
		for i := len(restore) - 1; i >= 0; i-- {
			os.Chmod(restore[i].handle, restore[i].mode) // gone with p, or back as it was
			restore[i].release()
		}
	}()
	// open opens up d, and says whether it is a directory to go on in.
	open := func(d string, need fs.FileMode) bool {
		h, release, err := dirHandle(d, began)
		if err != nil {
			return false
		}
		fi, err := os.Stat(h)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&need == need || !ownDir(fi) {
			release()
			return err == nil
		}
		if os.Chmod(h, fi.Mode().Perm()|need) == nil {
			restore = append(restore, mode{h, fi.Mode().Perm(), release})
		} else {
			release()
		}
		return true
	}
	var above []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(above) - 1; i > 0; i-- {
		open(above[i], 0o100)
	}
	open(above[0], 0o300)
	if inside {
		var walk func(d string)
		walk = func(d string) {
			if !open(d, 0o700) {
				return
			}
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if e.IsDir() {
					walk(filepath.Join(d, e.Name()))
				}
			}
		}
		walk(p)
	}
	return op()
}

// repoGitDir is the git directory of the repository whose worktree is
// root: its .git directory, or the one its .git file names.
func repoGitDir(root string) (string, bool) {
	dotgit := filepath.Join(root, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case err != nil:
		return "", false
	case fi.IsDir():
		return dotgit, true
	case fi.Mode().IsRegular():
		return gitdirOf(dotgit)
	}
	return "", false
}

// RandomName is prefix and 12 random hex digits, for a name that must not
// be ready before cordon makes it (a directory os.Mkdir then creates, a
// name a rename moves to). They come from the runtime's generator, which
// the kernel seeds per process, so no other user, and no box, can predict
// them; crypto/rand's first read would cost half a millisecond of every
// run here.
func RandomName(prefix string) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return prefix + hex.EncodeToString(b[:6])
}

// IsRandomName reports whether name is one RandomName(prefix) could have
// made: prefix and 12 lower-case hex digits.
func IsRandomName(name, prefix string) bool {
	digits, ok := strings.CutPrefix(name, prefix)
	return ok && len(digits) == 12 && strings.Trim(digits, "0123456789abcdef") == ""
}
