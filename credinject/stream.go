package credinject

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"time"
)

// matcher finds a fixed set of needles in a byte stream. At each position
// it takes the longest needle that matches there, scanning left to right
// without overlaps: the semantics of strings.NewReplacer given the needles
// longest first. It is the one engine behind response rewriting, output
// masking and the request body guard.
type matcher struct {
	needles [][]byte
	longest int
	// window is how many bytes a windowed stream holds back: m.longest-1,
	// or more where the needles' lengths must not show (the secrets',
	// see Set.window).
	window int
	// first marks the bytes some needle begins with.
	first [256]bool
	// apart marks the bytes no needle holds, letters and digits aside
	// (see stream.flushApart).
	apart [256]bool
}

// newMatcher compiles needles, which must all be non-empty.
func newMatcher(needles [][]byte) *matcher {
	m := &matcher{needles: needles}
	for c := range m.apart {
		m.apart[c] = !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z')
	}
	for _, n := range needles {
		m.longest = max(m.longest, len(n))
		m.first[n[0]] = true
		for _, c := range n {
			m.apart[c] = false
		}
	}
	m.window = max(m.longest-1, 0)
	return m
}

// Positions in stream.next that are not offsets.
const (
	nextUnknown = -2
	nextNone    = -1
)

// stream is one pass of a matcher over a byte stream. It keeps as its tail
// the bytes that could still begin a match once more data arrives, fewer
// than m.longest: a proper prefix of some needle or, with window set, the
// last m.window bytes whatever they are.
type stream struct {
	m *matcher
	// emit appends what replaces needle k to dst, or refuses with an error.
	emit func(dst []byte, k int) ([]byte, error)
	// window holds back a fixed number of bytes, so that what is handed
	// out, and when, never depends on how much of a needle the tail
	// holds: for needles the other side must not learn (real secrets).
	// Without it only a possible start of a needle is held, which is for
	// needles the other side knows anyway (placeholders).
	window bool
	tail   []byte
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
			switch {
			case final:
				hold = len(buf)
			case s.window:
				hold = max(i, len(buf)-s.m.window)
			default:
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

// replaceFolded appends text to dst with every needle found in it, in any
// ASCII case (m's needles are in lower case, lowerAll), replaced through
// emit, which must not fail, and reports whether it found one. Leftmost,
// longest and without overlaps, as scan.
func (m *matcher) replaceFolded(dst, text []byte, emit func(dst []byte, k int) ([]byte, error)) ([]byte, bool) {
	lower := lowerASCII(text)
	next := make([]int, len(m.needles))
	for k := range next {
		next[k] = nextUnknown
	}
	done, found := 0, false
	for {
		p, k := m.leftmost(lower, done, next)
		if p < 0 {
			return append(dst, text[done:]...), found
		}
		dst, _ = emit(append(dst, text[done:p]...), k)
		done, found = p+len(m.needles[k]), true
	}
}

// lowerASCII returns b with its ASCII capitals in lower case, byte for
// byte (strings.ToLower may change a length).
func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// lowerAll returns the needles in lower case (lowerASCII).
func lowerAll(needles [][]byte) [][]byte {
	out := make([][]byte, len(needles))
	for i, n := range needles {
		out[i] = lowerASCII(n)
	}
	return out
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

// flushApart decides the tail up to its last byte that no needle holds
// (m.apart), appending it to dst, and keeps the rest. No needle can cross
// such a byte, so none is split between what goes and what stays, and
// which bytes go depends on where those bytes are, never on how much of a
// needle the tail holds. Letters and digits never count as such bytes, so
// what it does tells nothing of which of them a needle holds (only which
// other bytes one does).
func (s *stream) flushApart(dst []byte) ([]byte, error) {
	end := len(s.tail)
	for end > 0 && !s.m.apart[s.tail[end-1]] {
		end--
	}
	dst, _, err := s.scan(dst, s.tail[:end], true)
	s.tail = append(s.tail[:0], s.tail[end:]...)
	return dst, err
}

// readChunk is how much a streamReader asks its source for at once.
const readChunk = 32 << 10

// maxEmptyReads is how many (0, nil) reads from a source a streamReader
// tolerates in a row before giving up with io.ErrNoProgress.
const maxEmptyReads = 100

// decided is the output side of a reader over a stream: what the stream
// has decided, handed out in turn.
type decided struct {
	out []byte
	off int
	// err ends the stream once out is drained: io.EOF, a source error or a
	// refusal from emit.
	err error
}

// read hands out decided bytes, calling more while there are none.
func (d *decided) read(p []byte, more func()) (int, error) {
	for empty := 0; d.off == len(d.out); empty++ {
		if d.err != nil {
			return 0, d.err
		}
		if empty == maxEmptyReads {
			d.err = io.ErrNoProgress
			continue
		}
		more()
	}
	n := copy(p, d.out[d.off:])
	d.off += n
	return n, nil
}

// streamReader passes a source through a stream. Memory is bounded by
// readChunk plus the longest needle, plus the replacements.
type streamReader struct {
	src io.ReadCloser
	st  stream
	in  []byte
	decided
}

func newStreamReader(src io.ReadCloser, m *matcher, emit func([]byte, int) ([]byte, error)) *streamReader {
	return &streamReader{src: src, st: stream{m: m, emit: emit}}
}

// Read returns decided bytes, reading the source as needed.
func (r *streamReader) Read(p []byte) (int, error) { return r.read(p, r.fill) }

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

// maskIdle is how long a masking stream waits for more bytes before it
// hands out what it holds back: a MaskWriter all of it, a maskReader what
// precedes the last byte no secret holds.
const maskIdle = 50 * time.Millisecond

// maskReader passes a source through a windowed stream: it holds back the
// last m.window bytes read until more arrive or the
// source ends; once the source has been quiet for maskIdle, it hands out
// the held bytes up to the last one no needle holds (stream.flushApart),
// and keeps the rest until more arrive. So what it hands out, and when,
// depends on the bytes only where a needle is whole, and a needle is never
// split by a pause: handing out the whole tail at a pause sent a secret the
// pause split out in two unmasked parts, and a pause is the sandbox's to
// make (a slow reader, or a response that outgrows the first flight of a
// distant upstream's TCP window). From the first Read, a goroutine reads
// the source ahead, into one of two buffers, so that a quiet source can be
// waited for with a deadline.
type maskReader struct {
	src    io.ReadCloser
	st     stream
	chunks chan chunk
	free   chan []byte
	done   chan struct{}
	exited chan struct{} // closed when pump returns, or at Close if it never ran
	start  sync.Once     // pump starts at the first Read: nothing reads the source before
	closed sync.Once
	idle   *time.Timer
	// quiet says the source went quiet and what could go has gone: the
	// rest of the tail waits for the source.
	quiet bool
	in    []byte
	decided
}

// chunk is one read of the source.
type chunk struct {
	b   []byte
	err error
}

func newMaskReader(src io.ReadCloser, m *matcher, emit func([]byte, int) ([]byte, error)) *maskReader {
	r := &maskReader{src: src, st: stream{m: m, emit: emit, window: true},
		chunks: make(chan chunk, 2), free: make(chan []byte, 2), done: make(chan struct{}), exited: make(chan struct{})}
	r.free <- *readAheadBuffers.Get().(*[]byte)
	r.free <- *readAheadBuffers.Get().(*[]byte)
	r.idle = time.NewTimer(time.Hour)
	r.idle.Stop()
	return r
}

// readAheadBuffers are the buffers maskReaders read their sources into.
var readAheadBuffers = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// giveBack returns the read-ahead buffers to their pool once the pump has
// exited.
func (r *maskReader) giveBack() {
	for {
		select {
		case b := <-r.free:
			b = b[:cap(b)]
			readAheadBuffers.Put(&b)
		case c := <-r.chunks:
			b := c.b[:cap(c.b)]
			readAheadBuffers.Put(&b)
		default:
			return
		}
	}
}

// pump reads the source ahead until it fails or the reader is closed.
func (r *maskReader) pump() {
	defer close(r.exited)
	for {
		var b []byte
		select {
		case b = <-r.free:
		case <-r.done:
			return
		}
		n, err := r.src.Read(b[:cap(b)])
		select {
		case r.chunks <- chunk{b[:n], err}:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read returns decided bytes, waiting for the source as needed.
func (r *maskReader) Read(p []byte) (int, error) {
	r.start.Do(func() { go r.pump() })
	return r.read(p, r.next)
}

// next takes the source's next read, or hands out the held tail up to its
// last byte no needle holds once the source has been quiet for maskIdle.
func (r *maskReader) next() {
	var c chunk
	if len(r.st.tail) == 0 || r.quiet {
		c = <-r.chunks
	} else {
		r.idle.Reset(maskIdle)
		select {
		case c = <-r.chunks:
			r.idle.Stop()
		case <-r.idle.C:
			// emit never fails for a mask.
			r.out, _ = r.st.flushApart(r.out[:0])
			r.off, r.quiet = 0, true
			return
		}
	}
	r.quiet = false
	buf := append(append(r.in[:0], r.st.tail...), c.b...)
	r.in = buf
	r.free <- c.b
	eof := errors.Is(c.err, io.EOF)
	out, decided, _ := r.st.scan(r.out[:0], buf, eof)
	r.out, r.off = out, 0
	r.st.tail = append(r.st.tail[:0], buf[decided:]...)
	switch {
	case eof:
		r.err = io.EOF
	case c.err != nil:
		// The held tail may be the start of a secret: it is dropped.
		r.err = c.err
	}
	if c.err != nil {
		<-r.exited // it sent its last
		r.giveBack()
	}
}

// Close stops the read-ahead, closes the source, and returns once nothing
// reads the source any more: the source's Close must end a read in
// progress (a connection's does), or the caller must end it first, before
// it reuses what the source reads from.
func (r *maskReader) Close() error {
	err := errors.New("credinject: closed twice")
	r.closed.Do(func() {
		close(r.done)
		r.idle.Stop()
		err = r.src.Close()
		r.start.Do(func() { close(r.exited) })
		<-r.exited
		r.giveBack()
	})
	return err
}

// errWriteAfterClose is returned by a MaskWriter used after Close.
var errWriteAfterClose = errors.New("credinject: write to a MaskWriter after Close")

// MaskWriter replaces each loaded secret in what is written through it with
// "[masked:NAME]" before passing it on, for a sandboxed command's stdout and
// stderr. It holds back the last bytes written (as many as Set.MaskBody)
// until more come or none has for maskIdle, whatever they are, so
// that prompts and line protocols keep flowing and nothing tells the writer
// whether what it wrote starts a secret. Where secrets overlap, the longest
// one that starts at the leftmost position wins. Write and Close may be
// called from one goroutine at a time.
type MaskWriter struct {
	mu      sync.Mutex
	w       io.Writer
	st      stream
	scratch []byte
	out     []byte
	err     error
	// idle hands out the held tail once no write has come for maskIdle:
	// armed by a write that leaves a tail, it looks at last when it
	// fires, and waits on if a write came since (resetting a timer on
	// every write costs more than the write).
	idle  *time.Timer
	armed bool
	last  time.Time
}

// NewMaskWriter returns a MaskWriter writing to w that masks the secrets of
// set; a nil or empty set masks nothing.
func NewMaskWriter(w io.Writer, set *Set) *MaskWriter {
	set = set.orEmpty()
	mw := &MaskWriter{w: w, st: stream{m: set.secrets, emit: set.maskedName, window: true}}
	mw.idle = time.AfterFunc(time.Hour, mw.flushIdle)
	mw.idle.Stop()
	return mw
}

// flushIdle writes the held tail once the stream has been quiet.
func (mw *MaskWriter) flushIdle() {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if quiet := time.Since(mw.last); quiet < maskIdle {
		mw.idle.Reset(maskIdle - quiet)
		return
	}
	mw.armed = false
	if mw.err == nil {
		mw.out, _ = mw.st.flush(mw.out[:0])
		mw.send()
	}
}

// maskedName is the emit function turning needle k of secrets or
// scrubber into "[masked:NAME]".
func (s *Set) maskedName(dst []byte, k int) ([]byte, error) {
	return s.credOf(k).masked(dst), nil
}

// masked appends "[masked:NAME]" to dst.
func (c *cred) masked(dst []byte) []byte {
	return append(append(append(dst, "[masked:"...), c.name...), ']')
}

// Redact returns v with every real secret replaced by "[masked:NAME]", as
// a MaskWriter writes it, and every base64 token that decodes to text
// holding one (a Docker config's "auth", the value of a Basic
// Authorization header) by the names of the secrets it holds; and it
// returns the environment variables that hold the placeholders of the
// credentials found (sorted, once each), none when v holds no secret.
func (s *Set) Redact(v string) (string, []string) {
	s = s.orEmpty()
	var vars []string
	emit := func(dst []byte, k int) ([]byte, error) {
		vars = append(vars, s.credOf(k).env)
		return s.maskedName(dst, k)
	}
	st := stream{m: s.secrets, emit: emit}
	out, _, _ := st.scan(make([]byte, 0, len(v)), []byte(v), true)
	out = rewriteBase64(out, func(tok []byte) ([]byte, bool) {
		raw, _, ok := s.decodeToken(tok)
		if !ok {
			return nil, false
		}
		var names []byte
		for _, c := range s.creds {
			if c.heldIn(raw) {
				vars, names = append(vars, c.env), c.masked(names)
			}
		}
		return names, true
	})
	slices.Sort(vars)
	return string(out), slices.Compact(vars)
}

// Write masks p and writes every byte that can no longer begin a secret.
func (mw *MaskWriter) Write(p []byte) (int, error) {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	if mw.err != nil {
		return 0, mw.err
	}
	// emit never fails here, so only the write below can.
	mw.out, mw.scratch, _ = mw.st.write(mw.out[:0], p, mw.scratch)
	if err := mw.send(); err != nil {
		return 0, err
	}
	if len(mw.st.tail) > 0 {
		mw.last = time.Now()
		if !mw.armed {
			mw.armed = true
			mw.idle.Reset(maskIdle)
		}
	}
	return len(p), nil
}

// Close writes the held-back tail. It does not close the underlying writer.
func (mw *MaskWriter) Close() error {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	mw.idle.Stop()
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
