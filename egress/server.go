// Package egress is cordon's egress proxy: it authenticates each client with
// the session token, judges every CONNECT and plain-HTTP request against the
// allowlist, dials only addresses that passed the guarded dialer, logs every
// decision before bytes flow, and hands allowed tunnels to TLS termination.
package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/connlimit"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// Reasons the proxy itself gives, beside the policy's.
const (
	ReasonAuthMissing        policy.Reason = "auth_required"
	ReasonAuthWrong          policy.Reason = "auth_failed"
	ReasonAuditFailed        policy.Reason = tlsterm.ReasonAuditFailed
	ReasonDialFailed         policy.Reason = "dial_failed"
	ReasonBadRequest         policy.Reason = tlsterm.ReasonBadRequest
	ReasonTooManyTunnels     policy.Reason = "too_many_tunnels"
	ReasonTooManyConnections policy.Reason = "too_many_connections"
	ReasonNotAProxyReq       policy.Reason = "not_a_proxy_request"
	ReasonUnknownFake        policy.Reason = "unknown_fake_address"
	ReasonUnknownProtocol    policy.Reason = "unknown_protocol"
)

// Config is what a Server needs. Rules, Dialer, Audit and Token are
// required.
type Config struct {
	Rules  *policy.Rules
	Dialer *Dialer
	Audit  *audit.Writer
	Token  string
	// Creds are the session's masked credentials (nil for none).
	Creds *credinject.Set
	// FakeRange and FakeName map the restricted network's fake addresses
	// (handed out by cordon's resolver) back to the names they stand for.
	FakeRange netip.Prefix
	FakeName  func(netip.Addr) (string, bool)
	// TLS terminates the tunnels Terminate picks; the rest stay opaque.
	TLS       *tlsterm.Terminator
	Terminate func(host string, port int) bool
	// MaxTunnels caps the tunnels open at once, terminated or opaque,
	// and, apart, the client connections speaking HTTP to the proxy (see
	// guardedListener); zero means 4096 (defaultMaxTunnels).
	MaxTunnels int
	// OwnUserOnly refuses client connections from sockets on this host
	// that belong to another user than cordon's (root excepted), before
	// they are read: any local user can reach a loopback port, and each
	// connection held open takes one of the client connections the proxy
	// serves at once (MaxTunnels), so another user could hold them all and
	// leave the session's own client waiting. Linux only (peerSocket).
	OwnUserOnly bool
	// ErrorLog receives problems that have no client to go to.
	ErrorLog *log.Logger
}

// defaultMaxTunnels is how many tunnels a session holds open at once, by
// default: enough for any client's pool, and a bound on what a box that
// opens connections without end can make cordon hold (two sockets and
// two goroutines each) outside the box's own limits.
const defaultMaxTunnels = 4096

// Server is the proxy. It is an http.Handler for an HTTP/1.1 listener.
type Server struct {
	cfg Config
	// tunnelSlots holds a token per open tunnel (Config.MaxTunnels).
	tunnelSlots chan struct{}
	plain       *httputil.ReverseProxy
	// upstreams holds the plain-HTTP proxy's upstream connections.
	upstreams upstreams
	ids       atomic.Uint64
	// unauth bounds the lines of clients without the token.
	unauth unauthLimiter

	// tunnels are the hijacked client connections still being served, so
	// a stopping proxy can end them and wait for their close lines.
	mu       sync.Mutex
	tunnels  map[net.Conn]net.Conn // client -> upstream
	stopping bool
	active   sync.WaitGroup
}

// sniffTimeout bounds how long a fresh checked tunnel may stay silent
// before it is refused.
const sniffTimeout = 10 * time.Second

// tunnel is an allowed connection to one target: its allow line is
// written and its upstream dialled.
type tunnel struct {
	id       uint64
	client   net.Conn
	upstream net.Conn
	target   Target
	addr     netip.AddrPort
	started  time.Time
	// tls holds a terminated-tunnel slot, when termination applies.
	tls *tlsterm.Terminator
	// slots is the Server's tunnelSlots, one of which the tunnel holds
	// until it ends (free).
	slots chan struct{}
}

// release ends a tunnel that will not be carried, dialled or not.
func (t *tunnel) release() {
	if t.upstream != nil {
		t.upstream.Close()
	}
	if t.tls != nil {
		t.tls.Release()
	}
	t.free()
}

// free gives back the tunnel's slot.
func (t *tunnel) free() { <-t.slots }

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Rules == nil || cfg.Dialer == nil || cfg.Audit == nil || cfg.Token == "" {
		return nil, errors.New("egress: Rules, Dialer, Audit and Token are required")
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = log.New(io.Discard, "", 0)
	}
	if cfg.MaxTunnels == 0 {
		cfg.MaxTunnels = defaultMaxTunnels
	}
	s := &Server{cfg: cfg, tunnelSlots: make(chan struct{}, cfg.MaxTunnels)}
	s.plain = s.newPlainProxy()
	s.upstreams.record = s.record
	return s, nil
}

// ServeHTTP authenticates the client, then routes CONNECT to a tunnel and
// anything else to the plain-HTTP proxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := audit.KindHTTP
	if r.Method == http.MethodConnect {
		kind = audit.KindConnect
	}
	// Every request takes its framing verdict, refused or not, to stay in
	// step with the connection's stream.
	framing := ""
	watch, _ := r.Context().Value(guardKey{}).(*parserWatch)
	if watch != nil {
		p, ok := watch.guard.Next()
		if !ok {
			p = "the request stream could not be followed"
		}
		framing = p
	}
	switch checkAuth(r.Header, s.cfg.Token) {
	case authMissing:
		s.refuseAuth(w, r, kind, ReasonAuthMissing, "proxy authentication required: use the proxy URL cordon printed (it carries the session token)")
		return
	case authWrong:
		s.refuseAuth(w, r, kind, ReasonAuthWrong, "wrong proxy token: use the proxy URL cordon printed for this session")
		return
	}
	if framing != "" {
		host, port := requestTarget(r)
		s.refuse(w, r, kind, policy.Decision{Host: host, Port: port, Reason: tlsterm.ReasonBadFraming,
			Detail: "ambiguous message framing: " + framing}, http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodConnect {
		s.serveConnect(w, r)
		return
	}
	if !r.URL.IsAbs() {
		s.refuse(w, r, audit.KindHTTP, policy.Decision{Reason: ReasonNotAProxyReq,
			Detail: "this is cordon's egress proxy; send absolute-form requests (http://host/path) or CONNECT"}, http.StatusBadRequest)
		return
	}
	if watch != nil {
		w = hijackWatch{ResponseWriter: w, watch: watch}
	}
	s.servePlain(w, r)
}

func (s *Server) refuseAuth(w http.ResponseWriter, r *http.Request, kind audit.Kind, reason policy.Reason, detail string) {
	host, port := requestTarget(r)
	s.recordUnauthenticated(audit.Record{Type: audit.TypeDecision, Kind: kind, Client: r.RemoteAddr,
		Host: host, Port: port, Decision: audit.Deny, Reason: string(reason), Detail: detail})
	w.Header().Set("Proxy-Authenticate", `Basic realm="cordon"`)
	w.Header().Set("X-Cordon-Reason", string(reason))
	w.Header().Set("Connection", "close")
	http.Error(w, "cordon: "+detail, http.StatusProxyAuthRequired)
}

// refuse logs a deny and answers with its reason.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, kind audit.Kind, d policy.Decision, status int) {
	rec := decisionRecord(kind, r.RemoteAddr, d)
	s.record(rec)
	tlsterm.WriteRefusal(w, d, status)
}

func decisionRecord(kind audit.Kind, client string, d policy.Decision) audit.Record {
	return audit.Record{Type: audit.TypeDecision, Kind: kind, Client: client,
		Host: d.Host, Port: d.Port, Decision: audit.Verdict(d.Allow),
		Reason: string(d.Reason), Detail: d.Detail, Rule: d.Rule}
}

// record writes audit lines, in one write(2); the error is returned for
// callers that must fail closed, and the first one also logged.
func (s *Server) record(rs ...audit.Record) error {
	return s.reported(s.cfg.Audit.Write(rs...))
}

// reported tells the operator err, a write's, if it is the log's first
// failure, and returns it.
func (s *Server) reported(err error) error {
	if s.cfg.Audit.Report(err) {
		s.cfg.ErrorLog.Printf("cordon: %v", err)
	}
	return err
}

// Judge is the whole decision for one host and port: the allowlist, then
// the guarded dialer's resolution and address checks.
func (s *Server) Judge(ctx context.Context, rawHost string, port int) (Target, policy.Decision) {
	d := s.cfg.Rules.Decide(rawHost, port)
	if !d.Allow {
		return Target{}, d
	}
	t, ad := s.cfg.Dialer.Check(ctx, d.Host, port)
	if !ad.Allow {
		return t, ad
	}
	return t, d
}

// lineRoom keeps room in the audit budget for the line of a connection
// to host and port (audit.Writer.Reserve), before its name is looked up,
// or refuses it, unlogged, when there is none (the log failed, or the
// budget is spent). Judged first, an allowed name went to the host's
// resolver, and on to its domain's servers, with no line naming it once
// the budget was spent, or spent meanwhile by other connections: names
// under an allowed wildcard carried what a box chose to the domain's DNS
// servers unlogged (red team, round 8).
func (s *Server) lineRoom(host string, port int) (*audit.Room, policy.Decision, bool) {
	room, err := s.cfg.Audit.Reserve(roomPerLine)
	if err != nil {
		s.reported(err)
		return nil, tlsterm.AuditFailed(host, port), false
	}
	return room, policy.Decision{}, true
}

// roomPerLine is the budget a connection's decision line is given ahead
// (lineRoom): most are some 400 bytes; a longer one is written whole all
// the same.
const roomPerLine = 1 << 10

func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	kind := audit.KindConnect
	host, port, err := policy.SplitHostPort(r.Host, 0)
	if err != nil {
		s.refuse(w, r, kind, policy.Decision{Reason: policy.ReasonBadHost, Host: r.Host,
			Detail: fmt.Sprintf("bad CONNECT target: %v", err)}, http.StatusBadRequest)
		return
	}
	t, d, status := s.admit(r.Context(), kind, r.RemoteAddr, host, port)
	if t == nil {
		tlsterm.WriteRefusal(w, d, status) // admit logged it
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		t.release()
		http.Error(w, "cordon: cannot take over this connection", http.StatusInternalServerError)
		return
	}
	client, rw, err := hj.Hijack()
	if err != nil {
		t.release()
		return
	}
	if !s.track(client, t) {
		return
	}
	defer s.untrack(client)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		t.release()
		return
	}
	if w, ok := client.(*parserWatch); ok {
		// What follows the 200 is the tunnel's, not HTTP to this proxy.
		w.hijacked.Store(true)
		w.guard.Stop()
		w.free()
		client = w.slot.Conn // the socket itself, which splice(2) and the client watch need
	}
	t.client = readerConn(client, rw.Reader)
	s.carry(t, kind)
}

// admit is the whole way into a tunnel to host:port: a fake address back
// to its name, the judgement, a tunnel slot (and a terminated-tunnel one
// when termination applies), and then, for each
// checked address in turn until one connects, its allow line and its dial.
// The line goes first, so nothing reaches an address the log does not
// name, and a connection whose line cannot be written is never made; an
// address that cannot be reached gets a close line saying why. Every
// refusal is logged here; it returns no tunnel, and the decision and
// status for the caller to answer with.
func (s *Server) admit(ctx context.Context, kind audit.Kind, client, host string, port int) (*tunnel, policy.Decision, int) {
	start := time.Now()
	room, d, ok := s.lineRoom(host, port)
	if !ok {
		return nil, d, http.StatusServiceUnavailable
	}
	defer room.Release()
	refuse := func(d policy.Decision, status int) (*tunnel, policy.Decision, int) {
		s.reported(room.Write(decisionRecord(kind, client, d)))
		return nil, d, status
	}
	if name, d, ok := s.fakeName(host, port); ok {
		if !d.Allow {
			return refuse(d, http.StatusForbidden)
		}
		host = name
	}
	t, d := s.Judge(ctx, host, port)
	if !d.Allow {
		return refuse(d, http.StatusForbidden)
	}
	select {
	case s.tunnelSlots <- struct{}{}:
	default:
		d.Allow, d.Reason = false, ReasonTooManyTunnels
		d.Detail = fmt.Sprintf("this session already has %d tunnels open, its most at once; one must close first", s.cfg.MaxTunnels)
		return refuse(d, http.StatusServiceUnavailable)
	}
	tn := &tunnel{target: t, started: start, slots: s.tunnelSlots}
	if s.cfg.TLS != nil && s.cfg.Terminate != nil && s.cfg.Terminate(t.Host, t.Port) {
		if !s.cfg.TLS.TryAcquire() {
			tn.release()
			d.Allow, d.Reason, d.Detail = false, ReasonTooManyTunnels, "too many terminated tunnels at once; retry later"
			return refuse(d, http.StatusServiceUnavailable)
		}
		tn.tls = s.cfg.TLS
	}
	var errs []error
	for _, a := range t.Addrs {
		tn.id, tn.addr = s.ids.Add(1), netip.AddrPortFrom(a, uint16(t.Port))
		rec := decisionRecord(kind, client, d)
		rec.ID, rec.Addr = tn.id, tn.addr.String()
		if err := s.reported(room.Write(rec)); err != nil {
			tn.release()
			// Unlogged, as the write failed: refuse says so on the way.
			return refuse(tlsterm.AuditFailed(d.Host, d.Port), http.StatusServiceUnavailable)
		}
		up, err := s.cfg.Dialer.dialAddr(ctx, tn.addr)
		if err == nil {
			tn.upstream = up
			return tn, d, 0
		}
		errs = append(errs, err)
		s.record(audit.Record{Type: audit.TypeClose, Kind: kind, ID: tn.id, Host: t.Host, Port: t.Port, Addr: tn.addr.String(),
			Reason: string(ReasonDialFailed), Detail: err.Error(), DurationMS: time.Since(start).Milliseconds()})
	}
	tn.release()
	d.Allow, d.Reason = false, ReasonDialFailed
	d.Detail = fmt.Sprintf("dial %s: no checked address", policy.JoinHostPort(t.Host, t.Port))
	if len(errs) > 0 {
		// Each attempt has its lines already.
		d.Detail = fmt.Sprintf("dial %s: %v", policy.JoinHostPort(t.Host, t.Port), errors.Join(errs...))
		return nil, d, http.StatusBadGateway
	}
	return refuse(d, http.StatusBadGateway)
}

// carry serves an admitted tunnel whose client is connected: terminated
// when its first bytes are TLS or HTTP and termination applies, spliced
// opaquely otherwise.
func (s *Server) carry(t *tunnel, kind audit.Kind) {
	defer t.free()
	proto := protoOpaque
	if t.tls != nil {
		var why string
		proto, why, t.client, t.upstream = sniff(t.client, t.upstream, sniffTimeout)
		switch proto {
		case protoRefused:
			t.tls.Release()
			s.refuseUnread(t, kind, why)
			return
		case protoEnded:
			t.tls.Release()
			t.client.Close()
			t.upstream.Close()
			s.closeLine(t, kind, 0, 0)
			return
		}
	}
	if proto != protoOpaque {
		s.cfg.TLS.Serve(&tlsterm.Stream{
			ID: t.id, Kind: kind, Client: t.client, Host: t.target.Host, Port: t.target.Port,
			Plaintext: proto == protoHTTP, Upstream: t.upstream, Addr: t.addr.String(),
			Redial: func(ctx context.Context) (net.Conn, error) {
				return s.cfg.Dialer.dialAddr(ctx, t.addr) // the address its allow line names
			},
		})
		return
	}
	if t.tls != nil {
		t.tls.Release()
	}
	s.splice(t, kind)
}

// refuseUnread ends a checked tunnel whose protocol sniff could not make
// plain, with a deny line saying why. Relayed unread, it could carry TLS
// or HTTP past the checks of one authority per connection.
func (s *Server) refuseUnread(t *tunnel, kind audit.Kind, why string) {
	t.client.Close()
	t.upstream.Close()
	s.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Kind: kind, ID: t.id,
		Host: t.target.Host, Port: t.target.Port, Addr: t.addr.String(), Reason: string(ReasonUnknownProtocol),
		Detail: why + "; a checked tunnel relays only TLS, HTTP/1.x, or a protocol whose server speaks first. " +
			"To relay this host unread, list it under exclude:",
		DurationMS: time.Since(t.started).Milliseconds()})
}

// splice copies bytes both ways until both sides are done, then writes the
// close record.
func (s *Server) splice(t *tunnel, kind audit.Kind) {
	up, down := Splice(t.client, t.upstream)
	s.closeLine(t, kind, up, down)
}

// closeLine records a tunnel's end and the bytes it carried each way.
func (s *Server) closeLine(t *tunnel, kind audit.Kind, up, down int64) {
	s.record(audit.Record{Type: audit.TypeClose, Kind: kind, ID: t.id, Host: t.target.Host, Port: t.target.Port,
		Addr: t.addr.String(), BytesUp: up, BytesDown: down, DurationMS: time.Since(t.started).Milliseconds()})
}

// Splice relays a and b until both directions end, closing both; it returns
// bytes sent a→b and b→a.
func Splice(a, b net.Conn) (ab, ba int64) {
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(b, a)
		closeWrite(b)
		done <- n
	}()
	ba, _ = io.Copy(a, b)
	closeWrite(a)
	ab = <-done
	a.Close()
	b.Close()
	return ab, ba
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// prefixConn is a conn whose reads first replay bytes already consumed.
type prefixConn struct {
	net.Conn
	prefix []byte
}

// NetConn is the connection under the replayed bytes.
func (p *prefixConn) NetConn() net.Conn { return p.Conn }

// newPrefixConn replays a copy of b before c's own bytes.
func newPrefixConn(c net.Conn, b []byte) *prefixConn {
	return &prefixConn{Conn: c, prefix: bytes.Clone(b)}
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) == 0 {
		return p.Conn.Read(b)
	}
	n := copy(b, p.prefix)
	p.prefix = p.prefix[n:]
	return n, nil
}

func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return p.Conn.Close()
}

// requestTarget is the host and port a request asks for, for logging a
// refusal that happens before the target is parsed properly.
func requestTarget(r *http.Request) (string, int) {
	def := 80
	if r.Method == http.MethodConnect {
		def = 0
	}
	hostport := r.Host
	if r.URL != nil && r.URL.Host != "" {
		hostport = r.URL.Host
		if r.URL.Scheme == "https" {
			def = 443
		}
	}
	h, p, err := policy.SplitHostPort(hostport, def)
	if err != nil {
		return hostport, 0
	}
	return h, p
}

// Serve accepts proxy clients on l until ctx ends, then stops accepting and
// closes idle connections; tunnels in flight are left to finish.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler: s,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if w, ok := c.(*parserWatch); ok {
				return context.WithValue(ctx, guardKey{}, w)
			}
			return ctx
		},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    tlsterm.MaxHeaderBytes,
		ErrorLog:          s.cfg.ErrorLog,
		// "OPTIONS *" comes to ServeHTTP like any request, to take its
		// framing verdict: answered by net/http itself, it left its
		// verdict to the connection's next request, whose own (a
		// Content-Length with a Transfer-Encoding) went to the one after.
		DisableGeneralOptionsHandler: true,
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		// Shutdown leaves hijacked tunnels alone.
		s.endTunnels()
	}()
	err := hs.Serve(newGuardedListener(l, s))
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-stopped
	return nil
}

// endTunnels ends every tunnel in flight and refuses new ones, and waits
// for their close lines, so the caller may close the audit log after.
func (s *Server) endTunnels() {
	s.mu.Lock()
	s.stopping = true
	for c, up := range s.tunnels {
		c.Close()
		up.Close()
	}
	s.mu.Unlock()
	s.active.Wait()
	s.upstreams.close()
}

// track registers t, carried for the client c, so that Close can end it.
// When the proxy is stopping it closes c, lets t go and returns false.
func (s *Server) track(c net.Conn, t *tunnel) bool {
	s.mu.Lock()
	ok := !s.stopping
	if ok {
		if s.tunnels == nil {
			s.tunnels = map[net.Conn]net.Conn{}
		}
		s.tunnels[c] = t.upstream
		s.active.Add(1)
	}
	s.mu.Unlock()
	if !ok {
		c.Close()
		t.release()
	}
	return ok
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.tunnels, c)
	s.mu.Unlock()
	s.active.Done()
}

// fakeName resolves a fake address back to its name. ok is false for a
// host that is not a fake address; an unknown fake address is refused.
func (s *Server) fakeName(host string, port int) (string, policy.Decision, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil || s.cfg.FakeName == nil || !s.cfg.FakeRange.Contains(a) {
		return "", policy.Decision{}, false
	}
	name, ok := s.cfg.FakeName(a)
	if !ok {
		return "", policy.Decision{Host: host, Port: port, Reason: ReasonUnknownFake,
			Detail: fmt.Sprintf("%s was not handed out by cordon's resolver in this session", host)}, true
	}
	return name, policy.Decision{Allow: true}, true
}

// guardKey finds a connection's parserWatch (and framing guard) from its
// requests' context.
type guardKey struct{}

// guardedListener watches each client connection's request framing, as
// tlsterm does inside tunnels, so plain-HTTP requests meet the same
// refusal of ambiguous framing; and it has the requests net/http refuses
// on its own logged (see parserWatch).
//
// It also bounds the client connections that speak HTTP to the proxy at
// once (Config.MaxTunnels of them; a CONNECT's connection leaves the count
// when it becomes a tunnel, which the tunnels' own bound counts). Past
// it, Accept waits for one to close: a box that opens connections without
// end finds them waiting in the listen queue, not each held by a
// goroutine of cordon's until its header timeout.
type guardedListener struct {
	*connlimit.Listener
	s *Server
}

func newGuardedListener(l net.Listener, s *Server) *guardedListener {
	g := &guardedListener{s: s}
	g.Listener = connlimit.NewListener(l, s.cfg.MaxTunnels, func() {
		s.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(ReasonTooManyConnections),
			Detail: fmt.Sprintf("the proxy already serves %d client connections at once, its most; the next wait in the listen queue until one closes (said once per session)", s.cfg.MaxTunnels)})
	})
	return g
}

func (l *guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	for err == nil && l.s.cfg.OwnUserOnly && !l.s.judgePeer(c) {
		c.Close() // and its place under the bound with it
		c, err = l.Listener.Accept()
	}
	if err != nil {
		return nil, err
	}
	g := tlsterm.NewFramingGuard(c)
	return &parserWatch{Conn: g, guard: g, refused: l.s.recordParserRefusal(c.RemoteAddr().String()), slot: c.(*connlimit.Conn)}, nil
}
