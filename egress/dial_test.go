package egress

import (
	"context"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want addrClass
	}{
		{"93.184.216.34", ""},
		{"127.0.0.1", classLoopback},
		{"127.8.9.10", classLoopback},
		{"::1", classLoopback},
		{"0.0.0.0", classUnspecified},
		{"0.1.2.3", classUnspecified},
		{"::", classUnspecified},
		{"169.254.169.254", classMetadata},
		{"fd00:ec2::254", classMetadata},
		{"fd00:ec2::23", classMetadata},
		{"fd20:ce::254", classMetadata},
		{"fd00:42::42", classMetadata},
		{"fd00:c1::a9fe:a9fe", classMetadata},
		{"fd00:a9fe:a9fe::1", classMetadata},
		{"100.100.100.200", classMetadata},
		{"168.63.129.16", classMetadata},
		{"169.254.1.1", classLinkLocal},
		{"fe80::1", classLinkLocal},
		{"224.0.0.1", classMulticast},
		{"ff02::1", classMulticast},
		{"255.255.255.255", classBroadcast},
		{"240.0.0.1", classReserved},
		{"10.1.2.3", classPrivate},
		{"172.16.0.1", classPrivate},
		{"192.168.1.1", classPrivate},
		{"100.64.0.1", classPrivate},
		{"100.100.100.100", classHostService},
		{"fd7a:115c:a1e0::53", classHostService},
		{"::ffff:100.100.100.100", classHostService},
		{"100.100.100.99", classPrivate},
		{"fd7a:115c:a1e0::54", classPrivate},
		{"fd12::1", classPrivate},
		{"2606:4700::1111", ""},
		// IPv6 forms that embed IPv4 are judged by what they embed.
		{"::ffff:127.0.0.1", classLoopback},
		{"::127.0.0.1", classLoopback},
		{"64:ff9b::7f00:1", classLoopback},
		{"64:ff9b::a9fe:a9fe", classMetadata},
		{"64:ff9b:1::a9fe:a9fe", classMetadata},
		{"2002:7f00:1::", classLoopback},
		{"2002:a9fe:a9fe::1", classMetadata},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", classLoopback}, // Teredo client 127.0.0.1
		{"64:ff9b::5db8:d822", ""},
		// Within 64:ff9b:1::/48 the operator chooses where the IPv4
		// address sits: each of RFC 6052's layouts is judged, so that a
		// name made to resolve to 127.0.0.1 under a /48 layout, and to a
		// public address under /96, is not dialled (red team, round 7,
		// from the code).
		{"64:ff9b:1:7f00:0:100:808:808", classLoopback}, // /48: 127.0.0.1
		{"64:ff9b:1:a:1:203:808:808", classPrivate},     // /56: 10.1.2.3
		{"64:ff9b:1::a:0:100:0", classPrivate},          // /64: 10.0.0.1
		{"64:ff9b:1::808:808", ""},                      // /96: 8.8.8.8, zeros elsewhere
		{"64:ff9b:1:abcd:ef01:2345:5db8:d822", ""},      // /96, a prefix of the operator's
	} {
		if got := classify(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("classify(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// rebinder answers with a public address first and loopback afterwards,
// the way a DNS-rebinding attacker's server does.
type rebinder struct{ calls atomic.Int32 }

func (r *rebinder) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

type fixed []netip.Addr

func (f fixed) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) { return f, nil }

func mustRules(t *testing.T, allow ...string) *policy.Rules {
	t.Helper()
	r, err := policy.Compile(allow, []string{"10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDialerCheck(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow       []string
		answer      fixed
		port        int
		denyPrivate bool
		wantAllow   bool
		wantReason  policy.Reason
	}{
		{"public", []string{"bench.test"}, fixed{netip.MustParseAddr("93.184.216.34")}, 443, false, true, policy.ReasonAllowed},
		{"loopback by name", []string{"bench.test"}, fixed{netip.MustParseAddr("127.0.0.1")}, 8443, false, false, policy.ReasonBlockedAddr},
		{"loopback allowed by address", []string{"bench.test:8443", "127.0.0.1:8443"}, fixed{netip.MustParseAddr("127.0.0.1")}, 8443, false, true, policy.ReasonAllowed},
		{"address rule on another port", []string{"bench.test:8443", "127.0.0.1:9000"}, fixed{netip.MustParseAddr("127.0.0.1")}, 8443, false, false, policy.ReasonBlockedAddr},
		{"mixed answer", []string{"bench.test"}, fixed{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254")}, 443, false, false, policy.ReasonBlockedAddr},
		{"Tailscale's host service by name", []string{"bench.test"}, fixed{netip.MustParseAddr("100.100.100.100")}, 8080, false, false, policy.ReasonBlockedAddr},
		{"nat64 metadata", []string{"bench.test"}, fixed{netip.MustParseAddr("64:ff9b::a9fe:a9fe")}, 443, false, false, policy.ReasonBlockedAddr},
		{"local nat64 loopback under a /48 layout", []string{"bench.test"}, fixed{netip.MustParseAddr("64:ff9b:1:7f00:0:100:808:808")}, 443, false, false, policy.ReasonBlockedAddr},
		{"private allowed", []string{"bench.test"}, fixed{netip.MustParseAddr("10.1.2.3")}, 443, false, true, policy.ReasonAllowed},
		{"private denied", []string{"bench.test"}, fixed{netip.MustParseAddr("10.1.2.3")}, 443, true, false, policy.ReasonPrivateAddr},
		{"mixed public and private, private denied", []string{"bench.test"}, fixed{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, 443, true, false, policy.ReasonPrivateAddr},
		{"mixed public and loopback, loopback last", []string{"bench.test"}, fixed{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:4700::1111"), netip.MustParseAddr("::1")}, 443, false, false, policy.ReasonBlockedAddr},
		{"deny rule on address", []string{"bench.test"}, fixed{netip.MustParseAddr("10.9.9.9")}, 443, false, false, policy.ReasonDenyRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dialer{Rules: mustRules(t, tc.allow...), Resolver: tc.answer, DenyPrivate: tc.denyPrivate}
			_, dec := d.Check(context.Background(), "bench.test", tc.port)
			if dec.Allow != tc.wantAllow || dec.Reason != tc.wantReason {
				t.Fatalf("Check = %+v, want allow=%v reason=%s", dec, tc.wantAllow, tc.wantReason)
			}
			if !dec.Allow && !strings.Contains(dec.Detail, "bench.test") {
				t.Errorf("detail %q does not name the host", dec.Detail)
			}
		})
	}
}

// asked is a resolver that keeps the names it is asked for.
type asked struct{ names []string }

func (a *asked) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a.names = append(a.names, host)
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// TestDialerLooksUpRooted: a name is asked for rooted, so the resolver
// tries no search domain; a one-label name (an exact allow entry, such
// as a name /etc/hosts lists) is asked for as it is.
func TestDialerLooksUpRooted(t *testing.T) {
	r := &asked{}
	d := &Dialer{Rules: mustRules(t, "*.example.com", "jenkins"), Resolver: r}
	for _, host := range []string{"wiki.example.com", "jenkins"} {
		if _, dec := d.Check(context.Background(), host, 443); !dec.Allow {
			t.Fatalf("%s: %+v", host, dec)
		}
	}
	if want := []string{"wiki.example.com.", "jenkins"}; !slices.Equal(r.names, want) {
		t.Fatalf("asked for %q, want %q", r.names, want)
	}
}

func TestDialerOwnAndSelf(t *testing.T) {
	own := netip.MustParseAddr("10.0.2.15")
	self := netip.MustParseAddrPort("127.0.0.1:3128")
	d := &Dialer{Rules: mustRules(t, "a.test:*", "127.0.0.1:*"), Resolver: fixed{own}, Own: []netip.AddrPort{netip.AddrPortFrom(own, 0)}, Self: []netip.AddrPort{self}}
	if _, dec := d.Check(context.Background(), "a.test", 443); dec.Allow || dec.Reason != policy.ReasonBlockedAddr {
		t.Errorf("own interface address: %+v", dec)
	}
	// cordon's own listener is refused even when its address is allowlisted.
	if _, dec := d.Check(context.Background(), "127.0.0.1", 3128); dec.Allow {
		t.Errorf("proxy's own listener allowed: %+v", dec)
	}
	if _, dec := d.Check(context.Background(), "127.0.0.1", 3129); !dec.Allow {
		t.Errorf("allowlisted loopback address refused: %+v", dec)
	}
	// So is every address that connects to it: the unspecified ones
	// reach this host's loopback, and an allow entry naming them exactly
	// lifts the refusal of a special address, not this one.
	unspecified := &Dialer{Rules: mustRules(t, "0.0.0.0:*", "[::]:*"), Self: []netip.AddrPort{self}}
	for _, host := range []string{"0.0.0.0", "::"} {
		if _, dec := unspecified.Check(context.Background(), host, 3128); dec.Allow || !strings.Contains(dec.Detail, "cordon's own listener") {
			t.Errorf("%s on the proxy's port: %+v", host, dec)
		}
		if _, dec := unspecified.Check(context.Background(), host, 3129); !dec.Allow {
			t.Errorf("%s allowlisted exactly, on another port, refused: %+v", host, dec)
		}
	}
	// A listener at an unspecified address (--listen-nonlocal) is reached
	// by every address of this host, and by no other host's.
	anyAddr := &Dialer{Rules: mustRules(t, "a.test:*", "127.0.0.0/8:*", own.String()+":*"), Own: []netip.AddrPort{netip.AddrPortFrom(own, 0)},
		Self: []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:3128")}}
	for _, tc := range []struct {
		host, answer string
		allow        bool
	}{
		{"a.test", "93.184.216.34", true},
		{"127.0.0.5", "", false},
		{own.String(), "", false},
		{"a.test", "::ffff:" + own.String(), false},
	} {
		if tc.answer != "" {
			anyAddr.Resolver = fixed{netip.MustParseAddr(tc.answer)}
		}
		if _, dec := anyAddr.Check(context.Background(), tc.host, 3128); dec.Allow != tc.allow {
			t.Errorf("%s (%s) on the port of a listener at 0.0.0.0: %+v, want allow %v", tc.host, tc.answer, dec, tc.allow)
		}
	}
	// An address a local route delivers to this host (AnyIP) is its own.
	d.Local = []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")}
	d.Resolver = fixed{netip.MustParseAddr("10.77.0.9")}
	if _, dec := d.Check(context.Background(), "a.test", 443); dec.Allow || dec.Reason != policy.ReasonBlockedAddr {
		t.Errorf("local-route address: %+v", dec)
	}
	// Host reads this host's addresses as they are.
	live := &Dialer{Rules: mustRules(t, "a.test:*"), Host: &HostAddrs{}}
	owns, err := OwnAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, own := range owns {
		live.Resolver = fixed{own.Addr()}
		if _, dec := live.Check(context.Background(), "a.test", 443); dec.Allow || !strings.Contains(dec.Detail, "an address of this host") {
			t.Errorf("this host's address %s: %+v", own.Addr(), dec)
		}
	}
}

// TestDialerRebinding resolves once: the address that passed the check is the
// address dialled, even if the name resolves elsewhere a moment later.
func TestDialerRebinding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rb := &rebinder{}
	d := &Dialer{Rules: mustRules(t, "rebind.test:*"), Resolver: rb}
	tgt, dec := d.Check(context.Background(), "rebind.test", ln.Addr().(*net.TCPAddr).Port)
	if !dec.Allow {
		t.Fatalf("first answer is public, want allow: %+v", dec)
	}
	if len(tgt.Addrs) != 1 || tgt.Addrs[0] != netip.MustParseAddr("93.184.216.34") {
		t.Fatalf("target addrs = %v", tgt.Addrs)
	}
	// Dial must not look the name up again (it would now get loopback).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.Dial(ctx, tgt)
	if n := rb.calls.Load(); n != 1 {
		t.Fatalf("resolver called %d times, want exactly 1", n)
	}
	// A fresh check sees the rebinding and refuses it.
	if _, dec := d.Check(context.Background(), "rebind.test", 443); dec.Allow {
		t.Fatalf("second answer is loopback, want deny: %+v", dec)
	}
}

// TestDialerSeesThroughAddresses: a broad allow entry does not exempt a
// special address, and deny entries catch what an address really reaches.
func TestDialerSeesThroughAddresses(t *testing.T) {
	own := netip.MustParseAddr("10.0.2.15")
	for _, tc := range []struct {
		name        string
		allow, deny []string
		addr        string
		wantAllow   bool
		wantReason  policy.Reason
	}{
		{"v6 unspecified under ::/0", []string{"0.0.0.0/0:*", "[::/0]:*"}, nil, "::", false, policy.ReasonBlockedAddr},
		{"v6 unspecified past a loopback deny", []string{"0.0.0.0/0:*", "[::/0]:*"}, []string{"127.0.0.0/8"}, "::", false, policy.ReasonDenyRule},
		{"NAT64 loopback under ::/0", []string{"[::/0]:*"}, nil, "64:ff9b::7f00:1", false, policy.ReasonBlockedAddr},
		{"NAT64 loopback past a loopback deny", []string{"[::/0]:*"}, []string{"127.0.0.0/8"}, "64:ff9b::7f00:1", false, policy.ReasonDenyRule},
		{"NAT64 loopback allowed exactly", []string{"[64:ff9b::7f00:1]:*"}, nil, "64:ff9b::7f00:1", true, policy.ReasonAllowed},
		{"loopback by its own range", []string{"127.0.0.0/8:*"}, nil, "127.0.0.5", true, policy.ReasonAllowed},
		{"loopback under 0.0.0.0/0", []string{"0.0.0.0/0:*"}, nil, "127.0.0.1", false, policy.ReasonBlockedAddr},
		{"metadata under a link-local range", []string{"169.254.0.0/16:*"}, nil, "169.254.169.254", false, policy.ReasonBlockedAddr},
		{"metadata exactly", []string{"169.254.169.254:*"}, nil, "169.254.169.254", true, policy.ReasonAllowed},
		{"Tailscale's host service under the CGNAT range", []string{"100.64.0.0/10:*"}, nil, "100.100.100.100", false, policy.ReasonBlockedAddr},
		{"Tailscale's host service under a ULA range", []string{"[fd7a:115c:a1e0::/48]:*"}, nil, "fd7a:115c:a1e0::53", false, policy.ReasonBlockedAddr},
		{"Tailscale's host service exactly", []string{"100.100.100.100:*"}, nil, "100.100.100.100", true, policy.ReasonAllowed},
		{"own address under 0.0.0.0/0", []string{"0.0.0.0/0:*"}, nil, own.String(), false, policy.ReasonBlockedAddr},
		{"own address exactly", []string{own.String() + ":*"}, nil, own.String(), true, policy.ReasonAllowed},
		{"own address in NAT64 under ::/0", []string{"[::/0]:*"}, nil, "64:ff9b::" + own.String(), false, policy.ReasonBlockedAddr},
		{"own address in NAT64 exactly", []string{"[64:ff9b::a00:20f]:*"}, nil, "64:ff9b::" + own.String(), true, policy.ReasonAllowed},
		{"public under 0.0.0.0/0", []string{"0.0.0.0/0:*"}, nil, "93.184.216.34", true, policy.ReasonAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := policy.Compile(tc.allow, tc.deny)
			if err != nil {
				t.Fatal(err)
			}
			d := &Dialer{Rules: rules, Own: []netip.AddrPort{netip.AddrPortFrom(own, 0)}}
			got := d.judgeAddr(netip.MustParseAddr(tc.addr), 8080)
			if got.Allow != tc.wantAllow || got.Reason != tc.wantReason {
				t.Fatalf("judgeAddr(%s) = %+v, want allow=%v %s", tc.addr, got, tc.wantAllow, tc.wantReason)
			}
		})
	}
}

// TestHostAddrsKeptWhenReadFails: a read of this host's addresses that
// fails (here for want of descriptors, as a box opening connections can
// make cordon) keeps what was read before: taken as empty, no address was
// this host's own until the next read.
func TestHostAddrsKeptWhenReadFails(t *testing.T) {
	var h HostAddrs
	before, _ := h.current()
	if len(before) == 0 {
		t.Fatal("no address of this host read")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	release := func() {
		for _, f := range files {
			f.Close()
		}
		files = nil
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	defer release()
	for len(files) < int(low.Cur) {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		files = append(files, f)
	}
	if _, err := OwnAddrs(); err == nil {
		t.Fatal("this host's addresses read with no descriptor left")
	}
	h.mu.Lock()
	h.at = time.Time{} // due for a read
	h.mu.Unlock()
	during, _ := h.current()
	release()
	if !slices.Equal(during, before) {
		t.Errorf("after a failed read, this host's addresses are %v, want %v as before", during, before)
	}
}
