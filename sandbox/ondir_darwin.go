package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// onDir runs op (a rename or a removal of the aftercare) with p, once no
// symbolic link on the way to it was made or changed since began (see
// linkMadeOnTheWay; what is for the error). Unlike Linux's, it goes by
// the path again: a link swapped in after the check is followed.
func onDir(p string, began time.Time, what string, op func(at string) error) error {
	if err := linkMadeOnTheWay(p, began, what); err != nil {
		return err
	}
	return op(p)
}

// linkMadeOnTheWay refuses a symbolic link above p (its directory, or
// one above it) made or changed since began, the run's start (any link,
// when began is zero): the box may have put it there, where a path of
// the workspace was missing, to send cordon's removal or rename (what,
// for the error) to a file or directory of the host's, which it could not
// even see.
func linkMadeOnTheWay(p string, began time.Time, what string) error {
	for d := filepath.Dir(p); d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if _, changed, err := fileTimes(d); err != nil || began.IsZero() || !changed.Before(began) {
			return fmt.Errorf("%s, on the way to it, is a symbolic link made during the run; nothing is %s through it", d, what)
		}
	}
	return nil
}

// openedAsNamed says whether fd, a directory opened by its path dir, is
// the directory dir names now without following a link at its end: a
// directory another box swapped for a link is reported. Unlike Linux's,
// it does not see a directory above dir swapped for a link.
func openedAsNamed(fd int, dir string) error {
	var opened, named unix.Stat_t
	if err := unix.Fstat(fd, &opened); err != nil {
		return &fs.PathError{Op: "fstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(dir, &named); err != nil {
		return &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if opened.Dev != named.Dev || opened.Ino != named.Ino {
		return fmt.Errorf("%s was replaced while cordon looked at it, by a symbolic link or another directory; what is in it was not checked", dir)
	}
	return nil
}

// dirHandle is d, a directory (not a link) with no link made since began
// on the way to it (linkMadeOnTheWay). Unlike Linux's, it names whatever
// is at d when it is used.
func dirHandle(d string, began time.Time) (handle string, release func(), err error) {
	if err := linkMadeOnTheWay(d, began, "opened up"); err != nil {
		return "", nil, err
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return "", nil, err
	}
	if !fi.IsDir() {
		return "", nil, fmt.Errorf("%s is no directory", d)
	}
	return d, func() {}, nil
}

// openDirLent opens the directory dir to read it. Unlike Linux's, it
// lends no permission: one this user may search but not read fails.
func openDirLent(dir string) (int, error) {
	return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}
