package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// What a run sets aside stays in the workspace, under a name git does not
// use, for the user to look at (Aftercare). A later run's box could rename
// it back: a nested repository's .git older than that run, whose config
// and hooks it did not change, is nothing the walk after the run tells
// from the user's own (repoChangedSince), and the host's git then ran the
// core.fsmonitor the box had planted the run before. So each run records
// what it set aside, in cordon's cache directory (a protected path, which
// no box can reach), and the guards of later runs in the workspace, or
// in a directory above or below it (asideKeys), keep what is still there
// read-only, with the directories above it pinned
// (GuardWorkspace): the box can neither rename it nor move a directory
// above it. What the user has renamed back, or removed, is no longer
// kept. A run that began before another set something aside is not
// kept from it (its guards were taken before).

// maxAsideRecord bounds the record of what runs in one workspace set
// aside that cordon reads.
const maxAsideRecord = 1 << 20

// asideRecord is the file that records what runs in workspace set
// aside, in cordon's cache directory; "" for nowhere.
func asideRecord(workspace string) string {
	c := CacheDir()
	if c == "" {
		return ""
	}
	return filepath.Join(c, "set-aside", workspaceKey(workspace))
}

// rememberSetAside adds paths, set aside by a run in workspace, to the
// record of what runs there set aside (rewriteSetAside), and workspace to
// the list of records below each directory above it (noteRecordBelow).
func rememberSetAside(workspace string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if err := rewriteSetAside(workspace, paths); err != nil {
		return err
	}
	for _, d := range above(workspace) {
		if err := noteRecordBelow(d, workspace); err != nil {
			return err
		}
	}
	return nil
}

// above lists the directories above p, innermost first.
func above(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != p; p, d = d, filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}

// recordsBelow is the file that lists the workspaces (and read-write
// allow_paths) below dir that have a record of what runs set aside, one
// quoted path a line; "" for nowhere.
func recordsBelow(dir string) string {
	if r := asideRecord(dir); r != "" {
		return r + ".below"
	}
	return ""
}

// noteRecordBelow adds workspace, which has a record of what runs set
// aside, to the list of those below dir (recordsBelow), unless it is
// there; under the lock of dir's record.
func noteRecordBelow(dir, workspace string) error {
	list := recordsBelow(dir)
	if list == "" {
		return nil
	}
	unlock, err := lockAsideRecord(asideRecord(dir))
	if err != nil {
		return err
	}
	defer unlock()
	data, _ := ReadPrivate(list)
	if slices.Contains(asideEntries(data), workspace) {
		return nil
	}
	return appendAside(list, []string{workspace})
}

// asideKeys lists the workspaces whose records of what runs set aside
// may name a path below root: root, each directory above it (a run in
// the workspace set aside what a run from a directory inside it can
// reach), and those below it (recordsBelow: a run from inside it, or
// with a read-write allow_path there, set aside what a run in it
// reaches). A list too large to read refuses the run, as a record does.
func asideKeys(root string) ([]string, error) {
	keys := append([]string{root}, above(root)...)
	list := recordsBelow(root)
	if list == "" {
		return keys, nil
	}
	data, _, tooLarge := readAsideFile(list)
	if tooLarge {
		return nil, errAsideRecordTooLarge(root, list)
	}
	for _, w := range asideEntries(data) {
		if Within(w, root) && w != root {
			keys = append(keys, w)
		}
	}
	return keys, nil
}

// rewriteSetAside rewrites the record of what runs in workspace set
// aside, one quoted path a line: what it names that is still there, and
// paths. An entry is dropped only where its path is not there at all
// (fs.ErrNotExist, looked at again here), never where it cannot be
// looked at: a path that vanished was renamed or removed by the user
// (which ends its keeping), or by a box that was not kept from it (a
// box kept from it can move neither it nor a directory above it), which
// could as well have renamed it back itself. Each rewrite is under the
// record's lock (lockAsideRecord), which every run that adds to the
// record takes too, and replaces the record whole (a rename), so that
// two runs at once lose neither's lines. A record too large to read
// (maxAsideRecord) is appended to, as it is: the next run is refused.
func rewriteSetAside(workspace string, paths []string) error {
	record := asideRecord(workspace)
	if record == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	unlock, err := lockAsideRecord(record)
	if err != nil {
		return err
	}
	defer unlock()
	data, ok, tooLarge := readAsideFile(record)
	if tooLarge {
		return appendAside(record, paths)
	}
	var b []byte
	if ok {
		for _, p := range asideEntries(data) {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				b = appendAsideLine(b, p)
			}
		}
	}
	for _, p := range paths {
		b = appendAsideLine(b, p)
	}
	return replacePrivate(record, b, true)
}

// appendAside appends paths to record, in one write.
func appendAside(record string, paths []string) error {
	var b []byte
	for _, p := range paths {
		b = appendAsideLine(b, p)
	}
	f, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// appendAsideLine appends the record's line for p to b.
func appendAsideLine(b []byte, p string) []byte {
	return append(strconv.AppendQuote(b, p), '\n')
}

// asideEntries lists the paths a record of what runs set aside names.
func asideEntries(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		p, err := strconv.Unquote(line)
		if err != nil || !filepath.IsAbs(p) {
			continue // the end, or a line cut short
		}
		out = append(out, p)
	}
	return out
}

// lockAsideRecord takes the lock on record (an exclusive flock on a file
// beside it, which the record's rename leaves in place), waiting for
// another run's rewrite to end; the kernel drops it however the process
// ends.
func lockAsideRecord(record string) (unlock func(), err error) {
	fd, err := syscall.Open(record+".lock", syscall.O_RDWR|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", record, err)
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", record, err)
	}
	return func() { syscall.Close(fd) }, nil
}

// setAsideEarlier lists what earlier runs in workspace set aside
// (rememberSetAside) that is still there, under the name it was given.
// Where an entry's path is no longer there, the record is rewritten
// without it (rewriteSetAside), so that it grows only with what is
// still set aside. A record larger than maxAsideRecord is an error, not
// a record of nothing: a box that set aside enough (some 350
// repositories under long names) made the next run keep nothing in
// place, and rename back what the runs before had set aside.
func setAsideEarlier(workspace string) ([]string, error) {
	record := asideRecord(workspace)
	if record == "" {
		return nil, nil
	}
	data, ok, tooLarge := readAsideFile(record)
	if tooLarge {
		return nil, errAsideRecordTooLarge(workspace, record)
	}
	if !ok {
		return nil, nil
	}
	var out []string
	vanished := false
	for _, p := range asideEntries(data) {
		switch _, err := os.Lstat(p); {
		case err == nil:
			out = append(out, p)
		case errors.Is(err, fs.ErrNotExist):
			vanished = true
		}
	}
	if vanished {
		rewriteSetAside(workspace, nil) // or a later run does
	}
	return out, nil
}

// readAsideFile reads a record of what runs set aside, or a list of the
// records below a directory (ReadPrivate); tooLarge says it holds more
// than maxAsideRecord, looked at before it is read (it may be huge) and
// after (it may have grown since).
func readAsideFile(p string) (data []byte, ok, tooLarge bool) {
	if fi, err := os.Lstat(p); err == nil && fi.Size() > maxAsideRecord {
		return nil, false, true
	}
	data, ok = ReadPrivate(p)
	if len(data) > maxAsideRecord {
		return nil, false, true
	}
	return data, ok, false
}

// errAsideRecordTooLarge refuses a run whose record of what runs in
// workspace set aside is too large to read.
func errAsideRecordTooLarge(workspace, record string) error {
	return fmt.Errorf("the record of what earlier runs set aside in %s (%s) is larger than %d bytes, too large to read: cordon cannot keep what they set aside in place, and this run's command could rename it back (a repository's .git, whose config the host's git would then obey). Look at what is set aside there (find %s -name '*.cordon-set-aside-*'), remove what you do not want, then remove %s",
		workspace, record, maxAsideRecord, workspace, record)
}

// guardSetAside guards each path earlier runs set aside that lies under
// one of roots (the workspace and the read-write allow_paths) read-only,
// with the directories between that root and it pinned (guardBelowRoot).
// The records of each root, of the directories above it and of those
// below it that have one are read (asideKeys): a run records what it set
// aside in a read-write allow_path under that path too (Aftercare), so
// that a run from another workspace keeps it as well, and a run from a
// directory inside the workspace, or from one above it, reaches what a
// run in the workspace set aside. One with a symbolic link on the way,
// which only the user can have made since, is left alone. A record too
// large to read refuses the run (setAsideEarlier).
func guardSetAside(roots []string) ([]GuardedPath, error) {
	var out []GuardedPath
	read, kept := map[string]bool{}, map[string]bool{}
	for _, root := range roots {
		keys, err := asideKeys(root)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if read[k] {
				continue
			}
			read[k] = true
			more, err := guardRecorded(k, roots, kept)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
	}
	return out, nil
}

// guardRecorded guards what workspace's record names (setAsideEarlier)
// below one of roots, but for what kept holds (guarded already), which
// it adds to.
func guardRecorded(workspace string, roots []string, kept map[string]bool) ([]GuardedPath, error) {
	earlier, err := setAsideEarlier(workspace)
	if err != nil {
		return nil, err
	}
	var out []GuardedPath
	for _, p := range earlier {
		if kept[p] {
			continue
		}
		kept[p] = true
		more, err := guardBelowRoot(p, roots, false, false)
		if err != nil {
			continue
		}
		out = append(out, more...)
	}
	return out, nil
}

// rememberSetAsideIn records aside, what a run set aside, for the guards
// of later runs (guardSetAside): all of it under the workspace (the
// Nested guard's path), and what lies in each Watched read-write
// allow_path under that path too, where a run from another workspace
// finds it. It returns what could not be recorded.
func rememberSetAsideIn(guards []GuardedPath, aside []string) []Unchecked {
	var out []Unchecked
	for _, g := range guards {
		paths := aside
		switch g.Guard {
		case Nested:
		case Watched:
			paths = slices.DeleteFunc(slices.Clone(aside), func(p string) bool { return !Within(p, g.Path) })
		default:
			continue
		}
		if err := rememberSetAside(g.Path, paths); err != nil {
			out = append(out, Unchecked{Path: g.Path, Reason: errAsideNotRecorded(err)})
		}
	}
	return out
}

// errAsideNotRecorded says what a run set aside could not be recorded.
func errAsideNotRecorded(err error) error {
	return fmt.Errorf("recording what was set aside, which later runs keep in place: %w; a later run's command could rename it back", err)
}
