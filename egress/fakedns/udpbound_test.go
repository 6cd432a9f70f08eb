package fakedns

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPQueriesBounded: while answers are slow (here the deny log held
// up, as a slow disk holds up its writes), a flood of UDP queries costs
// cordon at most udpWorkers goroutines, not one per packet; the first
// time every reader is busy is logged once, and once the log moves again
// the box's queries are answered and their refusals logged as before.
// miekg/dns's server started a goroutine per packet: some 30,000 (and 300
// MB) in two seconds of a stalled writer.
func TestUDPQueriesBounded(t *testing.T) {
	r, path := startResolver(t, testAllow, testDeny, netip.Prefix{})
	before := runtime.NumGoroutine()
	r.denies.mu.Lock()
	held := true
	defer func() {
		if held {
			r.denies.mu.Unlock()
		}
	}()
	c, err := net.Dial("udp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peak := 0
	for i := range 20000 {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("x%d.flood.test.", i), dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b) // a packet the kernel drops is the point
		if i%500 == 0 {
			peak = max(peak, runtime.NumGoroutine())
		}
	}
	time.Sleep(200 * time.Millisecond)
	peak = max(peak, runtime.NumGoroutine())
	r.denies.mu.Unlock()
	held = false
	if limit := before + udpWorkers + 16; peak > limit {
		t.Errorf("%d goroutines while the answers were held up, want at most %d (%d before the flood)", peak, limit, before)
	}
	waitFull(t, path)
	if resp := askAgain(t, r, "after.flood.test."); resp.Rcode != dns.RcodeNameError {
		t.Fatalf("a denied name after the flood: %s, want NXDOMAIN", dns.RcodeToString[resp.Rcode])
	}
	if len(findAudit(readAudit(t, path), "after.flood.test")) == 0 {
		t.Error("the refusal after the flood was not logged")
	}
}

// waitFull waits for the one line saying every UDP reader was busy.
func waitFull(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for _, rec := range readAudit(t, path) {
			if rec.Reason == string(ReasonTooManyQueries) {
				n++
			}
		}
		switch {
		case n == 1:
			return
		case n > 1 || time.Now().After(deadline):
			t.Fatalf("%d lines say %s, want 1", n, ReasonTooManyQueries)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// askAgain asks for name's A record over UDP until it is answered: the
// kernel drops a query that finds the socket's buffer still full.
func askAgain(t *testing.T, r *Resolver, name string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	var err error
	for range 10 {
		var resp *dns.Msg
		if resp, _, err = c.Exchange(m, r.addr); err == nil {
			return resp
		}
	}
	t.Fatalf("%s was never answered: %v", name, err)
	return nil
}
