// Package owner says whether a file or directory is beyond other users'
// reach: cordon trusts what only this user, or root, could have written.
package owner

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Mine says whether this user or root owns what fi describes (anything
// but a Unix file counts as theirs).
func Mine(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Uid == 0 || int(st.Uid) == os.Geteuid()
}

// OthersMayReplace says whether a user other than this one or root could
// replace what lies in the directory di describes: they own it, or may
// write in it without the sticky bit (as /tmp has) that keeps them from
// renaming or removing a file that is not theirs.
func OthersMayReplace(di fs.FileInfo) bool {
	return !Mine(di) || di.Mode().Perm()&0o022 != 0 && di.Mode()&os.ModeSticky == 0
}

// ReplaceableAt is the first of dir and the directories above it (to the
// root) that OthersMayReplace says another user could replace what lies
// in, with what Stat says of it; "" when none is. One that cannot be
// looked at is passed over.
func ReplaceableAt(dir string) (string, fs.FileInfo) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if di, err := os.Stat(d); err == nil && OthersMayReplace(di) {
			return d, di
		}
		if d == filepath.Dir(d) {
			return "", nil
		}
	}
}
