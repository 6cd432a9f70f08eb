package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// maxUpstreams bounds the addresses the plain-HTTP pool keeps transports
// (and idle connections) for; the least recently used goes first.
const maxUpstreams = 64

// upstreams is the plain-HTTP proxy's connection pool: one keep-alive
// transport per checked upstream address, each dialling that address and
// no other. A request reuses a connection only to the very address its
// own check allowed and its audit line names, whatever name it came by.
type upstreams struct {
	mu    sync.Mutex
	byKey map[netip.AddrPort]*http.Transport
	order []netip.AddrPort // least recently used first
}

// transport returns the pool's transport for addr, dialling through d.
func (u *upstreams) transport(addr netip.AddrPort, d *Dialer) *http.Transport {
	u.mu.Lock()
	defer u.mu.Unlock()
	if tr, ok := u.byKey[addr]; ok {
		u.touch(addr)
		return tr
	}
	if u.byKey == nil {
		u.byKey = map[netip.AddrPort]*http.Transport{}
	}
	if len(u.order) >= maxUpstreams {
		oldest := u.order[0]
		u.order = u.order[1:]
		u.byKey[oldest].CloseIdleConnections()
		delete(u.byKey, oldest)
	}
	only := Target{Host: addr.Addr().String(), Port: int(addr.Port()), Addrs: []netip.Addr{addr.Addr()}}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := d.Dial(ctx, only)
			return c, err
		},
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	u.byKey[addr] = tr
	u.order = append(u.order, addr)
	return tr
}

// touch moves addr to the most recently used end; the caller holds mu.
func (u *upstreams) touch(addr netip.AddrPort) {
	for i, a := range u.order {
		if a == addr {
			copy(u.order[i:], u.order[i+1:])
			u.order[len(u.order)-1] = addr
			return
		}
	}
}

// close drops every idle connection.
func (u *upstreams) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, tr := range u.byKey {
		tr.CloseIdleConnections()
	}
}
