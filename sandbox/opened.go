package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WriteClosed is the write permission a sandboxed command may not give
// other local users on what it can write: others' always, and the
// group's where the user's umask withholds it (a user whose umask lets
// the group write, as with a group of their own, makes group-writable
// files themselves). A workspace file or directory the box opened so
// (chmod 777 ., chmod o+w Makefile, an ACL, a umask of 0) let another
// local user replace the Makefile the user then ran. The Linux backend
// refuses the chmod and the ACLs that would give it; Aftercare takes it
// off what the command made with it in the workspace (openedSince).
var WriteClosed = fs.FileMode(0o002 | userUmask()&0o020)

// userUmask is this process's umask, read as cordon starts (and put back
// at once), before it makes any file.
func userUmask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}

// readDir is os.ReadDir, unsorted, and the entries of dir that the run
// opened to other local users (openedSince), looked for from the
// directory as opened: status calls by path cost the walk of 10,000
// directories a third more. A directory that may be searched but not
// read is read all the same (openDirLent).
func readDir(dir string, since time.Time) ([]fs.DirEntry, []string, error) {
	fd, err := openDirLent(dir)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if err := openedAsNamed(fd, dir); err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, &fs.PathError{Op: "fstat", Path: dir, Err: err}
	}
	entries, err := f.ReadDir(-1)
	if time.Unix(st.Ctim.Unix()).Before(since) {
		return entries, nil, err
	}
	opened, err2 := openedSince(dir, fd, entries, since)
	return entries, opened, errors.Join(err, err2)
}

// readDirLent is os.ReadDir, but that a directory that may be searched
// but not read is read all the same (openDirLent).
func readDirLent(dir string) ([]fs.DirEntry, error) {
	fd, err := openDirLent(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// openedSince returns the entries of dir (opened as dirfd, an entry added
// to it or renamed into it since) that were born since with a bit of
// WriteClosed in their mode: what the run made open to other local
// users, with a umask that let it (the chmod and the ACLs that could
// open what was there, the backend refuses). What was there before the
// run keeps its mode, whatever it is: the user chose it. Symbolic links,
// whose mode nothing reads, are passed over.
func openedSince(dir string, dirfd int, entries []fs.DirEntry, since time.Time) ([]string, error) {
	var out []string
	var err error
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		perm, born, _, err2 := fileStatusAt(dirfd, e.Name())
		switch {
		case errors.Is(err2, fs.ErrNotExist):
		case err2 != nil:
			err = errors.Join(err, fmt.Errorf("%s: %w", dir, err2))
		case !born.Before(since) && perm&WriteClosed != 0:
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, err
}
