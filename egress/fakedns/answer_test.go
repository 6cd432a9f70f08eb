package fakedns

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

func TestAnswerMessageShape(t *testing.T) {
	query := func(edit func(m *dns.Msg)) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("example.com.", dns.TypeA)
		edit(m)
		return m
	}
	tests := []struct {
		name      string
		req       *dns.Msg
		drop      bool
		rcode     int
		questions int
	}{
		{"plain", query(func(*dns.Msg) {}), false, dns.RcodeSuccess, 1},
		{"response", query(func(m *dns.Msg) { m.Response = true }), true, 0, 0},
		{"notify", query(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), false, dns.RcodeNotImplemented, 1},
		{"update", query(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), false, dns.RcodeNotImplemented, 1},
		{"no question", query(func(m *dns.Msg) { m.Question = nil }), false, dns.RcodeFormatError, 0},
		{"two questions", query(func(m *dns.Msg) {
			m.Question = append(m.Question, dns.Question{Name: "x.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		}), false, dns.RcodeFormatError, 0},
		{"two OPTs", query(func(m *dns.Msg) { m.SetEdns0(1232, false); m.SetEdns0(4096, false) }), false, dns.RcodeFormatError, 0},
	}
	r, _ := startResolver(t, testAllow, testDeny, netip.Prefix{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := r.answer(tc.req, "test", false)
			if tc.drop {
				if m != nil {
					t.Fatalf("want a drop, got %v", m)
				}
				return
			}
			if m == nil {
				t.Fatal("dropped, want a reply")
			}
			if m.Rcode != tc.rcode || len(m.Question) != tc.questions || !m.Response || m.Id != tc.req.Id {
				t.Errorf("got rcode %s, %d questions, response %v, id %d; want %s, %d, true, %d",
					dns.RcodeToString[m.Rcode], len(m.Question), m.Response, m.Id, dns.RcodeToString[tc.rcode], tc.questions, tc.req.Id)
			}
			if _, err := m.Pack(); err != nil {
				t.Errorf("reply does not pack: %v", err)
			}
		})
	}
}

func TestReplySize(t *testing.T) {
	opt := func(size uint16) *dns.OPT {
		m := new(dns.Msg)
		m.SetEdns0(size, false)
		return m.IsEdns0()
	}
	tests := []struct {
		name string
		opt  *dns.OPT
		tcp  bool
		want int
	}{
		{"udp", nil, false, 512},
		{"udp edns 4096", opt(4096), false, 4096},
		{"udp edns 100", opt(100), false, 512},
		{"tcp", nil, true, 65535},
		{"tcp edns 1232", opt(1232), true, 65535},
	}
	for _, tc := range tests {
		if got := replySize(tc.opt, tc.tcp); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	// A reply over the size (none of ours is; this is the contract the
	// handler relies on) loses records and gets TC.
	big := new(dns.Msg)
	big.SetQuestion("example.com.", dns.TypeA)
	for i := range 100 {
		big.Answer = append(big.Answer, &dns.A{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL},
			A: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}).AsSlice()})
	}
	big.Truncate(replySize(nil, false))
	out, err := big.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if !big.Truncated || len(out) > 512 {
		t.Errorf("truncated %v, %d bytes; want TC and at most 512", big.Truncated, len(out))
	}
}

func TestDenyRateLimit(t *testing.T) {
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	ask := func(name string) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if resp := r.answer(m, "test", false); resp.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: want NXDOMAIN, got %s", name, dns.RcodeToString[resp.Rcode])
		}
	}
	for range 10 { // one line, nine held back
		ask("loop.test.")
		now = now.Add(50 * time.Millisecond)
	}
	ask("other.test.") // a different name is not held back by loop.test
	now = now.Add(time.Second)
	ask("loop.test.") // a line counting the nine
	for range 3 {     // held back
		ask("loop.test.")
	}
	now = now.Add(500 * time.Millisecond)
	ask("held.test.")
	now = now.Add(2 * time.Second)
	ask("sweeper.test.") // its sweep writes loop.test's three as one line
	for range 2 {        // held back, written at Close as one line
		ask("sweeper.test.")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, path)
	for host, want := range map[string][]string{
		"loop.test":    {"", "(9 identical queries", "(2 identical queries"},
		"sweeper.test": {"", "(1 identical queries"},
		"other.test":   {""},
		"held.test":    {""},
	} {
		got := findAudit(recs, host)
		if len(got) != len(want) {
			t.Errorf("%s: want %d lines, got %+v", host, len(want), got)
			continue
		}
		for i, rec := range got {
			if rec.Decision != audit.Deny || rec.Reason != string(policy.ReasonNotAllowed) {
				t.Errorf("%s line %d: %+v", host, i, rec)
			}
			if want[i] == "" && strings.Contains(rec.Detail, "identical") || !strings.Contains(rec.Detail, want[i]) {
				t.Errorf("%s line %d detail %q, want it to contain %q", host, i, rec.Detail, want[i])
			}
		}
	}
}
func TestDecideName(t *testing.T) {
	rules, err := policy.Compile(
		[]string{"example.com", "*.example.com", "only22.test:22", "any.test:*", "gone.test:8080", "10.0.0.0/8:*", "both.test"},
		[]string{"secret.example.com", "gone.test:8080", "any.test:22", "both.test:443"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host   string
		allow  bool
		reason policy.Reason
		rule   string
	}{
		{"example.com", true, policy.ReasonAllowed, "example.com"},
		{"a.example.com", true, policy.ReasonAllowed, "*.example.com"},
		{"secret.example.com", false, policy.ReasonDenyRule, "secret.example.com"},
		{"only22.test", true, policy.ReasonAllowed, "only22.test:22"},
		{"any.test", true, policy.ReasonAllowed, "any.test:*"},
		{"gone.test", false, policy.ReasonDenyRule, "gone.test:8080"},
		{"both.test", true, policy.ReasonAllowed, "both.test"},
		{"example.org", false, policy.ReasonNotAllowed, ""},
		{"com", false, policy.ReasonNotAllowed, ""},
		{"10.1.2.3", false, policy.ReasonBadHost, ""},
	}
	for _, tc := range tests {
		d := DecideName(rules, tc.host)
		if d.Allow != tc.allow || d.Reason != tc.reason || d.Rule != tc.rule || d.Host != tc.host || d.Detail == "" {
			t.Errorf("%s: got %+v; want allow %v, reason %s, rule %q", tc.host, d, tc.allow, tc.reason, tc.rule)
		}
	}
}

func TestPool(t *testing.T) {
	tests := []struct {
		prefix      string
		first, last string
		count       int
	}{
		{"198.18.0.0/15", "198.18.0.1", "198.19.255.254", 130048},
		{"198.18.0.0/23", "198.18.0.1", "198.18.1.254", 508},
		{"198.18.0.0/30", "198.18.0.1", "198.18.0.2", 2},
		{"198.18.0.252/30", "198.18.0.253", "198.18.0.254", 2},
		{"198.18.1.0/29", "198.18.1.1", "198.18.1.6", 6},
		{"198.18.0.9/24", "198.18.0.1", "198.18.0.254", 254},
	}
	for _, tc := range tests {
		p, err := newPool(netip.MustParsePrefix(tc.prefix))
		if err != nil {
			t.Fatalf("%s: %v", tc.prefix, err)
		}
		var got []netip.Addr
		for len(got) <= tc.count {
			a, err := p.peek()
			if err != nil {
				break
			}
			got = append(got, a)
			p.advance()
		}
		if len(got) != tc.count || got[0].String() != tc.first || got[len(got)-1].String() != tc.last {
			t.Errorf("%s: %d addresses from %s to %s; want %d from %s to %s",
				tc.prefix, len(got), got[0], got[len(got)-1], tc.count, tc.first, tc.last)
		}
		for _, a := range got {
			if b := a.As4(); b[3] == 0 || b[3] == 255 {
				t.Errorf("%s: handed out %s", tc.prefix, a)
			}
		}
	}
}

func TestReverseAddr(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{"1.0.18.198.in-addr.arpa.", "198.18.0.1"},
		{"255.255.19.198.IN-ADDR.ARPA.", "198.19.255.255"},
		{"01.0.18.198.in-addr.arpa.", ""},
		{"256.0.18.198.in-addr.arpa.", ""},
		{"+1.0.18.198.in-addr.arpa.", ""},
		{"0.18.198.in-addr.arpa.", ""},
		{"1.1.0.18.198.in-addr.arpa.", ""},
		{"1.0.18.198.in-addr.arpa", ""},
		{"x.0.18.198.in-addr.arpa.", ""},
		{"1.0.18.198.ip6.arpa.", ""},
	}
	for _, tc := range tests {
		got := ""
		if a, ok := reverseAddr(tc.name); ok {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
