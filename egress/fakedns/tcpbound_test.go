package fakedns

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestTCPConnectionsBounded: at most MaxTCPConns TCP connections are
// served at once; the next waits, unanswered, until one of them closes,
// and reaching the bound is logged once. Without the bound, a sandbox
// that kept opening connections (each kept open by a query every few
// seconds) made cordon hold a socket and a goroutine for each until it
// ran out of descriptors.
func TestTCPConnectionsBounded(t *testing.T) {
	const max = 2
	r, path := startResolverWith(t, testAllow, testDeny, Config{MaxTCPConns: max})
	dial := func() *dns.Conn {
		t.Helper()
		c, err := dns.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ask := func(c *dns.Conn) <-chan error {
		m := new(dns.Msg)
		m.SetQuestion("example.com.", dns.TypeA)
		answered := make(chan error, 1)
		go func() {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if err := c.WriteMsg(m); err != nil {
				answered <- err
				return
			}
			_, err := c.ReadMsg()
			answered <- err
		}()
		return answered
	}
	var held []*dns.Conn
	for range max {
		c := dial()
		if err := <-ask(c); err != nil {
			t.Fatalf("a connection within the bound: %v", err)
		}
		held = append(held, c)
	}
	waiting := ask(dial())
	select {
	case err := <-waiting:
		t.Fatalf("a connection past the bound was served at once (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	n := 0
	for _, rec := range readAudit(t, path) {
		if rec.Reason == string(ReasonTooManyConnections) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d lines say %s, want 1", n, ReasonTooManyConnections)
	}
	held[0].Close()
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the waiting connection, once let in: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was never served after one closed")
	}
}
