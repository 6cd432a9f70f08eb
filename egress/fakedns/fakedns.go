// Package fakedns is the resolver of a restricted sandbox: it answers each
// allowlisted name with a stable fake IPv4 address from a reserved range,
// refuses everything else, logs its decisions, and never asks anyone else.
//
// The transparent listeners turn a fake address back into the name with
// NameFor, so a connection to 198.18.0.7:443 is judged as a connection to
// the name that address was handed out for.
//
// What it answers, per question (class IN, one question per message):
//
//   - A for an allowed name: one fake address, TTL seconds. The address is
//     allocated on the first query, sequentially from the start of the
//     range, and kept for the Resolver's life: the same name always gets the
//     same address, different names different addresses. The first address
//     of the range, its last, and every address ending in .0 or .255 are
//     skipped (old stacks treat those as network or broadcast addresses),
//     so 198.18.0.0/15 holds 130048 names. When the range is used up, new
//     names get SERVFAIL and a deny line with reason dns_range_full.
//   - AAAA, HTTPS and SVCB for an allowed name: NOERROR with no answer. The
//     sandbox has no IPv6, and an empty HTTPS/SVCB answer makes browsers
//     and curl fall back to the A record, where NXDOMAIN or REFUSED would
//     make some of them give up on the name.
//   - PTR for an address this Resolver handed out: the name. Any other
//     PTR: NXDOMAIN with reason dns_no_reverse.
//   - A, AAAA, HTTPS and SVCB for a name the allowlist does not cover:
//     NXDOMAIN, with the policy's reason (not_allowlisted, deny_rule); a
//     name that is not a valid host name (or is an IP address written as a
//     name): NXDOMAIN with reason bad_host.
//   - Any other type (TXT, ANY, MX, SRV, CNAME, NS, SOA, AXFR...) for any
//     name: REFUSED with reason dns_type; a class other than IN: REFUSED
//     with reason dns_class. NXDOMAIN would wrongly say the name does not
//     exist for the types that do work.
//
// Messages: responses are dropped; an opcode other than QUERY gets
// NOTIMP; a message with zero or several questions, or several OPT
// records, gets FORMERR; an EDNS version other than 0 gets BADVERS. A
// query with EDNS gets an OPT back (payload 1232). A UDP reply longer than
// 512 bytes, or than the client's EDNS payload, is truncated with TC set;
// TCP replies are never truncated. Malformed messages are not logged; one
// too short for a header gets no reply, one whose body does not read gets
// FORMERR. At most Config.MaxTCPConns TCP connections are served at once;
// the next waits in the listen queue until one closes, and reaching the
// bound is logged once, with reason too_many_connections. At most 64 UDP
// queries (udpWorkers) are answered at once; the next wait in the socket's
// buffer, the kernel drops what does not fit, and reaching the bound is
// logged once, with reason too_many_queries.
//
// TTL is short so that a cache which outlives the session (the fake range
// is reallocated from scratch each session) forgets its answers within
// seconds. Negative answers carry no SOA, so they are not cached at all.
//
// Audit (type decision, kind dns): every deny is logged, but identical
// denials (same name, type and reason) are logged at most once per second;
// the next line for that name, or a line at Close, counts the ones in
// between. An allowed name is logged once per session, on the query that
// first hands out its address, and that line is written before the answer
// is sent: if the write fails the query gets SERVFAIL. Empty AAAA, HTTPS
// and SVCB answers and PTR answers are not logged: they hand out nothing.
//
// The Resolver has no upstream: nothing in this package opens an outbound
// socket, and a name is answered from the allowlist alone, whatever
// /etc/hosts or any real DNS says about it.
package fakedns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/connlimit"
	"github.com/cordon-sandbox/cordon/policy"
)

// TTL is the time to live, in seconds, of every answer.
const TTL = 5

// DefaultRange is the benchmarking range (RFC 2544) fake addresses come from.
var DefaultRange = netip.MustParsePrefix("198.18.0.0/15")

// shutdownTimeout bounds how long Close waits for queries in flight.
const shutdownTimeout = 5 * time.Second

// Config is what New needs. Rules and Audit are required.
type Config struct {
	Rules *policy.Rules
	Audit *audit.Writer
	// Range is the IPv4 prefix fake addresses come from; the zero value
	// means DefaultRange.
	Range netip.Prefix
	// ErrorLog receives audit write failures; nil discards them.
	ErrorLog *log.Logger
	// MaxTCPConns bounds the TCP connections served at once; zero means
	// 256 (defaultMaxTCPConns).
	MaxTCPConns int
}

// Resolver is a running fake-IP DNS server.
type Resolver struct {
	cfg  Config
	addr string // where Serve's UDP socket is bound, for errors
	udp  net.PacketConn
	tcp  *dns.Server
	now  func() time.Time

	// udpDone is closed once every UDP reader stopped; udpBusy counts
	// the queries they are answering, and udpFull logs the first time
	// all of them are.
	udpDone chan struct{}
	udpBusy atomic.Int32
	udpFull sync.Once

	mu     sync.RWMutex
	pool   pool
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string

	denies limiter

	stopCtx   func() bool
	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and fills in its defaults; the Resolver answers once
// Serve gives it sockets.
func New(cfg Config) (*Resolver, error) {
	if cfg.Rules == nil {
		return nil, errors.New("fakedns: Config.Rules is nil; pass the session's compiled allowlist")
	}
	if cfg.Audit == nil {
		return nil, errors.New("fakedns: Config.Audit is nil; pass the session's audit writer")
	}
	if !cfg.Range.IsValid() {
		cfg.Range = DefaultRange
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = log.New(io.Discard, "", 0)
	}
	if cfg.MaxTCPConns == 0 {
		cfg.MaxTCPConns = defaultMaxTCPConns
	}
	p, err := newPool(cfg.Range)
	if err != nil {
		return nil, fmt.Errorf("fakedns: %w", err)
	}
	return &Resolver{
		cfg:    cfg,
		now:    time.Now,
		pool:   p,
		byName: make(map[string]netip.Addr),
		byAddr: make(map[netip.Addr]string),
		denies: limiter{pending: make(map[string]*pendingDeny)},
	}, nil
}

// Serve answers queries on pc (UDP) and l (TCP) until Close or until ctx
// is done; it returns once both serve. Call it once.
func (r *Resolver) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	r.addr = pc.LocalAddr().String()
	l = connlimit.NewListener(l, r.cfg.MaxTCPConns, r.tcpFull)
	r.tcp = &dns.Server{Listener: l, Handler: r, MsgAcceptFunc: acceptQuery}
	if err := serve(r.tcp); err != nil {
		l.Close()
		pc.Close()
		return fmt.Errorf("fakedns: serve tcp %s: %w", r.addr, err)
	}
	r.udp, r.udpDone = pc, make(chan struct{})
	go r.serveUDP(pc, r.udpDone)
	r.stopCtx = context.AfterFunc(ctx, func() { r.Close() })
	return nil
}

// acceptQuery drops responses and lets every query through to ServeDNS
// (or, over UDP, replyUDP), which answers malformed ones itself.
func acceptQuery(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if h.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// serve runs s in the background and returns once it listens, or with the
// error that stopped it first.
func serve(s *dns.Server) error {
	started := make(chan struct{})
	failed := make(chan error, 1)
	s.NotifyStartedFunc = func() { close(started) }
	go func() { failed <- s.ActivateAndServe() }()
	select {
	case <-started:
		return nil
	case err := <-failed:
		return err
	}
}

// Close stops both servers, waits for queries in flight, and logs the
// denials still held back by the rate limit. It is safe to call twice, and
// on a Resolver that never served.
func (r *Resolver) Close() error {
	r.closeOnce.Do(func() {
		defer r.flushDenies()
		if r.udp == nil {
			return // never served
		}
		r.stopCtx()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		r.closeErr = errors.Join(r.closeUDP(ctx), r.tcp.ShutdownContext(ctx))
		if r.closeErr != nil {
			r.closeErr = fmt.Errorf("fakedns: close %s: %w", r.addr, r.closeErr)
		}
	})
	return r.closeErr
}

// closeUDP closes the UDP socket and waits, until ctx is done, for the
// queries being answered.
func (r *Resolver) closeUDP(ctx context.Context) error {
	err := r.udp.Close()
	select {
	case <-r.udpDone:
		return err
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
}

// NameFor returns the name a fake address was handed out for.
func (r *Resolver) NameFor(ip netip.Addr) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name, ok := r.byAddr[ip.Unmap()]
	return name, ok
}

// AddrFor returns the fake address already handed out for a name, in any
// spelling NormalizeHost accepts; it never allocates one.
func (r *Resolver) AddrFor(name string) (netip.Addr, bool) {
	host, err := policy.NormalizeHost(name)
	if err != nil {
		return netip.Addr{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.byName[host]
	return a, ok
}

// ServeDNS answers one query; it implements dns.Handler.
func (r *Resolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	m := r.answer(req, w.RemoteAddr().String(), tcp)
	if m == nil {
		return
	}
	// A reply that cannot be written is a client that left: the box's to
	// know, and printing each would let it fill cordon's stderr.
	_ = w.WriteMsg(m)
}
