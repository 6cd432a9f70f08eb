//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// cordon runs bubblewrap outside the box, with cordon's own rights, so the
// binary it runs must be one nothing of the user's could have put there: a
// workspace directory on PATH (a project's virtualenv, say) could hold a
// "bwrap" a sandboxed command wrote in an earlier run. lookHelper finds a
// program on PATH as exec.LookPath does, but takes only a trusted one:
// owned by root and writable by nobody else, in a directory the same.

// errUntrusted says a helper was found only where a user could have put it.
var errUntrusted = errors.New("not owned by root, or writable by others")

// lookHelper finds name on path: the first trusted executable file.
// Untrusted ones are passed over; if only they were found, the error
// names the first.
func lookHelper(name, path string) (string, error) {
	var untrusted string
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // a relative entry depends on where cordon runs
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if trustedFile(p) {
			return p, nil
		}
		if untrusted == "" {
			untrusted = p
		}
	}
	if untrusted != "" {
		return "", fmt.Errorf("%s is %w: cordon runs it outside the box, so it takes only one no user process (a sandboxed command included) could have put there", untrusted, errUntrusted)
	}
	return "", fs.ErrNotExist
}

// trustedFile reports whether p (its links followed) and the directory it
// is in are owned by root and writable by no one else.
func trustedFile(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for _, q := range []string{real, filepath.Dir(real)} {
		fi, err := os.Stat(q)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return false
		}
	}
	return true
}
