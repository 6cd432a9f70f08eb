package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/connlimit"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// parserWatch is a proxy client's connection that notices net/http's own
// refusals. A request net/http cannot parse (a CONNECT line that is no
// authority, a Host header that is not ASCII, an unknown transfer coding,
// headers past the limit) never reaches ServeHTTP: net/http answers it
// itself, writing straight to the connection. parserWatch sees that
// answer go by and has it logged as a refusal, so every request the proxy
// turns away is in the audit log.
type parserWatch struct {
	net.Conn // the framing guard
	guard    *tlsterm.FramingGuard
	refused  func(kind audit.Kind, detail string)

	// hijacked is set once a handler takes the connection over: what it
	// carries from then on is a tunnel's, not answers to HTTP requests.
	hijacked atomic.Bool

	// fieldsAnswered says the 431 to a header past
	// tlsterm.MaxHeaderFields went out.
	fieldsAnswered atomic.Bool

	// slot holds the connection's place under the listener's bound
	// until it closes or becomes a tunnel (free).
	slot *connlimit.Conn
}

// free gives back the connection's place under the listener's bound.
func (c *parserWatch) free() { c.slot.Release() }

func (c *parserWatch) Write(p []byte) (int, error) {
	if !c.hijacked.Load() {
		status, why, ok := serverRefusal(p)
		if !ok && c.guard.Pending() {
			status, why, ok = expectationFailed(p)
		}
		if ok {
			line := c.guard.RequestLine()
			answer := why
			if !strings.HasPrefix(why, strconv.Itoa(status)) {
				answer = strconv.Itoa(status) + " " + why
			}
			c.refused(c.kind(), fmt.Sprintf("Go's HTTP parser refused the request before cordon's handler saw it (it answered %q); the request began %q", answer, tlsterm.WithoutQuery(line)))
		}
	}
	return c.Conn.Write(p)
}

// Read reads through the framing guard. A header past
// tlsterm.MaxHeaderFields is answered here, 431 and logged, as net/http
// answers one past the header's bytes: to the guard's error net/http
// would answer a bare 400, saying nothing of why. net/http then takes the
// connection for closed by the client.
func (c *parserWatch) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, tlsterm.ErrHeaderFields) && !c.hijacked.Load() && c.fieldsAnswered.CompareAndSwap(false, true) {
		c.refused(c.kind(), fmt.Sprintf("its header has over %d fields, the most cordon reads (it answered 431); the request began %q",
			tlsterm.MaxHeaderFields, tlsterm.WithoutQuery(c.guard.RequestLine())))
		tlsterm.WritePlainError(c.Conn, http.StatusRequestHeaderFieldsTooLarge, err.Error())
		tlsterm.Linger(c.slot.NetConn()) // the client may still be sending its header
	}
	if errors.Is(err, tlsterm.ErrHeaderFields) {
		return n, io.EOF
	}
	return n, err
}

// kind is the audit kind of the request being read: connect for a
// CONNECT line.
func (c *parserWatch) kind() audit.Kind {
	if line := c.guard.RequestLine(); len(line) >= 8 && line[:8] == http.MethodConnect+" " {
		return audit.KindConnect
	}
	return audit.KindHTTP
}

// maxAnswer bounds how much of net/http's answer is logged.
const maxAnswer = 200

// serverRefusal recognises the answer net/http writes, unbuffered and in
// one piece, to a request it could not read: a status line, exactly these
// two headers in this order (a handler's answer carries a Date and sorted
// headers), and the reason as the body.
func serverRefusal(p []byte) (status int, why string, ok bool) {
	const headers = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !found || len(rest) < 4 || rest[3] != ' ' {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	statusLine, body, found := bytes.Cut(rest, []byte(headers))
	if !found || bytes.ContainsAny(statusLine, "\r\n") {
		return 0, "", false
	}
	return status, string(body[:min(len(body), maxAnswer)]), true
}

// expectationFailed recognises the answer net/http writes, through a
// response of its own, to a request with an Expect other than
// 100-continue, before any handler sees the request (it was answered
// unlogged: red team, round 8): whole, in one piece, its headers exactly
// these in this order. A handler's 417 (an upstream's, forwarded) has
// the upstream's fields, and its Date among them in sorted order, and
// comes while a request's framing verdict waits only when the client
// pipelines (FramingGuard.Pending).
func expectationFailed(p []byte) (status int, why string, ok bool) {
	const answer = "417 Expectation Failed"
	// The status line has the request's version: HTTP/1.0's too.
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "+answer+"\r\nConnection: close\r\nDate: "))
	if !found {
		rest, found = bytes.CutPrefix(p, []byte("HTTP/1.0 "+answer+"\r\nConnection: close\r\nDate: "))
	}
	if !found {
		return 0, "", false
	}
	date, end, found := bytes.Cut(rest, []byte("\r\n"))
	if !found || len(date) == 0 || string(end) != "Content-Length: 0\r\n\r\n" {
		return 0, "", false
	}
	return http.StatusExpectationFailed, answer, true
}

// hijackWatch tells a parserWatch when a handler (the plain-HTTP
// forwarder's upgrade path) takes its connection over.
type hijackWatch struct {
	http.ResponseWriter
	watch *parserWatch
}

func (w hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("cordon: this connection cannot be taken over")
	}
	w.watch.hijacked.Store(true)
	return hj.Hijack()
}

func (w hijackWatch) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w hijackWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recordParserRefusal logs a request net/http refused on its own.
func (s *Server) recordParserRefusal(client string) func(audit.Kind, string) {
	return func(kind audit.Kind, detail string) {
		s.recordUnauthenticated(decisionRecord(kind, client, policy.Decision{Reason: ReasonBadRequest, Detail: detail}))
	}
}
