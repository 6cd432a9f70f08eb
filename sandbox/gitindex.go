package sandbox

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// modeGitlink is the mode of an index entry that records a submodule's
// commit rather than a file.
const modeGitlink = 0o160000

// indexBuffer is the read buffer of gitlinks, which also bounds a path.
const indexBuffer = 64 << 10

// errIndexEnds is a git index that ends before what it announces.
var errIndexEnds = errors.New("git index ends early")

// gitlinks lists the paths (slash-separated, relative to the worktree) of
// the gitlinks in the git index r, of size bytes, whose object names are
// hashSize bytes (20 for SHA-1, 32 for SHA-256), and the object name of
// its shared index (hex, "" for none) when it is split: git reads entries
// from both. It reads versions 2, 3 and 4 of the format, as a stream
// (an index can be hundreds of megabytes); the index is the box's to
// write, so a malformed one is an error, never a guess. A gitlink at a
// path no worktree has (absolute, unclean, through a .git) is a
// *badGitlinksError, returned with the gitlinks read.
func gitlinks(r io.Reader, size int64, hashSize int) (links []string, shared string, err error) {
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, indexBuffer)
	pos := func() int64 { return cr.n - int64(br.Buffered()) } // bytes parsed
	take := func(n int) ([]byte, error) {
		b, err := br.Peek(n)
		if err != nil {
			return nil, errIndexEnds
		}
		br.Discard(n)
		return b, nil
	}
	head, err := take(12)
	if err != nil || string(head[:4]) != "DIRC" {
		return nil, "", errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(head[4:8])
	if version < 2 || version > 4 {
		return nil, "", fmt.Errorf("git index version %d, which cordon does not read", version)
	}
	count := binary.BigEndian.Uint32(head[8:12])
	// fixed is an entry's size before its name: times, device, inode,
	// mode, ids, size, object name and flags.
	fixed := 40 + hashSize + 2
	if uint64(count) > uint64(size)/uint64(fixed) {
		return nil, "", fmt.Errorf("git index claims %d entries in %d bytes", count, size)
	}
	var prev []byte  // the last entry's path, which version 4 paths build on
	var bad []string // gitlinks at paths no worktree has
	for range count {
		e, err := take(fixed)
		if err != nil {
			return nil, "", err
		}
		mode := binary.BigEndian.Uint32(e[24:28])
		n := fixed
		if binary.BigEndian.Uint16(e[40+hashSize:])&0x4000 != 0 { // extended flags follow
			if version < 3 {
				return nil, "", errors.New("git index has an extended entry it cannot hold")
			}
			if _, err := take(2); err != nil {
				return nil, "", err
			}
			n += 2
		}
		var strip uint64
		if version == 4 {
			if strip, err = binary.ReadUvarint(br); err != nil || strip > uint64(len(prev)) {
				return nil, "", errors.New("git index has a bad path prefix")
			}
		}
		name, err := br.ReadSlice(0)
		if err != nil {
			return nil, "", errors.New("git index has a path it cannot read")
		}
		name = name[:len(name)-1]
		var p []byte
		if version == 4 {
			prev = append(prev[:len(prev)-int(strip)], name...)
			p = prev
		} else {
			p = name
			// Entries are padded with 1 to 8 NULs to a multiple of 8
			// bytes; ReadSlice took the first.
			if _, err := take((n+len(name)+8)&^7 - n - len(name) - 1); err != nil {
				return nil, "", err
			}
		}
		if mode == modeGitlink {
			if !cleanWorktreePath(string(p)) {
				// Reading on keeps one odd entry from hiding the others.
				bad = append(bad, string(p))
				continue
			}
			links = append(links, string(p))
		}
	}
	// Extensions follow the entries, up to the index's own checksum.
	for size-pos() > int64(hashSize) {
		h, err := take(8)
		if err != nil {
			return nil, "", errors.New("git index ends inside an extension")
		}
		sig, n := string(h[:4]), int64(binary.BigEndian.Uint32(h[4:8]))
		if n > size-pos()-int64(hashSize) {
			return nil, "", fmt.Errorf("git index extension %q overruns the index", sig)
		}
		if sig == "link" {
			if n < int64(hashSize) {
				return nil, "", errors.New("git index has a short link extension")
			}
			oid, err := take(hashSize)
			if err != nil {
				return nil, "", err
			}
			shared = hex.EncodeToString(oid)
			n -= int64(hashSize)
		}
		if d, _ := br.Discard(int(n)); int64(d) != n {
			return nil, "", errIndexEnds
		}
	}
	if bad != nil {
		return links, shared, &badGitlinksError{bad}
	}
	return links, shared, nil
}

// badGitlinksError names gitlinks at paths that are no paths in a worktree
// (git itself refuses to write them). It comes with the other gitlinks of
// the index, which were read.
type badGitlinksError struct{ paths []string }

func (e *badGitlinksError) Error() string {
	return fmt.Sprintf("git index has gitlinks at %q, which are no paths in a worktree", e.paths)
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// cleanWorktreePath says whether p names a path inside a worktree as git
// writes one: relative, clean, and with no .git component.
func cleanWorktreePath(p string) bool {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}
