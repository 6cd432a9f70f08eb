package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// TestHugeRequestsLogBounded: whatever a client sends, the lines the proxy
// logs stay short (each field at most audit.MaxFieldBytes, escaped) and
// readable: an unauthenticated CONNECT to a 40 KB target, and an allowed
// request with a 48 KB path of "<", escaped as \u003c (before headers were
// bounded at tlsterm.MaxHeaderBytes, a 900 KB target took as much of the
// session's audit budget, and such a path made a line past
// audit.MaxLineBytes that `cordon audit` skipped).
func TestHugeRequestsLogBounded(t *testing.T) {
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(far.Close)
	target := far.Listener.Addr().String()
	for _, tt := range []struct {
		name     string
		request  func(auth string) string
		status   int
		decision string
		// clipped is the field the request's decision line clips.
		clipped func(audit.Record) string
	}{
		{"unauthenticated CONNECT", func(string) string {
			return "CONNECT " + strings.Repeat("<a", 20<<10) + ":443 HTTP/1.1\r\n\r\n"
		}, http.StatusProxyAuthRequired, audit.Deny, func(r audit.Record) string { return r.Host }},
		{"allowed request with a huge path", func(auth string) string {
			return fmt.Sprintf("GET http://%s/%s?k=v HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
				target, strings.Repeat("%3C", 16<<10), target, auth)
		}, http.StatusOK, audit.Allow, func(r audit.Record) string { return r.Path }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			proxy, auth, logPath := startProxy(t, target, 0)
			resp, err := sendRaw(t, proxy, tt.request(auth))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tt.status)
			}
			// The decision line is written before the answer.
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(data), "\n") {
				if len(line) > 8*audit.MaxFieldBytes {
					t.Errorf("line %d is %d bytes, want at most %d", i+1, len(line), 8*audit.MaxFieldBytes)
				}
			}
			rd := audit.NewReader(strings.NewReader(string(data)), func(line int, err error) {
				t.Errorf("cordon audit skips line %d: %v", line, err)
			})
			found := false
			for rd.Next() {
				r := rd.Record()
				found = found || r.Type == audit.TypeDecision && r.Decision == tt.decision && strings.Contains(tt.clipped(r), "…[clipped from ")
			}
			if !found {
				t.Errorf("no %s decision with a clipped field in the log", tt.decision)
			}
		})
	}
}

// TestHeaderBounded: a request header past tlsterm.MaxHeaderBytes is
// refused (431) and logged, not held: each one held cost cordon several
// times its size, outside the box's limits.
func TestHeaderBounded(t *testing.T) {
	proxy, auth, logPath := startProxy(t, "allowed.test", 0)
	resp, err := sendRaw(t, proxy, fmt.Sprintf("CONNECT allowed.test:443 HTTP/1.1\r\nProxy-Authorization: Basic %s\r\nX-Big: %s\r\n\r\n",
		auth, strings.Repeat("y", 2*tlsterm.MaxHeaderBytes)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("answered %d, want 431", resp.StatusCode)
	}
	data, _ := os.ReadFile(logPath)
	if !strings.Contains(string(data), `"reason":"bad_request"`) {
		t.Fatalf("the refusal is not in the log:\n%s", data)
	}
}

// TestHeaderFieldsBounded: a request header of more than
// tlsterm.MaxHeaderFields fields is refused (431, saying why) and logged
// once, however short its fields: each field read cost net/http a map
// entry of a couple of hundred bytes, so a 64 KiB header of short fields,
// held unfinished, cost cordon some 1 MiB outside the box's limits. A
// header of that many fields is served.
func TestHeaderFieldsBounded(t *testing.T) {
	proxy, auth, logPath := startProxy(t, "allowed.test", 0)
	for _, tc := range []struct {
		fields int
		status int
	}{
		{tlsterm.MaxHeaderFields - 1, http.StatusForbidden}, // with Proxy-Authorization, MaxHeaderFields: judged (not.allowed.test is not allowed)
		{4 * tlsterm.MaxHeaderFields, http.StatusRequestHeaderFieldsTooLarge},
	} {
		resp, err := sendRaw(t, proxy, fmt.Sprintf("CONNECT not.allowed.test:443 HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n%s\r\n",
			auth, strings.Repeat("A: b\r\n", tc.fields)))
		if err != nil {
			t.Fatalf("%d fields: %v", tc.fields+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status {
			t.Fatalf("%d fields: answered %d, want %d", tc.fields+1, resp.StatusCode, tc.status)
		}
		if tc.status == http.StatusRequestHeaderFieldsTooLarge && !strings.Contains(string(body), "send fewer headers") {
			t.Errorf("the 431 does not say why: %q", body)
		}
	}
	data, _ := os.ReadFile(logPath)
	if n := strings.Count(string(data), `"reason":"bad_request","detail":"its header has over 256 fields`); n != 1 {
		t.Fatalf("%d lines for the refusal, want 1:\n%s", n, data)
	}
}

// TestPlainResponseHeaderBounded: through the plain-HTTP proxy too, an
// upstream's response header past tlsterm.MaxResponseHeaderBytes is
// refused (502) and logged, where net/http's Transport allowed 10 MiB.
func TestPlainResponseHeaderBounded(t *testing.T) {
	value := strings.Repeat("v", 8<<10)
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range tlsterm.MaxResponseHeaderBytes/len(value) + 2 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), value)
		}
	}))
	t.Cleanup(far.Close)
	target := far.Listener.Addr().String()
	proxy, auth, logPath := startProxy(t, target, 0)
	resp, err := sendRaw(t, proxy, fmt.Sprintf("GET http://%s/hdr HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("answered %d, want 502", resp.StatusCode)
	}
	if rec := closeLines(t, logPath, 1)[0]; rec.Status != http.StatusBadGateway || rec.Reason != string(tlsterm.ReasonUpstreamError) {
		t.Fatalf("the request's close line is %+v, want a 502 upstream_error", rec)
	}
}

// TestPlainResponseFieldsBounded: through the plain-HTTP proxy, read by
// net/http's Transport, an upstream's response header of more than
// 1,024 fields is refused (502, logged as upstream_error), however few
// its bytes: net/http keeps each field as a map entry of a couple of
// hundred bytes, so 256 KiB of short fields cost cordon some 8 MB a
// response. One of 1,024 is forwarded.
func TestPlainResponseFieldsBounded(t *testing.T) {
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("fields"))
		for i := range n - 2 { // net/http adds Content-Length and Date
			w.Header().Set(fmt.Sprintf("F%d", i), "v")
		}
	}))
	t.Cleanup(far.Close)
	target := far.Listener.Addr().String()
	proxy, auth, logPath := startProxy(t, target, 0)
	for i, tc := range []struct{ fields, status int }{{1024, http.StatusOK}, {1025, http.StatusBadGateway}} {
		resp, err := sendRaw(t, proxy, fmt.Sprintf("GET http://%s/f?fields=%d HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, tc.fields, target, auth))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status {
			t.Fatalf("a response header of %d fields: answered %d, want %d", tc.fields, resp.StatusCode, tc.status)
		}
		rec := closeLines(t, logPath, i+1)[i]
		if tc.status == http.StatusBadGateway && (rec.Reason != string(tlsterm.ReasonUpstreamError) || !strings.Contains(rec.Detail, "over 1024 fields")) {
			t.Fatalf("the request's close line is %+v, want an upstream_error for its fields", rec)
		}
	}
}

// sendRaw writes request to the proxy on a connection of its own, as it
// is written, and reads the answer; the connection closes when the test
// ends.
func sendRaw(t *testing.T, proxy, request string) (*http.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, request)
	return http.ReadResponse(bufio.NewReader(c), nil)
}
