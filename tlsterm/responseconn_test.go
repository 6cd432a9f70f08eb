package tlsterm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// netHTTPLength is how many bytes of wire net/http's Transport reads as
// the response to a request of method (informational responses, then
// the final one, its body read to its end), or an error where it refuses
// the response.
func netHTTPLength(wire, method string) (int, error) {
	r := bytes.NewReader([]byte(wire))
	br := bufio.NewReader(r)
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		return len(wire) - r.Len() - br.Buffered(), nil
	}
}

// TestResponseFramerAgreesWithNetHTTP: a ResponseConn's framer finds a
// response's end where net/http's Transport does (the bytes after it are
// another response, or ones nobody asked for), or refuses what it cannot
// follow, which net/http refuses too.
func TestResponseFramerAgreesWithNetHTTP(t *testing.T) {
	const next = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
	for _, tc := range []struct {
		name, method, wire string
		untilClose         bool
	}{
		{"length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", false},
		{"two spaces", "GET", "HTTP/1.1  200 OK\r\nContent-Length: 3\r\n\r\nabc", false},
		{"no reason", "GET", "HTTP/1.1 200\r\nContent-Length: 3\r\n\r\nabc", false},
		{"same lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length:  3 \r\n\r\nabc", false},
		{"empty", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
		{"head", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", false},
		{"head chunked", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"204", "GET", "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", false},
		{"304", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n", false},
		{"1xx", "GET", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\nContent-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=\"y\"\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n", false},
		{"trailer", "GET", "HTTP/1.1 200 OK\r\nTrailer: T\r\nTransfer-Encoding: Chunked\r\n\r\n1\r\nx\r\n0\r\nT: v\r\nU: w\r\n\r\n", false},
		{"chunked over length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", false},
		{"HTTP/1.0 chunked", "GET", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 8\r\n\r\n1\r\nx\r\n0\r\n", false},
		{"bare LF", "GET", "HTTP/1.1 200 OK\nContent-Length: 2\n\nab", false},
		{"until close", "GET", "HTTP/1.1 200 OK\r\n\r\nall of it", true},
		{"HTTP/1.0 chunked until close", "GET", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", true},
		{"refused: two lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", false},
		{"refused: signed length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc", false},
		{"refused: empty length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", false},
		{"refused: gzip", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc", false},
		{"refused: bad chunk", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", false},
		{"refused: status", "GET", "HTTP/1.1 20 OK\r\nContent-Length: 3\r\n\r\nabc", false},
		{"refused: version", "GET", "HTTP/x 200 OK\r\nContent-Length: 3\r\n\r\nabc", false},
	} {
		want, werr := netHTTPLength(tc.wire, tc.method)
		if tc.untilClose {
			want = len(tc.wire)
		}
		if wantRefused := strings.HasPrefix(tc.name, "refused"); (werr != nil) != wantRefused {
			t.Fatalf("%s: net/http's error is %v", tc.name, werr)
		}
		// All at once, and a byte at a time.
		for _, step := range []int{len(tc.wire + next), 1} {
			f := responseFramer{}
			f.next(tc.method == http.MethodHead)
			b, got, err := []byte(tc.wire+next), 0, error(nil)
			for len(b) > 0 && err == nil && f.state != respDone && f.state != respUntilClose {
				var k int
				k, err = f.feed(b[:min(step, len(b))])
				b, got = b[k:], got+k
			}
			switch {
			case werr != nil:
				if !errors.Is(err, errUnframed) {
					t.Fatalf("%s, %d at a time: net/http refuses it (%v), the framer says %v", tc.name, step, werr, err)
				}
			case err != nil:
				t.Fatalf("%s, %d at a time: %v", tc.name, step, err)
			case tc.untilClose:
				if f.state != respUntilClose {
					t.Fatalf("%s, %d at a time: the framer is in state %d, want it to read to the end", tc.name, step, f.state)
				}
			case got != want || f.state != respDone:
				t.Fatalf("%s, %d at a time: the framer ends the response after %d bytes (state %d), net/http after %d", tc.name, step, got, f.state, want)
			}
		}
	}
}

// TestResponseFramerRefusesWhatItCannotRead: a Content-Length or
// Transfer-Encoding folded onto a second line, or longer than the line
// the framer keeps, is one net/http reads and cordon cannot follow: the
// framer refuses it.
func TestResponseFramerRefusesWhatItCannotRead(t *testing.T) {
	for _, wire := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length:\r\n 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: " + strings.Repeat(" ", maxKeptLine) + "3\r\n\r\nabc",
	} {
		if _, err := netHTTPLength(wire, "GET"); err != nil {
			t.Fatalf("net/http refuses %.60q: %v", wire, err)
		}
		f := responseFramer{}
		f.next(false)
		if _, err := f.feed([]byte(wire)); !errors.Is(err, errUnframed) {
			t.Fatalf("the framer reads %.60q: %v", wire, err)
		}
	}
}

// TestResponseFramerRefusesHugeChunks: a chunk size that, with its
// data's CRLF, is past what a count holds is refused (an upstream's
// response is the box's to pick among the allowed hosts); it wrapped to a
// negative count, and the bytes after it panicked the framer.
func TestResponseFramerRefusesHugeChunks(t *testing.T) {
	for _, size := range []string{"7ffffffffffffffe", "7fffffffffffffff"} {
		f := responseFramer{}
		f.next(false)
		if _, err := f.feed([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + "\r\nab")); !errors.Is(err, errUnframed) {
			t.Fatalf("a chunk of %s bytes: %v, want %v", size, err, errUnframed)
		}
	}
}

// chunkConn returns its chunks, one a read, then EOF.
type chunkConn struct {
	net.Conn
	chunks []string
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks = c.chunks[1:]
	return n, nil
}

// TestResponseConnRefusesUnsolicited: bytes after a response, in the
// read that ends it or in a read of their own, are logged, after that
// response's request, and end the connection: the reader gets the
// response whole and then the connection's end, which net/http does not
// reuse, or an error, which it does not quote. An idle connection's 408
// is its server closing it, not logged.
func TestResponseConnRefusesUnsolicited(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, tc := range []struct {
		name   string
		chunks []string
		reads  []int // what each read returns, up to the failing one
		err    error
		logged bool
	}{
		{"with the response", []string{resp + "HTTP/1.1 200 OK\r\n"}, []int{len(resp)}, io.EOF, true},
		{"later", []string{resp, "HTTP/1.1 200 OK\r\n"}, []int{len(resp), 0}, errUnsolicited, true},
		{"408", []string{resp, "HTTP/1.1 408 Request Timeout\r\n\r\n"}, []int{len(resp), 0}, io.EOF, false},
		{"none", []string{resp}, []int{len(resp), 0}, io.EOF, false},
	} {
		var logged []string
		c := NewResponseConn(&chunkConn{chunks: tc.chunks}, func(method, path string) { logged = append(logged, method+" "+path) })
		req, _ := http.NewRequest("POST", "http://h/a?q", nil)
		c.expect(req)
		var err error
		for i, want := range tc.reads {
			var n int
			n, err = c.Read(make([]byte, 4096))
			if n != want {
				t.Fatalf("%s: read %d returned %d bytes, want %d", tc.name, i, n, want)
			}
		}
		if _, again := c.Read(make([]byte, 1)); err != tc.err || again != tc.err {
			t.Fatalf("%s: the reads end with %v, then %v; want %v", tc.name, err, again, tc.err)
		}
		if want := map[bool][]string{true: {"POST /a"}}[tc.logged]; !slices.Equal(logged, want) {
			t.Fatalf("%s: logged %q, want %q", tc.name, logged, want)
		}
	}
}

// TestResponseConnSeesWaitingBytes: bytes that wait on the socket when a
// read ends a response are refused with it, before the connection can be
// handed to another request that would take them as its response.
func TestResponseConnSeesWaitingBytes(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	io.WriteString(server, resp+"HTTP/1.1 200 OK\r\n")
	var logged []string
	c := NewResponseConn(client, func(method, path string) { logged = append(logged, method+" "+path) })
	defer c.Close()
	req, _ := http.NewRequest("GET", "http://h/a", nil)
	c.expect(req)
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.ReadFull(c, make([]byte, len(resp))); n != len(resp) || err != nil {
		t.Fatalf("the response: %d bytes, %v", n, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the response: %d bytes, %v; want the connection's end", n, err)
	}
	if !slices.Equal(logged, []string{"GET /a"}) {
		t.Fatalf("logged %q, want the bytes after GET /a", logged)
	}
}

// FuzzResponseFramer feeds arbitrary upstream bytes (the upstream is the
// box's to pick among the allowed hosts) in arbitrary chunks: the framer
// must never panic, and must end the response, or refuse it, at the same
// byte however the bytes are split.
func FuzzResponseFramer(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", uint8(3), false)
	f.Add("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", uint8(1), false)
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffe\r\nab", uint8(7), false)
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", uint8(2), true)
	f.Fuzz(func(t *testing.T, wire string, chunk uint8, head bool) {
		whole, wholeErr := frameAll(wire, len(wire)+1, head)
		split, splitErr := frameAll(wire, int(chunk%64)+1, head)
		if whole != split || (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("whole: %d bytes (%v); split: %d bytes (%v)", whole, wholeErr, split, splitErr)
		}
	})
}

// frameAll feeds wire to a fresh framer n bytes at a time and returns how
// many bytes the response took, and the error that refused it.
func frameAll(wire string, n int, head bool) (int, error) {
	f := responseFramer{}
	f.next(head)
	used := 0
	for i := 0; i < len(wire); i += n {
		b := []byte(wire[i:min(i+n, len(wire))])
		k, err := f.feed(b)
		used += k
		if err != nil || k < len(b) {
			return used, err
		}
	}
	return used, nil
}
