package tlsterm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"

	"github.com/cordon-sandbox/cordon/internal/survive"
)

// ResponseConn is an HTTP/1.1 upstream connection read by net/http's
// Transport (plain HTTP through the proxy, and an HTTP/2 client's
// requests to an HTTP/1.1 upstream). It follows the responses as they
// come, to bound what net/http's parser keeps: a response header of more
// than maxResponseFields fields fails the read with errResponseFields.
// net/http bounds a header's bytes (MaxResponseHeaderBytes) and not its
// fields, each a map entry of a couple of hundred bytes: 256 KiB of
// short fields held cordon at some 12 MB a response. A response whose
// length it cannot follow fails the read with errUnframed. Its
// Transport is a WatchingTransport, whose requests tell it what each
// asked for.
//
// Bytes that come when no request is out, or that wait already when a
// read ends a response (in that read, in the kernel, or in records TLS
// has read), answer no request cordon sent: a server that
// ignores a request's body (a Python http.server handler that answers
// without reading it does) reads the body as a request of its own and
// answers it. They are logged (unsolicited) and the connection is not
// reused: net/http only wrote them, with their content, to cordon's
// standard error, and an HTTP/2 client's next request could take them
// as its response.
type ResponseConn struct {
	net.Conn
	unsolicited func(method, path string)

	mu sync.Mutex
	f  responseFramer
	// method and path are the latest request's.
	method, path string
	// through says the stream is no longer followed: a body that ends
	// with the connection, or a switched protocol, after neither of
	// which net/http reuses the connection.
	through bool
	// err fails every read once it is set.
	err error
	// spentBy is a request whose body started like a request line
	// (bodystart.go): no request after it is written on the connection,
	// which fails later writes (refuseWrites) before a byte goes.
	spentBy      *http.Request
	refuseWrites bool
}

// errSpent fails the writes of a connection on which a request's body
// started like a request line: net/http sends the request again on
// another connection when it can (nothing of it was written).
var errSpent = errors.New("the upstream connection carried a body that starts like a request, which the server may read as one")

func (c *ResponseConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	refuse := c.refuseWrites
	c.mu.Unlock()
	if refuse {
		return 0, errSpent
	}
	return c.Conn.Write(p)
}

// spend marks the connection as having carried req, whose body started
// like a request line.
func (c *ResponseConn) spend(req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spentBy = req
}

// NewResponseConn follows the responses on c; unsolicited logs bytes
// nobody asked for, after the response to the request method and path
// (none before the first).
func NewResponseConn(c net.Conn, unsolicited func(method, path string)) *ResponseConn {
	return &ResponseConn{Conn: c, unsolicited: unsolicited, f: responseFramer{state: respDone}}
}

// errUnsolicited fails the reads of a connection that brought bytes no
// request asked for.
var errUnsolicited = errors.New("the upstream sent bytes no request asked for")

// errUnframed is a response whose length cordon could not follow.
var errUnframed = errors.New("upstream response framing cordon cannot follow (a malformed status line, chunk size, or Content-Length or Transfer-Encoding)")

// Read reads the upstream's bytes, following each response's framing. It
// runs on net/http's Transport's goroutine, which nothing recovers: a
// panic in the framing becomes the read's error (survive.Recover).
func (c *ResponseConn) Read(p []byte) (n int, err error) {
	defer survive.Recover(&err, "reading an upstream's response")
	return c.read(p)
}

func (c *ResponseConn) read(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for b := p[:n]; len(b) > 0 && !c.through; {
		if c.f.state == respDone {
			return c.refuse(b, n-len(b))
		}
		k, ferr := c.f.feed(b)
		if ferr != nil {
			// The reader is handed the bytes before the failure, which
			// come to a line's start, and the error with the next read:
			// handed a line cut short, net/http said the line was
			// malformed.
			c.err = ferr
			if at := n - len(b) + k; at > 0 {
				return at, nil
			}
			return 0, ferr
		}
		b = b[k:]
		c.through = c.f.state == respSwitched || c.f.state == respUntilClose
	}
	if n > 0 && err == nil && c.f.state == respDone && idleOn(c.Conn, bufio.NewReaderSize(c.Conn, 16)) == idleData {
		// The response ended with this read, and bytes came after it
		// already: in the kernel, or in records TLS has read.
		return c.refuse(nil, n)
	}
	return n, err
}

// refuse drops extra, bytes no request asked for that came after the
// first used bytes of a read, and logs them. The reader gets the used
// bytes and the connection's end, after which net/http does not reuse
// it, or, with none, an error it does not quote. An idle connection's
// 408 is its server closing it, as net/http has it: not logged.
func (c *ResponseConn) refuse(extra []byte, used int) (int, error) {
	c.err = errUnsolicited
	switch {
	case used > 0:
		c.err = io.EOF
	case is408(extra):
		c.err = io.EOF
		return 0, c.err
	}
	c.unsolicited(c.method, c.path)
	return used, c.err
}

// is408 says whether b starts an HTTP/1.x 408 response.
func is408(b []byte) bool {
	return len(b) >= len("HTTP/1.x 408") && bytes.HasPrefix(b, []byte("HTTP/1.")) && string(b[8:12]) == " 408"
}

// failed is the error that fails every read, if there is one.
func (c *ResponseConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// expect readies the connection for the response to req, unless it is
// in the middle of one.
func (c *ResponseConn) expect(req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f.state == respDone || c.f.state == respHeader && c.f.lines == 0 && len(c.f.line) == 0 {
		c.f.next(req.Method == http.MethodHead)
	}
	c.method, c.path = req.Method, req.URL.Path
	if c.spentBy != nil && c.spentBy != req {
		c.refuseWrites = true
	}
}

// WatchingTransport is a Transport whose HTTP/1.1 connections are
// ResponseConns: each request tells the connection it goes out on what it
// asked for, so that only what no request asked for is refused.
type WatchingTransport struct{ *http.Transport }

func (t WatchingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var watch *startWatch
	if req.Body != nil && req.Body != http.NoBody {
		watch = &startWatch{ReadCloser: req.Body}
	}
	notice, _ := req.Context().Value(bodyNoticeKey{}).(func())
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if c, ok := info.Conn.(*ResponseConn); ok {
			c.expect(req)
			if watch != nil {
				watch.whenLike(func() {
					c.spend(req)
					if notice != nil {
						notice()
					}
				})
			}
		}
	}}
	out := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	if watch != nil {
		// A body sent again (GetBody) would not be watched: a body
		// request is sent once.
		out.Body, out.GetBody = watch, nil
	}
	return t.Transport.RoundTrip(out)
}

// responseState is where a responseFramer is in a response.
type responseState int

const (
	respHeader responseState = iota
	respBody
	respChunkSize
	respChunkData
	respTrailer
	// respDone: the response has ended.
	respDone
	// respUntilClose: its body ends with the connection.
	respUntilClose
	// respSwitched: the connection switched protocols.
	respSwitched
)

// next readies f for a response, to a HEAD request or not.
func (f *responseFramer) next(head bool) {
	*f = responseFramer{head: head, line: f.line[:0]}
}

// responseFramer follows the bytes of one response to a request,
// informational responses included, as net/http reads them: a header
// block, then a body delimited by Content-Length or chunked (chunked
// wins over a Content-Length, and an HTTP/1.0 response's
// Transfer-Encoding is ignored, as net/http has it), none for a HEAD
// request or a 1xx, 204 or 304 status, or one that ends with the
// connection.
type responseFramer struct {
	head  bool
	state responseState
	// line is the start of the line being read (maxKeptLine), and
	// clipped says it went on past that.
	line    []byte
	clipped bool
	// lines counts the lines of the header block being read.
	lines int
	// status is the code of the block's status line, and http11 says its
	// version is HTTP/1.1 or later: net/http ignores an HTTP/1.0
	// message's Transfer-Encoding.
	status int
	http11 bool
	block  framingBlock
	remain int64
}

// feed follows b, the next bytes of the connection, and returns how many
// of them belong to the response: all of them unless it ended before
// b's end. It fails once a header block goes past maxResponseFields
// fields, or the framing cannot be followed.
func (f *responseFramer) feed(b []byte) (int, error) {
	all := len(b)
	for len(b) > 0 {
		switch f.state {
		case respDone, respUntilClose, respSwitched:
			return all - len(b), nil
		case respBody, respChunkData:
			k := min(int64(len(b)), f.remain)
			b, f.remain = b[k:], f.remain-k
			switch {
			case f.remain > 0:
			case f.state == respBody:
				f.state = respDone
			default:
				f.state = respChunkSize
			}
		default:
			if f.state == respHeader && len(f.line) == 0 && f.lines > maxResponseFields && b[0] != '\r' && b[0] != '\n' {
				return all - len(b), errResponseFields // a field past the bound starts here
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				f.collect(b)
				return all, nil
			}
			f.collect(b[:i+1])
			b = b[i+1:]
			if err := f.lineDone(); err != nil {
				return all - len(b), err
			}
		}
	}
	return all, nil
}

func (f *responseFramer) collect(b []byte) {
	if room := maxKeptLine - len(f.line); len(b) > room {
		b, f.clipped = b[:room], true
	}
	f.line = append(f.line, b...)
}

// lineDone acts on a completed line.
func (f *responseFramer) lineDone() error {
	defer func() { f.line, f.clipped = f.line[:0], false }()
	blank := bytes.Equal(f.line, []byte("\r\n")) || bytes.Equal(f.line, []byte("\n"))
	switch f.state {
	case respHeader:
		switch {
		case f.lines == 0:
			status, http11, ok := statusOf(f.line)
			if !ok {
				return errUnframed
			}
			f.status, f.http11 = status, http11
		case blank:
			return f.headerDone()
		default:
			f.headerLine()
		}
	case respChunkSize:
		size, ok := parseChunkSize(string(f.line))
		switch {
		case !ok || f.clipped:
			return errUnframed
		case size == 0:
			f.state = respTrailer
		default:
			f.state, f.remain = respChunkData, size+2 // data and its CRLF
		}
		return nil
	case respTrailer:
		// net/http reads at most the 4 KiB it has buffered of a trailer.
		if blank {
			f.state = respDone
		}
		return nil
	}
	f.lines++
	if f.lines > 1+maxResponseFields {
		return errResponseFields
	}
	return nil
}

// statusOf reads a status line's code, and whether its version is
// HTTP/1.1 or later, as net/http does.
func statusOf(line []byte) (status int, http11 bool, ok bool) {
	proto, rest, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
	major, minor, vok := http.ParseHTTPVersion(string(proto))
	code, _, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte(" "))
	if !ok || !vok || len(code) != 3 {
		return 0, false, false
	}
	n, err := strconv.Atoi(string(code))
	return n, major > 1 || major == 1 && minor >= 1, err == nil && n >= 0
}

// headerLine takes in one field line of a header block.
func (f *responseFramer) headerLine() {
	name, val, ok := bytes.Cut(bytes.TrimRight(f.line, "\r\n"), []byte(":"))
	if !ok {
		return
	}
	cl, te := equalFoldASCII(name, "content-length"), equalFoldASCII(name, "transfer-encoding")
	switch {
	case (cl || te) && f.clipped:
		f.block.lost = true // its value was not all kept
	case cl:
		f.block.contentLength(string(bytes.TrimSpace(val)))
	case te:
		f.block.transferEncoding(string(bytes.TrimSpace(val)), false)
	}
}

// headerDone sets up what follows a header block: the next block after
// an informational response, else the response's body.
func (f *responseFramer) headerDone() error {
	b := f.block
	f.lines, f.block = 0, framingBlock{}
	switch {
	case f.status == http.StatusSwitchingProtocols:
		f.state = respSwitched
		return nil
	case f.status >= 100 && f.status < 200:
		return nil // the final response follows
	case f.head || f.status == http.StatusNoContent || f.status == http.StatusNotModified:
		f.state = respDone
		return nil
	case b.lost || b.clConflict:
		return errUnframed
	case b.te && f.http11:
		if !equalFoldASCII(bytes.TrimSpace([]byte(b.lastCoding)), "chunked") {
			return errUnframed
		}
		f.state = respChunkSize
	case b.cls > 0:
		n, err := strconv.ParseUint(b.cl, 10, 63)
		if err != nil {
			return errUnframed
		}
		f.state, f.remain = respBody, int64(n)
		if n == 0 {
			f.state = respDone
		}
	default:
		f.state = respUntilClose
	}
	return nil
}
