//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// pinsAbove returns the directories to pin (bind onto themselves, which
// makes each a mount point the box can neither rename nor remove) above
// each of paths (absolute): every existing directory above one that the
// box could rename, lying in a read-write bind (the workspace, a
// read-write allow_path) and no bind's root. A mount over a path (a deny_read mask, a credential's
// file shown masked, one of cordon's own directories hidden) moves with
// a directory above it that is renamed, so a box that renamed one away
// would find the real file under the new name at the next run, which
// hides only the old one; pinned, the rename fails with EBUSY. A path
// outside every read-write bind needs no pin: the box cannot rename
// anything there. Paths are taken with their links resolved where they
// resolve; pins already listed (in pins) are not repeated.
func pinsAbove(pins, paths []string, binds []bind) []string {
	for _, p := range paths {
		dir := filepath.Dir(filepath.Clean(p))
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
		// Every ancestor: a read-only bind nested in a read-write one moves
		// with a directory above it too.
		for d := dir; d != "/"; d = filepath.Dir(d) {
			if !movable(d, binds) {
				continue
			}
			if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains(pins, d) {
				pins = append(pins, d)
			}
		}
	}
	return pins
}

// movable says whether the box may rename or remove q: it lies below the
// root of a bind (a root is a mount point), and the innermost bind
// holding it is read-write.
func movable(q string, binds []bind) bool {
	var in *bind
	for i, b := range binds {
		if q == b.path {
			return false
		}
		if sandbox.Within(q, b.path) && (in == nil || depth(b.path) > depth(in.path)) {
			in = &binds[i]
		}
	}
	return in != nil && in.write
}

// checkDenyReadLinks refuses a deny_read entry, or a file shown in the box
// (files, Spec.Files: a credential's files: entry shown masked), with a
// symbolic link on the way to it that the box could replace (one in a
// read-write bind): a mount lands on the link's target, and the next run
// would mount over whatever the link then pointed to, leaving the file
// it points to now readable. Relative deny_read entries are in the
// workspace ws.
func checkDenyReadLinks(p *policy.Policy, ws string, files map[string][]byte, binds []bind, names *sandbox.Resolver) error {
	replaceable := func(q string) bool { return movable(q, binds) }
	for _, d := range p.DenyRead {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws, d)
		}
		if _, err := resolveSource(filepath.Clean(d), replaceable, names); err != nil {
			return fmt.Errorf("deny_read %s: %w", d, err)
		}
	}
	for dst := range files {
		if !filepath.IsAbs(dst) {
			continue // refused as it is placed
		}
		if _, err := resolveSource(filepath.Clean(dst), replaceable, names); err != nil {
			return fmt.Errorf("file shown in the box (a credential's files:) %s: %w", dst, err)
		}
	}
	return nil
}
