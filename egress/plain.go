package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// dialedKey carries the connection the plain-HTTP handler already dialled
// (to a checked address) to the transport, which must not dial on its own.
type dialedKey struct{}

// newPlainProxy is goproxy configured for cordon: its transport never
// resolves or dials by itself (it takes the connection the handler dialled
// after the checks), there is no upstream proxy, no HTTP/2, no CONNECT, and
// no keep-alive upstream, so each request's audit line names the address
// it really went to.
func (s *Server) newPlainProxy() *goproxy.ProxyHttpServer {
	p := goproxy.NewProxyHttpServer()
	p.Logger = log.New(io.Discard, "", 0)
	p.KeepAcceptEncoding = true
	p.AllowHTTP2 = false
	p.Tr = &http.Transport{
		Proxy:              nil,
		DialContext:        dialPrepared,
		DisableKeepAlives:  true,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		TLSNextProto:       map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	p.ConnectDial = func(string, string) (net.Conn, error) {
		return nil, errors.New("cordon: goproxy's CONNECT path is not used")
	}
	p.ConnectDialWithReq = nil
	p.OnRequest().DoFunc(s.handlePlain)
	p.OnResponse().DoFunc(func(resp *http.Response, _ *goproxy.ProxyCtx) *http.Response {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			RemoveHopHeaders(resp.Header)
			tlsterm.MaskResponse(s.cfg.Creds, resp)
		}
		return resp
	})
	return p
}

func dialPrepared(ctx context.Context, _, _ string) (net.Conn, error) {
	c, ok := ctx.Value(dialedKey{}).(*countedConn)
	if !ok || !c.claim() {
		return nil, errors.New("cordon: refusing a dial that did not pass the checks")
	}
	return c, nil
}

// handlePlain judges one absolute-form request, dials the checked address,
// logs the decision, and lets goproxy forward it over that connection.
func (s *Server) handlePlain(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	start := time.Now()
	if r.URL.Scheme != "http" {
		return r, s.plainRefusal(r, policy.Decision{Reason: ReasonBadRequest, Host: r.URL.Host,
			Detail: fmt.Sprintf("scheme %q is not proxied as plain HTTP; use CONNECT (HTTPS_PROXY) for https", r.URL.Scheme)}, http.StatusBadRequest)
	}
	host, port, err := policy.SplitHostPort(r.URL.Host, 80)
	if err != nil {
		return r, s.plainRefusal(r, policy.Decision{Reason: policy.ReasonBadHost, Host: r.URL.Host, Detail: err.Error()}, http.StatusBadRequest)
	}
	if d := tlsterm.CheckRequest(r, host, port, 80); !d.Allow {
		return r, s.plainRefusal(r, d, http.StatusForbidden)
	}
	t, d := s.Judge(r.Context(), host, port)
	if !d.Allow {
		return r, s.plainRefusal(r, d, http.StatusForbidden)
	}
	out, cerr := tlsterm.ApplyCredentials(s.cfg.Creds, r, host, port, false)
	if cerr != nil {
		d.Allow, d.Reason, d.Detail = false, cerr.Reason, cerr.Error()
		rec := decisionRecord(audit.KindHTTP, r.RemoteAddr, d)
		rec.Credential = cerr.Credential
		s.record(rec)
		return r, s.plainResponse(r, d, http.StatusForbidden)
	}
	up, addr, err := s.cfg.Dialer.Dial(r.Context(), t)
	if err != nil {
		d.Allow, d.Reason, d.Detail = false, ReasonDialFailed, err.Error()
		return r, s.plainRefusal(r, d, http.StatusBadGateway)
	}
	id := s.ids.Add(1)
	rec := decisionRecord(audit.KindHTTP, r.RemoteAddr, d)
	rec.ID, rec.Addr, rec.Method, rec.Path = id, addr.String(), r.Method, r.URL.Path
	if err := s.record(rec); err != nil {
		up.Close()
		return r, s.plainResponse(r, policy.Decision{Reason: ReasonAuditFailed,
			Detail: "the audit log cannot be written, so nothing is allowed: " + err.Error()}, http.StatusServiceUnavailable)
	}
	for _, name := range out.Injected {
		s.record(audit.Record{Type: audit.TypeInject, Kind: audit.KindHTTP, ID: id, Host: host, Port: port, Method: r.Method, Path: r.URL.Path, Credential: name})
	}
	cc := &countedConn{Conn: up, onClose: func(upBytes, downBytes int64) {
		s.record(audit.Record{Type: audit.TypeClose, Kind: audit.KindHTTP, ID: id, Host: host, Port: port,
			Addr: addr.String(), BytesUp: upBytes, BytesDown: downBytes, DurationMS: time.Since(start).Milliseconds()})
	}}
	RemoveHopHeaders(r.Header)
	r.Header.Del("Proxy-Authorization")
	r = r.WithContext(context.WithValue(r.Context(), dialedKey{}, cc))
	// A request that never reaches the transport must not leak its conn.
	context.AfterFunc(r.Context(), func() { cc.closeIfUnclaimed() })
	return r, nil
}

func (s *Server) plainRefusal(r *http.Request, d policy.Decision, status int) *http.Response {
	s.record(decisionRecord(audit.KindHTTP, r.RemoteAddr, d))
	return s.plainResponse(r, d, status)
}

func (s *Server) plainResponse(r *http.Request, d policy.Decision, status int) *http.Response {
	resp := goproxy.NewResponse(r, goproxy.ContentTypeText, status, fmt.Sprintf("cordon: %s: %s\n", d.Reason, d.Detail))
	resp.Header.Set("X-Cordon-Reason", string(d.Reason))
	return resp
}

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 plus the
// proxy ones; Upgrade is kept when the request is an upgrade.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding",
}

// RemoveHopHeaders deletes hop-by-hop headers and those the Connection
// header names. An upgrade keeps "Connection: Upgrade" and "Upgrade".
func RemoveHopHeaders(h http.Header) {
	upgrade := h.Get("Upgrade")
	isUpgrade := upgrade != "" && tlsterm.HasToken(h, "Connection", "upgrade")
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
	if isUpgrade {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", upgrade)
	} else {
		h.Del("Upgrade")
	}
}

// countedConn counts bytes each way and reports them once, on Close. It
// can be handed to the transport exactly once.
type countedConn struct {
	net.Conn
	up, down atomic.Int64
	claimed  atomic.Bool
	once     sync.Once
	onClose  func(up, down int64)
}

func (c *countedConn) claim() bool { return c.claimed.CompareAndSwap(false, true) }

func (c *countedConn) closeIfUnclaimed() {
	if c.claim() {
		c.Close()
	}
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.down.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.up.Add(int64(n))
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.onClose(c.up.Load(), c.down.Load()) })
	return err
}
