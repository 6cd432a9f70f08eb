package tlsterm

import (
	"bytes"
	"errors"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
)

// FramingGuard watches the raw HTTP/1.x request stream of one connection,
// the bytes exactly as the client sent them, and gives a verdict on each
// request's message framing. net/http quietly resolves a request carrying
// both Content-Length and Transfer-Encoding (the transfer coding wins);
// cordon refuses it instead, because such a request is a smuggling attempt
// whatever the next hop makes of it.
//
// It follows header blocks, Content-Length bodies and chunked bodies
// (sizes, data, trailers) to find where each request ends. Once it can no
// longer follow the stream (an upgrade, or input net/http would reject
// anyway) it stops, and requests without a verdict are refused.
//
// It also bounds the lines of a header block (MaxHeaderFields): a read
// that would hand the reader above a line past the bound fails with
// ErrHeaderFields instead, as does every read after it.
type FramingGuard struct {
	net.Conn

	mu       sync.Mutex
	verdicts []string // "" means sound framing
	state    framingState
	// line is the start of the line being collected (maxKeptLine), and
	// clipped says it went on past that.
	line    []byte
	clipped bool
	remain  int64 // body or chunk bytes still to skip
	dead    bool
	// lines counts the lines of the header block being read, and block is
	// what they said about its framing.
	lines int
	block framingBlock
	// tooMany says a header block went past MaxHeaderFields.
	tooMany bool
	// first is the request line of the latest header block.
	first []byte
}

// maxRequestLine bounds how much of a request line RequestLine returns.
const maxRequestLine = 200

// RequestLine returns the start of the latest request line the client
// sent, whole or not yet ended, without its line ending: never a header
// line, which may carry credentials.
func (g *FramingGuard) RequestLine() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == inHeader && g.lines == 0 && len(g.line) > 0 {
		return string(g.line[:min(len(g.line), maxRequestLine)])
	}
	return string(g.first)
}

type framingState int

const (
	inHeader framingState = iota
	inBody
	inChunkSize
	inChunkData
	inTrailer
)

// maxKeptLine bounds how much of one line the guard keeps. A header block
// is judged line by line, so only the line being read is held, and only
// its start: all a header line's judgement needs unless it names
// Content-Length or Transfer-Encoding. Keeping whole blocks doubled what
// an unfinished header cost cordon (the reader above holds one too).
const maxKeptLine = 4096

// MaxHeaderFields bounds the field lines of a request's header block (and
// an HTTP/2 request's fields, which the handler refuses past it).
// net/http's parser keeps each field it has read as a map entry of a
// couple of hundred bytes, so MaxHeaderBytes alone let a header of short
// fields ("a1:", "a2:", ...) cost cordon some 1 MiB, outside the box's
// limits, for as long as it stayed unfinished: 4,000 such connections
// from a box took cordon past 4 GB. Real clients send a few dozen
// (Apache's httpd refuses more than 100).
const MaxHeaderFields = 256

// ErrHeaderFields is what a FramingGuard's reads return once a header
// block has gone past MaxHeaderFields lines.
var ErrHeaderFields = errors.New("the request header has over " + strconv.Itoa(MaxHeaderFields) + " fields, the most cordon reads; send fewer headers")

func (g *FramingGuard) Read(p []byte) (int, error) {
	if g.HeaderFieldsExceeded() {
		return 0, ErrHeaderFields
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		var tooMany bool
		n, tooMany = g.feedLocked(p[:n])
		if tooMany && n == 0 {
			return 0, ErrHeaderFields
		}
		if tooMany {
			err = nil // the next read says it, at a line's start
		}
	}
	return n, err
}

// feedLocked is feed under mu, and whether a header block went past
// MaxHeaderFields. A panic in feed leaves mu unlocked: the reader that
// recovers it goes on to the guard's other methods.
func (g *FramingGuard) feedLocked(b []byte) (n int, tooMany bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.feed(b), g.tooMany
}

// HeaderFieldsExceeded says a header block went past MaxHeaderFields.
func (g *FramingGuard) HeaderFieldsExceeded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tooMany
}

// NewFramingGuard wraps a client connection whose reads it watches.
func NewFramingGuard(c net.Conn) *FramingGuard { return &FramingGuard{Conn: c} }

// Stop ends the watching (the connection is switching protocols) and frees
// what the guard holds; requests after it get no verdict.
func (g *FramingGuard) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dead, g.line, g.verdicts, g.block = true, nil, nil, framingBlock{}
}

// Next returns the verdict for the next request net/http hands out: ""
// for sound framing, else the problem; ok is false when the guard could
// not follow the stream that far.
func (g *FramingGuard) Next() (problem string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.verdicts) == 0 {
		return "", false
	}
	v := g.verdicts[0]
	// Shifted rather than resliced, so the array is reused: there is
	// seldom more than one verdict waiting.
	g.verdicts = g.verdicts[:copy(g.verdicts, g.verdicts[1:])]
	return v, true
}

// Pending says a request's header has been read whose verdict no one has
// taken (Next): net/http has not handed it out, so an answer to it now is
// net/http's own.
func (g *FramingGuard) Pending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.verdicts) > 0
}

// feed follows b, the next bytes of the stream, and returns how many of
// them go up to the reader: all but those from the start of a header
// line past MaxHeaderFields on, so the reader is handed the request line
// and MaxHeaderFields whole field lines at most.
func (g *FramingGuard) feed(b []byte) int {
	all := len(b)
	for len(b) > 0 && !g.dead {
		if g.fieldPastBound(b) {
			g.tooMany, g.dead = true, true
			return all - len(b)
		}
		switch g.state {
		case inBody, inChunkData:
			k := int64(len(b))
			if k > g.remain {
				k = g.remain
			}
			b, g.remain = b[k:], g.remain-k
			if g.remain == 0 {
				if g.state == inBody {
					g.state = inHeader
				} else {
					g.state = inChunkSize
				}
			}
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				g.collect(b)
				return all
			}
			g.collect(b[:i+1])
			b = b[i+1:]
			g.lineDone()
		}
	}
	return all
}

// fieldPastBound says b, the next bytes of the line being read, make it
// a field line of a header block that has MaxHeaderFields already,
// rather than the blank line that ends the block.
func (g *FramingGuard) fieldPastBound(b []byte) bool {
	if g.state != inHeader || g.lines <= MaxHeaderFields { // the request line, then the fields
		return false
	}
	l := append(g.line[:len(g.line):len(g.line)], b[:min(len(b), 2)]...)
	blank := l[0] == '\n' || l[0] == '\r' && (len(l) == 1 || l[1] == '\n')
	return !blank
}

func (g *FramingGuard) collect(b []byte) {
	if room := maxKeptLine - len(g.line); len(b) > room {
		b, g.clipped = b[:room], true
	}
	g.line = append(g.line, b...)
}

// lineDone acts on a completed line.
func (g *FramingGuard) lineDone() {
	defer func() { g.line, g.clipped = g.line[:0], false }()
	if g.dead {
		return
	}
	blank := bytes.Equal(g.line, []byte("\r\n")) || bytes.Equal(g.line, []byte("\n"))
	switch g.state {
	case inHeader:
		switch {
		case blank && g.lines == 0:
			// blank lines between requests are allowed
		case blank:
			g.headerDone()
		case g.lines == 0: // the request line
			g.lines++
			first := bytes.TrimRight(g.line, "\r\n")
			g.first = append(g.first[:0], first[:min(len(first), maxRequestLine)]...)
		default:
			g.lines++
			g.headerLine()
		}
	case inChunkSize:
		size, ok := parseChunkSize(string(g.line))
		switch {
		case !ok || g.clipped:
			g.dead = true
		case size == 0:
			g.state = inTrailer
		default:
			g.state, g.remain = inChunkData, size+2 // data and its CRLF
		}
	case inTrailer:
		if blank {
			g.state = inHeader
		}
	}
}

// headerLine takes in one header line of the block (not its request
// line). A clipped line is judged by its start when that holds its whole
// name and the name is neither Content-Length nor Transfer-Encoding; else
// the block cannot be judged, and the guard follows it only to its end
// (counting its lines), where it stops.
func (g *FramingGuard) headerLine() {
	if g.block.lost {
		return
	}
	l := bytes.TrimSuffix(g.line, []byte("\n"))
	name, val, ok := bytes.Cut(bytes.TrimRight(l, "\r"), []byte(":"))
	if !ok {
		g.block.lost = g.clipped // the name may go on past what was kept
		return
	}
	trimmed := bytes.TrimSpace(name)
	cl, te := equalFoldASCII(trimmed, "content-length"), equalFoldASCII(trimmed, "transfer-encoding")
	if (cl || te) && g.clipped {
		g.block.lost = true // its value was not all kept
		return
	}
	switch {
	case cl:
		g.block.contentLength(string(bytes.TrimSpace(val)))
	case te:
		g.block.transferEncoding(string(bytes.TrimSpace(val)), len(name) != len(trimmed))
	}
}

// headerDone judges one request's header block and sets up its body.
// After a block it could not judge, the guard stops: the request gets no
// verdict, and where its body ends is unknown.
func (g *FramingGuard) headerDone() {
	if g.block.lost {
		g.dead = true
		return
	}
	problem, body, length := g.block.verdict()
	g.lines, g.block = 0, framingBlock{}
	g.verdicts = append(g.verdicts, problem)
	switch body {
	case bodyNone:
		g.state = inHeader
	case bodyLength:
		g.state, g.remain = inBody, length
	case bodyChunked:
		g.state = inChunkSize
	default:
		g.dead = true
	}
}

type bodyKind int

const (
	bodyNone bodyKind = iota
	bodyLength
	bodyChunked
	bodyUnknown
)

// framingBlock is what the header lines of one request have said about
// its framing so far.
type framingBlock struct {
	// lost says a line could not be judged (see headerLine).
	lost    bool
	problem string
	// cls counts the Content-Length headers, cl is the first one's value,
	// and clConflict says another differed from it.
	cls        int
	cl         string
	clConflict bool
	// te says a Transfer-Encoding header came; lastCoding is the last
	// coding the last one named.
	te         bool
	lastCoding string
}

func (b *framingBlock) contentLength(v string) {
	if b.cls == 0 {
		b.cl = v
	} else if v != b.cl {
		b.clConflict = true
	}
	b.cls++
}

// transferEncoding takes in a Transfer-Encoding value; spaced says
// whitespace surrounded the header's name.
func (b *framingBlock) transferEncoding(v string, spaced bool) {
	b.te = true
	b.lastCoding = v[strings.LastIndexByte(v, ',')+1:]
	if spaced {
		b.problem = "whitespace around the Transfer-Encoding header name"
	}
}

// verdict says whether a request's framing is sound, and how its body is
// delimited.
func (b *framingBlock) verdict() (problem string, body bodyKind, length int64) {
	switch {
	case b.problem != "":
		return b.problem, bodyUnknown, 0
	case b.cls > 0 && b.te:
		return "both Content-Length and Transfer-Encoding", bodyUnknown, 0
	case b.te:
		if !equalFoldASCII(strings.TrimSpace(b.lastCoding), "chunked") {
			return "", bodyUnknown, 0 // net/http answers 501
		}
		return "", bodyChunked, 0
	case b.cls > 0:
		if b.clConflict {
			return "conflicting Content-Length values", bodyUnknown, 0
		}
		n, err := strconv.ParseInt(b.cl, 10, 64)
		if err != nil || n < 0 {
			return "", bodyUnknown, 0 // net/http answers 400
		}
		if n == 0 {
			return "", bodyNone, 0
		}
		return "", bodyLength, n
	}
	return "", bodyNone, 0
}

// equalFoldASCII says whether s and t are equal ignoring ASCII case only,
// as HTTP compares header names (strings.EqualFold would also match
// "\u017f" to "s").
func equalFoldASCII[T ~string | ~[]byte](s T, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != lowerASCII(t[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// parseChunkSize reads a chunk-size line. A size the followers cannot
// count down together with the CRLF after the chunk's data (past
// maxChunkSize) is not ok: added to it, a size of 0x7fffffffffffffff
// wrapped to a negative count, and the next bytes of the stream panicked
// the goroutine reading it, which for a connection the restricted box's
// network redirected ended cordon, and with it the run, before the
// repositories the box had planted were set aside.
func parseChunkSize(line string) (int64, bool) {
	line = strings.TrimRight(line, "\r\n")
	if i := strings.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if line == "" || len(line) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(line, 16, 63)
	return int64(n), err == nil && n <= maxChunkSize
}

// maxChunkSize is the largest chunk size a follower takes: with its data's
// CRLF, the most an int64 counts.
const maxChunkSize = math.MaxInt64 - 2
