package credinject

import (
	"bytes"
	"errors"
	"io"
	"slices"
)

// matcher finds a fixed set of needles in a byte stream. At each position
// it takes the longest needle that matches there, scanning left to right
// without overlaps: the semantics of strings.NewReplacer given the needles
// longest first. It is the one engine behind response rewriting, output
// masking and the request body guard.
type matcher struct {
	needles [][]byte
	longest int
	// first marks the bytes some needle begins with.
	first [256]bool
}

// newMatcher compiles needles, which must all be non-empty.
func newMatcher(needles [][]byte) *matcher {
	m := &matcher{needles: needles}
	for _, n := range needles {
		m.longest = max(m.longest, len(n))
		m.first[n[0]] = true
	}
	return m
}

// Positions in stream.next that are not offsets.
const (
	nextUnknown = -2
	nextNone    = -1
)

// stream is one pass of a matcher over a byte stream. It keeps as its tail
// only the bytes that could still begin a match once more data arrives: a
// proper prefix of some needle, so fewer than m.longest bytes.
type stream struct {
	m *matcher
	// emit appends what replaces needle k to dst, or refuses with an error.
	emit func(dst []byte, k int) ([]byte, error)
	tail []byte
	// next caches, per needle, its leftmost occurrence in the buffer being
	// scanned (nextUnknown before the first search, nextNone if absent).
	next []int
}

// scan appends to dst the part of buf that is decided, with every match
// replaced through emit, and returns how many bytes of buf it decided. The
// undecided rest is where a needle may begin but has not ended yet; with
// final set, nothing is undecided. On an error from emit, the returned
// count is where the refused needle starts.
func (s *stream) scan(dst, buf []byte, final bool) ([]byte, int, error) {
	s.next = s.next[:0]
	for range s.m.needles {
		s.next = append(s.next, nextUnknown)
	}
	i, hold := 0, -1
	for {
		if hold < i {
			hold = len(buf)
			if !final {
				hold = s.m.firstPartial(buf, i)
			}
		}
		p, k := s.m.leftmost(buf, i, s.next)
		if p < 0 || p >= hold {
			return append(dst, buf[i:hold]...), hold, nil
		}
		dst = append(dst, buf[i:p]...)
		var err error
		if dst, err = s.emit(dst, k); err != nil {
			return dst, p, err
		}
		i = p + len(s.m.needles[k])
	}
}

// firstPartial returns the first position at or after from where buf's
// remainder is a proper prefix of some needle, or len(buf) if there is none.
// Only the last m.longest-1 positions can qualify.
func (m *matcher) firstPartial(buf []byte, from int) int {
	for q := max(from, len(buf)-m.longest+1); q < len(buf); q++ {
		if !m.first[buf[q]] {
			continue
		}
		rest := buf[q:]
		for _, n := range m.needles {
			if len(n) > len(rest) && bytes.HasPrefix(n, rest) {
				return q
			}
		}
	}
	return len(buf)
}

// leftmost returns the position and index of the leftmost complete needle
// in buf at or after i, the longest one on a tie, or -1 if there is none.
func (m *matcher) leftmost(buf []byte, i int, next []int) (int, int) {
	best, bk := -1, -1
	for k, n := range m.needles {
		if next[k] == nextUnknown || next[k] >= 0 && next[k] < i {
			next[k] = nextNone
			if j := bytes.Index(buf[i:], n); j >= 0 {
				next[k] = i + j
			}
		}
		p := next[k]
		if p >= 0 && (best < 0 || p < best || p == best && len(n) > len(m.needles[bk])) {
			best, bk = p, k
		}
	}
	return best, bk
}

// write feeds p into the stream, appending decided output to dst.
func (s *stream) write(dst, p, scratch []byte) ([]byte, []byte, error) {
	in := p
	if len(s.tail) > 0 {
		scratch = append(append(scratch[:0], s.tail...), p...)
		in = scratch
	}
	dst, n, err := s.scan(dst, in, false)
	s.tail = append(s.tail[:0], in[n:]...)
	return dst, scratch, err
}

// flush ends the stream, appending the decided tail to dst.
func (s *stream) flush(dst []byte) ([]byte, error) {
	dst, _, err := s.scan(dst, s.tail, true)
	s.tail = s.tail[:0]
	return dst, err
}

// readChunk is how much a streamReader asks its source for at once.
const readChunk = 32 << 10

// maxEmptyReads is how many (0, nil) reads from a source a streamReader
// tolerates in a row before giving up with io.ErrNoProgress.
const maxEmptyReads = 100

// streamReader passes a source through a stream. Memory is bounded by
// readChunk plus the longest needle, plus the replacements.
type streamReader struct {
	src io.ReadCloser
	st  stream
	in  []byte
	out []byte
	off int
	// err ends the stream once out is drained: io.EOF, a source error or a
	// refusal from emit.
	err error
}

func newStreamReader(src io.ReadCloser, m *matcher, emit func([]byte, int) ([]byte, error)) *streamReader {
	return &streamReader{src: src, st: stream{m: m, emit: emit}}
}

// Read returns decided bytes, reading the source as needed.
func (r *streamReader) Read(p []byte) (int, error) {
	for empty := 0; r.off == len(r.out); empty++ {
		if r.err != nil {
			return 0, r.err
		}
		if empty == maxEmptyReads {
			r.err = io.ErrNoProgress
			continue
		}
		r.fill()
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// fill reads once from the source and scans what arrived after the tail.
func (r *streamReader) fill() {
	if r.in == nil {
		r.in = make([]byte, 0, readChunk+r.st.m.longest)
	}
	buf := append(r.in[:0], r.st.tail...)
	n, err := r.src.Read(buf[len(buf):cap(buf)])
	buf = buf[:len(buf)+n]
	eof := errors.Is(err, io.EOF)
	out, decided, serr := r.st.scan(r.out[:0], buf, eof)
	r.out, r.off = out, 0
	r.st.tail = append(r.st.tail[:0], buf[decided:]...)
	switch {
	case serr != nil:
		r.err = serr
	case eof:
		r.err = io.EOF
	case err != nil:
		// The held tail may be the start of a needle: it is dropped.
		r.err = err
	}
}

// Close closes the source.
func (r *streamReader) Close() error { return r.src.Close() }

// errWriteAfterClose is returned by a MaskWriter used after Close.
var errWriteAfterClose = errors.New("credinject: write to a MaskWriter after Close")

// MaskWriter replaces each loaded secret in what is written through it with
// "[masked:NAME]" before passing it on, for a sandboxed command's stdout and
// stderr. It holds back only a possible start of a secret (fewer bytes than
// the longest secret) and passes everything else on at once, so prompts and
// line protocols keep flowing. Where secrets overlap, the longest one that
// starts at the leftmost position wins. It is not safe for concurrent use.
type MaskWriter struct {
	w       io.Writer
	st      stream
	scratch []byte
	out     []byte
	err     error
}

// NewMaskWriter returns a MaskWriter writing to w that masks the secrets of
// set; a nil or empty set masks nothing.
func NewMaskWriter(w io.Writer, set *Set) *MaskWriter {
	set = set.orEmpty()
	return &MaskWriter{w: w, st: stream{m: set.secrets, emit: set.maskedName}}
}

// maskedName is the emit function turning needle k of secrets or
// scrubber into "[masked:NAME]".
func (s *Set) maskedName(dst []byte, k int) ([]byte, error) {
	return append(append(append(dst, "[masked:"...), s.credOf(k).name...), ']'), nil
}

// Redact returns v with every real secret replaced by "[masked:NAME]", as
// a MaskWriter writes it, and the environment variables that hold the
// placeholders of the credentials found (sorted, once each), none when v
// holds no secret.
func (s *Set) Redact(v string) (string, []string) {
	s = s.orEmpty()
	var vars []string
	emit := func(dst []byte, k int) ([]byte, error) {
		vars = append(vars, s.credOf(k).env)
		return s.maskedName(dst, k)
	}
	st := stream{m: s.secrets, emit: emit}
	out, _, _ := st.scan(make([]byte, 0, len(v)), []byte(v), true)
	slices.Sort(vars)
	return string(out), slices.Compact(vars)
}

// Write masks p and writes every byte that can no longer begin a secret.
func (mw *MaskWriter) Write(p []byte) (int, error) {
	if mw.err != nil {
		return 0, mw.err
	}
	// emit never fails here, so only the write below can.
	mw.out, mw.scratch, _ = mw.st.write(mw.out[:0], p, mw.scratch)
	if err := mw.send(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes the held-back tail. It does not close the underlying writer.
func (mw *MaskWriter) Close() error {
	if mw.err != nil {
		if mw.err == errWriteAfterClose {
			return nil
		}
		return mw.err
	}
	mw.out, _ = mw.st.flush(mw.out[:0])
	if err := mw.send(); err != nil {
		return err
	}
	mw.err = errWriteAfterClose
	return nil
}

// send writes mw.out, remembering a failure for later calls.
func (mw *MaskWriter) send() error {
	if len(mw.out) == 0 {
		return nil
	}
	if _, err := mw.w.Write(mw.out); err != nil {
		mw.err = err
		return err
	}
	return nil
}
