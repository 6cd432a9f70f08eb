package tlsterm

import (
	"bufio"
	"context"
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
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// HTTP/1.x clients are served here, one goroutine per client connection:
// each request is read, judged like any other, written to the stream's one
// upstream connection (kept alive across requests), and its response is
// copied back. net/http's server and Transport would add goroutine
// hand-offs and buffering to every request; what they did that matters
// (header limits and timeouts, hop-by-hop headers, 1xx and 101 responses,
// retrying a stale idle connection) is done explicitly.

// Limits of the HTTP/1.x path, net/http's where it has one.
const (
	// maxRequestHeader bounds a request's header block, as net/http's
	// server does by default.
	maxRequestHeader = http.DefaultMaxHeaderBytes + 4096
	// maxResponseHeader bounds a response's header block, as net/http's
	// Transport does by default.
	maxResponseHeader = 10 << 20
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
	// wantsClose says the current request's client asked to close after
	// it (or speaks HTTP/1.0).
	wantsClose bool
}

// upstream1 is the stream's current upstream connection.
type upstream1 struct {
	conn net.Conn // TLS, or TCP on a plaintext stream
	// raw is the TCP connection under conn.
	raw *drainConn
	lim limitReader
	br  *bufio.Reader
	bw  *bufio.Writer
	// used says a request went over it: it may have gone stale since.
	used bool
}

// limitReader reads r until n bytes have been read, then reports EOF and
// hit: it bounds header blocks.
type limitReader struct {
	r   io.Reader
	n   int64
	hit bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		l.hit = true
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
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
	h := &conn1{st: st, client: c, cork: cork, guard: NewFramingGuard(c)}
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
// read to its end, so the connection is at the next request.
type clientBody struct {
	io.ReadCloser
	eof bool
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

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
func (h *conn1) linger() {
	if cw, ok := h.client.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	time.Sleep(rstAvoidance)
}

// readRequest reads the next request; nil means the connection is done,
// after answering what net/http's server answers to requests it cannot
// serve.
func (h *conn1) readRequest() *http.Request {
	if h.br.Buffered() == 0 {
		h.client.SetReadDeadline(time.Now().Add(idleTimeout))
		if _, err := h.br.Peek(1); err != nil {
			return nil
		}
	}
	h.client.SetReadDeadline(time.Now().Add(headerTimeout))
	h.lim.n = maxRequestHeader
	req, err := http.ReadRequest(h.br)
	h.lim.n = math.MaxInt64
	h.client.SetReadDeadline(time.Time{})
	if err == nil {
		err = checkRequestHeader(req)
	}
	if err == nil {
		return req
	}
	var ne net.Error
	if !h.lim.hit && (errors.Is(err, io.EOF) || errors.As(err, &ne)) {
		// The client went away or stalled: nobody to answer.
		return nil
	}
	// Every other request turned away here is logged, as refused requests
	// are; the line says what could not be read.
	why := err.Error()
	if h.lim.hit {
		why = fmt.Sprintf("its header is over %d bytes", maxRequestHeader)
	}
	h.st.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(ReasonBadRequest),
		Detail: "the request could not be read as HTTP/1.x: " + truncate(why, maxDetail)})
	switch {
	case h.lim.hit:
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

// maxDetail bounds the part of a refused request an audit line quotes.
const maxDetail = 300

// truncate cuts s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
	text := strconv.Itoa(status) + " " + http.StatusText(status)
	if detail != "" {
		text += ": " + detail
	}
	fmt.Fprintf(h.bw, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n%s", text, text)
	h.bw.Flush()
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
	writeHead(h.bw, req, status, hdr)
	if req.Method == http.MethodHead {
		return 0
	}
	h.bw.WriteString(body)
	return int64(len(body))
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

// exchange is one request's trip upstream.
type exchange struct {
	req  *http.Request
	resp *http.Response
	// upgrade is the protocol the client asked to switch to.
	upgrade string
	// wrote receives the request writer's result when the body is
	// written on its own goroutine; nil when the request was written whole.
	wrote chan error
	// bytesUp counts request body bytes sent upstream.
	bytesUp int64
	// guard is the credential guard on the request body, or nil.
	guard *credinject.BodyGuard
	// reason and detail say why the request failed, for its close line.
	reason, detail string
}

// forward sends an admitted request upstream and relays the response;
// false means the client connection is done.
func (h *conn1) forward(req *http.Request, out credinject.Outcome, body *clientBody, start time.Time) bool {
	method, path := req.Method, req.URL.Path
	x := &exchange{req: req, guard: out.Body}
	status, down, keep := h.roundTrip(x, body)
	if reason, detail, ok := bodyRefusal(out); ok {
		x.reason, x.detail = reason, detail
	}
	h.st.record(audit.Record{Type: audit.TypeClose, Method: method, Path: path,
		Status: status, BytesUp: x.bytesUp, BytesDown: down, Reason: x.reason, Detail: x.detail,
		DurationMS: time.Since(start).Milliseconds()})
	return keep
}

// roundTrip forwards x and relays its response, returning the status the
// client got, the body bytes it got and whether the connection goes on.
func (h *conn1) roundTrip(x *exchange, body *clientBody) (status int, down int64, keep bool) {
	req := x.req
	if err := h.outgoing(x); err != nil {
		return h.fail(x, err, body)
	}
	if err := h.send(x); err != nil {
		return h.fail(x, err, body)
	}
	resp := x.resp
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return h.switchProtocols(x, body)
	}
	removeHopByHopHeaders(resp.Header)
	MaskResponse(h.st.t.cfg.Creds, resp)
	h.mask(resp.Trailer) // the names announced now; the values come after the body

	hdr := resp.Header
	keep = !h.wantsClose
	chunked := false
	switch {
	case !bodyAllowed(req, resp.StatusCode):
		// The header describes a body that is not there: leave it as is.
	case resp.ContentLength >= 0 && !(len(resp.Trailer) > 0 && req.ProtoAtLeast(1, 1)):
		hdr.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	case req.ProtoAtLeast(1, 1):
		hdr.Del("Content-Length")
		hdr.Set("Transfer-Encoding", "chunked")
		chunked = true
		if len(resp.Trailer) > 0 {
			hdr.Set("Trailer", strings.Join(keysOf(resp.Trailer), ", "))
		}
	default:
		hdr.Del("Content-Length")
		keep = false // an HTTP/1.0 client reads to the end of the connection
	}
	if !keep {
		hdr.Set("Connection", "close")
	}
	writeHead(h.bw, req, resp.StatusCode, hdr)
	down, rerr, werr := h.relayBody(resp.Body, chunked)
	if rerr == nil && werr == nil && chunked {
		h.mask(resp.Trailer)
		werr = writeTrailer(h.bw, resp.Trailer)
	}
	if werr == nil {
		werr = h.bw.Flush()
	}
	upOK := rerr == nil && !resp.Close
	if rerr != nil {
		x.reason, x.detail = string(ReasonUpstreamError), "response body: "+rerr.Error()
	}
	if !h.finishWrite(x, upOK && werr == nil) {
		keep = false
	}
	if rerr != nil || werr != nil {
		keep = false
	}
	return resp.StatusCode, down, keep && drain(body)
}

// outgoing turns the client's request into the upstream's, as a reverse
// proxy does: hop-by-hop headers and forwarding headers dropped,
// unparsable query parameters removed, the stream's authority in Host.
func (h *conn1) outgoing(x *exchange) error {
	req := x.req
	x.upgrade = upgradeType(req.Header)
	if !isPrint(x.upgrade) {
		return fmt.Errorf("client tried to switch to invalid protocol %q", x.upgrade)
	}
	trailers := httpguts.HeaderValuesContainsToken(req.Header["Te"], "trailers")
	removeHopByHopHeaders(req.Header)
	if trailers {
		req.Header.Set("Te", "trailers")
	}
	if x.upgrade != "" {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", x.upgrade)
	}
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		req.Header.Del(k)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "") // not Go's own
	}
	req.URL.RawQuery = cleanQuery(req.URL.RawQuery)
	req.URL.Scheme, req.URL.Host, req.Host = "https", h.st.authority, h.st.authority
	if h.st.s.Plaintext {
		req.URL.Scheme = "http"
	}
	req.Header.Del("Expect") // answered here: the body comes anyway
	req.Close = false
	req.RequestURI = ""
	if req.ContentLength == 0 {
		req.Body = nil
	} else {
		// Closing is left to the connection: the upstream leg must not
		// drain the client's body.
		req.Body = io.NopCloser(&countingReader{r: req.Body, n: &x.bytesUp})
	}
	return nil
}

// send writes x.req to the upstream and reads the response header into
// x.resp, relaying 1xx responses. A bodyless replayable request that
// meets a stale kept-alive connection is sent again on a fresh one.
func (h *conn1) send(x *exchange) error {
	replayable := x.req.Body == nil && isIdempotent(x.req)
	for attempt := 0; ; attempt++ {
		if h.up != nil && h.up.used && !replayable && !h.up.alive() {
			h.dropUpstream()
		}
		if h.up == nil {
			if err := h.connect(); err != nil {
				return err
			}
		}
		reused := h.up.used
		h.up.used = true
		err := h.sendOnce(x)
		if err == nil {
			return nil
		}
		h.dropUpstream()
		if !reused || attempt > 0 || !replayable {
			return err
		}
	}
}

// connect opens the stream's upstream connection.
func (h *conn1) connect() error {
	c, err := h.st.dial(context.Background(), []string{"http/1.1"})
	if err != nil {
		return err
	}
	up := &upstream1{conn: c, raw: rawOf(c)}
	up.lim = limitReader{r: c, n: math.MaxInt64}
	up.br, up.bw = getReader(&up.lim), getWriter(c)
	h.up = up
	return nil
}

// dropUpstream closes the upstream connection; the next request opens
// another.
func (h *conn1) dropUpstream() {
	if h.up == nil {
		return
	}
	h.up.conn.Close()
	putBuffers(h.up.br, h.up.bw)
	h.up = nil
}

// sendOnce is one attempt of send on h.up.
func (h *conn1) sendOnce(x *exchange) error {
	up := h.up
	if x.req.Body == nil {
		x.wrote = nil
		if err := writeRequest(up, x.req); err != nil {
			return err
		}
	} else {
		// The body goes up while the response comes down: a server may
		// answer before it has read everything.
		x.wrote = make(chan error, 1)
		go func() {
			err := writeRequest(up, x.req)
			if err != nil {
				up.conn.Close() // unblock the response read
			}
			x.wrote <- err
		}()
	}
	for n := 0; ; n++ {
		up.lim.n = maxResponseHeader
		resp, err := http.ReadResponse(up.br, x.req)
		up.lim.n = math.MaxInt64
		if err != nil {
			if x.wrote != nil {
				if werr := h.abortWrite(x); werr != nil && !errors.Is(werr, net.ErrClosed) {
					return werr
				}
			}
			if up.lim.hit {
				return errors.New("upstream response header too large")
			}
			if errors.Is(err, io.EOF) {
				return errUpstreamClosed
			}
			return err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			x.resp = resp
			return nil
		}
		if n == max1xx {
			h.abortWrite(x)
			return errors.New("too many 1xx informational responses")
		}
		if !x.req.ProtoAtLeast(1, 1) {
			continue // HTTP/1.0 has no informational responses
		}
		h.mask(resp.Header)
		writeHead(h.bw, x.req, resp.StatusCode, resp.Header)
		if err := h.bw.Flush(); err != nil {
			h.abortWrite(x)
			return err
		}
	}
}

// writeRequest writes req, body included, to the upstream.
func writeRequest(up *upstream1, req *http.Request) error {
	if err := req.Write(up.bw); err != nil {
		return err
	}
	return up.bw.Flush()
}

// abortWrite stops a request body still being written (closing the
// upstream and cutting the client's body read short) and returns the
// writer's result.
func (h *conn1) abortWrite(x *exchange) error {
	if x.wrote == nil {
		return nil
	}
	select {
	case err := <-x.wrote:
		x.wrote = nil
		return err
	default:
	}
	h.up.conn.Close()
	h.client.SetReadDeadline(time.Now())
	err := <-x.wrote
	x.wrote = nil
	h.client.SetReadDeadline(time.Time{})
	return err
}

// finishWrite waits for the request body of x to be written once the
// response is done. reuse says the upstream may carry another request if
// the body went up whole; the result says whether the client connection
// can go on.
func (h *conn1) finishWrite(x *exchange, reuse bool) bool {
	clientOK := true
	if x.wrote != nil {
		t := time.NewTimer(writeWait)
		select {
		case err := <-x.wrote:
			x.wrote = nil
			if err != nil {
				reuse = false
				clientOK = false
			}
		case <-t.C:
			// The response ended well before the body was sent: the
			// server did not want it. Neither connection can be trusted
			// to be at a message boundary.
			h.abortWrite(x)
			reuse, clientOK = false, false
		}
		t.Stop()
	}
	if !reuse {
		h.dropUpstream()
	}
	return clientOK
}

// fail answers a request whose upstream leg failed with 502 and the
// reason, and records it for the close line.
func (h *conn1) fail(x *exchange, err error, body *clientBody) (int, int64, bool) {
	h.abortWrite(x)
	h.dropUpstream()
	if x.guard != nil && x.guard.Err() != nil {
		err = x.guard.Err()
	}
	reason := failureReason(err)
	x.reason, x.detail = string(reason), err.Error()
	keep := !h.wantsClose && drain(body)
	n := h.writeRefusal(x.req, http.StatusBadGateway, policy.Decision{Reason: reason, Detail: err.Error()}, keep)
	if h.bw.Flush() != nil {
		keep = false
	}
	return http.StatusBadGateway, n, keep
}

// relayBody copies a response body to the client, chunk-encoding it when
// chunked is set, one TLS record at a time; what is buffered is flushed
// whenever the upstream has nothing more at hand, so streamed responses
// are not held back.
func (h *conn1) relayBody(src io.Reader, chunked bool) (n int64, rerr, werr error) {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	h.cork.hold()
	defer func() {
		if err := h.cork.release(); werr == nil {
			werr = err
		}
	}()
	// A chunk is "hex size CRLF data CRLF": its size line goes in front
	// of the data, read in place.
	const pre = 6
	for {
		data := buf
		if chunked {
			data = buf[pre : maxRecord-2]
		}
		k, err := src.Read(data)
		if k > 0 {
			frame := data[:k]
			if chunked {
				size := strconv.AppendInt(buf[maxRecord:maxRecord], int64(k), 16)
				size = append(size, '\r', '\n')
				s := pre - len(size)
				copy(buf[s:], size)
				frame = append(buf[s:pre+k], '\r', '\n')
			}
			if _, werr = h.bw.Write(frame); werr != nil {
				return n, nil, werr
			}
			n += int64(k)
			if h.up == nil || h.up.br.Buffered() == 0 {
				if werr = h.bw.Flush(); werr != nil {
					return n, nil, werr
				}
				if h.up == nil || h.up.raw == nil || h.up.raw.drained {
					werr = h.cork.flush()
				} else {
					h.cork.wait() // the upstream has more at hand
				}
				if werr != nil {
					return n, nil, werr
				}
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return n, nil, nil
		case err != nil:
			return n, err, nil
		}
	}
}

// mask replaces real secrets in a response header (or trailer) with their
// placeholders.
func (h *conn1) mask(hdr http.Header) {
	if creds := h.st.t.cfg.Creds; len(creds.Names()) > 0 {
		creds.MaskHeader(hdr)
	}
}

// writeTrailer ends a chunked body, with the response's trailers.
func writeTrailer(w *bufio.Writer, trailer http.Header) error {
	w.WriteString("0\r\n")
	if err := trailer.Write(w); err != nil {
		return err
	}
	_, err := w.WriteString("\r\n")
	return err
}

// switchProtocols relays a 101 response and then the bytes of the new
// protocol both ways until both sides are done; the connection is then
// over. Credentials are guarded and masked in the new protocol's bytes as
// in bodies.
func (h *conn1) switchProtocols(x *exchange, body *clientBody) (int, int64, bool) {
	resp := x.resp
	got := upgradeType(resp.Header)
	switch {
	case x.upgrade == "":
		return h.fail(x, errors.New("upstream switched protocols unasked"), body)
	case !isPrint(got):
		return h.fail(x, fmt.Errorf("upstream tried to switch to invalid protocol %q", got), body)
	case !strings.EqualFold(x.upgrade, got):
		return h.fail(x, fmt.Errorf("upstream tried to switch protocol %q when %q was requested", got, x.upgrade), body)
	}
	if x.wrote != nil {
		// The request's body goes up whole before the new protocol.
		err := <-x.wrote
		x.wrote = nil
		if err != nil {
			return h.fail(x, err, body)
		}
	}
	creds := h.st.t.cfg.Creds
	fromClient, fromUpstream := io.Reader(h.br), io.Reader(h.up.br)
	h.mask(resp.Header)
	if len(creds.Names()) > 0 {
		fromClient = creds.GuardBody(io.NopCloser(h.br), h.st.s.Host, h.st.s.Port)
		fromUpstream = creds.MaskBody(io.NopCloser(h.up.br))
	}
	writeHead(h.bw, x.req, resp.StatusCode, resp.Header)
	if h.bw.Flush() != nil {
		return http.StatusSwitchingProtocols, 0, false
	}
	h.guard.Stop() // what follows is not HTTP
	up, down := relayBoth(h.client, h.up.conn, fromClient, fromUpstream)
	x.bytesUp += up
	h.dropUpstream()
	return http.StatusSwitchingProtocols, down, false
}

// relayBoth copies fromClient to upstream and fromUpstream to client until
// both directions end (a failing direction ends both), half-closing each
// destination as its source ends.
func relayBoth(client, upstream net.Conn, fromClient, fromUpstream io.Reader) (up, down int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		up, err = copyPlain(upstream, fromClient)
		endWrite(upstream, client, err)
	}()
	var err error
	down, err = copyPlain(client, fromUpstream)
	endWrite(client, upstream, err)
	<-done
	return up, down
}

// endWrite half-closes dst after a clean end of its source, or closes both
// connections after a failure so that the other direction ends too.
func endWrite(dst, other net.Conn, err error) {
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	other.Close()
}

// copyPlain copies src to dst through a pooled buffer (never ReadFrom or
// WriteTo, which would pick their own small buffers); a clean end is a nil
// error.
func copyPlain(dst io.Writer, src io.Reader) (int64, error) {
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// alive says whether an idle upstream connection can carry another
// request: no stray bytes waiting, not closed by the server meanwhile.
func (up *upstream1) alive() bool {
	if up.br.Buffered() > 0 {
		return false
	}
	switch peekIdle(up.conn) {
	case idleEmpty:
		return true
	case idleClosed:
		return false
	}
	if tc, ok := up.conn.(interface{ NetConn() net.Conn }); !ok || tc.NetConn() == up.conn {
		return false // unsolicited bytes on a plaintext connection
	}
	// Bytes wait on a TLS connection: a session ticket, or its end. Let TLS
	// read them, briefly.
	up.conn.SetReadDeadline(time.Now().Add(staleWait))
	_, err := up.br.Peek(1)
	up.conn.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	*c.n += int64(k)
	return k, err
}

// bodyAllowed says whether a response with status to req carries a body.
func bodyAllowed(req *http.Request, status int) bool {
	return req.Method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// isIdempotent says whether a request may be sent twice, as net/http's
// Transport judges it for its retries.
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// hopHeaders are removed from requests and responses between hops.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHopHeaders removes the headers Connection lists and the
// standard hop-by-hop headers.
func removeHopByHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// upgradeType is the protocol a header asks to switch to, "" for none.
func upgradeType(h http.Header) string {
	if !HasToken(h, "Connection", "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// isPrint says whether s is printable ASCII.
func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// cleanQuery drops the query parameters net/url cannot parse (a ';'
// separator, a bad escape), re-encoding the query only when there is one,
// so that no parameter is read one way here and another way upstream.
func cleanQuery(q string) string {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return reencodeQuery(q)
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return reencodeQuery(q)
			}
			i += 2
		}
	}
	return q
}

func reencodeQuery(q string) string {
	v, _ := url.ParseQuery(q)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// keysOf lists a header's names.
func keysOf(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// idleState is what waits on an idle connection.
type idleState int

const (
	idleEmpty  idleState = iota // nothing: the connection is quiet
	idleClosed                  // its end, or an error
	idleData                    // bytes nobody asked for yet
)

// rawOf finds the drainConn under an upstream connection.
func rawOf(c net.Conn) *drainConn {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	d, _ := c.(*drainConn)
	return d
}
