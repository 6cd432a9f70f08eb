package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/survive"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// newPlainProxy is the plain-HTTP forwarder: net/http/httputil's
// ReverseProxy (hop-by-hop headers, upgrades, trailers, streaming) over
// cordon's own transport, which sends each request only to an address its
// own check allowed (see servePlain and plainRoundTrip).
func (s *Server) newPlainProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		// The request goes out to the address and under the authority
		// its verdict names (plainRoundTrip), whatever its URI spelled.
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: plainTransport{s},
		// Responses are masked as they come back, in plainRoundTrip;
		// servePlain masks the 1xx headers and trailers.
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode != http.StatusSwitchingProtocols {
				RemoveHopHeaders(resp.Header)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ref *plainRefusal
			if !errors.As(err, &ref) {
				ref = &plainRefusal{d: tlsterm.Failure(err, s.cfg.Creds), status: http.StatusBadGateway}
			}
			if v, ok := r.Context().Value(plainKey{}).(*plainVerdict); ok && v.room.Unused() {
				// Refused before its transport saw it (an Upgrade that
				// is no token): its name was looked up, and no line
				// names it yet (red team, round 8).
				d := ref.d
				d.Host, d.Port = v.t.Host, v.t.Port
				rec := decisionRecord(audit.KindHTTP, r.RemoteAddr, d)
				rec.Method, rec.Path = r.Method, r.URL.Path
				s.reported(v.room.Write(rec))
			}
			tlsterm.WriteRefusal(w, ref.d, ref.status)
		},
		ErrorLog: s.cfg.ErrorLog,
	}
}

// plainKey carries a request's verdict from servePlain to its transport.
type plainKey struct{}

// plainVerdict is what servePlain decided for one request.
type plainVerdict struct {
	t        Target
	d        policy.Decision
	injected []string
	start    time.Time
	// room is the budget kept for the request's first decision line
	// (Server.lineRoom).
	room *audit.Room
}

// plainTransport is the forwarder's RoundTripper: the request's own
// verdict says where it may go.
type plainTransport struct{ s *Server }

func (p plainTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v, ok := req.Context().Value(plainKey{}).(*plainVerdict)
	if !ok {
		return nil, errors.New("cordon: a plain-HTTP request without a verdict is not sent")
	}
	return p.s.plainRoundTrip(req, v)
}

// plainRefusal is a refusal found while sending: the forwarder answers it.
type plainRefusal struct {
	d      policy.Decision
	status int
}

func (r *plainRefusal) Error() string { return fmt.Sprintf("%s: %s", r.d.Reason, r.d.Detail) }

// servePlain judges one absolute-form request and forwards it, logging the
// decision (naming the address) before any byte goes up and a close line
// when its response is done.
func (s *Server) servePlain(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	refuse := func(d policy.Decision, status int) { s.refuse(w, r, audit.KindHTTP, d, status) }
	if r.URL.Scheme != "http" {
		refuse(policy.Decision{Reason: ReasonBadRequest, Host: r.URL.Host,
			Detail: fmt.Sprintf("scheme %q is not proxied as plain HTTP; use CONNECT (HTTPS_PROXY) for https", r.URL.Scheme)}, http.StatusBadRequest)
		return
	}
	host, port, err := policy.SplitHostPort(r.URL.Host, 80)
	if err != nil {
		refuse(policy.Decision{Reason: policy.ReasonBadHost, Host: r.URL.Host, Detail: err.Error()}, http.StatusBadRequest)
		return
	}
	if d := tlsterm.CheckRequest(r, host, port, 80); !d.Allow {
		refuse(d, tlsterm.RefusalStatus(d.Reason))
		return
	}
	// A fake address is judged as the name it was handed out for, as
	// CONNECT and the transparent path judge it: judged as an address,
	// an allow rule for it would have cordon dial that benchmarking
	// address on the host's network, and one the resolver never handed
	// out would not be refused as such.
	if name, fd, ok := s.fakeName(host, port); ok {
		if !fd.Allow {
			refuse(fd, http.StatusForbidden)
			return
		}
		host = name
	}
	room, d, ok := s.lineRoom(host, port)
	if !ok {
		tlsterm.WriteRefusal(w, d, http.StatusServiceUnavailable)
		return
	}
	defer room.Release()
	t, d := s.Judge(r.Context(), host, port)
	if !d.Allow {
		s.reported(room.Write(decisionRecord(audit.KindHTTP, r.RemoteAddr, d)))
		tlsterm.WriteRefusal(w, d, http.StatusForbidden)
		return
	}
	out, cerr := tlsterm.ApplyCredentials(s.cfg.Creds, r, host, port, false)
	if cerr != nil {
		d.Allow, d.Reason, d.Detail = false, cerr.Reason, cerr.Error()
		rec := decisionRecord(audit.KindHTTP, r.RemoteAddr, d)
		rec.Credential = cerr.Credential
		s.reported(room.Write(rec))
		tlsterm.WriteRefusal(w, d, http.StatusForbidden)
		return
	}
	RemoveHopHeaders(r.Header)
	r.Header.Del("Proxy-Authorization")
	v := &plainVerdict{t: t, d: d, injected: out.Injected, start: start, room: room}
	tlsterm.ServeMasked(s.cfg.Creds, s.plain, w, r.WithContext(context.WithValue(r.Context(), plainKey{}, v)))
}

// plainRoundTrip sends req to the checked addresses of t in turn, until
// one takes it: each attempt is logged (allow, naming the address) before
// its transport writes a byte, and the one that answers gets a close line
// when its response body is done.
func (s *Server) plainRoundTrip(req *http.Request, v *plainVerdict) (*http.Response, error) {
	t, d, injected, start := v.t, v.d, v.injected, v.start
	host, path, method := t.Host, req.URL.Path, req.Method
	for i, a := range t.Addrs {
		addr := netip.AddrPortFrom(a, uint16(t.Port))
		id := s.ids.Add(1)
		rec := decisionRecord(audit.KindHTTP, req.RemoteAddr, d)
		rec.ID, rec.Addr, rec.Method, rec.Path = id, addr.String(), method, path
		recs := []audit.Record{rec}
		for _, name := range injected {
			recs = append(recs, audit.Record{Type: audit.TypeInject, Kind: audit.KindHTTP, ID: id, Host: host, Port: t.Port, Method: method, Path: path, Credential: name})
		}
		if err := s.reported(v.room.Write(recs...)); err != nil {
			return nil, &plainRefusal{d: tlsterm.AuditFailed(host, t.Port), status: http.StatusServiceUnavailable}
		}
		// status is what the client got: the upstream's, cordon's 502,
		// or none (0) when another address is tried.
		var bodyLike atomic.Bool // the body started like a request line
		closeLine := func(up, down int64, status int, f policy.Decision) {
			r := audit.Record{Type: audit.TypeClose, Kind: audit.KindHTTP, ID: id, Host: host, Port: t.Port,
				Addr: addr.String(), Method: method, Path: path, Status: status,
				BytesUp: up, BytesDown: down, DurationMS: time.Since(start).Milliseconds(),
				Decision: tlsterm.CloseDecision(f.Reason), Reason: string(f.Reason), Detail: f.Detail}
			if r.Detail == "" && bodyLike.Load() {
				r.Detail = tlsterm.BodyLikeRequestDetail
			}
			s.cfg.Audit.Later(r) // goes out with the next line (see audit.Writer.Later)
		}
		out := req.Clone(tlsterm.WithBodyNotice(req.Context(), func() { bodyLike.Store(true) }))
		out.URL.Host = addr.String() // the pool's key: connections to this address only
		// The authority judged and logged, not the URI's spelling of it:
		// net/http punycodes a host without the UTS #46 mapping cordon
		// judged it under ("evil。x.wild.test" went out as Host
		// xn--evilx-bu3d.wild.test), and a fake address stands for its
		// name.
		out.Host = tlsterm.Authority(host, t.Port, 80)
		// The request body is counted as it goes up (its count is "down"
		// from the body's point of view: bytes read from it).
		body := &countedBody{ReadCloser: req.Body, done: func(int64, int64, error) {}}
		if req.Body != nil && req.Body != http.NoBody {
			out.Body = body
		}
		resp, err := s.upstreams.transport(addr, host, s.cfg.Dialer).RoundTrip(out)
		if err != nil {
			var oe *net.OpError
			dialFailed := errors.As(err, &oe) && oe.Op == "dial"
			f := tlsterm.Failure(err, s.cfg.Creds)
			if dialFailed {
				f.Reason = ReasonDialFailed
			}
			// Another address is tried only when this one never got the
			// request (its dial failed) and there is no body the failed
			// attempt has closed.
			noBody := req.Body == nil || req.Body == http.NoBody
			if i+1 < len(t.Addrs) && dialFailed && noBody {
				closeLine(body.down.Load(), 0, 0, f)
				continue
			}
			closeLine(body.down.Load(), 0, http.StatusBadGateway, f)
			f.Host, f.Port = host, t.Port
			return nil, &plainRefusal{d: f, status: http.StatusBadGateway}
		}
		if err := maskPlain(s.cfg.Creds, resp, host, t.Port); err != nil {
			// Its body cannot be checked: refused unread.
			resp.Body.Close()
			f, ok := tlsterm.UncheckedEncoding(err)
			if !ok {
				f = policy.Decision{Reason: tlsterm.ReasonUpstreamError, Detail: err.Error()}
			}
			closeLine(body.down.Load(), 0, http.StatusBadGateway, f)
			f.Host, f.Port = host, t.Port
			return nil, &plainRefusal{d: f, status: http.StatusBadGateway}
		}
		switched, _ := resp.Body.(*maskedConn)
		resp.Body = newCountedBody(resp.Body, func(up, down int64, end error) {
			var f policy.Decision
			unchecked, cut := tlsterm.UncheckedEncoding(end)
			switch {
			case switched != nil && switched.guard.Err() != nil:
				// Cut for what the client sent on the switched protocol.
				f = tlsterm.Failure(switched.guard.Err(), s.cfg.Creds)
			case cut:
				// Or for what the upstream sent on it.
				f = unchecked
			case end == nil || resp.StatusCode == http.StatusSwitchingProtocols:
			case errors.Is(end, errBodyCut):
				// The relay stopped before the body's end without a read
				// error: writing it to the client failed.
				f = policy.Decision{Reason: tlsterm.ReasonClientGone, Detail: "response body: the client's connection failed"}
			default:
				f = tlsterm.Failure(end, s.cfg.Creds)
				if f.Reason == tlsterm.ReasonUpstreamError {
					f.Detail = "response body: " + f.Detail
				}
			}
			closeLine(body.down.Load()+up, down, resp.StatusCode, f)
		})
		return resp, nil
	}
	return nil, &plainRefusal{d: policy.Decision{Reason: ReasonDialFailed, Host: host, Port: t.Port,
		Detail: fmt.Sprintf("%s: no checked address", policy.JoinHostPort(t.Host, t.Port))}, status: http.StatusBadGateway}
}

// maskPlain masks a plain-HTTP response (tlsterm.MaskResponse) as it
// comes back from host and port. A 101's header keeps its Connection and
// Upgrade (only values holding a secret change); what the switched
// connection brings back is masked as a body is, and what the client sends
// on it is guarded as a request body is. A 101 whose protocol is encoded
// past masking (tlsterm.CheckSwitch) is refused.
func maskPlain(creds *credinject.Set, resp *http.Response, host string, port int) error {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return tlsterm.MaskResponse(creds, resp)
	}
	if len(creds.Names()) == 0 {
		return nil
	}
	if err := tlsterm.CheckSwitch(creds, resp); err != nil {
		return err
	}
	creds.MaskHeader(resp.Header)
	if conn, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = newMaskedConn(creds, resp.Header.Get("Upgrade"), conn, host, port)
	}
	return nil
}

// maskedConn is a switched connection read through a mask and written to
// through a guard. Its Close closes the connection.
type maskedConn struct {
	io.ReadCloser // the mask
	up            *io.PipeWriter
	guard         tlsterm.SwitchGuard
}

// newMaskedConn starts the copy of what the client writes, through the
// guard, to conn; a refused value ends it and the connection. What the
// client sends is guarded, and what conn brings back masked, as the
// switched protocol needs (tlsterm.GuardSwitched, tlsterm.MaskSwitched).
func newMaskedConn(creds *credinject.Set, protocol string, conn io.ReadWriteCloser, host string, port int) *maskedConn {
	pr, pw := io.Pipe()
	c := &maskedConn{ReadCloser: tlsterm.MaskSwitched(creds, protocol, conn), up: pw,
		guard: tlsterm.GuardSwitched(creds, protocol, pr, host, port)}
	go func() {
		err := func() (err error) {
			defer survive.Recover(&err, "guarding a switched protocol's messages")
			_, err = io.Copy(conn, c.guard)
			return err
		}()
		if err != nil {
			pr.CloseWithError(err)
			conn.Close()
		}
	}()
	return c
}

func (c *maskedConn) Write(p []byte) (int, error) { return c.up.Write(p) }

func (c *maskedConn) Close() error {
	c.up.Close()
	return c.ReadCloser.Close()
}

// RemoveHopHeaders deletes hop-by-hop headers and those the Connection
// header names (tlsterm.RemoveHopByHop). An upgrade keeps "Connection:
// Upgrade" and "Upgrade".
func RemoveHopHeaders(h http.Header) {
	upgrade := h.Get("Upgrade")
	isUpgrade := upgrade != "" && tlsterm.HasToken(h, "Connection", "upgrade")
	tlsterm.RemoveHopByHop(h)
	if isUpgrade {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", upgrade)
	}
}

// countedBody counts what is read from a body (down) and, for a switched
// protocol's body, what is written to it (up), and reports both once, when
// it is closed, with how the reading ended: nil at the body's end, the
// read's error, or errBodyCut for a body closed before either.
type countedBody struct {
	io.ReadCloser
	up, down atomic.Int64
	once     sync.Once
	done     func(up, down int64, end error)

	mu  sync.Mutex
	end error // the first read error (io.EOF at the body's end)
}

// errBodyCut is the end of a body closed before it was read to its end.
var errBodyCut = errors.New("closed before its end")

// newCountedBody wraps body; a switched protocol's body (which is also
// written to) keeps its Write.
func newCountedBody(body io.ReadCloser, done func(up, down int64, end error)) io.ReadCloser {
	c := &countedBody{ReadCloser: body, done: done}
	if w, ok := body.(io.Writer); ok {
		return &countedDuplex{countedBody: c, w: w}
	}
	return c
}

// Read may run on net/http's Transport's goroutine (a request's body),
// which nothing recovers: a panic below it becomes the read's error
// (survive.Recover).
func (b *countedBody) Read(p []byte) (n int, err error) {
	defer survive.Recover(&err, "reading a body")
	n, err = b.ReadCloser.Read(p)
	b.down.Add(int64(n))
	if err != nil {
		b.mu.Lock()
		if b.end == nil {
			b.end = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.mu.Lock()
		end := b.end
		b.mu.Unlock()
		switch {
		case end == nil:
			end = errBodyCut
		case errors.Is(end, io.EOF):
			end = nil
		}
		b.done(b.up.Load(), b.down.Load(), end)
	})
	return err
}

// countedDuplex is the body of a 101 response: the upgraded connection.
type countedDuplex struct {
	*countedBody
	w io.Writer
}

func (d *countedDuplex) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	d.up.Add(int64(n))
	return n, err
}
