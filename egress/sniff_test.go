package egress

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestOpening(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    protocol
		decided bool
	}{
		{"", protoRefused, false},
		{"\x16", protoTLS, true},
		{"\x16\x03\x01\x02\x00", protoTLS, true},
		{"GET / HTTP/1.1\r\n", protoHTTP, true},
		{"PROPFIND /x HTTP/1.1", protoHTTP, true},
		{"CONNECT a:1 HTTP/1.1", protoHTTP, true},
		{"PURGE / HTTP/1.1", protoHTTP, true},
		{"VERSION-CONTROL / HTTP/1.1", protoHTTP, true},
		{"M-SEARCH * HTTP/1.1", protoHTTP, true},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", protoHTTP, true},
		{"G", protoRefused, false},
		{"GE", protoRefused, false},
		{"GET", protoRefused, false},
		{"ABCDEFGHIJKLMNOPQRSTUVWX", protoRefused, false},
		{"ABCDEFGHIJKLMNOPQRSTUVWXY", protoRefused, true},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1", protoRefused, true},
		{"SSH-2.0-OpenSSH_9.2p1\r\n", protoRefused, true},
		{"SSH-2.0-OpenSSH_10.0p2 Debian-7\r\n", protoRefused, true},
		{"get / HTTP/1.1", protoRefused, true},
		{"GET2 / HTTP/1.1", protoRefused, true},
		{" GET / HTTP/1.1", protoRefused, true},
		{"-GET / HTTP/1.1", protoRefused, true},
		{"\x80\x2e\x01\x03\x01", protoRefused, true}, // an SSLv2-format ClientHello
		{"\x00", protoRefused, true},
	} {
		got, decided := opening([]byte(tc.in))
		if got != tc.want || decided != tc.decided {
			t.Errorf("opening(%q) = %v, %v; want %v, %v", tc.in, got, decided, tc.want, tc.decided)
		}
	}
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestSniff runs sniff over real sockets: the box's client on one side,
// the upstream server on the other, each doing what its protocol does.
// Nothing unread may be relayed unless the server spoke first.
func TestSniff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	type step struct {
		after time.Duration
		bytes string // "" closes
	}
	for _, tc := range []struct {
		name     string
		client   []step
		server   []step
		want     protocol
		whyHas   string
		replayed string // what the returned client conn reads first
	}{
		{name: "tls", client: []step{{0, "\x16\x03\x01\x00\x05hello"}}, want: protoTLS, replayed: "\x16\x03\x01\x00\x05hello"},
		{name: "http", client: []step{{0, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"}}, want: protoHTTP, replayed: "GET / HTTP/1.1"},
		{name: "unlisted method", client: []step{{0, "PURGE / HTTP/1.1\r\n"}}, want: protoHTTP, replayed: "PURGE /"},
		{name: "h2c prior knowledge", client: []step{{0, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}}, want: protoHTTP, replayed: "PRI * HTTP/2.0"},
		{name: "method split by a pause", client: []step{{0, "G"}, {150 * time.Millisecond, "ET / HTTP/1.1\r\n"}}, want: protoHTTP, replayed: "GET / HTTP/1.1"},
		{name: "server first", server: []step{{0, "SSH-2.0-OpenSSH_9.2p1\r\n"}}, want: protoOpaque, replayed: ""},
		{name: "ssh, both eager", client: []step{{0, "SSH-2.0-OpenSSH_10.0p2 Debian-7\r\n"}}, server: []step{{20 * time.Millisecond, "SSH-2.0-OpenSSH_9.2p1\r\n"}},
			want: protoOpaque, replayed: "SSH-2.0-OpenSSH_10.0p2"},
		{name: "silent client", want: protoRefused, whyHas: "neither side spoke within 300ms"},
		{name: "silent, then tls", client: []step{{2 * timeout, "\x16\x03\x01"}}, want: protoRefused, whyHas: "neither side spoke"},
		{name: "unknown bytes, silent server", client: []step{{0, "\x80\x2e\x01\x03\x01"}}, want: protoRefused, whyHas: "neither a TLS ClientHello nor an HTTP request line"},
		{name: "unknown method shape", client: []step{{0, "GET2 / HTTP/1.1\r\nHost: evil\r\n\r\n"}}, want: protoRefused, whyHas: "neither a TLS ClientHello"},
		{name: "partial method, then silence", client: []step{{0, "GE"}}, want: protoRefused, whyHas: "neither a TLS ClientHello"},
		{name: "client leaves", client: []step{{0, ""}}, want: protoEnded},
		{name: "client leaves after unknown bytes", client: []step{{0, "\x80\x2e"}, {10 * time.Millisecond, ""}}, want: protoRefused, whyHas: "neither a TLS ClientHello"},
		{name: "server leaves", server: []step{{0, ""}}, want: protoEnded},
		{name: "server leaves after unknown bytes", client: []step{{0, "\x80\x2e"}}, server: []step{{20 * time.Millisecond, ""}}, want: protoEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, clientEnd := tcpPair(t)     // the box's end, cordon's end
			upstreamEnd, upstream := tcpPair(t) // cordon's end, the server's end
			play := func(c net.Conn, steps []step) {
				for _, s := range steps {
					time.Sleep(s.after)
					if s.bytes == "" {
						c.Close()
						return
					}
					c.Write([]byte(s.bytes))
				}
			}
			go play(client, tc.client)
			go play(upstream, tc.server)
			start := time.Now()
			proto, why, c, _ := sniff(clientEnd, upstreamEnd, timeout)
			if proto != tc.want {
				t.Fatalf("sniff = %v (%q), want %v", proto, why, tc.want)
			}
			if !strings.Contains(why, tc.whyHas) || (tc.whyHas == "") != (why == "") {
				t.Fatalf("why = %q, want it to hold %q", why, tc.whyHas)
			}
			if d := time.Since(start); d > timeout+time.Second {
				t.Fatalf("sniff took %v, past its timeout of %v", d, timeout)
			}
			if tc.replayed != "" {
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				buf := make([]byte, len(tc.replayed))
				if _, err := io.ReadFull(c, buf); err != nil || string(buf) != tc.replayed {
					t.Fatalf("replayed %q, %v; want %q", buf, err, tc.replayed)
				}
			}
		})
	}
}

// TestSniffHoldsBackTheClient: until sniff has decided, none of the
// client's bytes reach the upstream, so a server that "speaks first"
// cannot be answering them.
func TestSniffHoldsBackTheClient(t *testing.T) {
	client, clientEnd := tcpPair(t)
	upstreamEnd, upstream := tcpPair(t)
	client.Write([]byte("GET2 / HTTP/1.1\r\nHost: evil.test\r\n\r\n"))
	got := make(chan int, 1)
	go func() {
		upstream.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _ := upstream.Read(make([]byte, 64))
		got <- n
	}()
	if proto, _, _, _ := sniff(clientEnd, upstreamEnd, 200*time.Millisecond); proto != protoRefused {
		t.Fatalf("sniff = %v, want refused", proto)
	}
	if n := <-got; n != 0 {
		t.Fatalf("the upstream read %d bytes of the client's during sniff", n)
	}
}

// FuzzOpening: once opening decides, more bytes never change its mind, and
// what it takes for HTTP is a method of capitals, '-' and '_', then a space.
func FuzzOpening(f *testing.F) {
	for _, seed := range []string{"GET / HTTP/1.1\r\n", "\x16\x03\x01", "SSH-2.0-x", "PRI * HTTP/2.0", "G", "M-SEARCH *", ""} {
		f.Add([]byte(seed), []byte("more"))
	}
	f.Fuzz(func(t *testing.T, b, more []byte) {
		p, ok := opening(b)
		if !ok {
			return
		}
		if p2, ok2 := opening(append(b[:len(b):len(b)], more...)); !ok2 || p2 != p {
			t.Fatalf("opening(%q) = %v, but with %q more: %v, %v", b, p, more, p2, ok2)
		}
		if p == protoHTTP {
			sp := bytes.IndexByte(b, ' ')
			if sp < 1 || sp > maxMethod {
				t.Fatalf("opening(%q) = HTTP with its space at %d", b, sp)
			}
			for _, c := range b[:sp] {
				if !(c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
					t.Fatalf("opening(%q) = HTTP with %q in its method", b, c)
				}
			}
		}
	})
}
