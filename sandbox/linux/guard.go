//go:build linux

package linux

import (
	"github.com/cordon-sandbox/cordon/sandbox"
)

// guardArgs renders the guard of the workspace (sandbox.GuardWorkspace:
// its git repository, the read_only paths and cordon's own files) as bwrap
// options: a pinned directory is bound onto itself, a mount point the box
// can neither rename nor remove; a read-only path is bound onto itself
// read-only; a missing file is the empty regular file empty bound
// read-only (not /dev/null: the box's mounts are nodev, so reading a
// device there fails, and git fails on a config it cannot read), a missing
// directory an empty read-only tmpfs. It returns the guarded paths too:
// what a mount cannot do (sandbox.Unmade, sandbox.Checkouts) is done after
// the run, by sandbox.Aftercare.
func guardArgs(g sandbox.GuardSpec, empty string) (args []string, paths []sandbox.GuardedPath, err error) {
	paths, err = sandbox.GuardWorkspace(g)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		switch p.Guard {
		case sandbox.Pinned:
			args = append(args, "--bind", p.Path, p.Path)
		case sandbox.ReadOnly:
			args = append(args, "--ro-bind", p.Path, p.Path)
		case sandbox.AbsentFile:
			args = append(args, "--ro-bind", empty, p.Path)
		case sandbox.AbsentDir:
			args = append(args, "--perms", "0555", "--tmpfs", p.Path, "--remount-ro", p.Path)
		}
	}
	return args, paths, nil
}
