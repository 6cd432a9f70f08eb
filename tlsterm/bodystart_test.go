package tlsterm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

func TestRequestLike(t *testing.T) {
	for _, c := range []struct {
		body          string
		ended         bool
		like, decided bool
	}{
		{"POST /collect HTTP/1.1\r\n", false, true, true},
		{"\r\n\r\nGET / HTTP/1.1\r\n", false, true, true},
		{" \tPUT x", false, true, true},
		{"M-SEARCH * HTTP/1.1", false, true, true},
		{"POST", false, false, false}, // more may come
		{"POST", true, true, true},    // cut off by the body's end: the next request completes it
		{`{"model":"x"}`, false, false, true},
		{"a=b&c=d", false, false, true}, // a form: '=' is no token character
		{"", true, false, true},
		{"\r\n", true, false, true},
		{"hello world", false, true, true}, // plain text counts: a cost of one reconnect
		{strings.Repeat("A", requestLikeLen), false, true, true},
		{"<xml/>", false, false, true},
	} {
		like, decided := requestLike([]byte(c.body), c.ended)
		if like != c.like || decided != c.decided {
			t.Errorf("requestLike(%q, ended %v) = %v, %v; want %v, %v", c.body, c.ended, like, decided, c.like, c.decided)
		}
	}
}

// TestStartWatchSkipsBlankLines: blank lines before a hidden request,
// more of them than the bytes looked at, do not hide it (a server that
// skips blank lines reads on to it); a JSON body read a byte at a time is
// still none.
func TestStartWatchSkipsBlankLines(t *testing.T) {
	for body, want := range map[string]bool{
		strings.Repeat("\r\n", 3*requestLikeLen) + "POST /collect HTTP/1.1\r\n": true,
		strings.Repeat(" ", 5*requestLikeLen):                                   false,
		`{"model":"x","input":"POST /collect HTTP/1.1"}`:                        false,
	} {
		w := &startWatch{ReadCloser: io.NopCloser(strings.NewReader(body))}
		buf := make([]byte, 1)
		for {
			if _, err := w.Read(buf); err != nil {
				break
			}
		}
		if got := w.startsLikeRequest(); got != want {
			t.Errorf("body %.40q…: starts like a request = %v, want %v", body, got, want)
		}
	}
}

// collectingOrigin answers a request without reading its body, as
// Python's http.server does, but for /collect, whose body it reads
// (Content-Length) and keeps, as a paste service does: a body it ignored
// that starts as POST /collect with a length then swallows the next
// request on the connection. conns counts its connections.
func collectingOrigin(collected chan<- string, conns *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		conns.Add(1)
		for {
			if r.URL.Path == "/collect" {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					return
				}
				collected <- string(b)
			}
			body := "you asked " + r.Method + " " + r.URL.Path
			fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			if brw.Flush() != nil {
				return
			}
			if r, err = http.ReadRequest(brw.Reader); err != nil {
				return
			}
		}
	})
}

// TestBodyLikeRequestEndsUpstream: a POST whose body is the start of a
// request (POST /collect with a length), to a server that answers it
// without reading the body, left the server waiting for that request's
// body, and cordon sent the client's next request on the same
// connection: the server stored it whole (its headers, and the
// credentials cordon injects into them) as /collect's body, where the box
// could fetch it, and answered the next request with /collect's
// response. The connection must not carry another request after such a
// body; one after a JSON body (which the server reads) still does. HTTP/1.1 clients (cordon's own
// upstream leg) and HTTP/2 clients (net/http's Transport to an HTTP/1.1
// upstream) alike. POST /a's close line says its connection was retired.
func TestBodyLikeRequestEndsUpstream(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		collected := make(chan string, 10)
		var conns atomic.Int32
		r := newRig(t, collectingOrigin(collected, &conns), rigOptions{h1Only: true})
		c := r.client(r.ClientRoots, h2)
		do := func(method, path, body string) string {
			t.Helper()
			req, _ := http.NewRequest(method, r.url(path), strings.NewReader(body))
			if body == "" {
				req.Body = nil
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v, %s %s: %v", h2, method, path, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(got)
		}
		next := "GET /secret HTTP/1.1\r\nHost: " + r.authority() + "\r\nAuthorization: Bearer real\r\n\r\n"
		prefix := fmt.Sprintf("POST /collect HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", r.authority(), len(next))
		if got := do("POST", "/a", prefix); got != "you asked POST /a" {
			t.Fatalf("h2 %v, POST /a: %q", h2, got)
		}
		if got := do("GET", "/secret", ""); got != "you asked GET /secret" {
			t.Errorf("h2 %v: GET /secret went on the connection the server read the POST's body on, and got %q", h2, got)
		}
		select {
		case b := <-collected:
			t.Errorf("h2 %v: the server stored the next request as /collect's body: %q", h2, b)
		case <-time.After(200 * time.Millisecond):
		}
		closes := r.waitRecords(t, audit.TypeClose, 2)
		if closes[0].Path != "/a" || closes[0].Detail != BodyLikeRequestDetail || closes[1].Detail != "" {
			t.Errorf("h2 %v: the close lines do not say POST /a's connection was retired, and only that: %+v", h2, closes)
		}
		before := conns.Load()
		if got := do("POST", "/collect", `{"model":"x"}`); got != "you asked POST /collect" || <-collected != `{"model":"x"}` {
			t.Fatalf("h2 %v, POST /collect: %q", h2, got)
		}
		if got := do("GET", "/after", ""); got != "you asked GET /after" {
			t.Fatalf("h2 %v, GET /after: %q", h2, got)
		}
		if n := conns.Load(); n != before {
			t.Errorf("h2 %v: a JSON body cost a new upstream connection (%d, then %d)", h2, before, n)
		}
	}
}
