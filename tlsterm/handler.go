package tlsterm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/survive"
	"github.com/cordon-sandbox/cordon/policy"
)

// handler judges and forwards each request of one HTTP/2 stream.
type handler struct {
	st *stream
}

// reqState carries what happened to a request to its close record.
type reqState struct {
	reason, detail string
	// bodyLike says the request's body started like a request line
	// (WithBodyNotice).
	bodyLike atomic.Bool
}

type reqStateKey struct{}

// markFailed notes why the upstream leg of a request failed.
func markFailed(r *http.Request, reason policy.Reason, detail string) {
	if rs, ok := r.Context().Value(reqStateKey{}).(*reqState); ok {
		rs.reason, rs.detail = string(reason), detail
	}
}

// refusal is a request admit turned away, its decision line written.
type refusal struct {
	status int
	d      policy.Decision
	// deny is a refused authority, framing or upgrade, after which an
	// HTTP/1.x connection is closed.
	deny bool
}

// admit judges one request (framing is the HTTP/1.x framing guard's
// problem with it, "" for none), puts credentials on it and writes its
// decision lines. A nil refusal means the request may be forwarded.
func (st *stream) admit(r *http.Request, framing string) (credinject.Outcome, *refusal) {
	s := st.s
	base := audit.Record{Type: audit.TypeDecision, Method: r.Method, Path: r.URL.Path}
	d := CheckRequest(r, s.Host, s.Port, s.defaultPort())
	if d.Allow && framing != "" {
		d.Allow, d.Reason, d.Detail = false, ReasonBadFraming, "ambiguous message framing: "+framing
	}
	if !d.Allow {
		base.Decision, base.Reason, base.Detail = audit.Deny, string(d.Reason), d.Detail
		st.record(base)
		return credinject.Outcome{}, &refusal{status: RefusalStatus(d.Reason), d: d, deny: true}
	}
	out, err := ApplyCredentials(st.t.cfg.Creds, r, s.Host, s.Port, !s.Plaintext)
	if err != nil {
		base.Decision, base.Reason, base.Detail, base.Credential = audit.Deny, string(err.Reason), err.Error(), err.Credential
		st.record(base)
		return out, &refusal{status: http.StatusForbidden, d: policy.Decision{Reason: err.Reason, Detail: err.Error()}}
	}
	base.Decision, base.Reason = audit.Allow, string(policy.ReasonAllowed)
	recs := []audit.Record{base}
	for _, name := range out.Injected {
		recs = append(recs, audit.Record{Type: audit.TypeInject, Method: r.Method, Path: r.URL.Path, Credential: name})
	}
	if err := st.record(recs...); err != nil {
		return out, &refusal{status: http.StatusServiceUnavailable,
			d: AuditFailed("", 0)}
	}
	return out, nil
}

// bodyRefusal is the reason and detail of a request body the credential
// guard cut off, if it did.
func bodyRefusal(out credinject.Outcome) (reason, detail string, ok bool) {
	if out.Body == nil {
		return "", "", false
	}
	var ce *credinject.Error
	if errors.As(out.Body.Err(), &ce) {
		return string(ce.Reason), ce.Error(), true
	}
	return "", "", false
}

// refuseBusy answers an HTTP/2 request past the bound on requests in
// flight (Config.MaxRequests) with 503, after its deny line.
func (st *stream) refuseBusy(w http.ResponseWriter, r *http.Request) {
	d := policy.Decision{Reason: ReasonTooManyRequests,
		Detail: fmt.Sprintf("this session already has %d HTTP/2 requests in flight, its most at once; one must end first", cap(st.t.requests))}
	st.record(audit.Record{Type: audit.TypeDecision, Method: r.Method, Path: r.URL.Path,
		Decision: audit.Deny, Reason: string(d.Reason), Detail: d.Detail})
	refuseH2(w, r, d, http.StatusServiceUnavailable)
}

// refuseFields answers an HTTP/2 request of more than MaxHeaderFields
// header fields with 431, after its deny line, as an HTTP/1.x one is
// refused: net/http read it whole (up to MaxHeaderBytes), but it is not
// held, with its header map, while it waits on its upstream.
func (st *stream) refuseFields(w http.ResponseWriter, r *http.Request) {
	d := policy.Decision{Reason: ReasonBadRequest, Detail: ErrHeaderFields.Error()}
	st.record(audit.Record{Type: audit.TypeDecision, Method: r.Method, Path: r.URL.Path,
		Decision: audit.Deny, Reason: string(d.Reason), Detail: d.Detail})
	refuseH2(w, r, d, http.StatusRequestHeaderFieldsTooLarge)
}

// h2WriteWait bounds each write of an HTTP/2 response, a refusal's
// included, to a client that does not open its flow-control window: the
// server then resets the stream, and the handler returns. A handler
// waiting holds its request: a client that set its streams' window to 0
// and opened 100 streams a connection, each refused for its 1,800 header
// fields, had each hold some 300 KB, for ever: 20 connections took
// cordon to 580 MB (red team, round 8). A variable for tests.
var h2WriteWait = 30 * time.Second

// refuseH2 answers r, an HTTP/2 request, with a refusal (WriteRefusal),
// after letting its header and trailer go, within h2WriteWait.
func refuseH2(w http.ResponseWriter, r *http.Request, d policy.Decision, status int) {
	r.Header, r.Trailer = nil, nil
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h2WriteWait))
	WriteRefusal(w, d, status)
}

// headerFields counts a header's fields, a field per value.
func headerFields(h http.Header) int {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	return n
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if headerFields(r.Header) > MaxHeaderFields {
		h.st.refuseFields(w, r)
		return
	}
	select {
	case h.st.t.requests <- struct{}{}:
		defer func() { <-h.st.t.requests }()
	default:
		h.st.refuseBusy(w, r)
		return
	}
	out, ref := h.st.admit(r, "")
	if ref != nil {
		refuseH2(w, r, ref.d, ref.status)
		return
	}
	rs := &reqState{}
	r = r.WithContext(WithBodyNotice(context.WithValue(r.Context(), reqStateKey{}, rs), func() { rs.bodyLike.Store(true) }))
	var up atomic.Int64
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: &up}
	}
	cw := &countingWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	defer func() {
		// A response cut short in its body (by either side) ends in
		// ReverseProxy's panic with http.ErrAbortHandler, which resets
		// the stream; the request is logged all the same.
		p := recover()
		if p == http.ErrAbortHandler && rs.reason == "" {
			rs.reason, rs.detail = string(ReasonUpstreamError), "response body: cut short"
			if r.Context().Err() != nil {
				rs.reason, rs.detail = string(ReasonClientGone), errClientGone.Error()
			}
		}
		if reason, detail, ok := bodyRefusal(out); ok {
			rs.reason, rs.detail = reason, detail
		}
		if rs.detail == "" && rs.bodyLike.Load() {
			rs.detail = BodyLikeRequestDetail
		}
		h.st.record(audit.Record{Type: audit.TypeClose, Method: r.Method, Path: r.URL.Path,
			Status: cw.status, BytesUp: up.Load(), BytesDown: cw.n, Reason: rs.reason, Detail: rs.detail,
			DurationMS: time.Since(start).Milliseconds()})
		// What is left of the response goes once the handler has
		// returned, within the bound its writes had.
		cw.rc.SetWriteDeadline(time.Now().Add(h2WriteWait))
		if p != nil {
			panic(p)
		}
	}()
	ServeMasked(h.st.t.cfg.Creds, h.st.rp, cw, r)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

// Read may run on net/http's Transport's goroutine, which nothing
// recovers: a panic below it becomes the read's error (survive.Recover).
func (b *countingBody) Read(p []byte) (n int, err error) {
	defer survive.Recover(&err, "reading a client's request body")
	n, err = b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingWriter records the status and counts body bytes, and bounds
// each write and flush by h2WriteWait (a deadline set for it and cleared
// after it: one left set would end a stream whose upstream is slow, not
// its client); Unwrap lets http.ResponseController reach the HTTP/2
// writer underneath.
type countingWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 || c.status < 200 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.rc.SetWriteDeadline(time.Now().Add(h2WriteWait))
	n, err := c.ResponseWriter.Write(b)
	c.rc.SetWriteDeadline(time.Time{})
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingWriter) Flush() {
	c.rc.SetWriteDeadline(time.Now().Add(h2WriteWait))
	c.rc.Flush()
	c.rc.SetWriteDeadline(time.Time{})
}

// defaultPort is the port an authority without one means on this stream.
func (s *Stream) defaultPort() int {
	if s.Plaintext {
		return 80
	}
	return 443
}

// ApplyCredentials puts bound credentials on a request (over TLS, or plain
// HTTP where a credential allows it) and refuses placeholders or secrets
// headed anywhere else. With credentials loaded it also asks the upstream
// for an unencoded body, and a WebSocket without extensions (whose
// messages permessage-deflate would compress), so the response can be
// masked.
func ApplyCredentials(creds *credinject.Set, r *http.Request, host string, port int, secure bool) (credinject.Outcome, *credinject.Error) {
	if len(creds.Names()) == 0 {
		return credinject.Outcome{}, nil
	}
	r.Header.Del("Accept-Encoding")
	r.Header.Del("Sec-WebSocket-Extensions")
	out, err := creds.Apply(r, host, port, secure)
	if err != nil {
		var ce *credinject.Error
		if errors.As(err, &ce) {
			return out, ce
		}
		return out, &credinject.Error{Reason: credinject.ReasonMisroute, Target: policy.JoinHostPort(host, port)}
	}
	if out.Body != nil {
		// Scan the start of the body before anything is sent: a small body
		// with a misrouted placeholder is refused whole, and only a longer
		// one can be cut off mid-stream.
		head, err := io.ReadAll(io.LimitReader(out.Body, bodyPrescan+1))
		var ce *credinject.Error
		if errors.As(err, &ce) {
			return out, ce
		}
		rest := io.Reader(out.Body)
		if err != nil {
			rest = errReader{err}
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), rest), out.Body}
	}
	return out, nil
}

// bodyPrescan is how much of a request body is scanned for misrouted
// credentials before the request is forwarded.
const bodyPrescan = 64 << 10

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
