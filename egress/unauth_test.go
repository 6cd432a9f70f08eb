package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

func TestUnauthLimiter(t *testing.T) {
	var l unauthLimiter
	now := time.Unix(1000, 0)
	for i := range unauthBurst {
		if ok, dropped, _ := l.allow(now); !ok || dropped != 0 {
			t.Fatalf("line %d of the burst: %v, %d", i, ok, dropped)
		}
	}
	for range 7 {
		if ok, _, _ := l.allow(now); ok {
			t.Fatal("a line past the burst, at once, was allowed")
		}
	}
	// A tenth of a second later, one more line: it carries the count.
	if ok, dropped, _ := l.allow(now.Add(time.Second / unauthRate)); !ok || dropped != 7 {
		t.Fatalf("after the refill: %v, %d; want true, 7", ok, dropped)
	}
	if ok, _, _ := l.allow(now.Add(time.Second / unauthRate)); ok {
		t.Fatal("the refill allowed two lines")
	}
	// Quiet for long, the bucket is full again, and no more.
	later := now.Add(time.Hour)
	for i := range unauthBurst {
		if ok, _, _ := l.allow(later); !ok {
			t.Fatalf("after an hour, line %d refused", i)
		}
	}
	if ok, _, _ := l.allow(later); ok {
		t.Fatal("the bucket held more than its burst")
	}
	// Over a session, unauthMax lines at most, the last one saying so.
	var m unauthLimiter
	at, finals := now, 0
	for i := range unauthMax + 50 {
		at = at.Add(time.Second)
		ok, _, final := m.allow(at)
		if ok != (i < unauthMax) {
			t.Fatalf("line %d of a session: allowed %v", i, ok)
		}
		if final {
			finals++
			if i != unauthMax-1 {
				t.Fatalf("line %d said it was the last", i)
			}
		}
	}
	if finals != 1 {
		t.Fatalf("%d lines said they were the session's last, want 1", finals)
	}
}

// TestUnauthenticatedFloodBounded: a local user without the token cannot
// fill the session's log: past the burst its refusals are counted, not
// written, and the count goes out with a later line; the session's own
// client is logged as always.
func TestUnauthenticatedFloodBounded(t *testing.T) {
	proxy, auth, logPath := startProxy(t, "allowed.test", 0)
	send := func(req string) int { return statusOf(t, proxy, req) }
	const flood = unauthBurst + 50
	start := time.Now()
	for i := range flood {
		if code := send("CONNECT flood.test:443 HTTP/1.1\r\nHost: flood.test:443\r\n\r\n"); code != http.StatusProxyAuthRequired {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	// The bucket refills while the flood goes on (slowly under the race
	// detector): those lines are allowed too.
	bound := unauthBurst + int(time.Since(start).Seconds()*unauthRate) + 2
	if bound >= flood {
		t.Fatalf("the flood of %d took %v, too slow to show a bound of %d lines", flood, time.Since(start), unauthBurst)
	}
	time.Sleep(time.Second / unauthRate * 2)
	send("CONNECT after.test:443 HTTP/1.1\r\nHost: after.test:443\r\n\r\n")
	send("CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\nProxy-Authorization: " + auth + "\r\n\r\n")
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	rd := audit.NewReader(strings.NewReader(string(data)), nil)
	var unauth, counted, own int
	for rd.Next() {
		r := rd.Record()
		switch {
		case r.Reason == string(ReasonAuthMissing) && strings.Contains(r.Detail, "were not logged one by one"):
			counted++
		case r.Reason == string(ReasonAuthMissing):
			unauth++
		case r.Host == "denied.test":
			own++
		}
	}
	if unauth+counted > bound || counted < 1 || own != 1 {
		t.Fatalf("%d refusals sent: %d logged one by one, %d lines with a count, %d of the session's own; log:\n%s",
			flood+1, unauth, counted, own, data)
	}
}

// TestUnauthenticatedLinesSpendNoBudget: the refusals of clients without
// the token are not charged to the session's audit budget. They were: a
// local user connecting and closing spent a session's budget (here 8 KiB,
// a 100-line burst is some 30), after which the session's own client was
// refused (red team, round 8).
func TestUnauthenticatedLinesSpendNoBudget(t *testing.T) {
	s, aw, token, logPath := newTestServer(t, "allowed.test", 0)
	aw.SetBudget(8 << 10)
	proxy := serveOnLoopback(t, s, aw)
	auth := base64.StdEncoding.EncodeToString([]byte("cordon:" + token))
	send := func(req string) int { return statusOf(t, proxy, req) }
	for i := range unauthBurst {
		if code := send("CONNECT flood.test:443 HTTP/1.1\r\nHost: flood.test:443\r\n\r\n"); code != http.StatusProxyAuthRequired {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if code := send("CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\nProxy-Authorization: Basic " + auth + "\r\n\r\n"); code != http.StatusForbidden {
		t.Errorf("the session's own client, after the strangers' refusals: %d, want 403", code)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	rd := audit.NewReader(strings.NewReader(string(data)), nil)
	var strangers, own, budget int
	for rd.Next() {
		switch r := rd.Record(); {
		case r.Type == audit.TypeBudget:
			budget++
		case r.Reason == string(ReasonAuthMissing):
			strangers++
		case r.Host == "denied.test":
			own++
		}
	}
	if strangers != unauthBurst || own != 1 || budget != 0 {
		t.Fatalf("%d strangers' lines (want %d), %d of the session's own (want 1), %d budget lines (want 0); log:\n%s", strangers, unauthBurst, own, budget, data)
	}
}

// TestNoLookupWhenUnloggable: once the session's lines cannot be written
// (its budget spent), a request for an allowed name is refused before the
// name is looked up, on CONNECT and plain HTTP alike. It was looked up
// first: the host's resolver, and the domain's DNS servers, were sent
// names a box chose under an allowed wildcard, with no line naming them
// (red team, round 8).
func TestNoLookupWhenUnloggable(t *testing.T) {
	s, aw, token, _ := newTestServer(t, "*.exfil.test:*", 0)
	resolver := &asked{}
	s.cfg.Dialer.Resolver = resolver
	aw.SetBudget(4 << 10)
	proxy := serveOnLoopback(t, s, aw)
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+token)) + "\r\n"
	send := func(req string) int { return statusOf(t, proxy, req) }
	if !spendBudget(send, auth, 200) {
		t.Fatal("200 denied requests did not spend a budget of 4 KiB")
	}
	for _, req := range []string{
		"CONNECT onxw2zlunfxw4ltu.exfil.test:443 HTTP/1.1\r\nHost: onxw2zlunfxw4ltu.exfil.test:443\r\n" + auth + "\r\n",
		"GET http://mfzxg53pojsc4ltm.exfil.test/ HTTP/1.1\r\nHost: mfzxg53pojsc4ltm.exfil.test\r\n" + auth + "\r\n",
	} {
		if code := send(req); code != http.StatusServiceUnavailable {
			t.Errorf("%q, the budget spent: %d, want 503", req, code)
		}
	}
	if len(resolver.names) != 0 {
		t.Errorf("names looked up with no line to name them: %v", resolver.names)
	}
}

// heldResolver answers every name with 127.0.0.1 (which the dialer
// refuses), once release is closed, and keeps the names it was asked.
type heldResolver struct {
	mu      sync.Mutex
	names   []string
	release chan struct{}
}

func (r *heldResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.names = append(r.names, strings.TrimSuffix(host, "."))
	r.mu.Unlock()
	select {
	case <-r.release:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func (r *heldResolver) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

// TestEveryLookupLogged: a name looked up is named in a line even when the
// budget is spent while its lookup is under way: its line's room is kept
// before the lookup (audit.Writer.Reserve). Checked before and written
// after, the lines of lookups held open while the box spent the budget
// were refused, and every such name had reached the resolver unlogged
// (red team, round 8, second look: 100 names a crossing).
func TestEveryLookupLogged(t *testing.T) {
	s, aw, token, logPath := newTestServer(t, "*.exfil.test:*", 0)
	resolver := &heldResolver{release: make(chan struct{})}
	s.cfg.Dialer.Resolver = resolver
	aw.SetBudget(64 << 10)
	proxy := serveOnLoopback(t, s, aw)
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+token)) + "\r\n"
	send := func(req string) int { return statusOf(t, proxy, req) }
	const held = 20
	var wg sync.WaitGroup
	for i := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := fmt.Sprintf("n%02d.exfil.test:443", i)
			send("CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n" + auth + "\r\n")
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(resolver.asked()) < held && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(resolver.asked()); n != held {
		t.Fatalf("%d lookups under way, want %d", n, held)
	}
	if !spendBudget(send, auth, 1000) {
		t.Fatal("1,000 denied requests did not spend the budget")
	}
	close(resolver.release)
	wg.Wait()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	rd := audit.NewReader(strings.NewReader(string(data)), nil)
	for rd.Next() {
		logged[rd.Record().Host] = true
	}
	for _, name := range resolver.asked() {
		if !logged[name] {
			t.Errorf("%s was looked up and is named in no line", name)
		}
	}
}

// statusOf writes request to the proxy on a connection of its own, as it
// is written, and returns the answer's status, or 0 (and the test fails)
// for none; the connection is closed at once. It may be called from
// goroutines of the test's.
func statusOf(t *testing.T, proxy, request string) int {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	c.Write([]byte(request))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	return resp.StatusCode
}

// TestPlainRefusedBeforeSendingLogged: a plain-HTTP request that net/http's
// reverse proxy refuses before cordon's transport sees it (an Upgrade
// that is no token) has a line naming its host, which was looked up. It
// had none, and its name had reached the resolver (red team, round 8).
func TestPlainRefusedBeforeSendingLogged(t *testing.T) {
	s, aw, token, logPath := newTestServer(t, "*.exfil.test:*", 0)
	resolver := &heldResolver{release: make(chan struct{})}
	close(resolver.release)
	s.cfg.Dialer.Resolver = resolver
	// The address it answers is allowed too, so nothing is refused for
	// it: were the request sent, it would go to this machine.
	rules, err := policy.Compile([]string{"*.exfil.test:*", "127.0.0.1:*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Rules, s.cfg.Dialer.Rules = rules, rules
	proxy := serveOnLoopback(t, s, aw)
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+token)) + "\r\n"
	code := statusOf(t, proxy, "GET http://secret-1234.exfil.test/ HTTP/1.1\r\nHost: secret-1234.exfil.test\r\nConnection: Upgrade\r\nUpgrade: caf\xe9\r\n"+auth+"\r\n")
	if code != http.StatusBadGateway {
		t.Errorf("answered %d, want 502", code)
	}
	if asked := resolver.asked(); !slices.Equal(asked, []string{"secret-1234.exfil.test"}) {
		t.Fatalf("looked up %v", asked)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"host":"secret-1234.exfil.test"`) {
		t.Errorf("the name looked up is in no line:\n%s", data)
	}
}

// spendBudget sends denied CONNECTs with the token auth (a Proxy-
// Authorization line) until one is refused for want of its line (503, the
// budget spent), n at most, and says whether one was.
func spendBudget(send func(string) int, auth string, n int) bool {
	for range n {
		if send("CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n"+auth+"\r\n") == http.StatusServiceUnavailable {
			return true
		}
	}
	return false
}
