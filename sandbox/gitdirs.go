package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The walk after a run leaves in place a nested repository's .git older
// than the run whose config and hooks the run did not change
// (repoChangedSince), and a directory git takes for a git directory by
// its layout that did not become one during the run (gitDirChangedSince):
// it goes by birth and change times. A box could stage one across runs,
// every piece born in one run under names git does not use (a .git
// named dotgit, its HEAD named HEAD.x), or whole where the walk does not
// look (inside a git directory it leaves in place), and rename it, or a
// directory above it, into place in a later run (a rename keeps every
// birth time, and changes no file inside the directory it moves): the
// walk after that run took it for the user's own, and the host's git
// status there ran the core.fsmonitor planted the run before (red team,
// round 6).
//
// So each walk records the git directories it leaves in place, and those
// it sets aside, by device and inode, in cordon's cache directory (which
// no box can reach), and the next walk of the same root sets aside a git
// directory the record does not name, born before any box could last
// write there (trustFrom), where it, or a directory between the root and
// it, changed during its run: it was moved into place during the run
// (movedInto). One born since is the user's, made between the runs (a
// clone); one the record names is the user's as much as before, where
// the user moves it or renames it back once set aside. The last time a
// box could write in a root is the latest walk after a run of any root
// that overlaps it (one above or below it: a workspace inside another,
// a read-write allow path), kept in one index (walksIndex): a box of a
// root below could stage what a run of the root above moved into place.
// The first run in a root makes the record before its command starts
// (rememberGitDirs in Owe), so a repository's own content, staged when
// it was cloned and moved into place by the first run, is no exception.

// gitDirsHeader starts a record of git directories.
const gitDirsHeader = "cordon git directories v1"

// maxGitDirsRecord bounds the record of git directories cordon reads and
// writes: a root with more in place than that is walked as if it had no
// record (as before it was kept), and told.
const maxGitDirsRecord = 8 << 20

// gitDirID names a git directory: its device and inode, which a move
// keeps, and whether it is a .git; its path, for whoever reads the
// record, is not compared. A git directory by another name (a bare
// repository in the workspace, as a test's fixture, whose config came
// with the clone) moved to be a worktree's .git is another thing to git
// run there: it is not the one the record names.
type gitDirID struct {
	dev, ino uint64
	path     string
}

// key is what a record compares: device, inode, and 1 for a .git.
func (id gitDirID) key() [3]uint64 {
	dotGit := uint64(0)
	if filepath.Base(id.path) == ".git" {
		dotGit = 1
	}
	return [3]uint64{id.dev, id.ino, dotGit}
}

// gitDirs is a record of the git directories a walk of a root left in
// place or set aside, and when that walk began.
type gitDirs struct {
	made time.Time
	ids  map[[3]uint64]bool
}

// gitDirsRecord is the file that records the git directories of root,
// in cordon's cache directory; "" for nowhere.
func gitDirsRecord(root string) string {
	c := CacheDir()
	if c == "" {
		return ""
	}
	return filepath.Join(c, "git-dirs", workspaceKey(root))
}

// readGitDirs reads root's record; ok is false when there is none, or it
// cannot be read or parsed.
func readGitDirs(root string) (r gitDirs, ok bool) {
	p := gitDirsRecord(root)
	if p == "" {
		return r, false
	}
	data, ok := ReadPrivate(p)
	rest, isRecord := strings.CutPrefix(string(data), gitDirsHeader+"\n")
	if !ok || !isRecord || len(data) > maxGitDirsRecord {
		return r, false
	}
	r.ids = map[[3]uint64]bool{}
	for line := range strings.Lines(rest) {
		kind, f, ok := LineFields(strings.TrimSuffix(line, "\n"))
		if !ok {
			return gitDirs{}, false
		}
		switch {
		case kind == "made" && len(f) == 1:
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return gitDirs{}, false
			}
			r.made = time.Unix(0, ns)
		case kind == "dir" && len(f) == 3:
			dev, err1 := strconv.ParseUint(f[0], 10, 64)
			ino, err2 := strconv.ParseUint(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				return gitDirs{}, false
			}
			r.ids[gitDirID{dev: dev, ino: ino, path: f[2]}.key()] = true
		default:
			return gitDirs{}, false
		}
	}
	return r, !r.made.IsZero()
}

// writeGitDirs replaces root's record with ids, made at made. A record
// past maxGitDirsRecord is not written, and the one there is removed:
// the next walk goes by times alone, as it did before records were kept.
func writeGitDirs(root string, made time.Time, ids []gitDirID) error {
	p := gitDirsRecord(root)
	if p == "" {
		return nil
	}
	b := fmt.Appendf(nil, "%s\nmade %d\n", gitDirsHeader, made.UnixNano())
	for _, id := range ids {
		b = fmt.Appendf(b, "dir %d %d %q\n", id.dev, id.ino, id.path)
	}
	if len(b) > maxGitDirsRecord {
		os.Remove(p)
		return fmt.Errorf("%s: more than %d MiB of git directories to remember; a repository the sandboxed command renames into place there is not told from yours", root, maxGitDirsRecord>>20)
	}
	return replacePrivate(p, b, false)
}

// gitDirIdentity names the directory at p; ok is false when p is no
// directory (a .git file or link is judged by its own change time).
func gitDirIdentity(p string) (id gitDirID, ok bool) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return id, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return id, false
	}
	return gitDirID{dev: uint64(st.Dev), ino: uint64(st.Ino), path: p}, true
}

// movedInto says whether the git directory dir, which the walk of root
// would leave in place, was moved into place during the run that began at
// since: r does not name it, it was born before trustFrom (when a box
// could last write in root), and it, or a directory between root and it,
// changed since (a rename changes what it moves).
func (r gitDirs) movedInto(root, dir string, since, trustFrom time.Time) bool {
	id, ok := gitDirIdentity(dir)
	if !ok || r.ids[id.key()] {
		return false
	}
	if born, _, err := fileTimes(dir); err != nil || !born.Before(trustFrom) {
		return false
	}
	for d := dir; d != root && Within(d, root); d = filepath.Dir(d) {
		if _, changed, err := fileTimes(d); err == nil && !changed.Before(since) {
			return true
		}
	}
	return false
}

// gitDirOf is the git directory what the walk sets aside at p belongs
// to: p itself, or, for the HEAD of a directory git takes for a git
// directory by its layout, that directory.
func gitDirOf(p string) string {
	if filepath.Base(p) == "HEAD" {
		return filepath.Dir(p)
	}
	return p
}

// rememberGitDirs makes the record of each walked guard's root that has
// none, before its run's command starts: the git directories there now
// (a walk that only lists them).
func rememberGitDirs(guards []GuardedPath) error {
	skip, roots := walkedRoots(guards)
	var errs error
	for _, g := range guards {
		if !walked(g.Guard) {
			continue
		}
		if _, ok := readGitDirs(g.Path); ok {
			continue
		}
		made := time.Now()
		w, err := nestedChanges(g.Path, made, skip, walkBound{Roots: roots, MaxEntries: maxEntries(g.Guard), listOnly: true})
		inner, left, err2 := innerGitDirsChangedSince(filepath.Join(g.Path, ".git"), made, skip)
		if err = errors.Join(err, err2); err != nil {
			errs = errors.Join(errs, err) // no record: the walk after the run goes by times alone
			continue
		}
		var ids []gitDirID
		for _, d := range append(append(append(w.gitDirs, w.innerLeft...), inner...), left...) {
			if id, ok := gitDirIdentity(d); ok {
				ids = append(ids, id)
			}
		}
		errs = errors.Join(errs, writeGitDirs(g.Path, made, ids))
	}
	return errs
}

// walkedRoots are what the walks of guards pass over (the guarded paths)
// and the roots they start from.
func walkedRoots(guards []GuardedPath) (skip, roots map[string]bool) {
	skip, roots = map[string]bool{}, map[string]bool{}
	for _, g := range guards {
		switch {
		case g.Guard == Pinned || g.Guard == ReadOnly:
			skip[g.Path] = true
		case walked(g.Guard):
			roots[g.Path] = true
		}
	}
	return skip, roots
}

// maxWalks bounds the roots the walks index names; the oldest past it
// are folded into its floor, a time taken as a walk of every root.
const maxWalks = 4096

// walksIndex is the file that says when each root was last walked after
// a run, in cordon's cache directory; "" for nowhere.
func walksIndex() string {
	c := CacheDir()
	if c == "" {
		return ""
	}
	return filepath.Join(c, "git-dirs", "walks")
}

// readWalks reads the walks index: the last walk of each root, and the
// floor.
func readWalks() (walks map[string]time.Time, floor time.Time) {
	walks = map[string]time.Time{}
	p := walksIndex()
	if p == "" {
		return walks, floor
	}
	data, _ := ReadPrivate(p)
	for line := range strings.Lines(string(data)) {
		kind, f, ok := LineFields(strings.TrimSuffix(line, "\n"))
		if !ok || len(f) < 1 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		switch {
		case err != nil:
		case kind == "floor" && len(f) == 1:
			floor = time.Unix(0, ns)
		case kind == "walk" && len(f) == 2:
			walks[f[1]] = time.Unix(0, ns)
		}
	}
	return walks, floor
}

// trustFrom is when a box could last have written in root: the latest
// walk after a run of root, or of a root above or below it, or the
// index's floor; the zero time where there is none.
func trustFrom(root string) time.Time {
	walks, t := readWalks()
	for r, at := range walks {
		if (Within(r, root) || Within(root, r)) && at.After(t) {
			t = at
		}
	}
	return t
}

// noteWalk records in the walks index that root was walked after a run
// at at. Two runs that note at once may lose one's line; the next walk
// of that root writes it again.
func noteWalk(root string, at time.Time) error {
	p := walksIndex()
	if p == "" {
		return nil
	}
	walks, floor := readWalks()
	walks[root] = at
	roots := slices.Collect(maps.Keys(walks))
	slices.SortFunc(roots, func(a, b string) int { return walks[b].Compare(walks[a]) })
	for _, r := range roots[min(len(roots), maxWalks):] {
		if walks[r].After(floor) {
			floor = walks[r]
		}
		delete(walks, r)
	}
	b := fmt.Appendf(nil, "floor %d\n", floor.UnixNano())
	for _, r := range roots[:min(len(roots), maxWalks)] {
		b = fmt.Appendf(b, "walk %d %q\n", walks[r].UnixNano(), r)
	}
	return replacePrivate(p, b, false)
}
