// Package regular opens a file only when it is a regular one: cordon reads
// (and appends to) files whose path others may have chosen, and a named
// pipe there would hold cordon until someone came to the other end, a
// device or a directory would not read as a file at all.
package regular

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// NotRegular is the error for a path that is something other than a
// regular file; Type is what it is.
type NotRegular struct {
	Path string
	Type fs.FileMode
}

func (e *NotRegular) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind())
}

// Kind names what the path is, in words: "a directory", "a named pipe
// (FIFO)".
func (e *NotRegular) Kind() string {
	switch {
	case e.Type&fs.ModeDir != 0:
		return "a directory"
	case e.Type&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case e.Type&fs.ModeSocket != 0:
		return "a socket"
	case e.Type&fs.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("of type %s", e.Type)
}

// Open opens path with flag and perm, as os.OpenFile does, without
// waiting on a named pipe (O_NONBLOCK), and returns it with its FileInfo
// when it is a regular file; otherwise the error is a *NotRegular, and the
// open's own error is returned as it is.
func Open(path string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &NotRegular{Path: path, Type: fi.Mode().Type()}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
