package regular

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A regular file opens; a named pipe, a directory and a device do not,
// and the pipe does not hold the open.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file, fifo := filepath.Join(dir, "f"), filepath.Join(dir, "p")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, fi, err := Open(file, os.O_RDONLY, 0)
	if err != nil || fi.Size() != 1 {
		t.Fatalf("a regular file: %v", err)
	}
	f.Close()
	for path, want := range map[string]struct {
		mode fs.FileMode
		kind string
	}{
		fifo:       {fs.ModeNamedPipe, "a named pipe (FIFO)"},
		dir:        {fs.ModeDir, "a directory"},
		os.DevNull: {fs.ModeDevice | fs.ModeCharDevice, "a device"},
	} {
		done := make(chan error, 1)
		go func() { _, _, err := Open(path, os.O_RDONLY, 0); done <- err }()
		select {
		case err := <-done:
			var nr *NotRegular
			if !errors.As(err, &nr) || nr.Type != want.mode || nr.Path != path {
				t.Errorf("%s: %v, want a NotRegular of type %v", path, err, want.mode)
			}
			// What it is, in words, not as a mode (d---------).
			if msg := path + " is " + want.kind + ", not a regular file"; err == nil || err.Error() != msg {
				t.Errorf("%s: %v, want %q", path, err, msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the open waits", path)
		}
	}
	if _, _, err := Open(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
