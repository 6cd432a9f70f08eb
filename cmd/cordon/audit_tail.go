package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// tailPoll is how often a followed log is looked at once its end is read.
const tailPoll = 200 * time.Millisecond

// tail reads a log that grows (`cordon audit --follow`): at its end it
// waits for more instead of ending, until ctx ends. A log truncated under
// it is read again from its start; a log moved aside and replaced by a new
// one at its path (rotated) is left, once read to its end, for the new one.
// Either is said through warn.
type tail struct {
	ctx  context.Context
	path string
	f    *os.File
	off  int64
	last byte // the last byte read, at off-1
	warn func(string)
}

// Read reads what the log holds past what was read; at its end it waits,
// and returns io.EOF only once ctx ends.
func (t *tail) Read(p []byte) (int, error) {
	for {
		n, err := t.f.Read(p)
		t.off += int64(n)
		if n > 0 {
			t.last = p[n-1]
		}
		if n > 0 || err != nil && err != io.EOF {
			return n, err
		}
		select {
		case <-t.ctx.Done():
			return 0, io.EOF
		case <-time.After(tailPoll):
		}
		// After the wait, before the next read: a log truncated and
		// written again meanwhile was read on from the old offset,
		// mid-line, and the first new record lost.
		if err := t.check(); err != nil {
			return 0, err
		}
	}
}

// check looks, at the log's end, whether it was truncated (shorter than
// what was read, or holding another byte where the last one read was:
// written again since) or replaced.
func (t *tail) check() error {
	cur, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("audit log %s: %w", t.path, err)
	}
	if at, err := os.Stat(t.path); err == nil && !os.SameFile(at, cur) {
		next, err := openLog(t.path)
		if err != nil {
			return fmt.Errorf("open the new audit log %s: %w", t.path, err)
		}
		t.f.Close()
		t.f, t.off = next, 0
		t.warn(fmt.Sprintf("%s was replaced (moved aside?): following the new file from its start; what sessions that began before append to the old one is not shown", t.path))
		return nil
	}
	var at [1]byte
	rewritten := t.off > 0 && cur.Size() >= t.off && (func() bool {
		n, _ := t.f.ReadAt(at[:], t.off-1)
		return n == 1 && at[0] != t.last
	})()
	if cur.Size() < t.off || rewritten {
		if _, err := t.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("audit log %s: %w", t.path, err)
		}
		t.off = 0
		t.warn(fmt.Sprintf("%s was truncated: reading it again from its start", t.path))
	}
	return nil
}

func (t *tail) close() error { return t.f.Close() }

// awaitLog opens the log at path once a session has made it, saying
// through warn that it waits; an interrupt first is not an error (an
// empty log is shown).
func awaitLog(ctx context.Context, path string, warn func(string)) (*os.File, error) {
	warn(fmt.Sprintf("no audit log at %s yet: waiting for `cordon run` or `cordon proxy` to write one", path))
	for {
		select {
		case <-ctx.Done():
			return os.Open(os.DevNull)
		case <-time.After(tailPoll):
		}
		f, err := openLog(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
}
