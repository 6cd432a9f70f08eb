package tlsterm

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// outgoingRequest reads raw as a client's request and turns it into the
// upstream's, as the HTTP/1.x path does; nil when it would be refused.
func outgoingRequest(t testing.TB, raw string) *http.Request {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil || checkRequestHeader(req) != nil {
		return nil
	}
	h := &conn1{st: &stream{authority: "api.example:8443", s: &Stream{}}}
	x := &exchange{req: req}
	if h.outgoing(x) != nil {
		return nil
	}
	return req
}

// written is what write makes of req.
func written(t testing.TB, req *http.Request, write func(*bufio.Writer, *http.Request) error) (string, error) {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	err := write(w, req)
	w.Flush()
	return b.String(), err
}

func reqWrite(w *bufio.Writer, req *http.Request) error { return req.Write(w) }

// TestWriteBodyless: writeBodyless writes what req.Write writes.
func TestWriteBodyless(t *testing.T) {
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: api.example:8443\r\n\r\n",
		"GET /a/b?x=1&y=%41 HTTP/1.1\r\nHost: api.example:8443\r\nUser-Agent: curl/8.5\r\nAccept: */*\r\n\r\n",
		"HEAD /h HTTP/1.1\r\nHost: api.example:8443\r\nUser-Agent: \r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: api.example:8443\r\nContent-Length: 0\r\n\r\n",
		"PUT /p HTTP/1.1\r\nHost: api.example:8443\r\n\r\n",
		"PATCH /p HTTP/1.1\r\nHost: api.example:8443\r\n\r\n",
		"DELETE /d HTTP/1.1\r\nHost: api.example:8443\r\nX-A: 1\r\nX-A: 2\r\nx-b: three\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: api.example:8443\r\n\r\n",
		"GET /te HTTP/1.1\r\nHost: api.example:8443\r\nTE: trailers\r\nConnection: close\r\n\r\n",
		"GET /ws HTTP/1.1\r\nHost: api.example:8443\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"GET /ua HTTP/1.1\r\nHost: api.example:8443\r\nUser-Agent: one\r\nUser-Agent: two\r\n\r\n",
		"GET http://api.example:8443/abs?q HTTP/1.1\r\nHost: api.example:8443\r\n\r\n",
		"GET /sp%20ace/%2F HTTP/1.0\r\n\r\n",
		"PROPFIND /dav HTTP/1.1\r\nHost: api.example:8443\r\nDepth: 1\r\n\r\n",
	} {
		req := outgoingRequest(t, raw)
		if req == nil {
			t.Fatalf("%q was refused", raw)
		}
		want, werr := written(t, req, reqWrite)
		got, gerr := written(t, req, writeBodyless)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Errorf("%q:\nwriteBodyless %q (%v)\nreq.Write     %q (%v)", raw, got, gerr, want, werr)
		}
	}
}

// FuzzWriteBodyless: for any request the HTTP/1.x path would forward
// without a body, writeBodyless and req.Write agree byte for byte.
func FuzzWriteBodyless(f *testing.F) {
	f.Add("GET", "/a?b=c", "User-Agent: x\r\nAccept: */*\r\n")
	f.Add("POST", "/", "")
	f.Add("DELETE", "/x", "X-Y: \tz \r\nConnection: close, x-y\r\n")
	f.Add("GET", "/", "User-Agent:  \r\n")
	f.Fuzz(func(t *testing.T, method, target, header string) {
		req := outgoingRequest(t, method+" "+target+" HTTP/1.1\r\nHost: api.example:8443\r\n"+header+"\r\n")
		if req == nil || req.Body != nil {
			return
		}
		want, werr := written(t, req, reqWrite)
		got, gerr := written(t, req, writeBodyless)
		if (gerr == nil) != (werr == nil) || (werr == nil && got != want) {
			t.Fatalf("writeBodyless %q (%v)\nreq.Write     %q (%v)", got, gerr, want, werr)
		}
	})
}

// BenchmarkWriteRequest writes the bench's kept-alive GET upstream, with
// req.Write and with writeBodyless.
func BenchmarkWriteRequest(b *testing.B) {
	req := outgoingRequest(b, "GET /small HTTP/1.1\r\nHost: api.example:8443\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
	w := bufio.NewWriter(io.Discard)
	for _, c := range []struct {
		name  string
		write func(*bufio.Writer, *http.Request) error
	}{{"req.Write", reqWrite}, {"writeBodyless", writeBodyless}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.write(w, req)
				w.Flush()
			}
		})
	}
}
