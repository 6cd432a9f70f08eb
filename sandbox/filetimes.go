package sandbox

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// fileTimes is p's birth and status-change times, p itself (not what a
// link names). On Linux, a file system that keeps no birth time is an
// error (fileStatusAt): a status change alone cannot tell a new
// repository from a used one.
func fileTimes(p string) (born, changed time.Time, err error) {
	_, born, changed, err = fileStatus(p)
	return born, changed, err
}

// fileStatus is fileTimes and p's permission bits.
func fileStatus(p string) (perm fs.FileMode, born, changed time.Time, err error) {
	return fileStatusAt(unix.AT_FDCWD, p)
}
