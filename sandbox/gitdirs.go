package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// named dotgit, its HEAD named HEAD.x), and rename them into place in
// the next (a rename keeps every birth time, and changes no file inside
// a renamed directory): the walk after the second run took it for the
// user's own, and the host's git status there ran the core.fsmonitor
// planted the run before (red team, round 6).
//
// So each walk records the git directories it leaves in place, and those
// it sets aside, under the paths they had (by device and inode too), in
// cordon's cache directory (which no box can reach), and the next walk
// of the same root sets aside a git directory the record does not name
// that changed during its run and was born before the record was made:
// it became a git directory, at that path, during the run (renamedInto).
// One born since the record was made was made between the runs, by the
// user (a clone). One the record names is the user's as much as it was
// before: a set-aside one the user renamed back among them. The first
// run in a root makes the record before its command starts
// (rememberGitDirs in Owe), so a repository's own content, staged when
// it was cloned and renamed into place by the first run, is no
// exception.

// gitDirsHeader starts a record of git directories.
const gitDirsHeader = "cordon git directories v1"

// maxGitDirsRecord bounds the record of git directories cordon reads and
// writes: a root with more in place than that is walked as if it had no
// record (as before it was kept), and told.
const maxGitDirsRecord = 8 << 20

// gitDirID names a git directory at a path.
type gitDirID struct {
	dev, ino uint64
	path     string
}

// gitDirs is a record of the git directories a walk of a root left in
// place or set aside (their paths before), and when that walk began.
type gitDirs struct {
	made time.Time
	ids  map[gitDirID]bool
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
	if !ok || len(data) > maxGitDirsRecord {
		return r, false
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(nil, maxGitDirsRecord)
	if !s.Scan() {
		return r, false
	}
	made, ok := strings.CutPrefix(s.Text(), gitDirsHeader+" ")
	if !ok {
		return r, false
	}
	ns, err := strconv.ParseInt(made, 10, 64)
	if err != nil {
		return r, false
	}
	r = gitDirs{made: time.Unix(0, ns), ids: map[gitDirID]bool{}}
	for s.Scan() {
		dev, rest, _ := strings.Cut(s.Text(), " ")
		ino, quoted, _ := strings.Cut(rest, " ")
		var id gitDirID
		var err1, err2, err3 error
		id.dev, err1 = strconv.ParseUint(dev, 10, 64)
		id.ino, err2 = strconv.ParseUint(ino, 10, 64)
		id.path, err3 = strconv.Unquote(quoted)
		if err1 != nil || err2 != nil || err3 != nil {
			return gitDirs{}, false
		}
		r.ids[id] = true
	}
	return r, s.Err() == nil
}

// writeGitDirs replaces root's record with ids, made at made. A record
// past maxGitDirsRecord is not written, and the one there is removed:
// the next walk goes by times alone, as it did before records were kept.
func writeGitDirs(root string, made time.Time, ids []gitDirID) error {
	p := gitDirsRecord(root)
	if p == "" {
		return nil
	}
	b := fmt.Appendf(nil, "%s %d\n", gitDirsHeader, made.UnixNano())
	for _, id := range ids {
		b = fmt.Appendf(b, "%d %d %s\n", id.dev, id.ino, strconv.Quote(id.path))
	}
	if len(b) > maxGitDirsRecord {
		os.Remove(p)
		return fmt.Errorf("%s: more than %d MiB of git directories to remember; a repository the sandboxed command renames into place there is not told from yours", root, maxGitDirsRecord>>20)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	next := fmt.Sprintf("%s.next.%d", p, os.Getpid())
	f, err := os.OpenFile(next, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(next)
		return err
	}
	return os.Rename(next, p)
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

// renamedInto says whether the git directory dir, which the walk would
// leave in place, became one at its path during the run that began at
// since: r does not name it, it changed since, and it was born before r
// was made.
func (r gitDirs) renamedInto(dir string, since time.Time) bool {
	id, ok := gitDirIdentity(dir)
	if !ok || r.ids[id] {
		return false
	}
	born, changed, err := fileTimes(dir)
	return err == nil && !changed.Before(since) && born.Before(r.made)
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
