package tlsterm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// feedAll pushes a raw request stream through a guard in chunks of size n.
func feedAll(raw string, n int) *FramingGuard {
	g := &FramingGuard{}
	for i := 0; i < len(raw); i += n {
		j := min(i+n, len(raw))
		g.feed([]byte(raw[i:j]))
	}
	return g
}

func TestFramingGuard(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want []string // one verdict per request; "ok" for sound framing
	}{
		{"get", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok"}},
		{"keep-alive with length body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok", "ok"}},
		{"chunked then get", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok", "ok"}},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []string{"both Content-Length and Transfer-Encoding"}},
		{"TE and CL, other order and case", "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n", []string{"both Content-Length and Transfer-Encoding"}},
		{"conflicting CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", []string{"conflicting Content-Length values"}},
		{"smuggled second request inside a body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\n\r\nGET /admin HTTP/1.1\r\nHost: evil\r\n\r\n\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok", "ok"}},
		{"whitespace before the TE colon", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", []string{"whitespace around the Transfer-Encoding header name"}},
		{"names compare in ASCII only", "POST / HTTP/1.1\r\nHost: a\r\nTran\u017ffer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nhiGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok", "ok"}},
		{"bare LF lines", "GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.1\nHost: a\n\n", []string{"ok", "ok"}},
		// With its CRLF, the size wrapped to a negative count of bytes
		// to skip, and the bytes after it panicked the guard.
		{"chunk size past what a count holds", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok"}},
		{"largest chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffd\r\nabGET /2 HTTP/1.1\r\nHost: a\r\n\r\n", []string{"ok"}},
	} {
		for _, n := range []int{1, 3, 7, 1 << 20} {
			g := feedAll(tc.raw, n)
			var got []string
			for {
				v, ok := g.Next()
				if !ok {
					break
				}
				if v == "" {
					v = "ok"
				}
				got = append(got, v)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%s (chunks of %d): verdicts %q, want %q", tc.name, n, got, tc.want)
			}
		}
	}
}

// FuzzFramingGuard feeds arbitrary request streams in arbitrary chunks: the
// guard must never panic, never give more verdicts than header blocks
// could end, and give the same verdicts however the stream is split.
func FuzzFramingGuard(f *testing.F) {
	f.Add("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", uint8(3))
	f.Add("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", uint8(1))
	f.Add("GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n", uint8(5))
	f.Add("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffe\r\nab", uint8(200))
	f.Fuzz(func(t *testing.T, raw string, chunk uint8) {
		n := int(chunk%64) + 1
		a, b := feedAll(raw, n), feedAll(raw, len(raw)+1)
		if strings.Join(a.verdicts, "|") != strings.Join(b.verdicts, "|") || a.dead != b.dead {
			t.Fatalf("verdicts depend on chunking: %q vs %q", a.verdicts, b.verdicts)
		}
		if len(a.verdicts) > strings.Count(raw, "\n") {
			t.Fatalf("%d verdicts from %d lines", len(a.verdicts), strings.Count(raw, "\n"))
		}
	})
}

// TestFramingGuardKeepsALineStart: the guard holds only the start of the
// line it is reading, never a whole header block, so an unfinished
// header costs cordon one copy of it (the reader's), not two. A line past
// that start is judged by it when the start holds the whole name and the
// name is neither Content-Length nor Transfer-Encoding; otherwise the
// guard stops following the stream, and what comes after gets no verdict
// (it is refused).
func TestFramingGuardKeepsALineStart(t *testing.T) {
	big := strings.Repeat("y", 60<<10)
	head := "POST / HTTP/1.1\r\nHost: a\r\nX-Big: " + big
	g := feedAll(head, 4096)
	if len(g.line) > maxKeptLine || cap(g.line) > 2*maxKeptLine {
		t.Fatalf("an unfinished 60 KiB header line: the guard holds %d bytes (capacity %d), want %d at most",
			len(g.line), cap(g.line), maxKeptLine)
	}
	g = feedAll(head+"\r\nContent-Length: 5\r\n\r\nhelloGET /"+big+" HTTP/1.1\r\nHost: a\r\n\r\n", 4096)
	if strings.Join(g.verdicts, "|") != "|" || g.dead {
		t.Fatalf("requests with long lines: verdicts %q (dead %v), want two sound ones", g.verdicts, g.dead)
	}
	for _, line := range []string{
		"Content-Length: " + strings.Repeat("0", maxKeptLine) + "5",
		"Transfer-Encoding: " + strings.Repeat(" ", maxKeptLine) + "chunked",
		strings.Repeat(" ", maxKeptLine) + "Transfer-Encoding: chunked",
	} {
		g := feedAll("POST / HTTP/1.1\r\nHost: a\r\n"+line+"\r\n\r\n", 4096)
		if len(g.verdicts) != 0 || !g.dead {
			t.Errorf("a framing header longer than the guard keeps (%.40q…): verdicts %q (dead %v), want none", line, g.verdicts, g.dead)
		}
	}
}

// readConn is a net.Conn whose reads come from r, n bytes at most at a
// time.
type readConn struct {
	net.Conn
	r io.Reader
	n int
}

func (c *readConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// lineCounter counts the line ends read through it.
type lineCounter struct {
	r     io.Reader
	lines int
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.lines += bytes.Count(p[:n], []byte("\n"))
	return n, err
}

// TestFramingGuardBoundsHeaderFields: a header block of more than
// MaxHeaderFields lines is cut off at the guard, which hands the parser
// above at most that many field lines of it (each cost net/http a map
// entry of a couple of hundred bytes: a 64 KiB header of short fields
// cost cordon some 1 MiB), then fails every read with ErrHeaderFields;
// also after a line the guard cannot judge. A block of MaxHeaderFields
// fields is read whole.
func TestFramingGuardBoundsHeaderFields(t *testing.T) {
	fields := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "a%d:\r\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, head string
		n          int
		refused    bool
	}{
		{"at the bound", "GET / HTTP/1.1\r\n", MaxHeaderFields, false},
		{"past the bound", "GET / HTTP/1.1\r\n", 10 * MaxHeaderFields, true},
		{"past the bound after a line the guard cannot judge", "GET / HTTP/1.1\r\nContent-Length: " + strings.Repeat("0", maxKeptLine) + "5\r\n", 10 * MaxHeaderFields, true},
	} {
		for _, chunk := range []int{7, 4096} {
			raw := tc.head + fields(tc.n) + "\r\n"
			g := NewFramingGuard(&readConn{r: strings.NewReader(raw), n: chunk})
			up := &lineCounter{r: g}
			req, err := http.ReadRequest(bufio.NewReader(up))
			if !tc.refused {
				if err != nil || len(req.Header) != tc.n-strings.Count(tc.head, "\n")+1 {
					t.Errorf("%s (chunks of %d): %v, %d fields read", tc.name, chunk, err, len(req.Header))
				}
				continue
			}
			if !errors.Is(err, ErrHeaderFields) {
				t.Errorf("%s (chunks of %d): the parser got %v, want ErrHeaderFields", tc.name, chunk, err)
			}
			if up.lines > MaxHeaderFields+1 {
				t.Errorf("%s (chunks of %d): the parser was handed %d lines, want the request line and %d fields at most", tc.name, chunk, up.lines, MaxHeaderFields)
			}
			if _, err := g.Read(make([]byte, 10)); !errors.Is(err, ErrHeaderFields) {
				t.Errorf("%s (chunks of %d): a read after the refusal got %v, want ErrHeaderFields", tc.name, chunk, err)
			}
		}
	}
}
