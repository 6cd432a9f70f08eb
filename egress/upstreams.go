package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// maxUpstreams bounds the addresses and names the plain-HTTP pool keeps
// transports (and idle connections) for; the least recently used goes
// first.
const maxUpstreams = 64

// upstreams is the plain-HTTP proxy's connection pool: one keep-alive
// transport per checked upstream address and host name, each dialling that
// address and no other. A request reuses a connection only to the very
// address its own check allowed and its audit line names, and only one
// that has carried requests for its own host alone. Pooled by address
// alone, a connection opened for one name carried the next request for
// another name at that address: a server that read the first request's
// body as the start of a request of its own (a Python http.server
// handler that answers without reading it does) took the second, and the
// credential put on it for its own host, as that request's body, a
// request for the other name.
type upstreams struct {
	// record logs the bytes an upstream sends that no request asked
	// for (tlsterm.ResponseConn).
	record func(...audit.Record) error

	mu    sync.Mutex
	byKey map[upstreamKey]tlsterm.WatchingTransport
	order []upstreamKey // least recently used first
}

// upstreamKey is what a pooled transport serves: one address, one host.
type upstreamKey struct {
	addr netip.AddrPort
	host string
}

// transport returns the pool's transport for requests to host at addr,
// dialling addr through d.
func (u *upstreams) transport(addr netip.AddrPort, host string, d *Dialer) tlsterm.WatchingTransport {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := upstreamKey{addr, host}
	if tr, ok := u.byKey[key]; ok {
		u.touch(key)
		return tr
	}
	if u.byKey == nil {
		u.byKey = map[upstreamKey]tlsterm.WatchingTransport{}
	}
	if len(u.order) >= maxUpstreams {
		oldest := u.order[0]
		u.order = u.order[1:]
		u.byKey[oldest].CloseIdleConnections()
		delete(u.byKey, oldest)
	}
	only := Target{Host: addr.Addr().String(), Port: int(addr.Port()), Addrs: []netip.Addr{addr.Addr()}}
	tr := tlsterm.WatchingTransport{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := d.Dial(ctx, only)
			if err != nil {
				return nil, err
			}
			return tlsterm.NewResponseConn(c, func(method, path string) {
				rec := tlsterm.UnsolicitedRecord(method, path)
				rec.Kind, rec.Host, rec.Port, rec.Addr = audit.KindHTTP, host, int(addr.Port()), addr.String()
				u.record(rec)
			}), nil
		},
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: tlsterm.MaxResponseHeaderBytes,
	}}
	u.byKey[key] = tr
	u.order = append(u.order, key)
	return tr
}

// touch moves key to the most recently used end; the caller holds mu.
func (u *upstreams) touch(key upstreamKey) {
	for i, k := range u.order {
		if k == key {
			copy(u.order[i:], u.order[i+1:])
			u.order[len(u.order)-1] = key
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
