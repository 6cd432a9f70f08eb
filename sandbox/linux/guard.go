//go:build linux

package linux

import (
	"os"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// guardArgs renders the guard of the workspace (sandbox.GuardWorkspace:
// its git repository, the read_only paths and cordon's own files) as bwrap
// options: a pinned directory is bound onto itself, a mount point the box
// can neither rename nor remove; a read-only path is bound onto itself
// read-only; a missing file is an empty read-only one, a missing
// directory an empty read-only tmpfs. A mount cannot forbid making a
// file (sandbox.Unmade): those are returned, to be removed after the run
// if the command made them (removeUnmade).
func guardArgs(g sandbox.GuardSpec) (args, unmade []string, err error) {
	paths, err := sandbox.GuardWorkspace(g)
	if err != nil {
		return nil, nil, err
	}
	var a []string
	for _, p := range paths {
		switch p.Guard {
		case sandbox.Pinned:
			a = append(a, "--bind", p.Path, p.Path)
		case sandbox.ReadOnly:
			a = append(a, "--ro-bind", p.Path, p.Path)
		case sandbox.AbsentFile:
			a = append(a, "--ro-bind", os.DevNull, p.Path)
		case sandbox.AbsentDir:
			a = append(a, "--perms", "0555", "--tmpfs", p.Path, "--remount-ro", p.Path)
		case sandbox.Unmade:
			unmade = append(unmade, p.Path)
		}
	}
	return a, unmade, nil
}

// removeUnmade removes those of paths that exist now (whatever the
// command made there: a file, a link, a directory), and returns them: the
// command made them, since each was missing when its run was built, and
// the run, all of its processes, has ended.
func removeUnmade(paths []string) []string {
	var removed []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil && os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}
