//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// bodyIgnoringOrigin is a plain-HTTP server on the test host, on port, as
// quick Python servers are written (http.server's BaseHTTPRequestHandler):
// only /collect reads its request's body; every other path answers
// without reading it (as a handler that refuses early does), so the body
// is read as the next request. It notes every request it reads, body
// included, and gives up on a body that has not come within a second.
type bodyIgnoringOrigin struct {
	mu   sync.Mutex
	seen []string
}

func startBodyIgnoringOrigin(t *testing.T, port int) *bodyIgnoringOrigin {
	t.Helper()
	testOrigin(t)
	ln, err := listenInNS(originNS, fmt.Sprintf("%s:%d", originAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o := &bodyIgnoringOrigin{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go o.serve(c)
		}
	}()
	return o
}

func (o *bodyIgnoringOrigin) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var body []byte
		if req.URL.Path == "/collect" {
			c.SetReadDeadline(time.Now().Add(time.Second))
			body, _ = io.ReadAll(req.Body)
		}
		o.mu.Lock()
		o.seen = append(o.seen, fmt.Sprintf("%s %s host=%s auth=%q body=%q", req.Method, req.URL.Path, req.Host, req.Header.Get("Authorization"), body))
		o.mu.Unlock()
		answer := "you asked " + req.Method + " " + req.URL.Path
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer); err != nil {
			return
		}
	}
}

func (o *bodyIgnoringOrigin) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// TestPlainPoolKeepsNamesApart: two allowed names at one address, a
// plaintext credential bound to one of them. A POST to the other name
// whose body is the start of another POST (to a server that answers the
// first without reading its body) left the second waiting for its body on
// the pooled connection, and the
// plain-HTTP pool, keyed by address alone, sent the next request, for the
// credential's host with the real key put on it, over that connection:
// the server took it, key and all, as the body of the POST for the other
// name. Each name now has connections of its own, so the credential's
// request reaches the server as itself.
func TestPlainPoolKeepsNamesApart(t *testing.T) {
	const port = 8091
	origin := startBodyIgnoringOrigin(t, port)
	o := testOrigin(t)
	dir := userDir(t, "cordon-it-pool-")
	cfg := filepath.Join(dir, "config.yaml")
	own := fmt.Sprintf("%s:%d", originName, port)
	other := fmt.Sprintf("front.cordon.test:%d", port)
	writeUserFile(t, cfg, []byte(fmt.Sprintf("allow: [%q, %q]\n", own, other)+providerCredential(fmt.Sprintf("%q", own), "allow_plaintext: true")))
	p := startProxyEnv(t, []string{"PROVIDER_REAL_KEY=" + realKey}, "--config", cfg, "--credential", "provider",
		resolveOrigin, "--resolve=front.cordon.test="+originAddr, "--extra-ca", o.caFile)
	proxy, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}

	prefix := fmt.Sprintf("POST /collect HTTP/1.1\r\nHost: %s\r\nContent-Length: 300\r\n\r\n", other)
	req, _ := http.NewRequest(http.MethodPost, "http://"+other+"/x", strings.NewReader(prefix))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	req, _ = http.NewRequest(http.MethodGet, "http://"+own+"/api", nil)
	req.Header.Set("Authorization", "Bearer "+p.env["PROVIDER_API_KEY"])
	if resp, err := client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	want := fmt.Sprintf("GET /api host=%s auth=%q body=%q", own, "Bearer "+realKey, "")
	var got []string
	if !eventually(5*time.Second, func() bool {
		got = origin.requests()
		return len(got) == 3 && strings.Contains(strings.Join(got, "\n"), want)
	}) {
		t.Fatalf("the credential's request did not reach the server as itself; it read:\n%s", strings.Join(got, "\n"))
	}
	for _, r := range got {
		if strings.Contains(r, realKey) && !strings.HasPrefix(r, "GET /api host="+own) {
			t.Fatalf("the real key reached the server inside another request: %s", r)
		}
	}
}

// TestPlainUnsolicitedResponseLogged: a plain-HTTP POST through `cordon
// proxy` whose body is a request of its own, to a server that answers
// without reading the body, draws a second response, for no request
// cordon sent. net/http's Transport dropped it with a line on cordon's
// standard error that quoted it, and none in the audit log; it must be
// logged as refused, after the POST, and the next request get its own
// answer.
func TestPlainUnsolicitedResponseLogged(t *testing.T) {
	const port = 8092
	origin := startBodyIgnoringOrigin(t, port)
	p := startProxy(t, "--allow", fmt.Sprintf("%s:%d", originName, port), resolveOrigin)
	base := fmt.Sprintf("http://%s:%d", originName, port)
	smuggled := fmt.Sprintf("DELETE /smuggled HTTP/1.1\r\nHost: %s:%d\r\n\r\n", originName, port)
	if body, _, code := curl(t, p, "--data-binary", smuggled, base+"/a"); code != 200 || body != "you asked POST /a" {
		t.Fatalf("POST /a: %d %q", code, body)
	}
	r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Kind: audit.KindHTTP, Decision: audit.Deny, Reason: "unsolicited_response"})
	if r.Method != "POST" || r.Path != "/a" || r.Host != originName || r.Port != port {
		t.Fatalf("the unsolicited response is logged as %+v, want it after POST /a to %s:%d", r, originName, port)
	}
	if body, _, code := curl(t, p, base+"/b"); code != 200 || body != "you asked GET /b" {
		t.Fatalf("GET /b: %d %q", code, body)
	}
	if got := origin.requests(); len(got) != 3 {
		t.Fatalf("the origin read %q", got)
	}
	if strings.Contains(p.stderr.String(), "smuggled") {
		t.Fatalf("cordon's standard error quotes the response:\n%s", p.stderr)
	}
	// The body started like a request: its connection took no other
	// request, and its close line says so.
	if c := waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Path: "/a"}); c.Detail != tlsterm.BodyLikeRequestDetail {
		t.Fatalf("POST /a's close line: %+v", c)
	}
}
