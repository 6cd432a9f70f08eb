package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
)

// modeGitlink is the mode of an index entry that records a submodule's
// commit rather than a file.
const modeGitlink = 0o160000

// gitlinks lists the paths (slash-separated, relative to the worktree) of
// the gitlinks in a git index, whose object names are hashSize bytes (20
// for SHA-1, 32 for SHA-256), and the object name of its shared index
// (hex, "" for none) when it is split: git reads entries from both. It
// reads versions 2, 3 and 4 of the format; the index is the box's to
// write, so a malformed one is an error, never a guess.
func gitlinks(index []byte, hashSize int) (links []string, shared string, err error) {
	links, rest, err := indexEntries(index, hashSize)
	if err != nil {
		return nil, "", err
	}
	// Extensions follow the entries, up to the index's own checksum.
	for len(rest) > hashSize {
		if len(rest) < 8+hashSize {
			return nil, "", errors.New("git index ends inside an extension")
		}
		sig, size := string(rest[:4]), binary.BigEndian.Uint32(rest[4:8])
		if uint64(size) > uint64(len(rest)-8-hashSize) {
			return nil, "", fmt.Errorf("git index extension %q overruns the index", sig)
		}
		if sig == "link" {
			if size < uint32(hashSize) {
				return nil, "", errors.New("git index has a short link extension")
			}
			shared = hex.EncodeToString(rest[8 : 8+hashSize])
		}
		rest = rest[8+size:]
	}
	return links, shared, nil
}

// indexEntries reads a git index's entries, returning its gitlinks and
// what follows the entries.
func indexEntries(index []byte, hashSize int) ([]string, []byte, error) {
	if len(index) < 12 || string(index[:4]) != "DIRC" {
		return nil, nil, errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(index[4:8])
	if version < 2 || version > 4 {
		return nil, nil, fmt.Errorf("git index version %d, which cordon does not read", version)
	}
	count := binary.BigEndian.Uint32(index[8:12])
	// fixed is an entry's size before its name: times, device, inode,
	// mode, ids, size, object name and flags.
	fixed := 40 + hashSize + 2
	if uint64(count) > uint64(len(index))/uint64(fixed) {
		return nil, nil, fmt.Errorf("git index claims %d entries in %d bytes", count, len(index))
	}
	var links []string
	rest := index[12:]
	prev := ""
	for range count {
		if len(rest) < fixed {
			return nil, nil, errors.New("git index ends inside an entry")
		}
		mode := binary.BigEndian.Uint32(rest[24:28])
		flags := binary.BigEndian.Uint16(rest[40+hashSize:])
		n := fixed
		if flags&0x4000 != 0 { // extended flags follow
			if version < 3 || len(rest) < n+2 {
				return nil, nil, errors.New("git index has an extended entry it cannot hold")
			}
			n += 2
		}
		name := rest[n:]
		var p string
		if version == 4 {
			strip, k := binary.Uvarint(name)
			if k <= 0 || strip > uint64(len(prev)) {
				return nil, nil, errors.New("git index has a bad path prefix")
			}
			name = name[k:]
			end := bytes.IndexByte(name, 0)
			if end < 0 {
				return nil, nil, errors.New("git index ends inside a path")
			}
			p = prev[:len(prev)-int(strip)] + string(name[:end])
			rest = name[end+1:]
		} else {
			end := bytes.IndexByte(name, 0)
			if end < 0 {
				return nil, nil, errors.New("git index ends inside a path")
			}
			p = string(name[:end])
			// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
			size := (n + end + 8) &^ 7
			if size > len(rest) {
				return nil, nil, errors.New("git index ends inside an entry's padding")
			}
			rest = rest[size:]
		}
		prev = p
		if mode == modeGitlink {
			if !cleanWorktreePath(p) {
				return nil, nil, fmt.Errorf("git index has a gitlink at %q, which is no path in a worktree", p)
			}
			links = append(links, p)
		}
	}
	return links, rest, nil
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
