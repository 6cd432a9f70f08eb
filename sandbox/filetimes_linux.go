package sandbox

import (
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// fileTimes is p's birth and status-change times, p itself (not what a
// link names). A file system that keeps no birth time is an error: a
// status change alone cannot tell a new repository from a used one.
func fileTimes(p string) (born, changed time.Time, err error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME, &st); err != nil {
		return time.Time{}, time.Time{}, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("%s: its file system keeps no birth time", p)
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)), nil
}
