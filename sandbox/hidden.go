package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
// that it did not when the run was built (before), and its exclude file,
// when the run made or changed it (its change time is began or later).
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
	}
	common := dir
	if c, ok := commonDir(dir); ok {
		common = c
	}
	exclude := filepath.Join(common, "info", "exclude")
	_, changed, err := fileTimes(exclude)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		// None, or under a directory the box made unsearchable, where git
		// cannot read it either.
	case err != nil:
		return out, fmt.Errorf("look at %s: %w", exclude, err)
	case !changed.Before(began):
		out = append(out, HiddenPath{Path: exclude, Kind: HiddenExcluded})
	}
	return out, nil
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
// run planted.
func sequencersSince(dir string, began time.Time) ([]string, error) {
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
