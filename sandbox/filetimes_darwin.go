package sandbox

import (
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// fileStatusAt is fileStatus of p relative to the directory dirfd.
func fileStatusAt(dirfd int, p string) (perm fs.FileMode, born, changed time.Time, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, p, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, time.Time{}, time.Time{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return fs.FileMode(st.Mode).Perm(), time.Unix(st.Btim.Unix()), time.Unix(st.Ctim.Unix()), nil
}

// takeWrite takes the permission bits off p's mode, p itself: a symbolic
// link found there (another local user may have put it in place of what
// the run made) is left, and what it names too.
func takeWrite(p string, bits fs.FileMode) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%s is a symbolic link now; neither it nor what it names was changed", p)
	}
	if err := unix.Fchmodat(unix.AT_FDCWD, p, uint32(st.Mode)&0o7777&^uint32(bits.Perm()), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	return nil
}

// fileClockNow is the earliest time a file made from now on may say it
// was born: now, less clockSlack.
func fileClockNow() time.Time { return time.Now().Add(-clockSlack) }
