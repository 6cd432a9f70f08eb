package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Only the proxy's own user's clients, and root's, may speak to it; a
// client socket nobody holds, or one on loopback the kernel does not
// know, is refused, and one on another machine is left to the token.
func TestPeerVerdict(t *testing.T) {
	loop, lan := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.7")
	for _, tc := range []struct {
		name   string
		remote netip.Addr
		p      peer
		found  bool
		err    error
		want   string // "" for allowed, else the start of the refusal
	}{
		{"own user", loop, peer{uid: 1001, open: true}, true, nil, ""},
		{"root", loop, peer{uid: 0, open: true}, true, nil, ""},
		{"another user", loop, peer{uid: 1002, open: true}, true, nil, "this client is another user's on this host (uid 1002)"},
		{"another user, mapped", netip.MustParseAddr("::ffff:127.0.0.1"), peer{uid: 1002, open: true}, true, nil, "this client is another user's"},
		{"closed socket (the kernel's, uid 0)", loop, peer{uid: 0}, true, nil, "this client's socket is no process's any more"},
		{"closed socket of the own user", loop, peer{uid: 1001}, true, nil, "this client's socket is no process's any more"},
		{"unknown on loopback", loop, peer{}, false, nil, "no socket on this host is this client's end"},
		{"unknown on ::1", netip.IPv6Loopback(), peer{}, false, nil, "no socket on this host"},
		{"another machine", lan, peer{}, false, nil, ""},
		{"lookup failed", lan, peer{}, false, errors.New("no netlink"), "cannot tell which user this client is (no netlink)"},
	} {
		got, ok := peerVerdict(tc.remote, tc.p, tc.found, tc.err, 1001)
		if ok != (tc.want == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: peerVerdict = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
