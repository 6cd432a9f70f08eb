package session

import (
	"net"
	"net/netip"
	"testing"
)

// TestListenNetwork: --listen 0.0.0.0:PORT listens on IPv4 alone. With
// Go's "tcp" it was a dual-stack socket, open on every IPv6 address too
// (red team, round 6), and the export lines named [::].
func TestListenNetwork(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:3128", "tcp4"},
		{"127.0.0.1:0", "tcp4"},
		{"[::ffff:127.0.0.1]:0", "tcp4"},
		{"[::1]:0", "tcp6"},
		{"[::]:0", "tcp6"},
		{":3128", "tcp"},
		{"no-port", "tcp"},
	} {
		if got := listenNetwork(c.addr); got != c.want {
			t.Errorf("listenNetwork(%q) = %q, want %q", c.addr, got, c.want)
		}
	}
	ln, err := net.Listen(listenNetwork("0.0.0.0:0"), "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if a := netip.MustParseAddrPort(ln.Addr().String()).Addr(); !a.Is4() {
		t.Errorf("listening on %s for 0.0.0.0:0", ln.Addr())
	}
}
