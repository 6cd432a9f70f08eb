package sandbox

import (
	"io/fs"
	"syscall"
	"time"
)

// fileTimes is p's birth and status-change times, p itself (not what a
// link names).
func fileTimes(p string) (born, changed time.Time, err error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return time.Time{}, time.Time{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return time.Unix(st.Birthtimespec.Unix()), time.Unix(st.Ctimespec.Unix()), nil
}
