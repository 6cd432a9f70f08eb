package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxLinksOnTheWay bounds the symbolic links followed on the way to a
// path, as the kernel's own resolution does.
const maxLinksOnTheWay = 40

// onDir runs op (a rename or a removal of the aftercare) with a name for
// p that reaches p's directory as onDir found it: p's directory is
// resolved one name at a time, each through a descriptor of the one
// before, and a symbolic link on the way that was made or changed since
// began (any link, when began is zero) is refused, as linkMadeOnTheWay
// says (what is for the error). op gets the directory's
// /proc/self/fd name joined with p's last name: a link another box in
// the same workspace swaps in after the check (a directory of the
// workspace renamed away and a link to the user's home put in its place,
// back and forth) is never followed, as it was when the check looked at
// the path and op then went by the path again.
func onDir(p string, began time.Time, what string, op func(at string) error) error {
	dir, release, err := openedDir(filepath.Dir(p), began, what)
	if err != nil {
		return err
	}
	defer release()
	return op(dir + "/" + filepath.Base(p))
}

// openDirChecked opens the directory dir (absolute) with O_PATH,
// following only the symbolic links on the way made before began.
func openDirChecked(dir string, began time.Time, what string) (int, error) {
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	curPath, rest := "/", strings.Split(dir, "/")
	for links := 0; len(rest) > 0; {
		elem := rest[0]
		rest = rest[1:]
		if elem == "" || elem == "." {
			continue
		}
		next := filepath.Join(curPath, elem)
		fd, err := unix.Openat(cur, elem, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(cur)
			return -1, &fs.PathError{Op: "open", Path: next, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			unix.Close(cur)
			return -1, &fs.PathError{Op: "fstat", Path: next, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			unix.Close(cur)
			cur, curPath = fd, next
			continue
		case unix.S_IFLNK:
		default:
			unix.Close(fd)
			unix.Close(cur)
			return -1, &fs.PathError{Op: "open", Path: next, Err: syscall.ENOTDIR}
		}
		target, err := checkedLink(fd, next, began, what)
		unix.Close(fd)
		if links++; err == nil && links > maxLinksOnTheWay {
			err = &fs.PathError{Op: "open", Path: next, Err: syscall.ELOOP}
		}
		if err != nil {
			unix.Close(cur)
			return -1, err
		}
		if filepath.IsAbs(target) {
			unix.Close(cur)
			if cur, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return -1, &fs.PathError{Op: "open", Path: "/", Err: err}
			}
			curPath = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}

// checkedLink is the target of the symbolic link fd (an O_PATH
// descriptor of it, at path), refused when the link was made or changed
// since began: its status and its target are read through the one
// descriptor, so the box cannot swap the link in between.
func checkedLink(fd int, path string, began time.Time, what string) (string, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_CTIME, &st); err != nil {
		return "", &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	if changed := time.Unix(st.Ctime.Sec, int64(st.Ctime.Nsec)); began.IsZero() || !changed.Before(began) {
		return "", fmt.Errorf("%s, on the way to it, is a symbolic link made during the run; nothing is %s through it", path, what)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: path, Err: err}
	}
	return string(buf[:n]), nil
}

// openedAsNamed says whether fd, a directory opened by its path dir (a
// real path), is that directory: a directory on the way that another box
// in the workspace swapped for a link (renameat2 RENAME_EXCHANGE, back and
// forth) had the walk after the run read a directory of the host's in its
// place, and pass over the one the run had filled. The kernel's name for
// the descriptor is compared with dir.
func openedAsNamed(fd int, dir string) error {
	at, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return err
	}
	if at != filepath.Clean(dir) {
		return fmt.Errorf("%s was opened as %s: a directory on the way was moved, or replaced by a symbolic link, while cordon looked at it; what is in it was not checked", dir, at)
	}
	return nil
}

// dirHandle is a name for the directory d that stays that directory
// while release is not called (its /proc/self/fd name), found following
// no link made since began (openDirChecked).
func dirHandle(d string, began time.Time) (handle string, release func(), err error) {
	return openedDir(d, began, "opened up")
}

// openedDir is the /proc/self/fd name of the directory d, opened by
// openDirChecked, and the release of its descriptor.
func openedDir(d string, began time.Time, what string) (name string, release func(), err error) {
	fd, err := openDirChecked(d, began, what)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), func() { unix.Close(fd) }, nil
}

// openDirLent opens the directory dir to read it. One of this user's that
// this user may search but not read (mode 111: a box leaves one so to
// hide what is below it from the walk after the run, while git, which
// needs only to search it, still finds a repository there) is given the
// read permission for as long as the open takes, through a descriptor of
// it that stays that directory, and then its mode back: a directory
// opened lists its entries whatever its mode becomes. Anything else is
// opened as unix.Open would, and fails as it would.
func openDirLent(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != unix.EACCES {
		return fd, err
	}
	at, err2 := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err2 != nil {
		return -1, err
	}
	defer unix.Close(at)
	var st unix.Stat_t
	if unix.Fstat(at, &st) != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o500 != 0o100 {
		return -1, err
	}
	name := "/proc/self/fd/" + strconv.Itoa(at)
	if unix.Chmod(name, st.Mode&0o7777|0o400) != nil {
		return -1, err
	}
	fd, err = unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err2 := unix.Chmod(name, st.Mode&0o7777); err2 != nil && err == nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: its mode (%o) could not be put back after it was read: %w", dir, st.Mode&0o7777, err2)
	}
	return fd, err
}
