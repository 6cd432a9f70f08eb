package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
)

// Resolver looks names up; *net.Resolver satisfies it, and tests inject
// their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer is the guarded dialer: it resolves a name once, checks every
// address it got, and dials only an address that passed, never resolving
// again. The address checked is the address dialled.
type Dialer struct {
	Rules    *policy.Rules
	Resolver Resolver
	// DenyPrivate refuses RFC 1918, ULA and CGNAT addresses.
	DenyPrivate bool
	// Own lists this host's interface addresses: never dialled unless
	// allowlisted by address.
	Own []netip.AddrPort
	// Local lists the ranges the kernel delivers to this host itself (see
	// LocalRanges): each address in them is judged as an Own one, on any
	// port.
	Local []netip.Prefix
	// Host, when set, adds this host's addresses as they are now (see
	// HostAddrs) to Own and Local.
	Host *HostAddrs
	// Self lists cordon's own listeners: never dialled at all, so the proxy
	// cannot be made to talk to itself.
	Self []netip.AddrPort
	// Static pins names to addresses, consulted before Resolver; a key
	// "*.example.com" pins every subdomain not pinned by name.
	Static map[string][]netip.Addr
	// Timeout bounds one dial; zero means 10s.
	Timeout time.Duration
}

// Target is a checked destination: the addresses that passed, in the order
// to try them.
type Target struct {
	Host  string
	Port  int
	Addrs []netip.Addr
}

// Check resolves host (already normalised) and judges every address. The
// decision is a deny if any address is refused, so one answer cannot mix a
// public address with a loopback one.
func (d *Dialer) Check(ctx context.Context, host string, port int) (Target, policy.Decision) {
	t := Target{Host: host, Port: port}
	dec := policy.Decision{Host: host, Port: port}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		dec.Reason = policy.ReasonResolveFailed
		dec.Detail = fmt.Sprintf("cannot resolve %s: %v", host, err)
		return t, dec
	}
	for _, a := range addrs {
		if ad := d.judgeAddr(a.Unmap(), port); !ad.Allow {
			ad.Host, ad.Port = host, port
			if !strings.HasPrefix(ad.Detail, host) {
				ad.Detail = fmt.Sprintf("%s resolves to %s", host, ad.Detail)
			}
			return t, ad
		}
		t.Addrs = append(t.Addrs, a.Unmap())
	}
	dec.Allow, dec.Reason = true, policy.ReasonAllowed
	return t, dec
}

func (d *Dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if addrs, ok := d.Static[host]; ok {
		return addrs, nil
	}
	for rest := host; strings.Contains(rest, "."); {
		_, rest, _ = strings.Cut(rest, ".")
		if addrs, ok := d.Static["*."+rest]; ok {
			return addrs, nil
		}
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", rooted(host))
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	return addrs, err
}

// rooted is the name to ask the resolver for host. Unrooted, a resolver
// that finds nothing for a name goes on to try it under the host's search
// domains (wiki.example.com.corp.example), a name outside the allowlist
// whose addresses would then be dialled as the allowed name's. A name of
// one label stays as it is: only an allow entry naming exactly it admits
// it (a wildcard covers names of three labels or more), and /etc/hosts
// lists such names (localhost) only unrooted.
func rooted(host string) string {
	if !strings.Contains(host, ".") {
		return host
	}
	return host + "."
}

// judgeAddr decides one resolved address: a deny rule refuses it, an
// address allow rule admits it, and otherwise special addresses are refused.
func (d *Dialer) judgeAddr(a netip.Addr, port int) policy.Decision {
	hp := policy.JoinHostPort(a.String(), port)
	if d.isSelf(a, port) {
		return policy.Decision{Reason: policy.ReasonBlockedAddr,
			Detail: fmt.Sprintf("%s, cordon's own listener", hp)}
	}
	// Deny rules see through an address to what it reaches: NAT64 and
	// other embeddings, and :: or 0.0.0.0, which reach this host.
	for _, e := range reaches(a) {
		if p, ok := d.Rules.DenyRule(e, port); ok {
			detail := fmt.Sprintf("%s is denied by rule %q", hp, p.Raw)
			if e != a {
				detail = fmt.Sprintf("%s reaches %s, which rule %q denies", hp, e, p.Raw)
			}
			return policy.Decision{Reason: policy.ReasonDenyRule, Rule: p.Raw, Detail: detail}
		}
	}
	allowRule, allowed := d.Rules.AllowRule(a, port)
	if d.isOwn(a, port) {
		if allowed && allowRule.Prefix.IsSingleIP() {
			return policy.Decision{Allow: true, Reason: policy.ReasonAllowed, Rule: allowRule.Raw}
		}
		return policy.Decision{Reason: policy.ReasonBlockedAddr,
			Detail: fmt.Sprintf("%s, an address of this host; allow it only by address (--allow %s)", hp, hp)}
	}
	switch c := classify(a); c {
	case "":
	case classPrivate:
		if d.DenyPrivate && !allowed {
			return policy.Decision{Reason: policy.ReasonPrivateAddr,
				Detail: fmt.Sprintf("%s, a private address, and deny_private is set", hp)}
		}
	default:
		if r := classRange(a); allowed && allowRule.Prefix.Bits() >= r.Bits() && r.Contains(allowRule.Prefix.Addr()) {
			return policy.Decision{Allow: true, Reason: policy.ReasonAllowed, Rule: allowRule.Raw}
		}
		return policy.Decision{Reason: policy.ReasonBlockedAddr,
			Detail: fmt.Sprintf("%s, a %s address; allow it only by that address or its own range (--allow %s)", hp, c, hp)}
	}
	if allowed {
		return policy.Decision{Allow: true, Reason: policy.ReasonAllowed, Rule: allowRule.Raw}
	}
	return policy.Decision{Allow: true, Reason: policy.ReasonAllowed}
}

// isSelf reports whether dialling a on port reaches one of cordon's own
// listeners: one at a itself or at what a reaches (0.0.0.0 and :: connect
// to this host's loopback, where an allow entry naming them exactly would
// otherwise let the proxy be made to talk to itself), or one at an
// unspecified address (--listen-nonlocal), which every address of this
// host reaches and no other host's does.
func (d *Dialer) isSelf(a netip.Addr, port int) bool {
	for _, self := range d.Self {
		switch {
		case int(self.Port()) != port:
		case self.Addr().IsUnspecified() && d.reachesThisHost(a, port):
			return true
		case slices.Contains(reaches(a), self.Addr()):
			return true
		}
	}
	return false
}

// reachesThisHost reports whether dialling a on port connects to this
// host: loopback, through what a reaches, or one of its own addresses.
func (d *Dialer) reachesThisHost(a netip.Addr, port int) bool {
	return slices.ContainsFunc(reaches(a), netip.Addr.IsLoopback) || d.isOwn(a, port)
}

// isOwn reports whether dialling a on port reaches this host: one of its
// interface addresses (Own) or an address its local routes deliver to it,
// itself or through the IPv4 address an IPv6 form of it embeds (a NAT64
// gateway hands 64:ff9b::a.b.c.d back to this host's a.b.c.d).
func (d *Dialer) isOwn(a netip.Addr, port int) bool {
	for _, e := range reaches(a) {
		if ownAddr(d.Own, d.Local, e, port) {
			return true
		}
		if d.Host != nil {
			if own, local := d.Host.current(); ownAddr(own, local, e, port) {
				return true
			}
		}
	}
	return false
}

// ownAddr reports whether e on port is one of own or lies in local.
func ownAddr(own []netip.AddrPort, local []netip.Prefix, e netip.Addr, port int) bool {
	for _, o := range own {
		if o.Addr() == e && (o.Port() == 0 || int(o.Port()) == port) {
			return true
		}
	}
	for _, r := range local {
		if r.Contains(e) {
			return true
		}
	}
	return false
}

// hostAddrsAge is how long HostAddrs keeps what it read.
const hostAddrsAge = time.Second

// HostAddrs is this host's addresses (OwnAddrs) and local ranges
// (LocalRanges) as they are now: read again when asked for a second or
// more after the last read, so an address that comes up during a session
// (a VPN, a new lease, an AnyIP route) is this host's within a second,
// not only one that was up when the session started. The zero value is
// ready to use.
type HostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	own   []netip.AddrPort
	local []netip.Prefix
}

func (h *HostAddrs) current() ([]netip.AddrPort, []netip.Prefix) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := time.Now(); now.Sub(h.at) >= hostAddrsAge {
		// A read that failed (cordon out of descriptors, which a box
		// opening connections can bring about) keeps what was read
		// before, and is tried again at the next ask: taken as empty, it
		// made no address this host's own for a second.
		own, errOwn := OwnAddrs()
		local, errLocal := LocalRanges()
		if errOwn == nil && errLocal == nil {
			h.own, h.local, h.at = own, local, now
		}
	}
	return h.own, h.local
}

// Dial connects to a checked target, trying its addresses in order. It
// returns the connection and the address it reached.
func (d *Dialer) Dial(ctx context.Context, t Target) (net.Conn, netip.AddrPort, error) {
	var errs []error
	for _, a := range t.Addrs {
		ap := netip.AddrPortFrom(a, uint16(t.Port))
		c, err := d.dialAddr(ctx, ap)
		if err == nil {
			return c, ap, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, netip.AddrPort{}, fmt.Errorf("dial %s: no checked address", policy.JoinHostPort(t.Host, t.Port))
	}
	return nil, netip.AddrPort{}, fmt.Errorf("dial %s: %w", policy.JoinHostPort(t.Host, t.Port), errors.Join(errs...))
}

// dialAddr connects to one address of a checked target (see admit, which
// logs each attempt first).
func (d *Dialer) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	timeout := d.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	nd := net.Dialer{Timeout: timeout}
	return nd.DialContext(ctx, "tcp", ap.String())
}

// OwnAddrs lists this host's interface addresses (any port).
func OwnAddrs() ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read this host's addresses: %w", err)
	}
	for _, ia := range ifaddrs {
		if pfx, err := netip.ParsePrefix(ia.String()); err == nil {
			out = append(out, netip.AddrPortFrom(pfx.Addr().Unmap().WithZone(""), 0))
		}
	}
	return out, nil
}
