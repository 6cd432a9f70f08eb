package egress

import (
	"net/netip"
	"testing"
)

// The pool keeps one transport per address, at most maxUpstreams of them,
// dropping the least recently used.
func TestUpstreamsBounded(t *testing.T) {
	var u upstreams
	d := &Dialer{}
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 80)
	}
	first := u.transport(addr(0), d)
	if u.transport(addr(0), d) != first {
		t.Fatal("one address got two transports")
	}
	for i := 1; i < maxUpstreams; i++ {
		u.transport(addr(i), d)
	}
	u.transport(addr(0), d) // now the most recently used
	u.transport(addr(maxUpstreams), d)
	if len(u.byKey) != maxUpstreams || len(u.order) != maxUpstreams {
		t.Fatalf("%d transports, %d in order; want %d", len(u.byKey), len(u.order), maxUpstreams)
	}
	if _, ok := u.byKey[addr(1)]; ok {
		t.Error("the least recently used address was kept")
	}
	if u.byKey[addr(0)] != first {
		t.Error("a recently used address lost its transport")
	}
	u.close()
}
