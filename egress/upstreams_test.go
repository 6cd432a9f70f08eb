package egress

import (
	"net/netip"
	"testing"
)

// The pool keeps one transport per address and host, at most maxUpstreams
// of them, dropping the least recently used.
func TestUpstreamsBounded(t *testing.T) {
	var u upstreams
	d := &Dialer{}
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 80)
	}
	first := u.transport(addr(0), "a.test", d)
	if u.transport(addr(0), "a.test", d) != first {
		t.Fatal("one address and host got two transports")
	}
	for i := 1; i < maxUpstreams; i++ {
		u.transport(addr(i), "a.test", d)
	}
	u.transport(addr(0), "a.test", d) // now the most recently used
	u.transport(addr(maxUpstreams), "a.test", d)
	if len(u.byKey) != maxUpstreams || len(u.order) != maxUpstreams {
		t.Fatalf("%d transports, %d in order; want %d", len(u.byKey), len(u.order), maxUpstreams)
	}
	if _, ok := u.byKey[upstreamKey{addr(1), "a.test"}]; ok {
		t.Error("the least recently used address was kept")
	}
	if u.byKey[upstreamKey{addr(0), "a.test"}] != first {
		t.Error("a recently used address lost its transport")
	}
	u.close()
}

// Two names at one address get a transport each, so no connection opened
// for one carries a request for the other (TestPlainPoolKeepsNamesApart
// shows why, through the real proxy).
func TestUpstreamsOneHostPerTransport(t *testing.T) {
	var u upstreams
	d := &Dialer{}
	addr := netip.MustParseAddrPort("10.0.0.1:80")
	if u.transport(addr, "a.test", d) == u.transport(addr, "b.test", d) {
		t.Fatal("two hosts at one address share a transport, and its connections")
	}
	u.close()
}
