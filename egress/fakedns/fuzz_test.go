package fakedns

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fuzzSeeds are queries of every kind the handler tells apart.
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	add := func(name string, qtype uint16, edit func(m *dns.Msg)) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		edit(m)
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	none := func(*dns.Msg) {}
	add("example.com.", dns.TypeA, none)
	add("WWW.Example.COM.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(4096, true) })
	add("example.com.", dns.TypeAAAA, none)
	add("example.com.", dns.TypeHTTPS, none)
	add("c2VjcmV0.attacker.test.", dns.TypeTXT, none)
	add("example.com.", dns.TypeANY, none)
	add("1.0.18.198.in-addr.arpa.", dns.TypePTR, none)
	add("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })
	add("example.com.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(512, false); m.IsEdns0().SetVersion(3) })
	add("example.com.", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate })
	add("example.com.", dns.TypeA, func(m *dns.Msg) {
		m.Question = append(m.Question, dns.Question{Name: "b.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	})
	add("example.com.", dns.TypeA, func(m *dns.Msg) { m.Response = true })
	return append(out, []byte{}, make([]byte, 12), []byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c})
}

// FuzzHandle feeds arbitrary bytes through the server's path (accept,
// unpack, answer): it never panics, drops only responses, and every reply
// packs, fits the client's size and answers the query it was given.
func FuzzHandle(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	r, log := fuzzResolver(f, []string{"deny.example.com"})
	f.Fuzz(func(t *testing.T, b []byte, tcp bool) {
		os.Truncate(log, 0)
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return // the server answers FORMERR from the header alone
		}
		h := dns.Header{Id: binary.BigEndian.Uint16(b), Bits: binary.BigEndian.Uint16(b[2:])}
		accepted := acceptQuery(h) == dns.MsgAccept
		m := r.answer(req, "fuzz", tcp)
		if !accepted || m == nil {
			if accepted || m != nil || !req.Response {
				t.Fatalf("accepted %v, reply %v, for a message with QR %v", accepted, m, req.Response)
			}
			return
		}
		out, err := m.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v\n%v", err, m)
		}
		if limit := replySize(req.IsEdns0(), tcp); len(out) > limit {
			t.Fatalf("reply is %d bytes, over the client's %d", len(out), limit)
		}
		back := new(dns.Msg)
		if err := back.Unpack(out); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if back.Id != req.Id || !back.Response || len(back.Question) > 1 {
			t.Fatalf("reply id %d response %v with %d questions, to query %d", back.Id, back.Response, len(back.Question), req.Id)
		}
		if len(back.Question) == 1 && back.Question[0] != req.Question[0] {
			t.Fatalf("reply question %v, asked %v", back.Question[0], req.Question[0])
		}
		if len(back.Answer) > 0 && back.Rcode != dns.RcodeSuccess {
			t.Fatalf("answers with rcode %s", dns.RcodeToString[back.Rcode])
		}
	})
}

// FuzzReplyUDP feeds arbitrary bytes to the UDP path: it never panics,
// sends nothing to a message too short for a header or to a response,
// and every reply unpacks, fits the client's size and carries the
// query's id.
func FuzzReplyUDP(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Add([]byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 3, 'a', 'b'})
	f.Add(manyQuestionsCut())
	r, log := fuzzResolver(f, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		os.Truncate(log, 0)
		out := r.replyUDP(b, "fuzz")
		if len(b) < headerLen || b[2]&0x80 != 0 {
			if out != nil {
				t.Fatalf("a reply to a message too short or a response: %x", out)
			}
			return
		}
		if out == nil {
			t.Fatal("a query got no reply")
		}
		limit := dns.MinMsgSize
		if req := new(dns.Msg); req.Unpack(b) == nil {
			limit = replySize(req.IsEdns0(), false)
		}
		if len(out) > limit {
			t.Fatalf("reply is %d bytes, over the client's %d", len(out), limit)
		}
		back := new(dns.Msg)
		if err := back.Unpack(out); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if back.Id != binary.BigEndian.Uint16(b) || !back.Response {
			t.Fatalf("reply id %d response %v, to query %d", back.Id, back.Response, binary.BigEndian.Uint16(b))
		}
	})
}

// manyQuestionsCut is a query of fifteen 255-byte questions whose answer
// section is cut short: it does not unpack, and what of it did is longer
// than a UDP reply may be.
func manyQuestionsCut() []byte {
	m := new(dns.Msg)
	name := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 61) + "."
	for range 15 {
		m.Question = append(m.Question, dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET})
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	b[7] = 1                  // one answer,
	return append(b, 0xc0, 1) // whose name points nowhere
}

// fuzzResolver is a resolver allowing example.com and its subdomains,
// denying deny, that logs to a real file, as the log must be; the
// fuzzers empty it as they go, so a long run does not fill the disk.
func fuzzResolver(f *testing.F, deny []string) (*Resolver, string) {
	rules, w, log := rulesAndAudit(f, []string{"example.com", "*.example.com"}, deny)
	f.Cleanup(func() { w.Close() })
	r, err := New(Config{Rules: rules, Audit: w})
	if err != nil {
		f.Fatal(err)
	}
	return r, log
}
