package sandbox

import (
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// fileStatusAt is fileStatus of p relative to the directory dirfd.
func fileStatusAt(dirfd int, p string) (perm fs.FileMode, born, changed time.Time, err error) {
	var st unix.Statx_t
	if err := unix.Statx(dirfd, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MODE|unix.STATX_BTIME|unix.STATX_CTIME, &st); err != nil {
		return 0, time.Time{}, time.Time{}, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("%s: its file system keeps no birth time", p)
	}
	return fs.FileMode(st.Mode).Perm(), time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)), nil
}

// takeWrite takes the permission bits off p's mode, p itself: a symbolic
// link found there (another local user may have put it in place of what
// the run made) is left, and what it names too. It goes through an O_PATH
// descriptor of p and its /proc/self/fd name, as glibc's fchmodat does
// with AT_SYMLINK_NOFOLLOW before Linux 6.6.
func takeWrite(p string, bits fs.FileMode) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%s is a symbolic link now; neither it nor what it names was changed", p)
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777&^uint32(bits.Perm())); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	return nil
}

// fileClockNow is the earliest time the kernel may stamp a file made from
// now on with: its coarse clock (CLOCK_REALTIME_COARSE), which file times
// come from (or later ones, with multigrain timestamps, never earlier).
// A run's start taken as time.Now less clockSlack took what the user made
// in the 50 ms before it (git init && cordon run) for the run's.
func fileClockNow() time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return time.Now().Add(-clockSlack)
	}
	return time.Unix(ts.Unix())
}
