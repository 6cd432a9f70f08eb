package tlsterm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// handler judges and forwards each request of one terminated stream.
type handler struct {
	st *stream
	// framing judges HTTP/1.x message framing; nil for HTTP/2.
	framing *FramingGuard
}

// reqState carries what happened to a request to its close record.
type reqState struct {
	reason, detail string
}

type reqStateKey struct{}

// markFailed notes why the upstream leg of a request failed.
func markFailed(r *http.Request, reason policy.Reason, detail string) {
	if rs, ok := r.Context().Value(reqStateKey{}).(*reqState); ok {
		rs.reason, rs.detail = string(reason), detail
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s := h.st.s
	base := audit.Record{Type: audit.TypeDecision, Method: r.Method, Path: r.URL.Path}
	d := CheckRequest(r, s.Host, s.Port, s.defaultPort())
	if h.framing != nil {
		// Every request takes its verdict, refused or not, to stay in step.
		problem, ok := h.framing.Next()
		if !ok {
			problem = "the request stream could not be followed"
		}
		if d.Allow && problem != "" {
			d.Allow, d.Reason, d.Detail = false, ReasonBadFraming, "ambiguous message framing: "+problem
		}
	}
	if !d.Allow {
		base.Decision, base.Reason, base.Detail = audit.Deny, string(d.Reason), d.Detail
		h.st.record(base)
		status := http.StatusMisdirectedRequest
		switch d.Reason {
		case ReasonH2CUpgrade:
			status = http.StatusForbidden
		case ReasonBadFraming:
			status = http.StatusBadRequest
		}
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		WriteRefusal(w, d, status)
		return
	}
	out, err := ApplyCredentials(h.st.t.cfg.Creds, r, s.Host, s.Port, !s.Plaintext)
	if err != nil {
		base.Decision, base.Reason, base.Detail, base.Credential = audit.Deny, string(err.Reason), err.Error(), err.Credential
		h.st.record(base)
		WriteRefusal(w, policy.Decision{Reason: err.Reason, Detail: err.Error()}, http.StatusForbidden)
		return
	}
	base.Decision, base.Reason = audit.Allow, string(policy.ReasonAllowed)
	if err := h.st.record(base); err != nil {
		WriteRefusal(w, policy.Decision{Reason: "audit_failed", Detail: "the audit log cannot be written, so nothing is allowed"}, http.StatusServiceUnavailable)
		return
	}
	for _, name := range out.Injected {
		h.st.record(audit.Record{Type: audit.TypeInject, Method: r.Method, Path: r.URL.Path, Credential: name})
	}
	rs := &reqState{}
	r = r.WithContext(context.WithValue(r.Context(), reqStateKey{}, rs))
	var up atomic.Int64
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: &up}
	}
	cw := &countingWriter{ResponseWriter: w}
	rp := h.st.rp
	if r.Header.Get("Upgrade") != "" {
		rp = h.st.rpUpgrade
		if h.framing != nil {
			h.framing.Stop() // what follows a 101 is not HTTP
		}
	}
	rp.ServeHTTP(cw, r)
	// Let the response leave before the close line is written, so logging
	// adds nothing to the client's latency.
	http.NewResponseController(cw).Flush()
	if out.Body != nil {
		if gerr := out.Body.Err(); gerr != nil {
			var ce *credinject.Error
			if errors.As(gerr, &ce) {
				rs.reason, rs.detail = string(ce.Reason), ce.Error()
			}
		}
	}
	h.st.record(audit.Record{Type: audit.TypeClose, Method: r.Method, Path: r.URL.Path,
		Status: cw.status, BytesUp: up.Load(), BytesDown: cw.n, Reason: rs.reason, Detail: rs.detail,
		DurationMS: time.Since(start).Milliseconds()})
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingWriter records the status and counts body bytes; Unwrap lets
// http.ResponseController reach Flush and Hijack (WebSockets).
type countingWriter struct {
	http.ResponseWriter
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
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingWriter) Flush() {
	http.NewResponseController(c.ResponseWriter).Flush()
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
// for an unencoded body, so the response can be masked.
func ApplyCredentials(creds *credinject.Set, r *http.Request, host string, port int, secure bool) (credinject.Outcome, *credinject.Error) {
	if len(creds.Names()) == 0 {
		return credinject.Outcome{}, nil
	}
	r.Header.Del("Accept-Encoding")
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
