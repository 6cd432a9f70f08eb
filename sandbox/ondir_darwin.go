package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
