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
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/survive"
)

// The upstream side of the HTTP/1.x path: one kept-alive connection per
// stream, each request written to it (once more on a fresh connection
// when a stale idle one fails), its response read back.

// exchange is one request's trip upstream.
type exchange struct {
	req  *http.Request
	resp *http.Response
	// upgrade is the protocol the client asked to switch to.
	upgrade string
	// wrote receives the request writer's result when the body is
	// written on its own goroutine; nil when the request was written whole.
	wrote <-chan error
	// bytesUp counts request body bytes sent upstream.
	bytesUp int64
	// guard is the credential guard on the request body, or nil.
	guard *credinject.BodyGuard
	// start watches the start of the request body, or is nil: one like a
	// request line keeps the upstream connection from another request
	// (bodystart.go).
	start *startWatch
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
	if x.detail == "" && x.start != nil && x.start.startsLikeRequest() {
		x.detail = BodyLikeRequestDetail
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
		h.watch.disarm() // from here each side's end is relayed to the other
		return h.switchProtocols(x, body)
	}
	RemoveHopByHop(resp.Header)
	resp.Body = &upstreamBody{r: resp.Body, conn: h.up.conn}
	if err := MaskResponse(h.st.t.cfg.Creds, resp); err != nil {
		return h.fail(x, err, body)
	}
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
	down, rerr, werr := h.relayBody(resp.Body, chunked, len(h.st.t.cfg.Creds.Names()) == 0)
	// Nothing reads the upstream once the body is closed (a masking
	// reader reads ahead), so the connection can be dropped or kept.
	resp.Body.Close()
	if rerr == nil && werr == nil && chunked {
		h.mask(resp.Trailer)
		werr = writeTrailer(h.bw, resp.Trailer)
	}
	if werr == nil {
		werr = h.bw.Flush()
	}
	upOK := rerr == nil && !resp.Close
	gone := h.watch.disarm()
	if !h.finishWrite(x, upOK && werr == nil && !gone) {
		keep = false
	}
	cerr := clientFailure(gone, body) // finishWrite is done with the body
	switch {
	case cerr != nil:
		// The server may have answered the part of the body it got;
		// whatever came back after a cut went nowhere.
		x.reason, x.detail = string(ReasonClientGone), cerr.Error()
	case rerr != nil:
		x.reason, x.detail = string(ReasonUpstreamError), "response body: "+rerr.Error()
	case werr != nil:
		x.reason, x.detail = string(ReasonClientGone), "response body: the client's connection failed: "+werr.Error()
	}
	if rerr != nil || werr != nil || cerr != nil {
		keep = false
	}
	return resp.StatusCode, down, keep && drain(body)
}

// upstreamBody is a response body read from an upstream connection kept
// for the next request. Its Close does not read the rest, as net/http's
// would: it cuts the connection, unless the body was read to its end, so
// that a read in progress ends (and the connection is not used again).
type upstreamBody struct {
	r    io.ReadCloser
	conn net.Conn
	eof  atomic.Bool // a masking reader's read-ahead reads while Close runs
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	if !b.eof.Load() {
		return b.conn.Close()
	}
	return nil
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
	RemoveHopByHop(req.Header)
	for name := range req.Header {
		switch name {
		case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
			"Expect": // answered here: the body comes anyway
			delete(req.Header, name)
		}
	}
	if trailers {
		req.Header.Set("Te", "trailers")
	}
	if x.upgrade != "" {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", x.upgrade)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "") // not Go's own
	}
	req.URL.RawQuery = cleanQuery(req.URL.RawQuery)
	req.URL.Scheme, req.URL.Host, req.Host = "https", h.st.authority, h.st.authority
	if h.st.s.Plaintext {
		req.URL.Scheme = "http"
	}
	req.Close = false
	req.RequestURI = ""
	if req.ContentLength == 0 {
		req.Body = nil
	} else {
		// Closing is left to the connection: the upstream leg must not
		// drain the client's body.
		x.start = &startWatch{ReadCloser: io.NopCloser(&countingReader{r: req.Body, n: &x.bytesUp})}
		req.Body = x.start
	}
	return nil
}

// send writes x.req to the upstream and reads the response header into
// x.resp, relaying 1xx responses. A bodyless replayable request that
// meets a stale kept-alive connection is sent again on a fresh one.
func (h *conn1) send(x *exchange) error {
	replayable := x.req.Body == nil && isIdempotent(x.req)
	for attempt := 0; ; attempt++ {
		if h.up != nil && h.up.used {
			h.checkIdle()
		}
		if h.up != nil && h.up.spent {
			h.dropUpstream()
		}
		if h.up == nil {
			if err := h.connect(); err != nil {
				return err
			}
		}
		reused := h.up.used
		h.up.used = true
		h.up.last = x.req
		err := h.sendOnce(x)
		if err == nil {
			return nil
		}
		h.dropUpstream()
		if !reused || attempt > 0 || !replayable || h.watch.isGone() {
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
	if up.raw != nil {
		if up.rc = sysConn(up.raw); up.rc != nil {
			up.await = up.awaitStep
		}
	}
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
	cut := up.conn
	if up.raw != nil {
		cut = up.raw // no close_notify: the server is not to answer
	}
	h.watch.arm(cut)
	if x.req.Body == nil {
		x.wrote = nil
		if err := up.writeAwaiting(x.req); err != nil {
			return err
		}
	} else {
		// The body goes up while the response comes down: a server may
		// answer before it has read everything.
		x.wrote = startWrite(up, x.req)
	}
	for n := 0; ; n++ {
		up.lim.n = MaxResponseHeaderBytes
		up.lim.countLines(1 + maxResponseFields + 1) // the status line, the fields, and one more is too many
		resp, err := http.ReadResponse(up.br, x.req)
		up.lim.n = math.MaxInt64
		tooMany := up.lim.tooMany
		up.lim.countLines(0)
		if err != nil {
			if x.wrote != nil {
				if werr := h.abortWrite(x); werr != nil && !errors.Is(werr, net.ErrClosed) {
					return werr
				}
			}
			if up.lim.hit {
				return errors.New("upstream response header too large")
			}
			if tooMany {
				return errResponseFields
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

// startWrite writes req upstream in a goroutine of its own, the client's
// body read on the way, and sends the outcome on the channel it returns;
// a failure closes the upstream connection, to unblock the response's
// read. A panic there (a chunk size that overflowed the framing guard's
// count once caused one) becomes the request's error (survive.Recover).
func startWrite(up *upstream1, req *http.Request) <-chan error {
	wrote := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if err != nil {
				up.conn.Close()
			}
			wrote <- err
		}()
		defer survive.Recover(&err, "sending a request upstream")
		err = writeRequest(up, req)
	}()
	return wrote
}

// writeRequest writes req, body included, to the upstream.
func writeRequest(up *upstream1, req *http.Request) error {
	if err := writeBodyless(up.bw, req); err != nil {
		return err
	}
	return up.bw.Flush()
}

// writeAwaiting writes a bodyless request and waits until the upstream's
// socket has something to read: its answer, or its end. The wait is armed
// before the request goes, so the response's arrival cannot be missed,
// and the read that follows finds it, instead of failing with EAGAIN and
// waiting then: one system call and one poll fewer per request. Bytes
// that were already read and not yet taken (a TLS record, read-ahead) do
// not matter: the answer to this request is new bytes on the socket.
//
// An end that came before the wait was armed does matter: a server that
// closed the idle connection by shutting its write side, and then reads
// and drops what comes (a lingering close), answers the request with
// nothing at all. So the armed wait is bounded by staleCheck; after it,
// the socket is looked at once (as the read would have), and the wait
// goes on unbounded only if nothing is there.
func (up *upstream1) writeAwaiting(req *http.Request) error {
	if up.rc == nil {
		return writeRequest(up, req)
	}
	up.raw.Conn.SetReadDeadline(time.Now().Add(staleCheck))
	up.awaiting, up.wrote = req, nil
	err := up.rc.Read(up.await)
	unsent := up.awaiting != nil
	up.awaiting = nil
	up.raw.Conn.SetReadDeadline(time.Time{})
	switch {
	case unsent:
		return writeRequest(up, req) // the bound passed before the write
	case up.wrote != nil:
		return up.wrote
	case errors.Is(err, os.ErrDeadlineExceeded):
		return up.rc.Read(peekWaiting)
	}
	return err
}

// staleCheck bounds writeAwaiting's armed wait: a response slower than
// this costs one look at the socket more.
const staleCheck = 100 * time.Millisecond

// awaitStep is writeAwaiting's callback (up.await holds it as a method
// value made once per connection, which spares a request an allocation):
// it writes the request on its first call; on its second the socket has
// something to read.
func (up *upstream1) awaitStep(uintptr) bool {
	if up.awaiting == nil {
		return true
	}
	req := up.awaiting
	up.awaiting = nil
	up.wrote = writeRequest(up, req)
	return up.wrote != nil
}

// peekWaiting is a RawConn.Read callback that is done once the socket
// holds bytes, its end or an error, without taking anything.
func peekWaiting(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
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
// the body went up whole; one whose body started like a request line
// (bodystart.go) is kept only to be looked at before the next request
// (upstream1.spent). The result says whether the client connection can
// go on.
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
	} else if x.start != nil && x.start.startsLikeRequest() {
		h.up.spent = true // the server may read the body as a request
	}
	return clientOK
}

// fail answers a request whose upstream leg failed with 502 and the
// reason, and records it for the close line.
func (h *conn1) fail(x *exchange, err error, body *clientBody) (int, int64, bool) {
	gone := h.watch.disarm()
	h.abortWrite(x)
	h.dropUpstream()
	cerr := clientFailure(gone, body) // abortWrite is done with the body
	switch {
	case cerr != nil:
		err = cerr
	case x.guard != nil && x.guard.Err() != nil:
		err = x.guard.Err()
	}
	d := Failure(err, h.st.t.cfg.Creds)
	if u, ok := UncheckedEncoding(err); ok {
		d = u
	}
	x.reason, x.detail = string(d.Reason), d.Detail
	keep := cerr == nil && !h.wantsClose && drain(body)
	n := h.writeRefusal(x.req, http.StatusBadGateway, d, keep)
	if h.bw.Flush() != nil {
		keep = false
	}
	return http.StatusBadGateway, n, keep
}

// clientFailure is how a request failed on the client's side, if it did:
// its connection ended in the middle of the body (clientLost), or the
// watch found it shut (errClientGone). The body's writer must be done.
func clientFailure(gone bool, body *clientBody) error {
	switch {
	case body.lost != nil:
		return clientLost{body.lost}
	case gone:
		return errClientGone
	}
	return nil
}

// checkIdle looks at the kept-alive upstream connection before a request
// goes over it, and drops it unless it is quiet. One the server closed
// meanwhile is dropped; one holding bytes nobody asked for is dropped and
// logged. Those bytes are a response to no request cordon sent: a server
// that ignores a body (a Python http.server handler that answers without
// reading it does) reads it as a request of its own and answers it, and the answer, taken as the next
// request's, reached its client as that request's response, and the log
// said so. Requests that could simply be sent again on a fresh connection
// were sent without this look, so they took such bytes as their answer.
func (h *conn1) checkIdle() {
	switch h.up.idle() {
	case idleEmpty:
		return
	case idleData:
		h.st.record(UnsolicitedRecord(h.up.last.Method, h.up.last.URL.Path))
	}
	h.dropUpstream()
}

// UnsolicitedRecord is the line for bytes an upstream connection sent
// that no request asked for, after its response to the request method
// and path.
func UnsolicitedRecord(method, path string) audit.Record {
	return audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(ReasonUnsolicitedResponse),
		Method: method, Path: path,
		Detail: "the upstream sent bytes after its response to this request that no request asked for (a response to a request it read from this one's body?); they were dropped with its connection, and the next request went on a new one"}
}

// idle says what waits on an idle upstream connection: nothing, so it can
// carry another request (idleEmpty), its end (idleClosed), or bytes nobody
// asked for (idleData).
func (up *upstream1) idle() idleState {
	if up.br.Buffered() > 0 {
		return idleData
	}
	return idleOn(up.conn, up.br)
}

// idleOn says what waits on c, an idle upstream connection read through
// br, which holds none of it.
func idleOn(c net.Conn, br *bufio.Reader) idleState {
	d := rawOf(c)
	if tc, ok := c.(interface{ NetConn() net.Conn }); !ok || tc.NetConn() == c || d == nil {
		return peekIdle(c) // a plaintext connection
	}
	// On a TLS connection TLS may hold records it read with the last
	// response's (a server's next answer), and bytes may wait on the
	// socket: a session ticket, the connection's end, or data. TLS is let
	// read what is at hand, and no more: the read under it that would wait
	// fails instead (one system call, no timer).
	d.atHand, d.gotAtHand = true, false
	_, err := br.Peek(1)
	d.atHand = false
	if err == errNotAtHand && d.gotAtHand {
		// Part of a record came: let TLS read the rest, briefly.
		c.SetReadDeadline(time.Now().Add(staleWait))
		_, err = br.Peek(1)
		c.SetReadDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return idleData
	case err == errNotAtHand || isTimeout(err):
		return idleEmpty
	}
	return idleClosed
}

// isTimeout says whether err is a read's deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// idleState is what waits on an idle connection.
type idleState int

// rawOf finds the drainConn under an upstream connection.
func rawOf(c net.Conn) *drainConn {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	d, _ := c.(*drainConn)
	return d
}
