// Package owner says whether a file or directory is beyond other users'
// reach: cordon trusts what only this user, or root, could have written.
package owner

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Mine says whether this user or root owns what fi describes (anything
// but a Unix file counts as theirs). In a user namespace that does not
// map root (a container, a sandbox around cordon), root's files belong to
// the overflow user, and count as root's: nothing there tells them apart.
func Mine(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Uid == 0 || int(st.Uid) == os.Geteuid() || unmappedRoot()(st.Uid)
}

// unmappedRoot says whether uid is the overflow user of a user namespace
// that does not map every user (/proc/self/uid_map), where it stands for
// an owner the namespace does not map, root among them. It is read once,
// when first asked.
var unmappedRoot = sync.OnceValue(func() func(uint32) bool {
	overflow, nested := uint32(0), false
	if data, err := os.ReadFile("/proc/sys/kernel/overflowuid"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 32); err == nil {
			overflow = uint32(n)
		}
	}
	if data, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		nested = strings.Join(strings.Fields(string(data)), " ") != "0 0 4294967295"
	}
	return func(uid uint32) bool { return nested && overflow != 0 && uid == overflow }
})

// OthersMayReplace says whether a user other than this one or root could
// replace what lies in the directory di describes: they own it, or may
// write in it without the sticky bit (as /tmp has) that keeps them from
// renaming or removing a file that is not theirs.
func OthersMayReplace(di fs.FileInfo) bool {
	return !Mine(di) || othersMayWrite(di)
}

// ReplaceableAt is the first of dir and the directories above it (to the
// root) that another user could replace what lies in, with what Stat
// says of it; "" when none is. dir itself counts as OthersMayReplace
// says; a directory above it only where others may write in it without
// the sticky bit, whoever owns it: in a user namespace (a container, a
// sandbox around cordon) the directories of an owner it does not map,
// root's among them (/, /home, /tmp), belong to the overflow user, whom
// nothing tells from another. One that cannot be looked at is passed
// over.
func ReplaceableAt(dir string) (string, fs.FileInfo) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err == nil && (OthersMayReplace(di) && d == filepath.Clean(dir) || othersMayWrite(di)) {
			return d, di
		}
		if d == filepath.Dir(d) {
			return "", nil
		}
	}
}

// othersMayWrite says whether group or others may write in the
// directory di describes without the sticky bit keeping them from what
// is not theirs.
func othersMayWrite(di fs.FileInfo) bool {
	return di.Mode().Perm()&0o022 != 0 && di.Mode()&os.ModeSticky == 0
}
