package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/echotest"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

const plainSecret = "s3cr3t-value-for-the-plain-tests"

// plainMaskRig is the proxy, holding one credential (allow_plaintext) for
// a plain-HTTP origin on 127.0.0.1 that echoes the injected header back.
type plainMaskRig struct {
	origin      *httptest.Server
	proxy       string // host:port
	token       string
	auth        string // the Proxy-Authorization value
	placeholder string
	logPath     string
	next        chan struct{}
}

func newPlainMaskRig(t *testing.T) *plainMaskRig {
	r := &plainMaskRig{next: make(chan struct{}, 1), logPath: filepath.Join(t.TempDir(), "audit.jsonl")}
	creds, placeholder := echotest.Creds(t, plainSecret)
	r.placeholder = placeholder
	mux := echotest.Origin(r.next)
	mux.HandleFunc("/ws", func(w http.ResponseWriter, req *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		auth := req.Header.Get("Authorization")
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\nX-Echo: %s\r\n\r\nnew protocol says %s\n", auth, auth)
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo: "+line)
	})
	r.origin = httptest.NewServer(mux)
	t.Cleanup(r.origin.Close)

	rules, err := policy.Compile([]string{r.origin.Listener.Addr().String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := audit.Open(r.logPath, "test")
	if err != nil {
		t.Fatal(err)
	}
	r.token = NewToken()
	r.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+r.token))
	s, err := New(Config{Rules: rules, Dialer: &Dialer{Rules: rules}, Audit: aw, Token: r.token, Creds: creds})
	if err != nil {
		t.Fatal(err)
	}
	r.proxy = serveOnLoopback(t, s, aw)
	return r
}

// client sends its requests through the proxy.
func (r *plainMaskRig) client() *http.Client {
	tr := &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("cordon", r.token), Host: r.proxy}),
		DisableCompression: true,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// closeLines reads the close lines logged so far, waiting (5 s at most)
// until there are n.
func (r *plainMaskRig) closeLines(t *testing.T, n int) []audit.Record {
	t.Helper()
	return closeLines(t, r.logPath, n)
}

// closeLines reads the close lines logged in logPath so far, waiting (5 s
// at most) until there are n.
func closeLines(t *testing.T, logPath string, n int) []audit.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []audit.Record
		f, err := os.Open(logPath)
		if err != nil {
			t.Fatal(err)
		}
		ar := audit.NewReader(f, nil)
		for ar.Next() {
			if ar.Record().Type == audit.TypeClose {
				got = append(got, ar.Record())
			}
		}
		f.Close()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%d close lines, want %d: %+v", len(got), n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPlainMaskedResponses: on the plain-HTTP path, a response echoing the
// injected secret reaches the client with the placeholder instead: in a
// 103's header and in trailers (which httputil.ReverseProxy relays itself),
// in a 101's header and in what the switched connection brings back
// (while what the client sends still reaches the origin), in a body the
// origin gzipped unasked, decoded as it streams, and in a body that
// pauses in the middle of the secret. A br body, which
// cannot be checked, is refused 502 unchecked_encoding and so logged.
func TestPlainMaskedResponses(t *testing.T) {
	get := func(t *testing.T, r *plainMaskRig, path string, trace *httptrace.ClientTrace) *http.Response {
		t.Helper()
		ctx := context.Background()
		if trace != nil {
			ctx = httptrace.WithClientTrace(ctx, trace)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", r.origin.URL+path, nil)
		resp, err := r.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// websocket sends a WebSocket handshake offering permessage-deflate,
	// for target, to the proxy, and returns the connection and its reader.
	websocket := func(t *testing.T, r *plainMaskRig, target string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", r.proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, echotest.WebSocketRequest(r.origin.URL+target, strings.TrimPrefix(r.origin.URL, "http://"),
			"Proxy-Authorization: "+r.auth, "Authorization: Bearer "+r.placeholder))
		return c, bufio.NewReader(c)
	}
	for _, tc := range []struct {
		name   string
		reason policy.Reason // of the close line
		detail string        // in the close line's detail
		check  func(t *testing.T, r *plainMaskRig)
	}{
		{"103 early hints", "", "", func(t *testing.T, r *plainMaskRig) {
			var hints []http.Header
			resp := get(t, r, "/hints", &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
				hints = append(hints, http.Header(h).Clone())
				return nil
			}})
			b, _ := io.ReadAll(resp.Body)
			if len(hints) != 1 || hints[0].Get("Link") != "</app.css?k=Bearer "+r.placeholder+">; rel=preload" || string(b) != "final" {
				t.Fatalf("1xx headers %v, body %q", hints, b)
			}
		}},
		{"trailers", "", "", func(t *testing.T, r *plainMaskRig) {
			resp := get(t, r, "/trailer", nil)
			b, _ := io.ReadAll(resp.Body)
			if want := "Bearer " + r.placeholder; resp.Trailer.Get("X-Echo") != want || resp.Trailer.Get("X-Late") != want || string(b) != "body" {
				t.Fatalf("trailers %v, body %q", resp.Trailer, b)
			}
		}},
		{"in header names", "", "", func(t *testing.T, r *plainMaskRig) {
			resp := get(t, r, "/name", nil)
			b, _ := io.ReadAll(resp.Body)
			if resp.Header.Get("X-Key-"+r.placeholder) != "1" || resp.Trailer.Get("X-Trailer-"+r.placeholder) != "2" ||
				resp.Trailer.Get("X-Late-"+r.placeholder) != "3" || string(b) != "body" {
				t.Fatalf("header %v, trailers %v, body %q", resp.Header, resp.Trailer, b)
			}
		}},
		{"gzip unasked", "", "", func(t *testing.T, r *plainMaskRig) {
			resp := get(t, r, "/gzip", nil)
			if enc := resp.Header.Get("Content-Encoding"); enc != "" {
				t.Fatalf("Content-Encoding %s passed on", enc)
			}
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); line != "first Bearer "+r.placeholder+"\n" {
				t.Fatalf("first line %q %v", line, err)
			}
			r.next <- struct{}{} // the second line comes only now
			if rest, err := io.ReadAll(br); string(rest) != "second Bearer "+r.placeholder+"\n" || err != nil {
				t.Fatalf("second line %q %v", rest, err)
			}
		}},
		{"a pause in the secret", "", "", func(t *testing.T, r *plainMaskRig) {
			resp := get(t, r, "/pause", nil)
			first := make([]byte, len("key Bearer "))
			if _, err := io.ReadFull(resp.Body, first); string(first) != "key Bearer " {
				t.Fatalf("during the pause %q %v", first, err)
			}
			r.next <- struct{}{} // the rest comes only now
			if rest, err := io.ReadAll(resp.Body); string(rest) != r.placeholder+"\n" || err != nil {
				t.Fatalf("after the pause %q %v; want the placeholder", rest, err)
			}
		}},
		{"br unasked", tlsterm.ReasonUncheckedEncoding, `Content-Encoding "br"`, func(t *testing.T, r *plainMaskRig) {
			resp := get(t, r, "/br", nil)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Cordon-Reason") != string(tlsterm.ReasonUncheckedEncoding) ||
				!strings.Contains(string(b), `Content-Encoding "br"`) || strings.Contains(string(b), plainSecret) {
				t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, b)
			}
		}},
		{"101 and the switched connection", "", "", func(t *testing.T, r *plainMaskRig) {
			c, err := net.Dial("tcp", r.proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			u := r.origin.URL + "/ws"
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n",
				u, strings.TrimPrefix(r.origin.URL, "http://"), r.auth)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 101 || resp.Header.Get("X-Echo") != "Bearer "+r.placeholder ||
				resp.Header.Get("Upgrade") != "x" || !strings.EqualFold(resp.Header.Get("Connection"), "upgrade") {
				t.Fatalf("switch: %d %v", resp.StatusCode, resp.Header)
			}
			if line, err := br.ReadString('\n'); line != "new protocol says Bearer "+r.placeholder+"\n" {
				t.Fatalf("switched connection not masked: %q %v", line, err)
			}
			io.WriteString(c, "hello\n")
			if line, err := br.ReadString('\n'); line != "echo: hello\n" {
				t.Fatalf("the client's side of the switched connection: %q %v", line, err)
			}
		}},
		{"WebSocket: no compression offered", "", "", func(t *testing.T, r *plainMaskRig) {
			_, br := websocket(t, r, "/websocket")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Extensions") != "" {
				t.Fatalf("handshake: %v %v; want 101 with no extension", resp, err)
			}
			// The frame's length says the secret's; the bytes are the
			// placeholder's.
			if rest, err := io.ReadAll(br); !strings.Contains(string(rest), "key Bearer "+r.placeholder) || err != nil {
				t.Fatalf("message %q, %v; want the placeholder, uncompressed", rest, err)
			}
		}},
		{"WebSocket compressed unasked", tlsterm.ReasonUncheckedEncoding, `Sec-WebSocket-Extensions "permessage-deflate"`, func(t *testing.T, r *plainMaskRig) {
			_, br := websocket(t, r, "/websocket?unasked")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Cordon-Reason") != string(tlsterm.ReasonUncheckedEncoding) ||
				strings.Contains(string(b), plainSecret) {
				t.Fatalf("%d %v %q; want 502 %s", resp.StatusCode, resp.Header, b, tlsterm.ReasonUncheckedEncoding)
			}
		}},
		{"WebSocket: a secret split between frames", "", "", func(t *testing.T, r *plainMaskRig) {
			_, br := websocket(t, r, "/websocket?fragmented")
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("handshake: %v %v", resp, err)
			}
			msg, control, err := echotest.ReadWebSocketMessage(br)
			if msg != "key Bearer "+r.placeholder || len(control) != 1 || control[0] != "Bearer "+r.placeholder || err != nil {
				t.Fatalf("message %q, control frames %q, %v; want the placeholder", msg, control, err)
			}
			io.ReadAll(br) // to the end, for the close line
		}},
		{"WebSocket: a frame compressed unnegotiated", tlsterm.ReasonUncheckedEncoding, "reserved bit", func(t *testing.T, r *plainMaskRig) {
			_, br := websocket(t, r, "/websocket?compressed")
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("handshake: %v %v", resp, err)
			}
			if rest, _ := io.ReadAll(br); len(rest) > 0 {
				t.Fatalf("after a compressed frame: %q; want the connection cut", rest)
			}
		}},
		{"WebSocket: a secret in a masked frame", credinject.ReasonSecretLeak, "", func(t *testing.T, r *plainMaskRig) {
			c, br := websocket(t, r, "/websocket?listen")
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("handshake: %v %v", resp, err)
			}
			if _, _, err := echotest.ReadWebSocketMessage(br); err != nil {
				t.Fatal(err)
			}
			c.Write(echotest.WebSocketClientFrame(0x81, []byte("leak "+plainSecret), [4]byte{9, 8, 7, 6}))
			io.ReadAll(br) // cut
		}},
		{"a secret sent on the switched connection", credinject.ReasonSecretLeak, "", func(t *testing.T, r *plainMaskRig) {
			c, err := net.Dial("tcp", r.proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n",
				r.origin.URL+"/ws", strings.TrimPrefix(r.origin.URL, "http://"), r.auth)
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 101 {
				t.Fatalf("switch: %v %v", resp, err)
			}
			br.ReadString('\n')
			io.WriteString(c, "leak "+plainSecret+"\n")
			if rest, _ := io.ReadAll(br); strings.Contains(string(rest), "echo") {
				t.Fatalf("the secret went up: %q", rest)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPlainMaskRig(t)
			tc.check(t, r)
			rec := r.closeLines(t, 1)[0]
			if rec.Reason != string(tc.reason) {
				t.Fatalf("close line %+v, want reason %q", rec, tc.reason)
			}
			if !strings.Contains(rec.Detail, tc.detail) {
				t.Fatalf("close line %+v says not why", rec)
			}
		})
	}
}

// TestPlainCloseLineNamesTheRequest: a plain-HTTP request's close line
// says what was asked and what the client got, as a terminated one's
// does: method, path without the query, status; a request refused 502
// for a body cordon cannot check says 502.
func TestPlainCloseLineNamesTheRequest(t *testing.T) {
	r := newPlainMaskRig(t)
	c := r.client()
	for _, p := range []string{"/hints?token=x", "/br"} {
		resp, err := c.Get(r.origin.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	got := r.closeLines(t, 2)
	want := []struct {
		path   string
		status int
	}{{"/hints", http.StatusOK}, {"/br", http.StatusBadGateway}}
	for i, w := range want {
		if g := got[i]; g.Method != http.MethodGet || g.Path != w.path || g.Status != w.status {
			t.Errorf("close line %d: method %q path %q status %d; want GET %s %d", i, g.Method, g.Path, g.Status, w.path, w.status)
		}
	}
}
