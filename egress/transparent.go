package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/connlimit"
	"github.com/cordon-sandbox/cordon/internal/survive"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// ReasonNoDestination is a redirected connection whose original
// destination cannot be read.
const ReasonNoDestination policy.Reason = "no_destination"

// ReasonInternalError is a redirected connection cut because serving it
// panicked.
const ReasonInternalError policy.Reason = "internal_error"

// ReasonSandboxAddress is a redirected connection to an address of the
// sandbox's own network (its gateway, its loopback), which the host's
// network does not have for it.
const ReasonSandboxAddress policy.Reason = "sandbox_address"

// ServeTransparent accepts connections a sandbox's network redirected to
// l, each to the destination dest reads from it, and judges, logs and
// carries them as it does a CONNECT to that destination: the redirect
// stands in for the CONNECT line, and only the sandbox can reach l. A
// destination inside own, the addresses only the sandbox's network has,
// is refused whatever the allowlist: dialled from the host, it would
// reach another machine than the one the sandbox named. It returns when
// ctx ends, after ending the tunnels in flight.
//
// At most Config.MaxTunnels connections are being judged at once (a
// judged one moves under the tunnels' own bound); past them the next
// wait in the listen queue, and reaching the bound is logged once.
func (s *Server) ServeTransparent(ctx context.Context, l net.Listener, dest func(net.Conn) (netip.AddrPort, error), own []netip.Prefix) error {
	l = connlimit.NewListener(l, s.cfg.MaxTunnels, func() {
		s.record(audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Kind: audit.KindTransparent, Reason: string(ReasonTooManyConnections),
			Detail: fmt.Sprintf("the transparent listener already holds %d connections being judged, its most; the next wait in the listen queue until one is (said once per session)", s.cfg.MaxTunnels)})
	})
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				s.endTunnels()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || connlimit.Exhausted(err) {
				continue
			}
			return fmt.Errorf("transparent listener: %w", err)
		}
		go s.serveRedirected(ctx, c.(*connlimit.Conn), dest, own)
	}
}

// serveRedirected serves one redirected connection. A panic while
// serving it cuts it, and is logged, and cordon goes on, as net/http does
// for a proxy client: nothing else recovers this goroutine, and a chunk
// size that overflowed the framing guard's count once ended cordon run
// at the box's first such request, before the run's aftercare set aside
// the repositories the box had planted, whose config then ran at the
// user's next git status.
func (s *Server) serveRedirected(ctx context.Context, lc *connlimit.Conn, dest func(net.Conn) (netip.AddrPort, error), own []netip.Prefix) {
	client := lc.RemoteAddr().String()
	var failed error
	defer func() {
		if failed != nil {
			s.record(decisionRecord(audit.KindTransparent, client, policy.Decision{Reason: ReasonInternalError,
				Detail: failed.Error() + ", and cut it"}))
			lc.Close()
		}
	}()
	defer survive.Recover(&failed, "while serving the redirected connection from "+client)
	s.serveRedirectedConn(ctx, lc, client, dest, own)
}

func (s *Server) serveRedirectedConn(ctx context.Context, lc *connlimit.Conn, client string, dest func(net.Conn) (netip.AddrPort, error), own []netip.Prefix) {
	var c net.Conn = lc
	kind := audit.KindTransparent
	dst, err := dest(lc.NetConn())
	if err != nil {
		s.record(decisionRecord(kind, client, policy.Decision{Reason: ReasonNoDestination,
			Detail: fmt.Sprintf("a connection reached the transparent listener without being redirected there: %v", err)}))
		c.Close()
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	t, d, status := s.admitRedirected(ctx, client, dst, own)
	if t == nil {
		// admit logged it. A plain-HTTP client gets the refusal and its
		// reason; any other sees the connection close.
		if dst.Port() == 80 {
			tlsterm.WriteRefusalTo(c, d, status)
		}
		c.Close()
		return
	}
	// Judged, it moves under the tunnels' bound, on its socket itself
	// (which splice(2) needs).
	lc.Release()
	c = lc.NetConn()
	if !s.track(c, t) {
		return
	}
	defer s.untrack(c)
	t.client = c
	s.carry(t, kind)
}

// admitRedirected is admit for a redirected connection to dst, but for a
// destination inside own, which it refuses and logs.
func (s *Server) admitRedirected(ctx context.Context, client string, dst netip.AddrPort, own []netip.Prefix) (*tunnel, policy.Decision, int) {
	for _, p := range own {
		if p.Contains(dst.Addr()) {
			d := policy.Decision{Host: dst.Addr().String(), Port: int(dst.Port()), Reason: ReasonSandboxAddress,
				Detail: fmt.Sprintf("%s is the sandbox's own address, in its own network, so it is not dialled from the host's, where it would be another machine or none, whatever the allowlist says: "+
					"inside, only the proxy and the resolver listen there; reach the host's services through the proxy, by a name or address it allows", dst)}
			s.record(decisionRecord(audit.KindTransparent, client, d))
			return nil, d, http.StatusForbidden
		}
	}
	return s.admit(ctx, audit.KindTransparent, client, dst.Addr().String(), int(dst.Port()))
}
