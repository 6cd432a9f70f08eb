//go:build linux

package linux

import (
	"os"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// guardArgs renders the guard of the workspace (sandbox.GuardWorkspace:
// its git repository and the read_only paths) as bwrap options: a pinned
// directory is bound onto itself, a mount point the box can neither
// rename nor remove; a read-only path is bound onto itself read-only; a
// missing config is an empty read-only file, a missing hooks directory
// an empty read-only tmpfs.
func guardArgs(ws string, readOnly []string) ([]string, error) {
	paths, err := sandbox.GuardWorkspace(ws, readOnly)
	if err != nil {
		return nil, err
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
		}
	}
	return a, nil
}
