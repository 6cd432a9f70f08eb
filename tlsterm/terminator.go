// Package tlsterm terminates one client TLS stream at a time: it presents a
// leaf for the tunnel's host, refuses a ClientHello or any request that
// names another authority, and forwards each request over verified TLS to
// the address the egress proxy already checked, logging every request.
package tlsterm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// Config is what a Terminator needs; Leaves, Roots and Audit are required.
type Config struct {
	Leaves *certs.LeafCache
	// Roots returns the pool that verifies upstream servers (system roots
	// plus configured extra CAs). It is called at every upstream
	// handshake, so it may still be loading when the Terminator starts.
	Roots func() (*x509.CertPool, error)
	Audit *audit.Writer
	// Creds swaps placeholders for secrets toward their hosts and masks
	// secrets in responses; nil means no credentials.
	Creds *credinject.Set
	// HandshakeTimeout bounds the client's TLS handshake; zero means 10s.
	HandshakeTimeout time.Duration
	// MaxStreams caps concurrently terminated streams; zero means 1024.
	MaxStreams int
	// MaxRequests caps the HTTP/2 requests in flight at once, across all
	// the terminated streams; zero means 1024 (defaultMaxRequests).
	MaxRequests int
	// MaxHTTP2Conns caps the terminated streams that speak HTTP/2 at
	// once; zero means 64 (defaultMaxHTTP2Conns).
	MaxHTTP2Conns int
	// ErrorLog receives problems that have no client to go to.
	ErrorLog *log.Logger
}

// defaultMaxRequests is how many HTTP/2 requests may be in flight at once
// across a session's terminated streams, by default: as many as its
// HTTP/1.x streams could carry, one each. Without a bound, each HTTP/2
// stream multiplies its connection by net/http's 250 concurrent
// requests, each holding an upstream connection of its own when the
// upstream does not speak HTTP/2 (or caps its streams): a box could make
// cordon, outside the box's limits, hold a quarter of a million sockets.
const defaultMaxRequests = 1024

// defaultMaxHTTP2Conns is how many terminated streams may speak HTTP/2 at
// once, by default; past them, a client that offers HTTP/1.1 too is
// served HTTP/1.1, and one that offers HTTP/2 alone is refused. net/http's
// HTTP/2 server keeps a request's state (some 5 KiB, most of it a 4 KiB
// response buffer) for each stream whose handler has not yet run, and a
// stream the client resets at once still waits its turn: four times its
// connection's concurrent streams may wait so, on top of those running.
// A box that opened HEADERS and reset each stream in a loop on 1,000
// terminated connections took cordon, outside the box's limits, to 3.9 GB;
// with this bound and maxClientStreams, at most 64 connections of some
// 500 stream states each, about 160 MB.
const defaultMaxHTTP2Conns = 64

// The flow-control windows of the HTTP/2 forwarders' upstream
// connections. net/http's Transport buffers what an upstream sends ahead
// of the client's reading, up to 4 MiB a stream and 1 GiB a connection,
// outside the box's limits: a box whose 1,000 HTTP/2 requests each
// fetched a large body and never read it took cordon past 2.4 GB (350 MB
// now). A session's first fullWindows upstream connections at once get
// a window of fullWindow, the rest leastWindow, the least net/http
// takes: what they cannot buffer waits upstream. A stream gets half its
// connection's window, so one whose client does not read leaves the
// others room; at fullWindow, as much as net/http gives a stream.
const (
	fullWindow  = 8 << 20
	fullWindows = 16
	leastWindow = 64 << 10
)

// Terminator terminates client TLS streams.
type Terminator struct {
	cfg   Config
	slots chan struct{}
	// requests holds a token per HTTP/2 request in flight
	// (Config.MaxRequests).
	requests chan struct{}
	// windows holds a token per upstream HTTP/2 transport given
	// fullWindow (fullWindows of them).
	windows chan struct{}
	// h2conns holds a token per terminated stream speaking HTTP/2
	// (Config.MaxHTTP2Conns).
	h2conns chan struct{}
}

// New builds a Terminator.
func New(cfg Config) (*Terminator, error) {
	if cfg.Leaves == nil || cfg.Roots == nil || cfg.Audit == nil {
		return nil, errors.New("tlsterm: Leaves, Roots and Audit are required")
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 1024
	}
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = defaultMaxRequests
	}
	if cfg.MaxHTTP2Conns == 0 {
		cfg.MaxHTTP2Conns = defaultMaxHTTP2Conns
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = log.New(io.Discard, "", 0)
	}
	return &Terminator{
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.MaxStreams),
		requests: make(chan struct{}, cfg.MaxRequests),
		windows:  make(chan struct{}, fullWindows),
		h2conns:  make(chan struct{}, cfg.MaxHTTP2Conns),
	}, nil
}

// TryAcquire reserves a stream slot; Serve releases it. A caller that gets
// false must refuse the stream (503) before telling the client anything.
func (t *Terminator) TryAcquire() bool {
	select {
	case t.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives back a slot taken by TryAcquire when the stream will not be
// served after all.
func (t *Terminator) Release() { <-t.slots }

// Stream is one client connection to terminate.
type Stream struct {
	// ID ties the stream's audit lines to the decision that allowed it.
	ID   uint64
	Kind audit.Kind
	// Client is the client's side, positioned at its ClientHello.
	Client net.Conn
	// Host and Port are the one authority this stream may speak to.
	Host string
	Port int
	// Plaintext streams carry HTTP/1.x without TLS (CONNECT to port 80,
	// transparent port 80): the same checks, no handshakes.
	Plaintext bool
	// Upstream is a TCP connection to the checked address, or nil.
	Upstream net.Conn
	// Addr is the address Upstream reached, for audit lines.
	Addr string
	// Redial connects again to Addr, the checked address the stream's
	// allow line names.
	Redial func(ctx context.Context) (net.Conn, error)
}

// Serve terminates s until the client goes away, then releases the slot
// taken by TryAcquire.
func (t *Terminator) Serve(s *Stream) {
	defer t.Release()
	defer s.Client.Close()
	st := &stream{t: t, s: s, authority: Authority(s.Host, s.Port, s.defaultPort())}
	if s.Upstream != nil {
		st.first.Store(&s.Upstream)
	}
	defer st.closeUpstream()

	cork := &corkConn{Conn: s.Client}
	if s.Plaintext {
		st.serveHTTP1(cork, cork)
		return
	}
	var refused *policy.Decision
	var h2 alpnSlot
	defer h2.release()
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.cfg.Leaves.Get(s.Host)
		},
	}
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		d := CheckSNI(hello.ServerName, s.Host, s.Port)
		if d.Allow {
			d = h2.take(t.h2conns, hello.SupportedProtos, s)
		}
		if !d.Allow {
			refused = &d
			return nil, errors.New(d.Detail)
		}
		if !h2.held() {
			h1 := cfg.Clone()
			h1.GetConfigForClient, h1.NextProtos = nil, []string{"http/1.1"}
			return h1, nil
		}
		return nil, nil
	}
	tc := tls.Server(cork, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		d := policy.Decision{Host: s.Host, Port: s.Port, Reason: ReasonHandshake, Detail: "client TLS handshake failed: " + err.Error()}
		if refused != nil {
			d = *refused
		}
		st.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(d.Reason), Detail: d.Detail})
		return
	}
	// The upstream leg speaks what the client chose: HTTP/2 clients are
	// served by net/http's HTTP/2 server and forwarded over HTTP/2 where
	// the upstream offers it; HTTP/1.x clients get HTTP/1.1 end to end.
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		defer st.setup()()
		refused := &protocolRefusals{record: st.record}
		serveH2(tc, &handler{st: st}, refused.count)
		refused.end()
		return
	}
	st.serveHTTP1(tc, cork)
}

// alpnSlot is a terminated stream's place among those that may speak
// HTTP/2 (Config.MaxHTTP2Conns), taken at its ClientHello.
type alpnSlot struct{ slots chan struct{} }

// take reserves a place in slots for a client offering protos that
// include HTTP/2. With none free, a client that offers HTTP/1.1 too (or
// no protocol) is left to it, and one that offers HTTP/2 alone is refused.
func (a *alpnSlot) take(slots chan struct{}, protos []string, s *Stream) policy.Decision {
	d := policy.Decision{Host: s.Host, Port: s.Port, Allow: true}
	if a.held() || !slices.Contains(protos, "h2") {
		return d
	}
	select {
	case slots <- struct{}{}:
		a.slots = slots
	default:
		if len(protos) == 1 {
			d.Allow, d.Reason = false, ReasonTooManyRequests
			d.Detail = fmt.Sprintf("this session already has %d connections speaking HTTP/2, its most at once, and the client offered no HTTP/1.1; one must end first", cap(slots))
		}
	}
	return d
}

// held says the stream may speak HTTP/2.
func (a *alpnSlot) held() bool { return a.slots != nil }

// release gives the place back, if one was taken.
func (a *alpnSlot) release() {
	if a.slots != nil {
		<-a.slots
		a.slots = nil
	}
}

// stream is the state of one terminated client connection.
type stream struct {
	t *Terminator
	s *Stream
	// authority is the stream's authority as requests name it upstream:
	// the scheme's default port elided.
	authority string
	// rp forwards HTTP/2 clients' requests (HTTP/2 upstream when the
	// server offers it).
	rp http.Handler
	// first is the pre-dialled upstream TCP connection, used once.
	first atomic.Pointer[net.Conn]
	// upstreams are the upstream connections the stream opened and that
	// are still open, for its end to close.
	upMu      sync.Mutex
	upstreams map[*trackedConn]struct{}
}

// record logs rs, each stamped with the stream's connection, in one
// write(2); a close line waits for the next write (audit.Writer.Later).
func (st *stream) record(rs ...audit.Record) error {
	now := rs[:0]
	for _, r := range rs {
		r.Kind, r.ID, r.Host, r.Port, r.Addr = st.s.Kind, st.s.ID, st.s.Host, st.s.Port, st.s.Addr
		if r.Type == audit.TypeClose {
			r.Decision = CloseDecision(policy.Reason(r.Reason))
			// A close line reports what already happened: it goes out
			// with the next line, sparing a keep-alive request a write(2).
			st.t.cfg.Audit.Later(r)
			continue
		}
		now = append(now, r)
	}
	if len(now) == 0 {
		return nil
	}
	err := st.t.cfg.Audit.Write(now...)
	if st.t.cfg.Audit.Report(err) {
		st.t.cfg.ErrorLog.Printf("cordon: %v", err)
	}
	return err
}

// setup builds the HTTP/2 forwarder and returns its cleanup.
func (st *stream) setup() (cleanup func()) {
	window, release := st.t.window()
	tr := st.newTransport(window)
	st.rp = st.reverseProxy(tr)
	return func() {
		tr.CloseIdleConnections()
		release()
	}
}

// window is the flow-control window of a new upstream HTTP/2 transport's
// connection: fullWindow while fewer than fullWindows transports hold it,
// else leastWindow. release gives it back.
func (t *Terminator) window() (window int, release func()) {
	select {
	case t.windows <- struct{}{}:
		return fullWindow, func() { <-t.windows }
	default:
		return leastWindow, func() {}
	}
}

// newTransport makes the HTTP/2 forwarder's upstream transport: every
// connection it opens goes to the checked addresses, over TLS verified for
// the stream's host, and it cannot be pointed anywhere else. window bounds
// the response bytes an upstream connection may send ahead of the
// client's reading (see fullWindow). An HTTP/1.1 upstream's connections
// follow their responses (ResponseConn).
func (st *stream) newTransport(window int) WatchingTransport {
	return WatchingTransport{&http.Transport{
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: window, MaxReceiveBufferPerStream: window / 2,
			// One connection: the window bounds it alone (see fullWindow).
			StrictMaxConcurrentRequests: true},
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		Proxy:                  nil,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		TLSHandshakeTimeout:    st.t.cfg.HandshakeTimeout,
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := st.dial(ctx, []string{"h2", "http/1.1"})
			if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol != "h2" {
				// HTTP/1.1, which net/http's Transport reads from any
				// connection that is not a *tls.Conn.
				return NewResponseConn(c, func(method, path string) { st.record(UnsolicitedRecord(method, path)) }), nil
			}
			return c, err
		},
	}}
}

// dial connects to the checked address (the pre-dialled connection first)
// and, unless the stream is plaintext, verifies the upstream's TLS offering
// protos. The caller owns the connection; the stream's end closes it if
// it is still open.
func (st *stream) dial(ctx context.Context, protos []string) (net.Conn, error) {
	var raw net.Conn
	if p := st.first.Swap(nil); p != nil {
		raw = *p
	} else {
		c, err := st.s.Redial(ctx)
		if err != nil {
			return nil, err
		}
		raw = c
	}
	raw = &drainConn{Conn: st.track(raw)}
	if st.s.Plaintext {
		return raw, nil
	}
	return st.handshakeUpstream(ctx, raw, protos)
}

// track remembers an upstream connection until it closes, so the
// stream's end closes it if it is still open.
func (st *stream) track(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, st: st}
	st.upMu.Lock()
	if st.upstreams == nil {
		st.upstreams = map[*trackedConn]struct{}{}
	}
	st.upstreams[tc] = struct{}{}
	st.upMu.Unlock()
	return tc
}

// trackedConn is an upstream connection that its stream forgets when it
// closes. Kept until the stream's end instead, every connection a
// long-lived client connection ever had opened stayed in memory with its
// buffers: a client that cancels each request mid-response (which leaves
// its upstream connection unusable, so the next request dials anew)
// made cordon, outside the box's limits, hold some 50 KiB more per
// request, without end.
type trackedConn struct {
	net.Conn
	st *stream
}

// NetConn is the connection underneath, for sysConn.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

func (c *trackedConn) Close() error {
	c.st.upMu.Lock()
	delete(c.st.upstreams, c)
	c.st.upMu.Unlock()
	return c.Conn.Close()
}

// handshakeUpstream verifies the upstream against Roots with SNI = the
// stream's host (no SNI for an IP literal; its IP SAN is checked).
func (st *stream) handshakeUpstream(ctx context.Context, raw net.Conn, protos []string) (net.Conn, error) {
	roots, err := st.t.cfg.Roots()
	if err != nil {
		raw.Close()
		return nil, &upstreamTLSError{err: err}
	}
	uc := tls.Client(raw, &tls.Config{
		ServerName: st.s.Host,
		RootCAs:    roots,
		NextProtos: protos,
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, st.t.cfg.HandshakeTimeout)
	defer cancel()
	if err := uc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, &upstreamTLSError{err: err}
	}
	return uc, nil
}

// closeUpstream closes the pre-dialled connection if no request used it,
// and every upstream the stream opened.
func (st *stream) closeUpstream() {
	if p := st.first.Swap(nil); p != nil {
		(*p).Close()
	}
	st.upMu.Lock()
	defer st.upMu.Unlock()
	for c := range st.upstreams {
		c.Conn.Close() // not c.Close, which takes upMu
	}
}

type upstreamTLSError struct{ err error }

func (e *upstreamTLSError) Error() string {
	return "upstream TLS verification failed: " + e.err.Error()
}

func (e *upstreamTLSError) Unwrap() error { return e.err }

// reverseProxy forwards a checked HTTP/2 request to the stream's
// authority.
func (st *stream) reverseProxy(tr http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = st.authority
			pr.Out.Host = st.authority
		},
		Transport:  tr,
		BufferPool: copyBuffers,
		ErrorLog:   log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			return MaskResponse(st.t.cfg.Creds, resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			d := Failure(err, st.t.cfg.Creds)
			if u, ok := UncheckedEncoding(err); ok {
				d = u
			}
			markFailed(r, d.Reason, d.Detail)
			WriteRefusal(w, d, http.StatusBadGateway)
		},
	}
}

// Failure is why an upstream leg failed, for its line and its 502: the
// credential guard's own reason, a WebSocket frame masking or the guard
// could not read, an unverified upstream, a client that left, or any other
// upstream error. The error's text may quote the
// request, so the detail is scrubbed of creds' secrets and placeholders.
func Failure(err error, creds *credinject.Set) policy.Decision {
	var te *upstreamTLSError
	var ce *credinject.Error
	var we *WebSocketError
	d := policy.Decision{Reason: ReasonUpstreamError, Detail: creds.Scrub(err.Error())}
	switch {
	case errors.As(err, &ce):
		d.Reason = ce.Reason
	case errors.As(err, &we):
		d.Reason = ReasonUncheckedEncoding
	case errors.As(err, &te):
		d.Reason = ReasonUpstreamTLS
	case errors.Is(err, errClientGone):
		d.Reason = ReasonClientGone
	case errors.Is(err, context.Canceled):
		d.Reason, d.Detail = ReasonClientGone, errClientGone.Error()
	}
	return d
}

// CloseDecision is the decision a request's close line carries, given
// the reason it ended early: deny when cordon refused the request on its
// way (a credential's guard cut its body off, a response came in a coding
// cordon cannot check), so that cordon audit --decision deny and
// --summary count it with the requests refused at once (its decision line
// said allow: the refusal came later); none when it ended, or failed, of
// itself.
func CloseDecision(reason policy.Reason) string {
	switch reason {
	case credinject.ReasonPlaintext, credinject.ReasonMisroute, credinject.ReasonSecretLeak,
		credinject.ReasonBasicUser, credinject.ReasonPlacement, ReasonUncheckedEncoding:
		return audit.Deny
	}
	return ""
}

// WriteRefusal answers a refused request: the reason code in
// X-Cordon-Reason and the sentence in the body, so a client can tell "not
// authenticated" (407) from "not allowed" (403) and see why.
func WriteRefusal(w http.ResponseWriter, d policy.Decision, status int) {
	w.Header().Set("X-Cordon-Reason", string(d.Reason))
	http.Error(w, refusalText(d), status)
}

// refusalText is the sentence a refusal page carries.
func refusalText(d policy.Decision) string {
	return fmt.Sprintf("cordon: %s: %s", d.Reason, d.Detail)
}

// MaskResponse rewrites every real secret in a response's headers and body
// back to its placeholder before the sandbox sees it. The body streams, so
// its length may change: Content-Length is dropped. A gzipped body is
// decoded first (Content-Encoding dropped); a body in any other coding
// cannot be checked, and MaskResponse returns an *EncodingError for the
// caller to refuse the response with (UncheckedEncoding).
func MaskResponse(creds *credinject.Set, resp *http.Response) error {
	if len(creds.Names()) == 0 {
		return nil
	}
	creds.MaskHeader(resp.Header)
	if resp.Body != nil && resp.Body != http.NoBody {
		if err := decodeBody(resp); err != nil {
			return err
		}
		resp.Body = creds.MaskBody(resp.Body)
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	return nil
}

// copyBuffers recycles the buffers bodies are copied through, instead of a
// fresh 32 KiB per request.
var copyBuffers = &bufferPool{sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

// Get and Put serve httputil.ReverseProxy; get and put lend the same
// buffers without the allocation Put costs.
func (b *bufferPool) Get() []byte   { return *b.get() }
func (b *bufferPool) Put(s []byte)  { b.p.Put(&s) }
func (b *bufferPool) get() *[]byte  { return b.p.Get().(*[]byte) }
func (b *bufferPool) put(p *[]byte) { b.p.Put(p) }
