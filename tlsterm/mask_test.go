package tlsterm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/echotest"
	"github.com/cordon-sandbox/cordon/policy"
)

// maskSecret is the real value of the tests' credential.
const maskSecret = "s3cr3t-value-for-the-mask-tests"

// maskCase is one response echoing the secret, as the sandbox's client
// should see it: check returns the HTTP version spoken and what went
// wrong, or "".
type maskCase struct {
	name, path string
	check      func(c *http.Client, url, placeholder string, next chan<- struct{}) (int, string)
}

// maskCases are the echoing responses of echotest.Origin.
func maskCases() []maskCase {
	return []maskCase{
		{"103 early hints", "/hints", func(c *http.Client, url, ph string, _ chan<- struct{}) (int, string) {
			var hints []http.Header
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					hints = append(hints, http.Header(h).Clone())
					return nil
				}})
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := c.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(hints) != 1 || hints[0].Get("Link") != "</app.css?k=Bearer "+ph+">; rel=preload" || string(b) != "final" {
				return resp.ProtoMajor, fmt.Sprintf("1xx headers %v, body %q", hints, b)
			}
			return resp.ProtoMajor, ""
		}},
		{"trailers", "/trailer", func(c *http.Client, url, ph string, _ chan<- struct{}) (int, string) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, err.Error()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.Trailer.Get("X-Echo") != "Bearer "+ph || resp.Trailer.Get("X-Late") != "Bearer "+ph || string(b) != "body" {
				return resp.ProtoMajor, fmt.Sprintf("trailers %v, body %q", resp.Trailer, b)
			}
			return resp.ProtoMajor, ""
		}},
		{"in header names", "/name", func(c *http.Client, url, ph string, _ chan<- struct{}) (int, string) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, err.Error()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The origin's library re-cased the names (HTTP/2 lowercases
			// them): the secret is found in any case.
			if resp.Header.Get("X-Key-"+ph) != "1" || resp.Trailer.Get("X-Trailer-"+ph) != "2" ||
				resp.Trailer.Get("X-Late-"+ph) != "3" || string(b) != "body" {
				return resp.ProtoMajor, fmt.Sprintf("header %v, trailers %v, body %q", resp.Header, resp.Trailer, b)
			}
			return resp.ProtoMajor, ""
		}},
		{"gzip unasked", "/gzip", func(c *http.Client, url, ph string, next chan<- struct{}) (int, string) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			if enc := resp.Header.Get("Content-Encoding"); enc != "" {
				return resp.ProtoMajor, "Content-Encoding " + enc + " passed on"
			}
			// Decoded as it streams: the first line comes before the
			// origin writes the second.
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); line != "first Bearer "+ph+"\n" {
				return resp.ProtoMajor, fmt.Sprintf("first line %q %v", line, err)
			}
			next <- struct{}{}
			if rest, err := io.ReadAll(br); string(rest) != "second Bearer "+ph+"\n" || err != nil {
				return resp.ProtoMajor, fmt.Sprintf("second line %q %v", rest, err)
			}
			return resp.ProtoMajor, ""
		}},
		{"a pause in the secret", "/pause", func(c *http.Client, url, ph string, next chan<- struct{}) (int, string) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			// What precedes the secret comes during the pause; the secret
			// waits for the rest, and comes as the placeholder.
			first := make([]byte, len("key Bearer "))
			if _, err := io.ReadFull(resp.Body, first); string(first) != "key Bearer " {
				return resp.ProtoMajor, fmt.Sprintf("during the pause %q %v", first, err)
			}
			next <- struct{}{}
			if rest, err := io.ReadAll(resp.Body); string(rest) != ph+"\n" || err != nil {
				return resp.ProtoMajor, fmt.Sprintf("after the pause %q %v", rest, err)
			}
			return resp.ProtoMajor, ""
		}},
		{"br unasked", "/br", func(c *http.Client, url, ph string, _ chan<- struct{}) (int, string) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, err.Error()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Cordon-Reason") != string(ReasonUncheckedEncoding) ||
				!strings.Contains(string(b), `Content-Encoding "br"`) || strings.Contains(string(b), maskSecret) {
				return resp.ProtoMajor, fmt.Sprintf("%d %v %q", resp.StatusCode, resp.Header, b)
			}
			return resp.ProtoMajor, ""
		}},
	}
}

// TestMaskedResponses: a response echoing the injected secret reaches the
// client with the placeholder instead, on both terminated paths, in the
// 1xx headers and trailers httputil.ReverseProxy relays itself (HTTP/2;
// HTTP/1.1 relays them itself and is here as the reference), in a body
// the origin gzipped unasked, decoded as it streams, and in a body that
// pauses in the middle of the secret (before, the part held back went
// out at the pause and the rest after it: the key whole); a body in a
// coding cordon cannot decode (br) is refused, 502 unchecked_encoding,
// and so logged.
func TestMaskedResponses(t *testing.T) {
	creds, ph := echotest.Creds(t, maskSecret)
	for _, path := range []struct {
		name       string
		h2, h1Only bool // the client's protocol, the origin's
	}{
		{"HTTP/1.1", false, false},
		{"HTTP/2", true, false},
		{"HTTP/2 to an HTTP/1.1 origin", true, true},
	} {
		for _, tc := range maskCases() {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				next := make(chan struct{}, 1)
				r := newRig(t, echotest.Origin(next), rigOptions{creds: creds, h1Only: path.h1Only})
				proto, msg := tc.check(r.client(r.ClientRoots, path.h2), r.url(tc.path), ph, next)
				if msg != "" {
					t.Fatal(msg)
				}
				if want := map[bool]int{false: 1, true: 2}[path.h2]; proto != want {
					t.Fatalf("spoke HTTP/%d, want HTTP/%d", proto, want)
				}
				rec := r.waitRecords(t, audit.TypeClose, 1)[0]
				if tc.path == "/br" && (rec.Reason != string(ReasonUncheckedEncoding) || rec.Status != http.StatusBadGateway ||
					!strings.Contains(rec.Detail, `Content-Encoding "br"`)) {
					t.Fatalf("close line %+v, want 502 %s", rec, ReasonUncheckedEncoding)
				}
				if tc.path != "/br" && rec.Reason != "" {
					t.Fatalf("close line %+v", rec)
				}
			})
		}
	}
}

// TestMaskResponseEncodings: which content codings MaskResponse decodes,
// passes or refuses, and that it touches nothing without credentials.
func TestMaskResponseEncodings(t *testing.T) {
	creds, ph := echotest.Creds(t, maskSecret)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "key "+maskSecret)
	zw.Close()
	for _, tc := range []struct {
		name     string
		encoding []string
		body     string
		creds    *credinject.Set
		want     string // the body read, or "refused"
		wantEnc  string
	}{
		{"none", nil, "key " + maskSecret, creds, "key " + ph, ""},
		{"identity", []string{"identity"}, "key " + maskSecret, creds, "key " + ph, "identity"},
		{"gzip", []string{"gzip"}, gz.String(), creds, "key " + ph, ""},
		{"x-gzip, any case and space", []string{" X-GZip "}, gz.String(), creds, "key " + ph, ""},
		{"gzip after identity", []string{"identity", "gzip"}, gz.String(), creds, "key " + ph, ""},
		{"empty gzip", []string{"gzip"}, "", creds, "", ""},
		{"br", []string{"br"}, "x", creds, "refused", ""},
		{"zstd", []string{"zstd"}, "x", creds, "refused", ""},
		{"deflate", []string{"deflate"}, "x", creds, "refused", ""},
		{"compress", []string{"compress"}, "x", creds, "refused", ""},
		{"stacked gzip", []string{"gzip, gzip"}, "x", creds, "refused", ""},
		{"stacked in two lines", []string{"gzip", "br"}, "x", creds, "refused", ""},
		{"unknown", []string{"s3cr3t"}, "x", creds, "refused", ""},
		{"no credentials: left alone", []string{"br"}, "x", nil, "x", "br"},
	} {
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Length": {"99"}}, ContentLength: 99,
			Body: io.NopCloser(strings.NewReader(tc.body))}
		if tc.encoding != nil {
			resp.Header["Content-Encoding"] = tc.encoding
		}
		err := MaskResponse(tc.creds, resp)
		d, refused := UncheckedEncoding(err)
		if tc.want == "refused" {
			if !refused || d.Reason != ReasonUncheckedEncoding || strings.Contains(d.Detail, "s3cr3t") {
				t.Errorf("%s: %v, %+v; want an unchecked_encoding refusal naming no header value it does not know", tc.name, err, d)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		if string(b) != tc.want || err != nil || resp.Header.Get("Content-Encoding") != tc.wantEnc {
			t.Errorf("%s: read %q %v, Content-Encoding %q; want %q, %q", tc.name, b, err, resp.Header.Get("Content-Encoding"), tc.want, tc.wantEnc)
		}
		if tc.creds != nil && (resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "") {
			t.Errorf("%s: length %d %q kept", tc.name, resp.ContentLength, resp.Header.Get("Content-Length"))
		}
	}
}

// TestMaskedBodyAbandonedEnds: an HTTP/1.1 client that leaves in the
// middle of a masked, endless response leaves nothing of cordon's running
// for it: the masking reader's read-ahead ends with the exchange.
func TestMaskedBodyAbandonedEnds(t *testing.T) {
	creds, _ := echotest.Creds(t, maskSecret)
	origin := http.NewServeMux()
	origin.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 16<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	r := newRig(t, origin, rigOptions{creds: creds})
	leave := func() {
		c, br := r.dial(t, false)
		fmt.Fprintf(c, "GET /endless HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(resp.Body, make([]byte, 64<<10))
		c.Close()
	}
	leave() // the rig's own goroutines start
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 20 {
		leave()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Fatalf("%d goroutines after 20 clients left mid-body, %d before", n, before)
	}
}

// TestWebSocketUncompressed: a WebSocket client's permessage-deflate
// offer does not reach the upstream, so a message echoing the injected
// secret comes back uncompressed, where it is masked; an upstream that
// compresses its messages anyway (its 101 names an extension) is refused,
// 502 unchecked_encoding, and so logged. Before, the offer went up and a
// compressed message carried the real secret to the client.
func TestWebSocketUncompressed(t *testing.T) {
	// As long as its placeholder, so that masking keeps the frame's length.
	const secret = "s3cr3t-value-for-the-websocket-tests-0123"
	creds, ph := echotest.Creds(t, secret)
	r := newRig(t, echotest.Origin(nil), rigOptions{creds: creds})
	c, br := r.dial(t, false)
	io.WriteString(c, echotest.WebSocketRequest("/websocket", r.authority(), "Authorization: Bearer "+ph))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Extensions") != "" {
		t.Fatalf("handshake: %v %v; want 101 with no extension", resp, err)
	}
	if text, _, err := echotest.ReadWebSocketMessage(br); text != "key Bearer "+ph || err != nil {
		t.Fatalf("message %q, %v; want the placeholder", text, err)
	}
	c.Close()

	c, br = r.dial(t, false)
	io.WriteString(c, echotest.WebSocketRequest("/websocket?unasked", r.authority(), "Authorization: Bearer "+ph))
	resp, body := readResp(t, br, "GET")
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Cordon-Reason") != string(ReasonUncheckedEncoding) ||
		!strings.Contains(body, "permessage-deflate") || strings.Contains(body, secret) {
		t.Fatalf("an extension the client was not let offer: %d %v %q; want 502 %s", resp.StatusCode, resp.Header, body, ReasonUncheckedEncoding)
	}
	refused := false
	for _, rec := range r.waitRecords(t, audit.TypeClose, 2) {
		refused = refused || rec.Path == "/websocket" && rec.Status == http.StatusBadGateway && rec.Reason == string(ReasonUncheckedEncoding)
	}
	if !refused {
		t.Fatal("no close line says the compressed WebSocket was refused")
	}
}

func TestCloseDecision(t *testing.T) {
	for reason, want := range map[policy.Reason]string{
		credinject.ReasonSecretLeak: audit.Deny,
		credinject.ReasonMisroute:   audit.Deny,
		credinject.ReasonPlaintext:  audit.Deny,
		credinject.ReasonBasicUser:  audit.Deny,
		credinject.ReasonPlacement:  audit.Deny,
		ReasonUncheckedEncoding:     audit.Deny,
		ReasonUpstreamError:         "",
		ReasonUpstreamTLS:           "",
		ReasonClientGone:            "",
		"":                          "",
	} {
		if got := CloseDecision(reason); got != want {
			t.Errorf("CloseDecision(%q) = %q, want %q", reason, got, want)
		}
	}
}
