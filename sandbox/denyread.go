package sandbox

import (
	"os"
	"path/filepath"

	"github.com/cordon-sandbox/cordon/policy"
)

// MissingDenyRead lists the deny_read entries of p that lie in the
// workspace ws (a real path; a relative entry is in it) and do not exist,
// so that nothing is hidden there. One may not have been made yet (a .env
// a later step writes), or may have been moved, with a directory above it,
// by a box of a cordon that did not yet pin those directories: the file
// then lies under another name, which no entry hides. The caller tells
// the user, naming each.
func MissingDenyRead(p *policy.Policy, ws string) []string {
	if p == nil || ws == "" {
		return nil
	}
	var out []string
	for _, d := range p.DenyRead {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws, d)
		}
		d = filepath.Clean(d)
		if !Within(d, ws) && !Within(resolvedPrefix(d), ws) {
			continue
		}
		if _, err := os.Lstat(d); err == nil {
			continue
		}
		out = append(out, d)
	}
	return out
}
