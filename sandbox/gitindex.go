package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
	"time"
)

// modeGitlink is the mode of an index entry that records a submodule's
// commit rather than a file.
const modeGitlink = 0o160000

// indexBuffer is the read buffer of gitlinks, which also bounds a path.
const indexBuffer = 64 << 10

// errIndexEnds is a git index that ends before what it announces.
var errIndexEnds = errors.New("git index ends early")

// Flag bits of an index entry: assume-valid in its flags word, and
// skip-worktree in its extended flags word.
const (
	flagAssumeValid  = 0x8000
	flagExtended     = 0x4000
	flagSkipWorktree = 0x4000
)

// maxHiddenNamed bounds the flagged paths a Hidden keeps by name (a
// sparse checkout flags every entry outside its cone, and an index can
// have millions).
const maxHiddenNamed = 1000

// Hidden is what a git index holds of the entries git takes for unchanged
// without looking at their files: those with the skip-worktree or the
// assume-valid flag (git update-index --skip-worktree,
// --assume-unchanged). Git status, git diff and git diff HEAD say nothing
// of such a file, whatever is in it. A sparse checkout flags the entries
// outside its cone.
type Hidden struct {
	// Count is how many entries are flagged.
	Count int
	// Digest is the SHA-256 of their paths, each ended by a NUL, in the
	// order read ("" for none).
	Digest string
	// Paths are the first maxHiddenNamed of them that have names.
	Paths []string
	// Untracked is the SHA-256 of the index's untracked cache (its UNTR
	// extension), "" for none: git status takes from it, without looking,
	// which files of a directory whose status it records are untracked,
	// so one the box wrote can leave out a file it added.
	Untracked string
	h         hash.Hash
	// recorded, when not nil, keeps the entries whose recorded status
	// says the file changed at its since or later (see recordedSince).
	recorded *recordedSince
}

// add counts the flagged entry at p.
func (h *Hidden) add(p []byte) {
	if h.h == nil {
		h.h = sha256.New()
	}
	h.h.Write(p)
	h.h.Write([]byte{0})
	h.Count++
	// A split index's entry that replaces one of its shared index has
	// no name of its own (the link extension's bitmap places it): it is
	// counted, and not named.
	if len(p) > 0 && len(h.Paths) < maxHiddenNamed {
		h.Paths = append(h.Paths, string(p))
	}
}

// done settles the digest once every entry is read (of the index and
// its shared index).
func (h *Hidden) done() {
	if h.h != nil {
		h.Digest = hex.EncodeToString(h.h.Sum(nil))
		h.h = nil
	}
}

// Named says whether h names every flagged entry.
func (h Hidden) Named() bool { return h.Count == len(h.Paths) }

// Since is what after, the same index read once the run ended, flags that
// h (read when the run was built) did not: the paths it can name, and
// whether it names them all (false where the flags changed and more
// were flagged than maxHiddenNamed, before or after, or some had no name:
// a split index's). Entries whose
// flags the run cleared are none of its business: git looks at them.
func (h Hidden) Since(after Hidden) (paths []string, all bool) {
	if after.Count == h.Count && after.Digest == h.Digest {
		return nil, true
	}
	for _, p := range after.Paths {
		if !slices.Contains(h.Paths, p) {
			paths = append(paths, p)
		}
	}
	return paths, h.Named() && after.Named()
}

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
	return readIndex(r, size, hashSize, nil)
}

// readIndex is gitlinks, which also counts in hidden (when not nil) the
// entries flagged skip-worktree or assume-valid (see Hidden).
func readIndex(r io.Reader, size int64, hashSize int, hidden *Hidden) (links []string, shared string, err error) {
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
		flags := binary.BigEndian.Uint16(e[40+hashSize:])
		hides := flags&flagAssumeValid != 0
		n := fixed
		if flags&flagExtended != 0 {
			if version < 3 {
				return nil, "", errors.New("git index has an extended entry it cannot hold")
			}
			ext, err := take(2)
			if err != nil {
				return nil, "", err
			}
			hides = hides || binary.BigEndian.Uint16(ext)&flagSkipWorktree != 0
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
		if hides && hidden != nil {
			hidden.add(p)
		}
		if hidden != nil && hidden.recorded != nil {
			hidden.recorded.add(e, p, hashSize, !hides && mode != modeGitlink)
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
		var skipped int64
		if sig == "UNTR" && hidden != nil {
			h := sha256.New()
			skipped, _ = io.CopyN(h, br, n)
			hidden.Untracked = hex.EncodeToString(h.Sum(nil))
		} else {
			d, _ := br.Discard(int(n))
			skipped = int64(d)
		}
		if skipped != n {
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

// maxRecorded bounds the entries a recordedSince keeps, and so the files
// Aftercare reads again (see forgedSince).
const maxRecorded = 1000

// maxRecordedAnyTime bounds the entries a recordedSince keeps when git
// does not compare change times (anyTime): Aftercare looks at the status
// of each, and reads again only those the run changed.
const maxRecordedAnyTime = 100_000

// recordedSince keeps an index's entries (not flagged, not gitlinks)
// whose recorded change time is since or later: git takes a file for
// unchanged when its status (times, size, inode) matches its entry's,
// without reading it, so a box that changed a file and wrote its new
// status into its entry, with the old object name, hid the change. Git
// compares the change time (core.trustctime), which no one can set back,
// so such an entry records one from the run.
type recordedSince struct {
	since time.Time
	// anyTime says git does not compare the change time here
	// (core.trustctime = false, core.checkStat = minimal): a file the box
	// rewrote in place, its size kept and its modification time set
	// back, is unchanged to git with no entry rewritten, so every entry
	// is kept (to maxRecordedAnyTime), whatever change time it records.
	anyTime bool
	entries []indexEntry
	// over says more entries were recorded since than maxRecorded, or
	// one had no name (a split index's).
	over bool
	// attributes says the index holds a .gitattributes, whose filters and
	// conversions can make a file's content differ from its blob's.
	attributes bool
}

// indexEntry is what an index records of a file: its path, object name,
// mode, and the modification time (seconds) and size git compares first.
type indexEntry struct {
	path  string
	oid   []byte
	mode  uint32
	mtime uint32
	size  uint32
}

// add looks at the index entry e (its fixed part) at path p, which it
// keeps when keep (a file's, not flagged: a flag is reported as such)
// and it was recorded since.
func (r *recordedSince) add(e, p []byte, hashSize int, keep bool) {
	if path.Base(string(p)) == ".gitattributes" {
		r.attributes = true
	}
	ctime := time.Unix(int64(binary.BigEndian.Uint32(e[0:4])), int64(binary.BigEndian.Uint32(e[4:8])))
	switch {
	case !keep || !r.anyTime && ctime.Before(r.since):
	case len(p) == 0 || len(r.entries) == r.bound():
		r.over = true
	default:
		r.entries = append(r.entries, indexEntry{path: string(p), oid: slices.Clone(e[40 : 40+hashSize]),
			mode: binary.BigEndian.Uint32(e[24:28]), mtime: binary.BigEndian.Uint32(e[8:12]), size: binary.BigEndian.Uint32(e[36:40])})
	}
}

// bound is how many entries r keeps at most.
func (r *recordedSince) bound() int {
	if r.anyTime {
		return maxRecordedAnyTime
	}
	return maxRecorded
}
