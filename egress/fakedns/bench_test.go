package fakedns

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkCachedAUDP is one client asking for an already answered name
// over UDP on loopback, one query at a time.
func BenchmarkCachedAUDP(b *testing.B) {
	r, _ := startResolver(b, testAllow, testDeny, netip.Prefix{})
	c, err := net.Dial("udp", r.addr)
	if err != nil {
		b.Fatal(err)
	}
	conn := &dns.Conn{Conn: c}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	answerA(b, exchange(b, r, "udp", "www.example.com.", dns.TypeA))
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := conn.WriteMsg(m); err != nil {
			b.Fatal(err)
		}
		resp, err := conn.ReadMsg()
		if err != nil || len(resp.Answer) != 1 {
			b.Fatalf("%v %v", resp, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkCachedAAnswer is the handler alone for an already answered
// name, from unpacked query to reply, on all CPUs.
func BenchmarkCachedAAnswer(b *testing.B) {
	r, _ := startResolver(b, testAllow, testDeny, netip.Prefix{})
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	answerA(b, r.answer(m, "bench", false))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if resp := r.answer(m, "bench", false); len(resp.Answer) != 1 {
				b.Fatalf("%v", resp)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
