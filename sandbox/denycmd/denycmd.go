// Package denycmd refuses commands on the deny_commands list before
// anything starts: by name, by being the same file (hard links and
// symlinks), or by having the same contents (copies), looking through
// wrappers such as sh -c, env and one-line interpreter scripts.
package denycmd

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// maxHashSize bounds the files compared by contents: a copy of a larger
// deny-listed binary is caught by name or not at all.
const maxHashSize = 64 << 20

// Match is one refused command.
type Match struct {
	// Entry is the deny_commands entry that matched.
	Entry string
	// Word is the command as written, and Via how it was reached.
	Word Word
	// How is "name", "same file" or "same contents".
	How string
}

func (m Match) String() string {
	s := fmt.Sprintf("command %q is on deny_commands (%s, %s)", m.Word.Name, m.Entry, m.How)
	if m.Word.Via != "" {
		s += ", reached through " + m.Word.Via
	}
	return s
}

// Checker holds the deny list, resolved once.
type Checker struct {
	entries []entry
	path    string
	dir     string
}

// entry is one deny_commands item and the file it names, if any.
type entry struct {
	raw  string
	name string
	fi   os.FileInfo
	path string
	sum  []byte // contents hash, computed on first need
}

// New resolves the deny list against the host PATH; relative paths in
// commands are taken from dir.
func New(deny []string, pathEnv, dir string) *Checker {
	c := &Checker{path: pathEnv, dir: dir}
	for _, d := range deny {
		e := entry{raw: d, name: filepath.Base(d)}
		if p := c.resolve(d); p != "" {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				e.fi, e.path = fi, p
			}
		}
		c.entries = append(c.entries, e)
	}
	return c
}

// Check returns the first command of argv (or of what it wraps) that the
// deny list refuses.
func (c *Checker) Check(argv []string) (Match, bool) {
	if len(c.entries) == 0 {
		return Match{}, false
	}
	for _, w := range Words(argv) {
		if m, ok := c.match(w); ok {
			return m, true
		}
	}
	return Match{}, false
}

// match judges one command word.
func (c *Checker) match(w Word) (Match, bool) {
	base := filepath.Base(w.Name)
	for _, e := range c.entries {
		if base == e.name {
			return Match{Entry: e.raw, Word: w, How: "name"}, true
		}
	}
	p := c.resolve(w.Name)
	if p == "" {
		return Match{}, false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return Match{}, false
	}
	for i := range c.entries {
		e := &c.entries[i]
		if e.fi == nil {
			continue
		}
		if os.SameFile(fi, e.fi) {
			return Match{Entry: e.raw, Word: w, How: "same file"}, true
		}
		if fi.Size() == e.fi.Size() && fi.Size() <= maxHashSize && e.sameContents(p) {
			return Match{Entry: e.raw, Word: w, How: "same contents"}, true
		}
	}
	return Match{}, false
}

// sameContents compares the file at p with the entry's by SHA-256.
func (e *entry) sameContents(p string) bool {
	if e.sum == nil {
		e.sum = hashFile(e.path)
		if e.sum == nil {
			e.sum = []byte{}
		}
	}
	other := hashFile(p)
	return len(e.sum) > 0 && bytes.Equal(e.sum, other)
}

// hashFile is the SHA-256 of a file no larger than maxHashSize, or nil.
func hashFile(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxHashSize+1))
	if err != nil || n > maxHashSize {
		return nil
	}
	return h.Sum(nil)
}

// resolve finds the file a command word names: a path (relative ones from
// the checker's directory), or a name on PATH.
func (c *Checker) resolve(name string) string {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(c.dir, name)
		}
		return name
	}
	return sandbox.SearchPath(c.path, name)
}
