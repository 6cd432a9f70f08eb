package sandbox

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A git repository holds commands that git runs on the host: its config
// (core.fsmonitor, core.hooksPath, aliases, filter and diff drivers) and
// its hooks. A box that could write them would run code outside the box
// the next time anyone ran git in the workspace: the user, an editor, or
// a shell prompt that shows the branch, which runs `git status` on every
// cd. So backends guard the workspace's repository: its config files and
// hooks are read-only, and each git directory is pinned (neither renamed
// nor removed, so the box cannot swap in one of its own). Objects, refs
// and the index stay writable: git add, commit, branch and merge work.

// Bounds on the search for submodules' git directories under modules/.
const (
	maxRepoModuleDepth   = 8
	maxRepoModuleEntries = 10_000
)

// RepoGuard says how a backend guards one path of the repository.
type RepoGuard int

const (
	// Pinned is a git directory: it stays where it is, while what is in it
	// stays writable (but for the read-only paths listed after it).
	Pinned RepoGuard = iota
	// ReadOnly is an existing config, hooks directory or .git file, with
	// everything under it.
	ReadOnly
	// AbsentFile is a config that does not exist: it is to read as
	// empty, and the box must not create it.
	AbsentFile
	// AbsentDir is a hooks directory that does not exist: it is to be an
	// empty directory the box cannot write.
	AbsentDir
)

// RepoPath is one guarded path of the workspace's repository.
type RepoPath struct {
	Path  string
	Guard RepoGuard
	// Dir says the path is (or, absent, is to be) a directory.
	Dir bool
}

// GuardRepo lists how to guard the git repository at the workspace root
// ws (a real path), in an order in which bind mounts can be made: a git
// directory before the paths inside it. A workspace that is no repository
// gives nothing. A .git file (a linked worktree, a submodule's checkout)
// is read-only, so it keeps naming its git directory, which is guarded
// too when it is inside the workspace. A guarded path that is a symbolic
// link is refused: a guard would land on the link's target, and the link
// itself could be replaced.
func GuardRepo(ws string) ([]RepoPath, error) {
	dotgit := filepath.Join(ws, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return nil, nil
	}
	g := repoWalk{entries: maxRepoModuleEntries}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, linkRefusal(dotgit)
	case fi.IsDir():
		return g.dir(dotgit, 0)
	case fi.Mode().IsRegular():
		out := []RepoPath{{Path: dotgit, Guard: ReadOnly}}
		dir, ok := gitdirOf(dotgit)
		if !ok || !pathWithin(dir, ws) {
			return out, nil
		}
		more, err := g.dir(dir, 0)
		return append(out, more...), err
	}
	return nil, nil
}

// gitdirOf reads the git directory a .git file names ("gitdir: PATH",
// relative to the file's directory), resolved to its real path.
func gitdirOf(dotgit string) (string, bool) {
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return "", false
	}
	rest, ok := bytes.CutPrefix(b, []byte("gitdir:"))
	if !ok {
		return "", false
	}
	p := string(bytes.TrimSpace(rest))
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(dotgit), p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	return real, true
}

// pathWithin reports whether p is dir or lies under it (both clean).
func pathWithin(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// linkRefusal is the error for a guarded path that is a symbolic link.
func linkRefusal(p string) error {
	return fmt.Errorf("%s is a symbolic link: cordon keeps a repository's config and hooks read-only in the box, and cannot guard a link (the box could replace it); replace it with what it points to", p)
}

// repoWalk walks one repository's git directories within a bound.
type repoWalk struct {
	entries int // directory entries the modules search may still read
}

// dir guards the git directory dir and, under its modules/, the git
// directories of its submodules (depth counts the nesting).
func (g *repoWalk) dir(dir string, depth int) ([]RepoPath, error) {
	out := []RepoPath{{Path: dir, Guard: Pinned, Dir: true}}
	// config.worktree is read only when the (read-only) config turns
	// extensions.worktreeConfig on; one that does not exist needs nothing.
	// A missing config reads as empty to git.
	for _, name := range []string{"config", "config.worktree"} {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		switch {
		case err != nil && name == "config":
			out = append(out, RepoPath{Path: p, Guard: AbsentFile})
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkRefusal(p)
		default:
			out = append(out, RepoPath{Path: p, Guard: ReadOnly, Dir: fi.IsDir()})
		}
	}
	hooks := filepath.Join(dir, "hooks")
	fi, err := os.Lstat(hooks)
	switch {
	case err != nil:
		out = append(out, RepoPath{Path: hooks, Guard: AbsentDir, Dir: true})
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, linkRefusal(hooks)
	default:
		out = append(out, RepoPath{Path: hooks, Guard: ReadOnly, Dir: fi.IsDir()})
	}
	worktrees, _ := os.ReadDir(filepath.Join(dir, "worktrees"))
	for _, w := range worktrees {
		p := filepath.Join(dir, "worktrees", w.Name(), "config.worktree")
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil, linkRefusal(p)
			}
			out = append(out, RepoPath{Path: p, Guard: ReadOnly})
		}
	}
	more, err := g.modules(filepath.Join(dir, "modules"), depth)
	return append(out, more...), err
}

// modules finds the submodules' git directories under d (a submodule's
// name may hold slashes, so they can sit at any depth): a directory with
// a HEAD file is one.
func (g *repoWalk) modules(d string, depth int) ([]RepoPath, error) {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil, nil
	}
	var out []RepoPath
	for _, e := range entries {
		if g.entries--; g.entries < 0 || depth >= maxRepoModuleDepth {
			return nil, fmt.Errorf("the workspace's repository has too many submodules, or nested too deep, to guard (the bound is %d entries, %d levels under .git/modules)", maxRepoModuleEntries, maxRepoModuleDepth)
		}
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(d, e.Name())
		next := g.modules
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			next = g.dir
		}
		more, err := next(p, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}
