package sandbox

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HiddenKind says how a run hid a change from git status and git diff.
type HiddenKind int

const (
	// HiddenFlagged is a file whose index entry the run flagged
	// skip-worktree or assume-valid (see Hidden): git takes it for
	// unchanged, whatever is in it.
	HiddenFlagged HiddenKind = iota
	// HiddenUnnamed is a repository's worktree where the run changed which
	// entries are flagged, among more than cordon keeps by name
	// (maxHiddenNamed): the files it names are some of them, maybe none.
	HiddenUnnamed
	// HiddenExcluded is a repository's exclude file (info/exclude) the
	// run made or changed: git status lists no untracked file it names.
	HiddenExcluded
	// HiddenIgnoring is a .gitignore the run made or changed: git status
	// lists no untracked file it names, itself included (a .gitignore of
	// '*' hides itself and what is beside it). Cordon does not match
	// patterns as git does: each one is reported, whatever it names.
	HiddenIgnoring
	// HiddenUntrackedCache is a repository's worktree whose index's
	// untracked cache the run added or rewrote: git status takes from it
	// which files are untracked, and one the box wrote can leave out a
	// file it added. Cordon does not tell a forged cache from one git
	// wrote (that takes git's ignore rules): each change is reported.
	HiddenUntrackedCache
	// HiddenForged is a file the run changed whose index entry it made
	// record the file's new status with the old object name: git takes it
	// for unchanged without reading it (see forgedSince).
	HiddenForged
	// HiddenUnverified is a file whose index entry the run rewrote, whose
	// content is not the blob the entry names, in a repository with
	// attributes (a filter, an end-of-line conversion) that cordon does
	// not evaluate; or a worktree where the run rewrote more entries than
	// cordon reads again (maxRecorded, maxRecheckBytes). Not checked.
	HiddenUnverified
	// HiddenAttributes is a repository's attributes file (info/attributes)
	// the run made or changed, which git status does not show: its
	// attributes change what git diff shows of a change (-diff, binary,
	// a diff driver of the user's configuration whose textconv shows
	// something else), and its conversions (eol, ident) have git take a
	// file that differs from its blob for unchanged. It names no command
	// (drivers are defined in config, which the box cannot write).
	HiddenAttributes
)

// HiddenPath is a path where a run hid a change from git status and git
// diff, and how. Cordon clears no flag and restores no exclude file: it
// would have to write git's index (its format, its lock, a git running
// beside it), and a flag may be the user's intent (a sparse checkout);
// it names what to look at, and how to undo it.
type HiddenPath struct {
	Path string
	Kind HiddenKind
}

// hiddenSince lists what the run hid in the repository whose worktree is
// root and git directory dir: the entries its index flags now (after)
// that it did not when the run was built (before), its untracked cache
// when the run added or changed it, and its exclude and attributes files
// (info/), when the run made or changed them (their change time is began
// or later).
func hiddenSince(root, dir string, before *Hidden, after Hidden, began time.Time) ([]HiddenPath, error) {
	var out []HiddenPath
	if before != nil {
		paths, all := before.Since(after)
		for _, p := range paths {
			out = append(out, HiddenPath{Path: filepath.Join(root, filepath.FromSlash(p)), Kind: HiddenFlagged})
		}
		if !all {
			out = append(out, HiddenPath{Path: root, Kind: HiddenUnnamed})
		}
		if after.Untracked != "" && after.Untracked != before.Untracked {
			out = append(out, HiddenPath{Path: root, Kind: HiddenUntrackedCache})
		}
	}
	common := dir
	if c, ok := commonDir(dir); ok {
		common = c
	}
	var errs error
	for _, f := range []struct {
		name string
		kind HiddenKind
	}{{"exclude", HiddenExcluded}, {"attributes", HiddenAttributes}} {
		p := filepath.Join(common, "info", f.name)
		_, changed, err := fileTimes(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
			// None, or under a directory the box made unsearchable,
			// where git cannot read it either.
		case err != nil:
			errs = errors.Join(errs, fmt.Errorf("look at %s: %w", p, err))
		case !changed.Before(began):
			out = append(out, HiddenPath{Path: p, Kind: f.kind})
		}
	}
	return out, errs
}

// flaggedChangedSince lists, for a repository whose index was not read
// when the run was built (one nested in the workspace, not guarded), what
// its index, read after the run (after), flags and the run may have hid:
// each flagged file the run changed (its change time is began or later:
// git takes it for unchanged, whatever is in it), and the worktree root
// when some flagged entries have no name cordon kept (maxHiddenNamed, a
// split index) and the index itself changed during the run. A flag from
// before on a file the run left alone (a sparse checkout's) is not
// reported. index is the repository's index file.
func flaggedChangedSince(root, index string, after Hidden, began time.Time) ([]HiddenPath, error) {
	var out []HiddenPath
	var errs error
	for _, p := range after.Paths {
		f := filepath.Join(root, filepath.FromSlash(p))
		_, changed, err := fileTimes(f)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrPermission):
			// No file there for git to take for unchanged (a sparse
			// checkout's), or none it can read either.
		case err != nil:
			errs = errors.Join(errs, fmt.Errorf("look at %s: %w", f, err))
		case !changed.Before(began):
			out = append(out, HiddenPath{Path: f, Kind: HiddenFlagged})
		}
	}
	if !after.Named() {
		_, changed, err := fileTimes(index)
		switch {
		case err != nil:
			errs = errors.Join(errs, fmt.Errorf("look at %s: %w", index, err))
		case !changed.Before(began):
			out = append(out, HiddenPath{Path: root, Kind: HiddenUnnamed})
		}
	}
	return out, errs
}

// sequencerStates are the directories of a git directory where git keeps
// an operation it paused, to go on with at the user's next --continue:
// a rebase's (its todo list runs each exec line with the shell), git
// am's, and a cherry-pick's or revert's.
var sequencerStates = []string{"rebase-merge", "rebase-apply", "sequencer"}

// IsSequencerState says whether p is the new name of a paused operation's
// state that Aftercare set aside (sequencersSince).
func IsSequencerState(p string) bool {
	name, _, ok := strings.Cut(filepath.Base(p), setAsideInfix)
	return ok && slices.Contains(sequencerStates, name)
}

// maxSequencerEntries bounds the look through one paused operation's
// state (a rebase of many commits keeps a file for each in rebase-apply).
const maxSequencerEntries = 100_000

// sequencersSince lists the paused operations' states in the git
// directory dir that the run made or changed (the directory, or a file
// in it, changed at began or later): the user's next git rebase
// --continue would run what the box wrote in a todo list (exec lines)
// on the host. Aftercare sets them aside, as it does other git state the
// run planted. Those of each linked worktree's git directory in dir
// (worktrees/*) are listed too.
func sequencersSince(dir string, began time.Time) ([]string, error) {
	var out []string
	var errs error
	// A linked worktree's git directory (worktrees/NAME) keeps its own:
	// git rebase --continue there reads them.
	linked, err := readDirLent(filepath.Join(dir, "worktrees"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		errs = err
	}
	for _, d := range linked {
		if d.IsDir() { // not through a link
			states, err := sequencersIn(filepath.Join(dir, "worktrees", d.Name()), began)
			out = append(out, states...)
			errs = errors.Join(errs, err)
		}
	}
	states, err := sequencersIn(dir, began)
	return append(out, states...), errors.Join(errs, err)
}

// sequencersIn is sequencersSince for the git directory dir alone.
func sequencersIn(dir string, began time.Time) ([]string, error) {
	var out []string
	var errs error
	for _, name := range sequencerStates {
		p := filepath.Join(dir, name)
		changed, err := treeChangedSince(p, began, maxSequencerEntries)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = errors.Join(errs, err)
		case changed:
			out = append(out, p)
		}
	}
	return out, errs
}

// treeChangedSince says whether p, or anything under it (through no
// link), changed at since or later, looking at no more than bound
// entries.
func treeChangedSince(p string, since time.Time, bound int) (bool, error) {
	changed, seen := false, 0
	err := filepath.WalkDir(p, func(q string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if seen++; seen > bound {
			return fmt.Errorf("%s: more than %d entries to look through", p, bound)
		}
		_, c, err := fileTimes(q)
		if err != nil {
			return err
		}
		if !c.Before(since) {
			changed = true
			return filepath.SkipAll
		}
		return nil
	})
	return changed, err
}

// maxRecheckBytes bounds the bytes forgedSince reads, in all.
const maxRecheckBytes = 64 << 20

// forgedSince lists the files of the repository whose worktree is root
// and git directory dir (object names of hashSize bytes) whose index
// entries r kept (recorded as changed since the run began) and whose
// status matches the entry's, so that git takes them for unchanged
// without reading them, but whose content is not the blob the entry
// names: the run changed the file and rewrote its entry's status to
// hide it (HiddenForged). A file git would read anyway (its size or
// modification time differs from the entry's), or would not find (gone,
// or reached through a link), is git's to report. Where the repository
// has attributes (a .gitattributes, info/attributes), whose filters and
// conversions cordon does not evaluate, a difference is reported as not
// checked (HiddenUnverified), as is the worktree when r kept too many
// entries or they hold too many bytes to read. A CRLF file whose blob
// is the file with LF line ends (core.autocrlf) is no difference.
func forgedSince(root, dir string, r *recordedSince, hashSize int) ([]HiddenPath, error) {
	if r == nil {
		return nil, nil
	}
	common := dir
	if c, ok := commonDir(dir); ok {
		common = c
	}
	_, err := os.Lstat(filepath.Join(common, "info", "attributes"))
	attributes := r.attributes || err == nil
	rootFd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootFd)
	var out []HiddenPath
	var errs error
	budget, over := int64(maxRecheckBytes), r.over
	for _, e := range r.entries {
		p := filepath.Join(root, filepath.FromSlash(e.path))
		v, err := recheck(rootFd, e, hashSize, r.since, &budget)
		switch {
		case err != nil:
			errs = errors.Join(errs, fmt.Errorf("read %s again: %w", p, err))
		case v == recheckOver:
			over = true
		case v == recheckDiffers && attributes:
			out = append(out, HiddenPath{Path: p, Kind: HiddenUnverified})
		case v == recheckDiffers:
			out = append(out, HiddenPath{Path: p, Kind: HiddenForged})
		}
	}
	if over {
		out = append(out, HiddenPath{Path: root, Kind: HiddenUnverified})
	}
	return out, errs
}

// recheckVerdict is what recheck finds of a file.
type recheckVerdict int

const (
	// recheckSame: the file is the blob its entry names, or git reads
	// it anyway (its status is not the entry's), or cannot find it.
	recheckSame recheckVerdict = iota
	// recheckDiffers: git takes the file for unchanged, and it is not the
	// blob its entry names.
	recheckDiffers
	// recheckOver: the file is more than the bytes left to read.
	recheckOver
)

// recheck reads again the file of the index entry e, in the worktree
// opened as rootFd (through no link), taking what it reads from budget;
// a file whose change time is before since the run did not change.
func recheck(rootFd int, e indexEntry, hashSize int, since time.Time, budget *int64) (recheckVerdict, error) {
	regularFile := e.mode&unix.S_IFMT == unix.S_IFREG
	if !regularFile && e.mode&unix.S_IFMT != unix.S_IFLNK {
		return recheckSame, nil
	}
	fd, err := openEntry(rootFd, e.path, regularFile)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
		return recheckSame, nil // git finds no file there, or not this one
	case err != nil:
		return recheckSame, err
	}
	f := os.NewFile(uintptr(fd), e.path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return recheckSame, err
	}
	if uint32(st.Mode)&unix.S_IFMT != e.mode&unix.S_IFMT || uint32(st.Size) != e.size || uint32(st.Mtim.Sec) != e.mtime {
		return recheckSame, nil // git reads it itself
	}
	if time.Unix(st.Ctim.Unix()).Before(since) {
		return recheckSame, nil // as it was before the run
	}
	if st.Size > *budget {
		return recheckOver, nil
	}
	*budget -= st.Size
	var data []byte
	if regularFile {
		data, err = io.ReadAll(io.LimitReader(f, st.Size+1))
	} else {
		data, err = readEntryLink(fd, st.Size)
	}
	if err != nil {
		return recheckSame, err
	}
	if blobIs(data, e.oid, hashSize) || regularFile && bytes.Contains(data, []byte("\r\n")) && blobIs(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), e.oid, hashSize) {
		return recheckSame, nil
	}
	return recheckDiffers, nil
}

// blobIs says whether data, as a git blob, has the object name oid
// (SHA-1 for hashSize 20, SHA-256 for 32).
func blobIs(data, oid []byte, hashSize int) bool {
	h := sha1.New()
	if hashSize == sha256.Size {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return bytes.Equal(h.Sum(nil), oid)
}
