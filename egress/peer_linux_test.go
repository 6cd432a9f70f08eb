package egress

import (
	"net"
	"net/netip"
	"os"
	"testing"
)

// The kernel names the owner of a connection's client end, over IPv4
// and IPv6; a client end that does not exist is not found (not a
// listener on its port, which the kernel's lookup falls back to).
func TestPeerSocket(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		local := netip.MustParseAddrPort(s.LocalAddr().String())
		remote := netip.MustParseAddrPort(s.RemoteAddr().String())
		p, found, err := peerSocket(local, remote)
		if err != nil || !found || p.uid != uint32(os.Getuid()) || !p.open {
			t.Fatalf("%s: peerSocket(%s, %s) = %+v, %v, %v; want uid %d, open", addr, local, remote, p, found, err, os.Getuid())
		}
		// A port with a listener but no such client: not found.
		other := netip.AddrPortFrom(remote.Addr(), local.Port())
		if p, found, err := peerSocket(local, other); err != nil || found {
			t.Fatalf("%s: peerSocket(%s, %s) = %+v, %v, %v; want not found", addr, local, other, p, found, err)
		}
	}
}
