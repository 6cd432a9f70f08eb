package tlsterm

import (
	"bytes"
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
type FramingGuard struct {
	net.Conn

	mu       sync.Mutex
	verdicts []string // "" means sound framing
	state    framingState
	line     []byte // the header block or chunk line being collected
	remain   int64  // body or chunk bytes still to skip
	dead     bool
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
	if g.state == inHeader && len(g.line) > 0 && bytes.IndexByte(g.line, '\n') < 0 {
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

// maxFramingLine bounds what the guard buffers: net/http's default header
// limit plus slack.
const maxFramingLine = 1<<20 + 4096

func (g *FramingGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if n > 0 {
		g.mu.Lock()
		g.feed(p[:n])
		g.mu.Unlock()
	}
	return n, err
}

// NewFramingGuard wraps a client connection whose reads it watches.
func NewFramingGuard(c net.Conn) *FramingGuard { return &FramingGuard{Conn: c} }

// Stop ends the watching (the connection is switching protocols) and frees
// what the guard holds; requests after it get no verdict.
func (g *FramingGuard) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dead, g.line, g.verdicts = true, nil, nil
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

func (g *FramingGuard) feed(b []byte) {
	for len(b) > 0 && !g.dead {
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
				return
			}
			g.collect(b[:i+1])
			b = b[i+1:]
			g.lineDone()
		}
	}
}

func (g *FramingGuard) collect(b []byte) {
	if len(g.line)+len(b) > maxFramingLine {
		g.dead = true
		return
	}
	g.line = append(g.line, b...)
}

// lineDone acts on a completed line (header and trailer states collect
// whole blocks, line by line).
func (g *FramingGuard) lineDone() {
	if g.dead {
		return
	}
	switch g.state {
	case inHeader:
		if bytes.Equal(g.line, []byte("\r\n")) || bytes.Equal(g.line, []byte("\n")) {
			g.line = g.line[:0] // blank lines between requests are allowed
			return
		}
		if bytes.IndexByte(g.line, '\n') == len(g.line)-1 { // the block's first line
			first := bytes.TrimRight(g.line, "\r\n")
			g.first = append(g.first[:0], first[:min(len(first), maxRequestLine)]...)
		}
		if !bytes.HasSuffix(g.line, []byte("\n\r\n")) && !bytes.HasSuffix(g.line, []byte("\n\n")) {
			return // the block goes on
		}
		g.headerDone(g.line)
	case inChunkSize:
		size, ok := parseChunkSize(string(g.line))
		switch {
		case !ok:
			g.dead = true
		case size == 0:
			g.state = inTrailer
		default:
			g.state, g.remain = inChunkData, size+2 // data and its CRLF
		}
	case inTrailer:
		if bytes.Equal(g.line, []byte("\r\n")) || bytes.Equal(g.line, []byte("\n")) {
			g.state = inHeader
		}
	}
	g.line = g.line[:0]
}

// headerDone judges one request's header block and sets up its body.
func (g *FramingGuard) headerDone(block []byte) {
	problem, body, length := judgeFraming(block)
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

// judgeFraming reads a request's header block and says whether its framing
// is sound, and how its body is delimited.
func judgeFraming(block []byte) (problem string, body bodyKind, length int64) {
	var cls, tes []string
	_, rest, _ := bytes.Cut(block, []byte("\n")) // the request line
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, val, ok := bytes.Cut(bytes.TrimRight(l, "\r"), []byte(":"))
		if !ok {
			continue
		}
		trimmed := bytes.TrimSpace(name)
		switch {
		case equalFoldASCII(trimmed, "content-length"):
			cls = append(cls, string(bytes.TrimSpace(val)))
		case equalFoldASCII(trimmed, "transfer-encoding"):
			tes = append(tes, string(bytes.TrimSpace(val)))
			if len(name) != len(trimmed) {
				problem = "whitespace around the Transfer-Encoding header name"
			}
		}
	}
	switch {
	case problem != "":
		return problem, bodyUnknown, 0
	case len(cls) > 0 && len(tes) > 0:
		return "both Content-Length and Transfer-Encoding", bodyUnknown, 0
	case len(tes) > 0:
		codings := strings.Split(strings.Join(tes, ","), ",")
		if !equalFoldASCII(strings.TrimSpace(codings[len(codings)-1]), "chunked") {
			return "", bodyUnknown, 0 // net/http answers 501
		}
		return "", bodyChunked, 0
	case len(cls) > 0:
		for _, v := range cls[1:] {
			if v != cls[0] {
				return "conflicting Content-Length values", bodyUnknown, 0
			}
		}
		n, err := strconv.ParseInt(cls[0], 10, 64)
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
	return int64(n), err == nil
}
