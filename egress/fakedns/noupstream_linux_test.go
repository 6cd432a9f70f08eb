package fakedns

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// sockets returns the socket inodes this process holds open, by fd.
func sockets(t *testing.T) map[string]string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:") {
			out[target] = fd.Name()
		}
	}
	return out
}

// TestNoUpstream answers a run of queries, names /etc/hosts knows among
// them, over one client socket opened beforehand, and checks that the
// process held no new socket afterwards and that only the allowlist
// decided the answers.
func TestNoUpstream(t *testing.T) {
	r, _ := startResolver(t, []string{"example.com"}, nil, netip.Prefix{})
	c, err := net.Dial("udp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	conn := &dns.Conn{Conn: c}
	defer conn.Close()
	before := sockets(t)
	tests := []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"localhost.", dns.TypeA, dns.RcodeNameError},
		{"localhost.", dns.TypeAAAA, dns.RcodeNameError},
		{"ip6-localhost.", dns.TypeAAAA, dns.RcodeNameError},
		{"example.org.", dns.TypeA, dns.RcodeNameError},
		{"www.example.com.", dns.TypeA, dns.RcodeNameError},
		{"c2VjcmV0.attacker.test.", dns.TypeTXT, dns.RcodeRefused},
		{"8.8.8.8.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"1.0.0.127.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"example.com.", dns.TypeA, dns.RcodeSuccess},
	}
	for _, tc := range tests {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, tc.qtype)
		if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		resp, err := conn.ReadMsg()
		if err != nil {
			t.Fatalf("%s %s: %v", tc.name, dns.Type(tc.qtype), err)
		}
		if resp.Rcode != tc.rcode {
			t.Errorf("%s %s: %s, want %s", tc.name, dns.Type(tc.qtype), dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
		}
		for _, rr := range resp.Answer {
			if a, ok := rr.(*dns.A); ok && !DefaultRange.Contains(netip.AddrFrom4([4]byte(a.A.To4()))) {
				t.Errorf("%s: real address %s, want a fake one", tc.name, a.A)
			}
		}
	}
	for sock, fd := range sockets(t) {
		if _, ok := before[sock]; !ok {
			t.Errorf("fd %s (%s) was opened while answering", fd, sock)
		}
	}
}
