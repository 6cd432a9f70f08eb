package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clockSlack is how far before a run's start a file the run made may say
// it was born, where the clock file times come from cannot be read
// (fileClockNow): they come from the kernel's coarse clock.
const clockSlack = 50 * time.Millisecond

// nestedChanges walks root (a Nested guard's) for the repositories nested
// in it, below its own .git, that the run made or whose config or hooks it
// changed: each .git (directory, file or link) born at or after since, and
// each older one whose config, config.worktree, commondir or hooks (the
// directory or a file in it) changed since; and, of one that did not,
// each git directory of a submodule or linked worktree in it that
// became one or changed since (innerGitDirsChangedSince). Git run there
// on the host (a prompt that shows the branch does it at a cd, an editor
// that opens the repositories it finds) would run what the box wrote. A
// directory that
// git itself takes for a git directory (gitDirLayout: a bare repository's
// layout, which git's discovery finds in any directory above where it
// runs, before the workspace's own .git) counts when it changed since
// (gitDirChangedSince): what is returned for it is its HEAD, which git cannot do
// without; one that did not (a separate git directory a .git file names,
// the workspace's own among them, or a bare repository) is looked through
// as a .git is (gitPipes). Either is walked further, as any directory, but
// for the objects of one an earlier walk left in place (bound.Known) that
// did not change. It does not descend
// into .git directories, and leaves out
// skip (the guarded ones, and the .git.cordon-set-aside-* that cordon
// set aside in this run; one the box named so is walked like any other
// directory). It also returns the named pipes (FIFOs) made, renamed or
// written to since (their change time, which a rename sets too): git
// opens a .gitignore without waiting for it to be a regular file, and
// one that was a pipe held the host's git status there (and a shell
// prompt that shows the branch, at every cd) for ever, waiting for a
// writer. And it returns the pipes, sockets and links to neither a file
// nor a directory in the .git directories it passes, the workspace's own
// included, where git reads and writes its files (gitPipes). And
// it returns what the run opened to other local users' writes in each
// directory it reads, and in those gitPipes reads (openedSince). And it
// returns each .gitignore (not a directory) made or changed since: git
// status lists no untracked file one names, and one can name itself
// (*), so that neither it nor what is beside it shows (see walkFound).
// It keeps within bound.
func nestedChanges(root string, since time.Time, skip map[string]bool, bound walkBound) (walkFound, error) {
	var (
		mu      sync.Mutex
		errs    error
		pending sync.WaitGroup
		read    atomic.Int64
		over    sync.Once
		w       walkFound
	)
	// addIfChanged adds p to list if it was made or changed since.
	addIfChanged := func(list *[]string, p string) {
		_, changed, err := fileTimes(p)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = errors.Join(errs, err)
		case !changed.Before(since):
			*list = append(*list, p)
		}
	}
	// Directories below the root are read by a few workers at once: the
	// walk is system calls, and the cores are otherwise idle once the run
	// has ended. The workers start with the first directory queued: a
	// workspace with none below its root costs no thread.
	dirs := make(chan string, 1024)
	var startWorkers sync.Once
	var visit func(dir string)
	queue := func(dir string) {
		pending.Add(1)
		startWorkers.Do(func() {
			for range max(2, runtime.GOMAXPROCS(0)) {
				go func() {
					for dir := range dirs {
						visit(dir)
					}
				}()
			}
		})
		select {
		case dirs <- dir:
		default:
			visit(dir) // the queue is full: this worker reads it itself
		}
	}
	visit = func(dir string) {
		defer pending.Done()
		// readDir opens the directory itself: os.Open offers it to the
		// poller, two system calls more per directory here. An error may
		// be a directory the box made that no one can read, to hide what
		// is in it until someone opens it up.
		entries, open, err := readDir(dir, since)
		mu.Lock()
		errs = errors.Join(errs, err)
		mu.Unlock()
		if bound.MaxEntries > 0 && read.Add(int64(len(entries))+1) > int64(bound.MaxEntries) {
			over.Do(func() {
				mu.Lock()
				errs = errors.Join(errs, fmt.Errorf("%s: more than %d entries: the rest was not looked through for what the run left there (named pipes, repositories, what it opened to other local users)", root, bound.MaxEntries))
				mu.Unlock()
			})
			return
		}
		// layout says dir is one git takes for a git directory: it is
		// walked all the same (but for its objects, when it is kept):
		// git run in a directory below it looks for that directory's
		// .git first, and a box that made a directory look so (HEAD,
		// objects and refs, made in an earlier run or in a directory
		// the run pins) hid the repository it planted below from a walk
		// that stopped there (red team, round 8).
		layout := gitDirLayout(entries)
		// kept says dir is a git directory by its layout that an earlier
		// walk left in place (bound.Known) and this run did not change:
		// its objects are git's, not walked. Any other's are walked.
		kept := false
		if layout && bound.listOnly {
			mu.Lock()
			w.gitDirs = append(w.gitDirs, dir)
			mu.Unlock()
		}
		if layout && !bound.listOnly {
			// Pinned or not (the workspace's own git directory by
			// another name, one above a guarded path, which the box can
			// make look like one), below another's modules/ or worktrees/
			// or not: HEAD's birth does not count (gitDirBornSince).
			changed, err := gitDirChangedSince(dir, since)
			var fifos, open []string
			if err == nil && !changed {
				// A git directory by another name (one a .git file
				// names, the workspace's own among them, which is
				// guarded; a bare repository): looked through as a .git
				// is.
				fifos, open, err = gitPipes(dir, since)
			}
			mu.Lock()
			switch {
			case changed:
				w.found = append(w.found, filepath.Join(dir, "HEAD"))
			default:
				w.gitFifos = append(w.gitFifos, fifos...)
				w.opened = append(w.opened, open...)
				w.gitDirs = append(w.gitDirs, dir)
			}
			errs = errors.Join(errs, err)
			mu.Unlock()
			// One whose HEAD cordon set aside before is a decoy's, which
			// the record names all the same (a set-aside git directory
			// the user renames back is theirs); its set-aside HEAD stays,
			// read-only, for as long as it is set aside.
			kept = err == nil && !changed && bound.Known != nil && bound.Known(dir) &&
				!slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.HasPrefix(e.Name(), "HEAD.cordon-set-aside-") })
		}
		mu.Lock()
		w.opened = append(w.opened, open...)
		mu.Unlock()
		for _, d := range entries {
			p := filepath.Join(dir, d.Name())
			switch {
			case kept && d.IsDir() && d.Name() == "objects":
				// its object store, looked through by gitPipes
			case bound.listOnly && d.Name() != ".git":
				if d.IsDir() && !bound.Roots[p] {
					queue(p)
				}
			case d.Name() == ".git":
				if dir == root {
					// The workspace's own (pinned): its config and
					// hooks are guarded, but not what else git reads.
					if d.IsDir() && !bound.listOnly {
						fifos, open, err := gitPipes(p, since)
						mu.Lock()
						w.gitFifos = append(w.gitFifos, fifos...)
						w.opened = append(w.opened, open...)
						errs = errors.Join(errs, err)
						mu.Unlock()
					}
					continue
				}
				if skip[p] {
					continue // a guarded checkout's
				}
				var changed bool
				var err error
				if !bound.listOnly {
					changed, err = repoChangedSince(p, d, since)
				}
				var inner, left, fifos, open []string
				if err == nil && !changed && d.IsDir() {
					inner, left, err = innerGitDirsChangedSince(p, since, skip)
					if !bound.listOnly {
						var err2 error
						fifos, open, err2 = gitPipes(p, since)
						err = errors.Join(err, err2)
					}
				}
				mu.Lock()
				switch {
				case changed:
					w.found = append(w.found, p)
				default:
					w.found = append(w.found, inner...)
					w.innerLeft = append(w.innerLeft, left...)
					w.gitFifos = append(w.gitFifos, fifos...)
					w.opened = append(w.opened, open...)
					if d.IsDir() {
						w.gitDirs = append(w.gitDirs, p)
					}
				}
				errs = errors.Join(errs, err)
				mu.Unlock()
			case d.Type()&fs.ModeNamedPipe != 0:
				addIfChanged(&w.pipes, p)
			case d.Name() == ".gitignore" && !d.IsDir():
				addIfChanged(&w.ignores, p)
			case !d.IsDir():
			case strings.HasPrefix(d.Name(), ".git.cordon-set-aside-") && skip[p]:
				// a git directory set aside in this run
			case bound.Roots[p]:
				// walked from its own root
			default:
				queue(p)
			}
		}
	}
	pending.Add(1)
	visit(root)
	pending.Wait()
	close(dirs)
	// What lies in a git directory by another name is looked through as
	// a git directory's (gitPipes) and walked too: a pipe there is
	// removed, as in a git directory, not set aside.
	inGitDirs := make(map[string]bool, len(w.gitFifos))
	for _, p := range w.gitFifos {
		inGitDirs[p] = true
	}
	w.pipes = slices.DeleteFunc(w.pipes, func(p string) bool { return inGitDirs[p] })
	for _, l := range []*[]string{&w.found, &w.pipes, &w.gitFifos, &w.opened, &w.ignores, &w.gitDirs, &w.innerLeft} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return w, errs
}

// bornSince says whether any of names in dir ("" for dir itself) was
// born at or after since.
func bornSince(dir string, since time.Time, names ...string) (bool, error) {
	return timeSince(dir, since, true, names)
}

// changedSince says whether any of names in dir changed (its status) at or
// after since.
func changedSince(dir string, since time.Time, names ...string) (bool, error) {
	return timeSince(dir, since, false, names)
}

// timeSince is bornSince, or changedSince when born is false.
func timeSince(dir string, since time.Time, born bool, names []string) (bool, error) {
	for _, name := range names {
		b, c, err := fileTimes(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if !born {
			b = c
		}
		if !b.Before(since) {
			return true, nil
		}
	}
	return false, nil
}

// walkFound is what nestedChanges finds in a Nested workspace.
type walkFound struct {
	// found are the nested repositories (their .git, or a git directory
	// by its layout's HEAD) to set aside.
	found []string
	// pipes are the named pipes made, renamed or written to.
	pipes []string
	// gitFifos are the pipes, sockets and links in git directories.
	gitFifos []string
	// opened are what the run opened to other local users' writes.
	opened []string
	// ignores are the .gitignore files made or changed.
	ignores []string
	// gitDirs are the git directories of the nested repositories left in
	// place (neither made nor changed in their config or hooks), and of
	// the directories git takes for one by their layout, where a paused
	// operation's state may be (sequencersSince).
	gitDirs []string
	// innerLeft are the git directories of the submodules and linked
	// worktrees of those nested repositories, left in place
	// (innerGitDirsChangedSince).
	innerLeft []string
}

// walkBound is how far one walk of nestedChanges goes.
type walkBound struct {
	// Roots are the roots of every walk after the run: one below another
	// is walked from its own, not from that one.
	Roots map[string]bool
	// MaxEntries bounds the directories and entries the walk reads (each
	// directory counts once, and once more as an entry of the directory
	// above; one directory's entries may take it past the bound), 0 for
	// no bound. The git directories it looks through (gitPipes) each
	// have their own bound, maxGitPipeEntries.
	MaxEntries int
	// listOnly has the walk list the git directories there (gitDirs,
	// innerLeft: all of them, as if none was made or changed) and look at
	// nothing else (rememberGitDirs).
	listOnly bool
	// Known says whether a directory is one an earlier walk left in
	// place as a git directory (the record of gitdirs.go); nil for none.
	Known func(dir string) bool
}

// maxWatchedEntries bounds the walk of a read-write allow_path (Watched),
// often a cache of many directories, and what the walk costs goes by
// entries: Go's build cache here, 110,000 entries in 303 directories,
// took 130 to 165 ms with no directory changed, and 0.6 to 0.85 s with
// every one changed (a status call per entry of a changed directory), so
// 200,000 holds a walk to some 1.5 s at worst, and takes in such a cache.
const maxWatchedEntries = 200_000

// repoChangedSince says whether the .git at p (d its entry) was born at
// or after since, or its config or hooks changed since.
func repoChangedSince(p string, d fs.DirEntry, since time.Time) (bool, error) {
	born, changed, err := fileTimes(p)
	if err != nil {
		return false, err
	}
	if !born.Before(since) {
		return true, nil
	}
	if !d.IsDir() {
		return !changed.Before(since), nil // a .git file names its git directory
	}
	return configChangedSince(p, since)
}

// gitDirLayout says whether a directory with entries is one git takes for
// a git directory (setup.c's is_git_directory): a HEAD, and objects/ and
// refs/, or a commondir naming where they are. Names are enough: git
// follows links, and one the box made to look so is as much its business.
func gitDirLayout(entries []fs.DirEntry) bool {
	var head, objects, refs, commondir bool
	for _, e := range entries {
		switch e.Name() {
		case "HEAD":
			head = true
		case "objects":
			objects = true
		case "refs":
			refs = true
		case "commondir":
			commondir = true
		}
	}
	return head && (commondir || objects && refs)
}

// commonChangedSince says whether the directory dir's commondir names
// (where git reads the config of a linked worktree's or a submodule's git
// directory from) was born, or its config or hooks changed, at or after
// since; false when dir has no commondir.
func commonChangedSince(dir string, since time.Time) (bool, error) {
	p := filepath.Join(dir, "commondir")
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return false, nil // none, or no file git reads (a pipe is a trap: gitPipes)
	}
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	f.Close()
	if err != nil {
		return false, err
	}
	common := strings.TrimRight(string(b), "\r\n")
	if !filepath.IsAbs(common) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		common = filepath.Join(dir, common)
	}
	// As git finds it: links followed (a link the box made to old
	// pieces, with a config of its own beside them: the fifth look).
	if real, err := filepath.EvalSymlinks(common); err == nil {
		common = real
	}
	if born, err := bornSince(common, since, ""); err != nil || born {
		return born, err
	}
	return changedSince(common, since, "config", "hooks")
}

// gitDirChangedSince says whether dir, a directory git takes for a git
// directory, became one since (gitDirBornSince), or its config, hooks or
// commondir changed since, or the directory its commondir names
// (commonChangedSince).
func gitDirChangedSince(dir string, since time.Time) (bool, error) {
	if born, err := gitDirBornSince(dir, since); err != nil || born {
		return born, err
	}
	if changed, err := configChangedSince(dir, since); err != nil || changed {
		return changed, err
	}
	return commonChangedSince(dir, since)
}

// gitDirBornSince says whether the git directory dir, or its objects,
// commondir or (with no commondir) refs, was born at or after since. Not
// its HEAD, which git makes anew at every checkout (a nested repository's
// linked worktree or submodule, a separate git directory, were set aside
// for a branch switched to: the round's fifth look); a directory that
// became a git directory by a new HEAD is one the record does not name,
// changed in the run (movedInto). Nor a linked worktree's own refs,
// which git makes at a bisect.
func gitDirBornSince(dir string, since time.Time) (bool, error) {
	names := []string{"", "objects", "commondir"}
	if _, err := os.Lstat(filepath.Join(dir, "commondir")); err != nil {
		names = append(names, "refs")
	}
	return bornSince(dir, since, names...)
}

// configChangedSince says whether the config, config.worktree, commondir
// or hooks (the directory or a file in it) of the git directory p changed
// since, or what its config names for git to run or read: a hooks
// directory core.hooksPath names and the hooks in it, an include, a
// program (a file made since counts).
func configChangedSince(p string, since time.Time) (bool, error) {
	check := []string{"config", "config.worktree", "commondir", "hooks"}
	for i := range check {
		check[i] = filepath.Join(p, check[i])
	}
	// What its config names for git to run or read (a hooks directory
	// core.hooksPath names, includes, programs), as for the workspace's
	// own repository (configured), wherever it is.
	named, err := (&repoWalk{top: filepath.Dir(p)}).configured(p, filepath.Dir(p))
	if err != nil {
		return false, err
	}
	for _, g := range named {
		check = append(check, g.Path)
	}
	for _, d := range slices.Clone(check) {
		if entries, err := readDirLent(d); err == nil { // a hooks directory
			for _, e := range entries {
				check = append(check, filepath.Join(d, e.Name()))
			}
		}
	}
	for _, f := range check {
		_, changed, err := fileTimes(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if !changed.Before(since) {
			return true, nil
		}
	}
	return false, nil
}

// innerGitDirsChangedSince lists the git directories inside the git
// directory dir that git uses from elsewhere, but for skip, that became
// one since or whose config or hooks changed since (gitDirChangedSince):
// each linked worktree's (worktrees/NAME), which that worktree's .git
// file names, and each submodule's (a directory under modules/ holding a
// HEAD, at any depth, as a submodule's name may hold slashes; and those
// inside it in turn), which its checkout's .git file names, and which
// git submodule update takes up again for a checkout it makes. The walk
// of nested repositories does not enter git directories, so these went
// unseen: the box wrote a core.fsmonitor into a nested repository's
// submodule config, and the host's git status there ran it as it
// recursed into the checkout; and it made a submodule's git directory
// of its own under the workspace's .git/modules, registered in the
// index with no checkout, whose hooks and config the user's next git
// submodule update ran. A worktree outside the workspace whose directory
// here is gone (removed by hand, or pruned while its disk was away)
// still names it, and one the box made under that name would have git
// run there take the box's config. A worktree or a submodule the box
// adds in the workspace has its checkout's .git set aside too (Nested,
// Checkouts). Those of the workspace's own repository present when the
// run began are guarded, and pinned.
//
// It returns, too, those it left: neither made nor changed since.
func innerGitDirsChangedSince(dir string, since time.Time, skip map[string]bool) (found, left []string, err error) {
	dirs, err := innerGitDirs(dir)
	for _, d := range dirs {
		if skip[d] {
			continue
		}
		changed, err2 := gitDirChangedSince(d, since)
		switch {
		case err2 != nil:
			err = errors.Join(err, err2)
		case changed:
			found = append(found, d)
		default:
			left = append(left, d)
		}
	}
	return found, left, err
}

// innerGitDirs lists the linked worktrees' and the submodules' git
// directories inside the git directory dir (see
// innerGitDirsChangedSince), within the bounds of the search for
// submodules' git directories when a run is built.
func innerGitDirs(dir string) ([]string, error) {
	var out []string
	entries := maxRepoModuleEntries
	list := func(d string) ([]fs.DirEntry, error) {
		es, err := readDirLent(d)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil
		}
		if entries -= len(es); entries < 0 {
			return nil, fmt.Errorf("%s: more than %d entries to look through for the git directories of submodules and worktrees", dir, maxRepoModuleEntries)
		}
		return es, err
	}
	var gitDir, modules func(d string, depth int) error
	gitDir = func(d string, depth int) error {
		worktrees, err := list(filepath.Join(d, "worktrees"))
		for _, w := range worktrees {
			out = append(out, filepath.Join(d, "worktrees", w.Name()))
		}
		return errors.Join(err, modules(filepath.Join(d, "modules"), depth))
	}
	modules = func(d string, depth int) error {
		if depth >= maxRepoModuleDepth {
			return fmt.Errorf("%s: submodules nested more than %d levels deep", dir, maxRepoModuleDepth)
		}
		es, err := list(d)
		for _, e := range es {
			p := filepath.Join(d, e.Name())
			if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
				continue // git follows a link, and so does this
			}
			next := modules
			if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
				out = append(out, p)
				next = gitDir
			}
			if err2 := next(p, depth+1); err2 != nil {
				return errors.Join(err, err2)
			}
		}
		return err
	}
	return out, gitDir(dir, 0)
}

// maxGitPipeEntries bounds the look through one git directory for pipes
// (its refs, their logs, its submodules' git directories: a repository
// with many branches fetched has a log for each).
const maxGitPipeEntries = 100_000

// gitPipes returns what the run made, renamed or wrote to (its change
// time is since or later) in the git directory dir, where git reads and
// writes its files, and that holds git for ever, has it write where it
// should not, or is of no use to it: a named pipe (FIFO), which git opens
// and waits on for a writer (or, to append to it, a reader); a unix
// socket; and a symbolic link (but for a HEAD as git makes one,
// symbolicHead), which git follows when it writes: a ref's log
// (logs/HEAD, appended to at every commit and checkout, with the box's
// branch names in it) or COMMIT_EDITMSG (replaced at every commit) that
// was a link to a file of the host's (a shell's rc file) had the host's
// git write there, and a link to a directory had it write its files in
// the host's; a link to a pipe elsewhere, or to nothing yet (where
// another local user may make one later), held it. HEAD, index,
// packed-refs, a ref or a pack index so made held the host's git (a plain
// git status, a shell prompt at every cd, git branch); a loose object,
// every git command that read it (git log); a ref's log (logs/HEAD), git
// commit; a rebase's state (rebase-merge/head-name), git status; a
// submodule's git directory (modules/NAME/index), git status in the
// superproject. Git makes none of these there, so what is found is
// removed, not set aside: under refs/ a renamed pipe would still be read
// as a ref. The whole git directory is looked through, but for its
// object stores' loose objects (objectStore), and the stores of large
// files git itself does not read (gitLargeStores). It also returns what the
// run opened to other local users' writes in the directories it reads
// (openedSince): a ref, or a directory of loose objects, that another
// user could write.
func gitPipes(dir string, since time.Time) (out, opened []string, err error) {
	entries := maxGitPipeEntries
	var look func(d string) error
	look = func(d string) error {
		es, open, err := readDir(d, since)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if entries -= len(es); entries < 0 {
			return fmt.Errorf("%s: more than %d entries to look through for named pipes", dir, maxGitPipeEntries)
		}
		opened = append(opened, open...)
		// A git directory's own (modules/NAME's too) holds a HEAD.
		gitDir := slices.ContainsFunc(es, func(e fs.DirEntry) bool { return e.Name() == "HEAD" })
		for _, e := range es {
			p := filepath.Join(d, e.Name())
			switch {
			case gitTrap(p, e.Type()):
				_, changed, err2 := fileTimes(p)
				switch {
				case err2 != nil:
					err = errors.Join(err, err2)
				case !changed.Before(since):
					out = append(out, p)
				}
			case !e.IsDir():
			case gitDir && gitLargeStores[e.Name()]:
			case gitDir && e.Name() == "objects":
				dirs, traps, open, err2 := objectStore(p, since)
				out = append(out, traps...)
				opened = append(opened, open...)
				err = errors.Join(err, err2)
				for _, d := range dirs {
					err = errors.Join(err, look(d))
				}
			default:
				err = errors.Join(err, look(p))
			}
		}
		return err
	}
	return out, opened, look(dir)
}

// gitLargeStores are the directories of a git directory where git-lfs and
// git-annex keep large files, in a fan-out of up to 65,536 directories,
// which git itself never reads: gitPipes does not look through them.
var gitLargeStores = map[string]bool{"lfs": true, "annex": true}

// gitTrap says whether p, of type t, is what gitPipes looks for: a named
// pipe, a unix socket, or a symbolic link but for a HEAD as git makes
// one (symbolicHead).
func gitTrap(p string, t fs.FileMode) bool {
	switch {
	case t&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		return true
	case t&fs.ModeSymlink != 0:
		return !symbolicHead(p)
	}
	return false
}

// symbolicHead says whether the symbolic link p is a git directory's HEAD
// as git makes it with core.preferSymlinkRefs: a link to a ref of that
// git directory (refs/heads/main), which git reads and writes in place
// of the link, in the git directory, the only link git makes there.
func symbolicHead(p string) bool {
	to, err := os.Readlink(p)
	return err == nil && filepath.Base(p) == "HEAD" && strings.HasPrefix(to, "refs/") && filepath.Clean(to) == to
}

// objectStore returns the directories of the object store objects for
// gitPipes to look through: each but those of loose objects (two hex
// digits, objects/ab), and of those each an entry was added to, or
// renamed into, since (their change time says so), a status call each
// rather than a read of every object; as traps, the symbolic links made
// since under such a name, which git follows into a directory that may
// hold a pipe, and never makes; and, as opened, the directories born
// since with a bit of WriteClosed in their mode (see openedSince).
func objectStore(objects string, since time.Time) (dirs, traps, opened []string, err error) {
	// Each directory's status is taken relative to the store's, opened
	// once: for all 256, 0.7 ms here, where a path walk for each cost 1.0
	// (BenchmarkGitPipes).
	fd, err := openDirLent(objects)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, &fs.PathError{Op: "open", Path: objects, Err: err}
	}
	f := os.NewFile(uintptr(fd), objects)
	defer f.Close()
	es, err := f.ReadDir(-1)
	for _, e := range es {
		n := e.Name()
		loose := len(n) == 2 && strings.Trim(n, "0123456789abcdef") == ""
		if !e.IsDir() && (!loose || e.Type()&fs.ModeSymlink == 0) {
			continue
		}
		var st unix.Stat_t
		if err2 := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err2 != nil {
			err = errors.Join(err, &fs.PathError{Op: "fstatat", Path: filepath.Join(objects, n), Err: err2})
			continue
		}
		d := filepath.Join(objects, n)
		changed := !time.Unix(st.Ctim.Unix()).Before(since)
		switch {
		case !e.IsDir():
			if changed {
				traps = append(traps, d)
			}
			continue
		case !loose:
			dirs = append(dirs, d) // info/, pack/
		case changed:
			dirs = append(dirs, d)
		}
		if changed && fs.FileMode(st.Mode).Perm()&WriteClosed != 0 {
			// Made so in the run, or by the user's git before it (a
			// shared repository's) and given an object since: birth
			// tells.
			switch _, born, _, err2 := fileStatus(d); {
			case err2 != nil:
				err = errors.Join(err, err2)
			case !born.Before(since):
				opened = append(opened, d)
			}
		}
	}
	return dirs, traps, opened, err
}
