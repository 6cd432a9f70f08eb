package fakedns

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// testAllow is the allowlist most tests share.
var testAllow = []string{"example.com", "*.example.com", "api.test:8443", "ssh.test:*", "blocked.test"}

// testDeny takes blocked.test back on every port.
var testDeny = []string{"blocked.test", "ssh.test:22"}

// startResolver starts a Resolver on 127.0.0.1 with a fresh audit log.
func startResolver(t testing.TB, allow, deny []string, rng netip.Prefix) (*Resolver, string) {
	t.Helper()
	return startResolverWith(t, allow, deny, Config{Range: rng})
}

// startResolverWith is startResolver with cfg's other fields.
func startResolverWith(t testing.TB, allow, deny []string, cfg Config) (*Resolver, string) {
	t.Helper()
	rules, w, path := rulesAndAudit(t, allow, deny)
	cfg.Rules, cfg.Audit = rules, w
	r, err := start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		w.Close()
	})
	return r, path
}

// rulesAndAudit compiles allow and deny and opens a fresh audit log, returning
// its path; the caller closes the writer.
func rulesAndAudit(t testing.TB, allow, deny []string) (*policy.Rules, *audit.Writer, string) {
	t.Helper()
	rules, err := policy.Compile(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.Open(path, "test")
	if err != nil {
		t.Fatal(err)
	}
	return rules, w, path
}

// exchange sends one question over network ("udp" or "tcp").
func exchange(t testing.TB, r *Resolver, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return exchangeMsg(t, r, network, m)
}

func exchangeMsg(t testing.TB, r *Resolver, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	resp, _, err := c.Exchange(m, r.addr)
	if err != nil {
		t.Fatalf("%s %v %s: %v", network, m.Question, r.addr, err)
	}
	if resp.Id != m.Id || !resp.Response {
		t.Fatalf("reply to %v is not a response to it: %v", m.Question, resp)
	}
	return resp
}

// readAudit returns every record in the log at path.
func readAudit(t testing.TB, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := audit.NewReader(f, func(line int, err error) { t.Errorf("audit line %d: %v", line, err) })
	var out []audit.Record
	for rd.Next() {
		out = append(out, rd.Record())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// findAudit returns the dns decision records for host.
func findAudit(recs []audit.Record, host string) []audit.Record {
	var out []audit.Record
	for _, rec := range recs {
		if rec.Type == audit.TypeDecision && rec.Kind == audit.KindDNS && rec.Host == host {
			out = append(out, rec)
		}
	}
	return out
}

func answerA(t testing.TB, resp *dns.Msg) netip.Addr {
	t.Helper()
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("want one A answer, got %s with %v", dns.RcodeToString[resp.Rcode], resp.Answer)
	}
	a, ok := resp.Answer[0].(*dns.A)
	if !ok {
		t.Fatalf("answer %v is not an A record", resp.Answer[0])
	}
	if a.Hdr.Ttl != TTL {
		t.Errorf("TTL %d, want %d", a.Hdr.Ttl, TTL)
	}
	ip, _ := netip.AddrFromSlice(a.A)
	return ip.Unmap()
}

func TestAllowedAStableAndDistinct(t *testing.T) {
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
			names := []string{"example.com.", "a.example.com.", "b.a.example.com.", "api.test.", "ssh.test."}
			first := map[netip.Addr]string{}
			for i, name := range names {
				a := answerA(t, exchange(t, r, network, name, dns.TypeA))
				if i == 0 && a != netip.MustParseAddr("198.18.0.1") {
					t.Errorf("first address %s, want 198.18.0.1", a)
				}
				if !DefaultRange.Contains(a) {
					t.Errorf("%s got %s, outside %s", name, a, DefaultRange)
				}
				if other, dup := first[a]; dup {
					t.Errorf("%s and %s both got %s", name, other, a)
				}
				first[a] = name
			}
			for range 3 {
				for a, name := range first {
					if got := answerA(t, exchange(t, r, network, name, dns.TypeA)); got != a {
						t.Errorf("%s: %s, earlier %s", name, got, a)
					}
				}
			}
			recs := readAudit(t, path)
			for _, name := range names {
				host := strings.TrimSuffix(name, ".")
				got := findAudit(recs, host)
				if len(got) != 1 || got[0].Decision != audit.Allow || got[0].Reason != string(policy.ReasonAllowed) || got[0].Addr == "" {
					t.Errorf("%s: want exactly one allow line with the address, got %+v", host, got)
				}
			}
		})
	}
}

func TestEmptyAnswers(t *testing.T) {
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	for _, qtype := range []uint16{dns.TypeAAAA, dns.TypeHTTPS, dns.TypeSVCB} {
		resp := exchange(t, r, "udp", "www.example.com.", qtype)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 || len(resp.Ns) != 0 {
			t.Errorf("%s: want empty NOERROR, got %s %v %v", dns.Type(qtype), dns.RcodeToString[resp.Rcode], resp.Answer, resp.Ns)
		}
	}
	if _, ok := r.AddrFor("www.example.com"); ok {
		t.Error("an AAAA, HTTPS or SVCB query handed out an address")
	}
	if recs := findAudit(readAudit(t, path), "www.example.com"); len(recs) != 0 {
		t.Errorf("empty answers were logged: %+v", recs)
	}
}

func TestDeniedNames(t *testing.T) {
	tests := []struct {
		name, host string
		qtype      uint16
		reason     policy.Reason
	}{
		{"not-allowed.test.", "not-allowed.test", dns.TypeA, policy.ReasonNotAllowed},
		{"not-allowed.test.", "not-allowed.test", dns.TypeAAAA, policy.ReasonNotAllowed},
		{"not-allowed.test.", "not-allowed.test", dns.TypeHTTPS, policy.ReasonNotAllowed},
		{"blocked.test.", "blocked.test", dns.TypeA, policy.ReasonDenyRule},
		{"localhost.", "localhost", dns.TypeA, policy.ReasonNotAllowed},
		{"com.", "com", dns.TypeA, policy.ReasonNotAllowed},
		{"example.com.evil.test.", "example.com.evil.test", dns.TypeA, policy.ReasonNotAllowed},
		{"1.2.3.4.", "1.2.3.4", dns.TypeA, policy.ReasonBadHost},
		{"0x7f.1.", "127.0.0.1", dns.TypeA, policy.ReasonBadHost},
		{`bad\.label.example.com.`, `bad\.label.example.com.`, dns.TypeA, policy.ReasonBadHost},
		{`sp\032ace.example.com.`, `sp\ ace.example.com.`, dns.TypeA, policy.ReasonBadHost},
		{"-dash.example.com.", "-dash.example.com.", dns.TypeA, policy.ReasonBadHost},
		{".", ".", dns.TypeA, policy.ReasonBadHost},
	}
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	for _, tc := range tests {
		for _, network := range []string{"udp", "tcp"} {
			resp := exchange(t, r, network, tc.name, tc.qtype)
			if resp.Rcode != dns.RcodeNameError || len(resp.Answer) != 0 {
				t.Errorf("%s %s %s: want NXDOMAIN, got %s %v", network, tc.name, dns.Type(tc.qtype), dns.RcodeToString[resp.Rcode], resp.Answer)
			}
		}
	}
	recs := readAudit(t, path)
	for _, tc := range tests {
		found := false
		for _, rec := range findAudit(recs, tc.host) {
			found = found || rec.Decision == audit.Deny && rec.Reason == string(tc.reason) &&
				strings.HasPrefix(rec.Detail, dns.Type(tc.qtype).String()+" query") && rec.Client != ""
		}
		if !found {
			t.Errorf("%s %s: no deny line with reason %s in %+v", tc.name, dns.Type(tc.qtype), tc.reason, findAudit(recs, tc.host))
		}
	}
}

func TestRefusedTypes(t *testing.T) {
	tests := []struct {
		name   string
		qtype  uint16
		qclass uint16
		host   string
		reason policy.Reason
	}{
		{"c2VjcmV0.attacker.test.", dns.TypeTXT, dns.ClassINET, "c2vjcmv0.attacker.test", ReasonType},
		{"example.com.", dns.TypeTXT, dns.ClassINET, "example.com", ReasonType},
		{"example.com.", dns.TypeANY, dns.ClassINET, "example.com", ReasonType},
		{"example.com.", dns.TypeMX, dns.ClassINET, "example.com", ReasonType},
		{"_https._tcp.example.com.", dns.TypeSRV, dns.ClassINET, "_https._tcp.example.com", ReasonType},
		{"www.example.com.", dns.TypeCNAME, dns.ClassINET, "www.example.com", ReasonType},
		{"example.com.", dns.TypeNS, dns.ClassINET, "example.com", ReasonType},
		{"example.com.", dns.TypeSOA, dns.ClassINET, "example.com", ReasonType},
		{"example.com.", dns.TypeAXFR, dns.ClassINET, "example.com", ReasonType},
		{"example.com.", 65280, dns.ClassINET, "example.com", ReasonType},
		{"version.bind.", dns.TypeTXT, dns.ClassCHAOS, "version.bind", ReasonClass},
		{"example.com.", dns.TypeA, dns.ClassANY, "example.com", ReasonClass},
	}
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	for _, tc := range tests {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, tc.qtype)
		m.Question[0].Qclass = tc.qclass
		network := "udp"
		if tc.qtype == dns.TypeAXFR {
			network = "tcp"
		}
		resp := exchangeMsg(t, r, network, m)
		if resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 {
			t.Errorf("%s %s: want REFUSED, got %s %v", tc.name, dns.Type(tc.qtype), dns.RcodeToString[resp.Rcode], resp.Answer)
		}
	}
	recs := readAudit(t, path)
	for _, tc := range tests {
		found := false
		for _, rec := range findAudit(recs, tc.host) {
			found = found || rec.Decision == audit.Deny && rec.Reason == string(tc.reason) &&
				strings.Contains(rec.Detail, dns.Type(tc.qtype).String())
		}
		if !found {
			t.Errorf("%s %s: no %s deny line naming the type in %+v", tc.name, dns.Type(tc.qtype), tc.reason, findAudit(recs, tc.host))
		}
	}
	if _, ok := r.AddrFor("example.com"); ok {
		t.Error("a refused query handed out an address")
	}
}

func TestSpellingsShareAnAddress(t *testing.T) {
	r, _ := startResolver(t, testAllow, testDeny, netip.Prefix{})
	want := answerA(t, exchange(t, r, "udp", "www.example.com.", dns.TypeA))
	for _, name := range []string{"WWW.EXAMPLE.COM.", "Www.Example.Com.", "wWw.eXaMpLe.cOm."} {
		resp := exchange(t, r, "udp", name, dns.TypeA)
		if got := answerA(t, resp); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
		if resp.Answer[0].Header().Name != name {
			t.Errorf("answer owner %q, want the name as asked %q", resp.Answer[0].Header().Name, name)
		}
	}
	for _, name := range []string{"www.example.com", "www.example.com.", "WWW.Example.COM."} {
		if got, ok := r.AddrFor(name); !ok || got != want {
			t.Errorf("AddrFor(%q) = %s, %v; want %s", name, got, ok, want)
		}
	}
}

func TestWildcard(t *testing.T) {
	r, _ := startResolver(t, []string{"*.wild.test"}, nil, netip.Prefix{})
	answerA(t, exchange(t, r, "udp", "a.wild.test.", dns.TypeA))
	answerA(t, exchange(t, r, "udp", "b.a.wild.test.", dns.TypeA))
	for _, name := range []string{"wild.test.", "awild.test.", "wild.test.other."} {
		if resp := exchange(t, r, "udp", name, dns.TypeA); resp.Rcode != dns.RcodeNameError {
			t.Errorf("%s: want NXDOMAIN, got %s", name, dns.RcodeToString[resp.Rcode])
		}
	}
}

func TestNameForAddrFor(t *testing.T) {
	r, _ := startResolver(t, testAllow, testDeny, netip.Prefix{})
	for _, name := range []string{"example.com", "x.example.com", "api.test"} {
		a := answerA(t, exchange(t, r, "tcp", name+".", dns.TypeA))
		if got, ok := r.NameFor(a); !ok || got != name {
			t.Errorf("NameFor(%s) = %q, %v; want %q", a, got, ok, name)
		}
		if got, ok := r.NameFor(netip.AddrFrom16(a.As16())); !ok || got != name {
			t.Errorf("NameFor(mapped %s) = %q, %v; want %q", a, got, ok, name)
		}
		if got, ok := r.AddrFor(name); !ok || got != a {
			t.Errorf("AddrFor(%q) = %s, %v; want %s", name, got, ok, a)
		}
	}
	for _, a := range []string{"198.18.0.200", "198.19.255.254", "10.0.2.2", "::1"} {
		if name, ok := r.NameFor(netip.MustParseAddr(a)); ok {
			t.Errorf("NameFor(%s) = %q, want nothing", a, name)
		}
	}
	for _, name := range []string{"never-asked.example.com", "not-allowed.test", "", "bad..name"} {
		if a, ok := r.AddrFor(name); ok {
			t.Errorf("AddrFor(%q) = %s, want nothing", name, a)
		}
	}
}

func TestPTR(t *testing.T) {
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	a := answerA(t, exchange(t, r, "udp", "example.com.", dns.TypeA))
	rev, err := dns.ReverseAddr(a.String())
	if err != nil {
		t.Fatal(err)
	}
	resp := exchange(t, r, "udp", strings.ToUpper(rev), dns.TypePTR)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "example.com." {
		t.Errorf("PTR %s: want example.com., got %s %v", rev, dns.RcodeToString[resp.Rcode], resp.Answer)
	}
	for _, name := range []string{"2.0.18.198.in-addr.arpa.", "2.2.0.10.in-addr.arpa.", "01.0.18.198.in-addr.arpa.",
		"1.0.18.198.in-addr.arpa.evil.", "0.18.198.in-addr.arpa.", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa."} {
		if resp := exchange(t, r, "udp", name, dns.TypePTR); resp.Rcode != dns.RcodeNameError || len(resp.Answer) != 0 {
			t.Errorf("PTR %s: want NXDOMAIN, got %s %v", name, dns.RcodeToString[resp.Rcode], resp.Answer)
		}
	}
	if recs := findAudit(readAudit(t, path), "2.2.0.10.in-addr.arpa"); len(recs) != 1 || recs[0].Reason != string(ReasonNoReverse) {
		t.Errorf("want one %s line for 10.0.2.2, got %+v", ReasonNoReverse, recs)
	}
}

func TestExhaustion(t *testing.T) {
	r, path := startResolver(t, []string{"*.example.com"}, nil, netip.MustParsePrefix("198.18.0.0/30"))
	a1 := answerA(t, exchange(t, r, "udp", "one.example.com.", dns.TypeA))
	a2 := answerA(t, exchange(t, r, "udp", "two.example.com.", dns.TypeA))
	if a1 != netip.MustParseAddr("198.18.0.1") || a2 != netip.MustParseAddr("198.18.0.2") {
		t.Errorf("got %s and %s, want 198.18.0.1 and .2", a1, a2)
	}
	for range 2 {
		if resp := exchange(t, r, "udp", "three.example.com.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
			t.Errorf("third name: want SERVFAIL, got %s %v", dns.RcodeToString[resp.Rcode], resp.Answer)
		}
	}
	if got := answerA(t, exchange(t, r, "udp", "one.example.com.", dns.TypeA)); got != a1 {
		t.Errorf("after exhaustion one.example.com got %s, want %s", got, a1)
	}
	recs := findAudit(readAudit(t, path), "three.example.com")
	if len(recs) != 1 || recs[0].Reason != string(ReasonRangeFull) || !strings.Contains(recs[0].Detail, "198.18.0.0/30") {
		t.Errorf("want one %s line naming the range, got %+v", ReasonRangeFull, recs)
	}
}

func TestNewErrors(t *testing.T) {
	rules, w, _ := rulesAndAudit(t, testAllow, nil)
	defer w.Close()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no rules", Config{Audit: w}, "Rules is nil"},
		{"no audit", Config{Rules: rules}, "Audit is nil"},
		{"ipv6 range", Config{Rules: rules, Audit: w, Range: netip.MustParsePrefix("fd00::/64")}, "not IPv4"},
		{"/31", Config{Rules: rules, Audit: w, Range: netip.MustParsePrefix("198.18.0.0/31")}, "no usable address"},
		{"/32", Config{Rules: rules, Audit: w, Range: netip.MustParsePrefix("198.18.0.1/32")}, "no usable address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.cfg)
			if err == nil {
				r.Close()
				t.Fatalf("New succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestContextCloses(t *testing.T) {
	rules, w, _ := rulesAndAudit(t, testAllow, nil)
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := start(ctx, Config{Rules: rules, Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	answerA(t, exchange(t, r, "tcp", "example.com.", dns.TypeA))
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("resolver still accepts TCP 5s after its context was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
}

func TestAuditFailureFailsClosed(t *testing.T) {
	rules, w, _ := rulesAndAudit(t, testAllow, nil)
	w.Close()
	r, err := start(context.Background(), Config{Rules: rules, Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if resp := exchange(t, r, "udp", "example.com.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
		t.Errorf("unlogged allow: want SERVFAIL, got %s %v", dns.RcodeToString[resp.Rcode], resp.Answer)
	}
	if a, ok := r.AddrFor("example.com"); ok {
		t.Errorf("unlogged allow handed out %s", a)
	}
	if resp := exchange(t, r, "udp", "other.test.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("deny with a failed log: want NXDOMAIN, got %s", dns.RcodeToString[resp.Rcode])
	}
}

func TestEDNS(t *testing.T) {
	r, _ := startResolver(t, testAllow, testDeny, netip.Prefix{})
	plain := exchange(t, r, "udp", "example.com.", dns.TypeA)
	if plain.IsEdns0() != nil {
		t.Error("reply to a query without EDNS carries an OPT record")
	}
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.SetEdns0(4096, true)
	resp := exchangeMsg(t, r, "udp", m)
	answerA(t, resp)
	if opt := resp.IsEdns0(); opt == nil || opt.Version() != 0 || opt.UDPSize() != ednsSize || opt.Do() {
		t.Errorf("want an OPT record version 0, payload %d, DO clear; got %v", ednsSize, opt)
	}
	m = new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.SetEdns0(4096, false)
	m.IsEdns0().SetVersion(1)
	resp = exchangeMsg(t, r, "udp", m)
	if resp.Rcode != dns.RcodeBadVers || len(resp.Answer) != 0 || resp.IsEdns0() == nil {
		t.Errorf("EDNS version 1: want BADVERS with an OPT, got %s %v", dns.RcodeToString[resp.Rcode], resp)
	}
}

// goneWriter is a client that left before its answer: every write fails.
type goneWriter struct{ dns.ResponseWriter }

func (goneWriter) RemoteAddr() net.Addr    { return &net.TCPAddr{IP: net.IPv4(10, 0, 2, 100), Port: 4242} }
func (goneWriter) WriteMsg(*dns.Msg) error { return errors.New("connection reset by peer") }

// TestReplyToAGoneClientUnlogged: an answer the client left before is not
// reported on cordon's stderr (the box could print a line there for each
// query it sends and abandons, outside the audit budget); the query's
// decision is still logged.
func TestReplyToAGoneClientUnlogged(t *testing.T) {
	var stderr bytes.Buffer
	r, path := startResolverWith(t, testAllow, testDeny, Config{ErrorLog: log.New(&stderr, "", 0)})
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	r.ServeDNS(goneWriter{}, m)
	if stderr.Len() != 0 {
		t.Errorf("a failed reply was reported: %q", stderr.String())
	}
	if len(findAudit(readAudit(t, path), "example.com")) == 0 {
		t.Error("the abandoned query's decision was not logged")
	}
}
