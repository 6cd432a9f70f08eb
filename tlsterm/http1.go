package tlsterm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// HTTP/1.x clients are served here, one goroutine per client connection:
// each request is read, judged like any other, written to the stream's one
// upstream connection (kept alive across requests), and its response is
// copied back. net/http's server and Transport would add goroutine
// hand-offs and buffering to every request; what they did that matters
// (header limits and timeouts, hop-by-hop headers, 1xx and 101 responses,
// retrying a stale idle connection) is done explicitly.

// MaxHeaderBytes bounds the header block of a request from the sandboxed
// side, on every path (CONNECT and plain HTTP to the proxy, HTTP/1.1 and
// HTTP/2 in a tunnel), where net/http's default is 1 MiB. An unfinished
// header is held until its timeout, and holding one costs cordon, outside
// the box's limits, several times its size: at 1 MiB a box that opened a
// few hundred such connections took cordon to nearly a gigabyte. Real
// clients' headers (cookies and tokens included) are a few KiB.
const MaxHeaderBytes = 64 << 10

// MaxResponseHeaderBytes bounds the header block of a response from an
// upstream, on every path, where net/http's Transport allows 10 MiB. A
// response waiting for its client holds its header, and a request's
// upstream is the box's to pick among the allowed hosts (a wildcard may
// take in a host anyone can serve): 200 requests whose upstream answered
// with 9 MB of headers, to a client that read nothing, took cordon past
// 500 MB. Browsers refuse more than 256 KiB.
const MaxResponseHeaderBytes = 256 << 10

// maxResponseFields bounds the fields of a response header from an
// HTTP/1.1 upstream: net/http's parser keeps each as a map entry of a
// couple of hundred bytes, so MaxResponseHeaderBytes of short fields would
// cost cordon some 8 MB a response. (An HTTP/2 upstream's fields each
// count 32 bytes more against MaxResponseHeaderBytes, so there are at most
// 8,192 of them.)
const maxResponseFields = 1024

// Limits of the HTTP/1.x path, net/http's where it has one.
const (
	// maxRequestHeader bounds a request's header block (MaxHeaderBytes,
	// and the slack net/http's server adds to it).
	maxRequestHeader = MaxHeaderBytes + 4096
	// maxDrain is how much of a refused request's unread body is read
	// and dropped to keep the connection; past it the connection closes.
	maxDrain = 256 << 10
	// max1xx bounds the informational responses before a final one.
	max1xx = 5
	// rstAvoidance is how long a connection closed with request bytes
	// unread waits, so the client can read the response before a reset.
	rstAvoidance = 500 * time.Millisecond
	// staleWait bounds the check of an idle upstream TLS connection that
	// holds unread bytes (a ticket, or its close).
	staleWait = 5 * time.Millisecond
	// writeWait is how long a finished response waits for its request's
	// body to be sent, as net/http's Transport waits before reusing a
	// connection.
	writeWait = 50 * time.Millisecond
	// maxRecord is the largest TLS record payload: one write of it is one
	// record.
	maxRecord = 16 << 10
)

// errUpstreamClosed ends a request whose upstream went away early.
var errUpstreamClosed = errors.New("upstream closed the connection")

// conn1 is one HTTP/1.x client connection being served.
type conn1 struct {
	st *stream
	// client is the client's connection (TLS, or plaintext); reads go
	// through guard and lim.
	client net.Conn
	// cork is the client's connection under TLS (or client itself).
	cork  *corkConn
	guard *FramingGuard
	lim   limitReader
	br    *bufio.Reader
	bw    *bufio.Writer
	up    *upstream1
	// watch notices a client that leaves while its request is upstream.
	watch *clientWatch
	// wantsClose says the current request's client asked to close after
	// it (or speaks HTTP/1.0).
	wantsClose bool
}

// upstream1 is the stream's current upstream connection.
type upstream1 struct {
	conn net.Conn // TLS, or TCP on a plaintext stream
	// raw is the TCP connection under conn, and rc its descriptor when
	// it has one (see writeAwaiting).
	raw *drainConn
	rc  syscall.RawConn
	// await, awaiting and wrote serve writeAwaiting.
	await    func(uintptr) bool
	awaiting *http.Request
	wrote    error
	lim      limitReader
	br       *bufio.Reader
	bw       *bufio.Writer
	// used says a request went over it: it may have gone stale since;
	// last is the latest such request.
	used bool
	last *http.Request
	// spent says last's body started like a request line
	// (bodystart.go): the connection carries no other request, and is
	// kept only to be looked at once more (checkIdle), for the answer to
	// that request.
	spent bool
}

// limitReader reads r until n bytes have been read, then reports EOF and
// hit: it bounds header blocks. With lines above zero, it also fails
// once the header block read through it goes past that many lines (see
// countLines).
type limitReader struct {
	r   io.Reader
	n   int64
	hit bool
	// lines is how many more lines the header block may have while it is
	// counted; lineLen is the length of its current line, less '\r's.
	lines   int
	lineLen int
	// tooMany says the block went past its lines.
	tooMany bool
}

// errResponseFields is a response header past maxResponseFields.
var errResponseFields = errors.New("upstream response header has over " + strconv.Itoa(maxResponseFields) + " fields")

// countLines bounds the header block read next to n lines, its first
// one included; zero stops counting.
func (l *limitReader) countLines(n int) { l.lines, l.lineLen, l.tooMany = n, 0, false }

func (l *limitReader) Read(p []byte) (int, error) {
	if l.tooMany {
		return 0, errResponseFields
	}
	if l.n <= 0 {
		l.hit = true
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	for _, b := range p[:n] {
		if l.lines == 0 {
			break // not counting, or the block has ended
		}
		switch {
		case b == '\n' && l.lineLen == 0: // the blank line ends the block
			l.lines = 0
		case b == '\n':
			l.lines, l.lineLen = l.lines-1, 0
			if l.lines == 0 {
				l.tooMany = true
			}
		case b != '\r':
			l.lineLen++
		}
	}
	if l.tooMany {
		return 0, errResponseFields
	}
	return n, err
}

const bufSize = 4 << 10

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func getWriter(w io.Writer) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func putBuffers(br *bufio.Reader, bw *bufio.Writer) {
	br.Reset(nil)
	bw.Reset(nil)
	readers.Put(br)
	writers.Put(bw)
}

// serveHTTP1 serves HTTP/1.x requests on c until either side ends the
// connection.
func (st *stream) serveHTTP1(c net.Conn, cork *corkConn) {
	h := &conn1{st: st, client: c, cork: cork, guard: NewFramingGuard(c), watch: newClientWatch(cork.Conn)}
	h.lim = limitReader{r: h.guard, n: math.MaxInt64}
	h.br, h.bw = getReader(&h.lim), getWriter(c)
	defer func() {
		h.dropUpstream()
		putBuffers(h.br, h.bw)
	}()
	for h.serveOne() {
	}
}

// clientBody is a request body as the client sends it; eof says it was
// read to its end, so the connection is at the next request, and lost
// holds the error of a client connection that ended or failed before it.
type clientBody struct {
	io.ReadCloser
	eof  bool
	lost error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
		b.eof = true
	case b.lost != nil:
	case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne) && !ne.Timeout():
		// Not a timeout: abortWrite's deadline is cordon's own doing.
		b.lost = err
	}
	return n, err
}

// clientLost is a request whose client's connection ended, or failed, in
// the middle of its body.
type clientLost struct{ err error }

func (e clientLost) Error() string {
	return "the client's connection failed in the middle of its request body (" + e.err.Error() + "); the upstream request was cut"
}

func (e clientLost) Is(target error) bool { return target == errClientGone }

// serveOne serves one request; false means the connection is done.
func (h *conn1) serveOne() bool {
	req := h.readRequest()
	if req == nil {
		return false
	}
	start := time.Now()
	problem, ok := h.guard.Next() // every request takes its verdict, to stay in step
	if !ok {
		problem = "the request stream could not be followed"
	}
	h.wantsClose = req.Close
	body := &clientBody{ReadCloser: req.Body, eof: req.Body == http.NoBody}
	req.Body = body
	var cont *continueReader
	if h.expectsContinue(req) {
		cont = &continueReader{ReadCloser: body, h: h}
		req.Body = cont
	}
	var keep bool
	out, ref := h.st.admit(req, problem)
	if ref != nil {
		keep = !ref.deny && !h.wantsClose && (cont == nil || cont.sent) && drain(body)
		h.writeRefusal(req, ref.status, ref.d, keep)
		keep = h.bw.Flush() == nil && keep
	} else {
		if cont != nil && !cont.sent {
			// Tell the client to send its body now, before it is read on
			// another goroutine.
			cont.sent = true
			h.writeContinue()
		}
		keep = h.forward(req, out, body, start)
	}
	if !keep && !body.eof {
		h.linger()
	}
	return keep
}

// linger half-closes a connection whose client may still be sending a
// request body, and waits a moment before it is closed: closing with
// unread bytes resets the connection, which can destroy the response
// before the client reads it.
func (h *conn1) linger() { Linger(h.client) }

// Linger half-closes c, whose client may still be sending, and waits a
// moment (as net/http's server does) before the caller closes it.
func Linger(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	time.Sleep(rstAvoidance)
}

// readRequest reads the next request; nil means the connection is done,
// after answering what net/http's server answers to requests it cannot
// serve.
func (h *conn1) readRequest() *http.Request {
	waited := h.br.Buffered() == 0
	if waited {
		h.client.SetReadDeadline(time.Now().Add(idleTimeout))
		if _, err := h.br.Peek(1); err != nil {
			return nil
		}
	}
	// A header already in hand is read without a deadline of its own.
	timed := !headerBuffered(h.br)
	if timed {
		h.client.SetReadDeadline(time.Now().Add(headerTimeout))
	}
	h.lim.n = maxRequestHeader
	req, err := http.ReadRequest(h.br)
	h.lim.n = math.MaxInt64
	if waited || timed {
		h.client.SetReadDeadline(time.Time{})
	}
	if err == nil {
		err = checkRequestHeader(req)
	}
	if err == nil {
		return req
	}
	var ne net.Error
	var ue *url.Error // a net.Error too, but it is the request line's URI that is bad
	if !h.lim.hit && (errors.Is(err, io.EOF) || errors.As(err, &ne) && !errors.As(err, &ue)) {
		// The client went away or stalled: nobody to answer.
		return nil
	}
	// Every other request turned away here is logged, as refused requests
	// are; the line says what could not be read.
	why := err.Error()
	fields := errors.Is(err, ErrHeaderFields)
	switch {
	case h.lim.hit:
		why = fmt.Sprintf("its header is over %d bytes", maxRequestHeader)
	case fields:
		why = fmt.Sprintf("its header has over %d fields", MaxHeaderFields)
	case ue != nil:
		why = "its URI: " + ue.Err.Error() // not the URI itself, whose query the log never holds
	case strings.HasPrefix(why, "malformed MIME header"):
		why, _, _ = strings.Cut(why, `: "`) // not the header line, which may carry a credential
	case strings.HasPrefix(why, "malformed HTTP version"):
		why, _, _ = strings.Cut(why, ` "`) // what it quotes may be the end of a query with a space in it
	default:
		why = withoutQuotedQuery(why)
	}
	h.st.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(ReasonBadRequest),
		Detail: "the request could not be read as HTTP/1.x: " + clip(why)})
	switch {
	case h.lim.hit, fields:
		h.plainError(http.StatusRequestHeaderFieldsTooLarge, "")
		h.linger() // the client may still be sending its header
	case errors.Is(err, errVersion):
		h.plainError(http.StatusHTTPVersionNotSupported, err.Error())
	case errors.Is(err, errExpectation):
		h.plainError(http.StatusExpectationFailed, "")
	case isUnsupportedTE(err):
		// As net/http's server answers it, without echoing the coding.
		fmt.Fprintf(h.bw, "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding")
		h.bw.Flush()
	default:
		h.plainError(http.StatusBadRequest, "")
	}
	return nil
}

// headerBuffered says whether br holds a blank line, so that reading a
// request header from it reads nothing more from the connection: the
// header ends there at the latest.
func headerBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n"))
}

// WithoutQuery is a request line, or its URI, as a client sent it, less
// its query, which the log never holds: what follows the first '?' goes,
// up to the line's last space (a query a client failed to escape may hold
// spaces); the last word, the HTTP version, stays, less a query of its own.
func WithoutQuery(line string) string {
	head, rest, ok := strings.Cut(line, "?")
	if !ok {
		return line
	}
	if i := strings.LastIndexByte(rest, ' '); i >= 0 {
		return head + WithoutQuery(rest[i:])
	}
	return head
}

// withoutQuotedQuery is a net/http error message less the query of what it
// quotes at its end (WithoutQuery): `malformed HTTP request "GET /x?k=v"`
// quotes the request line.
func withoutQuotedQuery(msg string) string {
	if i := strings.IndexByte(msg, '"'); i >= 0 {
		if line, err := strconv.Unquote(msg[i:]); err == nil {
			return msg[:i] + strconv.Quote(WithoutQuery(line))
		}
	}
	return WithoutQuery(msg)
}

// isUnsupportedTE says whether ReadRequest refused a transfer coding it
// does not know (its error type is not exported; its messages are).
func isUnsupportedTE(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unsupported transfer encoding: ") || strings.HasPrefix(msg, "too many transfer encodings: ")
}

var (
	errVersion     = errors.New("unsupported protocol version")
	errExpectation = errors.New("unsupported expectation")
)

// checkRequestHeader refuses what net/http's server refuses after parsing:
// HTTP versions other than 1.x, a missing or malformed Host, invalid
// header names and values, and expectations other than 100-continue.
func checkRequestHeader(req *http.Request) error {
	if req.ProtoMajor != 1 {
		return errVersion
	}
	// ReadRequest has moved the Host header (one at most) to req.Host.
	switch {
	case req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect:
		return errors.New("missing required Host header")
	case !httpguts.ValidHostHeader(req.Host):
		return errors.New("malformed Host header")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return errors.New("invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return errors.New("invalid header value")
			}
		}
	}
	if e := req.Header["Expect"]; len(e) > 0 && !httpguts.HeaderValuesContainsToken(e, "100-continue") {
		return errExpectation
	}
	return nil
}

// plainError answers a request that could not be read, and ends the
// connection.
func (h *conn1) plainError(status int, detail string) {
	WritePlainError(h.bw, status, detail)
	h.bw.Flush()
}

// WritePlainError writes the answer net/http's server gives a request it
// cannot read: the status, its text and detail (if any) as the body, and
// Connection: close.
func WritePlainError(w io.Writer, status int, detail string) error {
	text := strconv.Itoa(status) + " " + http.StatusText(status)
	if detail != "" {
		text += ": " + detail
	}
	_, err := fmt.Fprintf(w, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n%s", text, text)
	return err
}

// expectsContinue says the client waits for "100 Continue" before it
// sends the body.
func (h *conn1) expectsContinue(req *http.Request) bool {
	return req.ProtoAtLeast(1, 1) && req.ContentLength != 0 &&
		httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue")
}

// continueReader sends "100 Continue" before the first read of a body
// whose client waits for it. Its reads all happen on the connection's own
// goroutine until sendContinue has run.
type continueReader struct {
	io.ReadCloser
	h    *conn1
	sent bool
}

func (c *continueReader) Read(p []byte) (int, error) {
	if !c.sent {
		c.sent = true
		c.h.writeContinue()
	}
	return c.ReadCloser.Read(p)
}

func (h *conn1) writeContinue() {
	h.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	h.bw.Flush()
}

// drain reads and drops what is left of a request body, up to maxDrain;
// true means the body ended, so the connection can carry another request.
func drain(body *clientBody) bool {
	if !body.eof {
		io.CopyN(io.Discard, body, maxDrain+1)
	}
	return body.eof
}

// writeRefusal answers a refused request with the same page WriteRefusal
// writes, saying "Connection: close" unless keep, and returns the page's
// length.
func (h *conn1) writeRefusal(req *http.Request, status int, d policy.Decision, keep bool) int64 {
	body, hdr := refusalPage(d, keep)
	writeHead(h.bw, req, status, hdr)
	if req.Method == http.MethodHead {
		return 0
	}
	h.bw.WriteString(body)
	return int64(len(body))
}

// refusalPage is the body and header block of a refusal.
func refusalPage(d policy.Decision, keep bool) (string, http.Header) {
	body := refusalText(d) + "\n"
	hdr := http.Header{
		"Content-Type":           {"text/plain; charset=utf-8"},
		"X-Content-Type-Options": {"nosniff"},
		"X-Cordon-Reason":        {string(d.Reason)},
		"Content-Length":         {strconv.Itoa(len(body))},
	}
	if !keep {
		hdr["Connection"] = []string{"close"}
	}
	return body, hdr
}

// WriteRefusalTo answers, on a bare connection, an HTTP/1.1 request the
// proxy refused before reading it (a transparent connection to port 80):
// the page WriteRefusal writes, then the connection closes.
func WriteRefusalTo(w io.Writer, d policy.Decision, status int) error {
	body, hdr := refusalPage(d, false)
	bw := bufio.NewWriter(w)
	writeHead(bw, &http.Request{ProtoMajor: 1, ProtoMinor: 1}, status, hdr)
	bw.WriteString(body)
	return bw.Flush()
}

// writeHead writes a response's status line and header block.
func writeHead(w *bufio.Writer, req *http.Request, status int, hdr http.Header) {
	proto := "HTTP/1.1 "
	if !req.ProtoAtLeast(1, 1) {
		proto = "HTTP/1.0 "
	}
	text := http.StatusText(status)
	if text == "" {
		text = "status code " + strconv.Itoa(status)
	}
	w.WriteString(proto)
	w.WriteString(strconv.Itoa(status))
	w.WriteString(" ")
	w.WriteString(text)
	w.WriteString("\r\n")
	hdr.Write(w)
	w.WriteString("\r\n")
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	*c.n += int64(k)
	return k, err
}

const (
	idleEmpty  idleState = iota // nothing: the connection is quiet
	idleClosed                  // its end, or an error
	idleData                    // bytes nobody asked for yet
)
