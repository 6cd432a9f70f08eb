package sandbox

import (
	"fmt"
	"path/filepath"
	"syscall"

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
	var r Resolver
	for _, d := range p.DenyRead {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws, d)
		}
		d = filepath.Clean(d)
		if !Within(d, ws) && !Within(resolvedPrefix(&r, d), ws) {
			continue
		}
		if _, err := r.Lstat(d); err == nil {
			continue
		}
		out = append(out, d)
	}
	return out
}

// DenyReadFiles lists, by their real paths, the files p's deny_read
// entries hide from the box, in one of seen (the trees the box sees),
// that have more than one name: each entry that is such a file, and each
// such file under one that is a directory, found by a walk bounded as
// the search for their other names is (RefuseSecretLinks, which the
// caller makes). The box reads an empty file at the entry's path, and
// read the file whole through another name: a hard link an earlier run's
// box made to the file before the secret was written into it (a
// deny_read entry not made yet is common, and the box may make it).
// Relative entries are in the workspace ws. A directory too large to
// search is refused, as an exposed tree is. Names are resolved by r.
func DenyReadFiles(p *policy.Policy, ws string, seen []string, r *Resolver) ([]string, error) {
	var out []string
	search := newLinkSearch()
	for _, d := range p.DenyRead {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws, d)
		}
		real, err := r.EvalSymlinks(d)
		if err != nil {
			continue // not there: nothing to hide
		}
		inSight := false
		for _, t := range seen {
			inSight = inSight || Within(real, t)
		}
		if !inSight {
			continue
		}
		err = search.regularFiles(real, func(path string, st *syscall.Stat_t) error {
			if st.Nlink > 1 {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("deny_read %s: looking for files in it with more than one name, which the command could read through another: %w; name the files to hide, or a narrower directory", d, err)
		}
	}
	return out, nil
}
