//go:build linux

package integration

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestTLSUpstreamProtocolFollowsClient: a terminated tunnel speaks to the
// origin in the client's HTTP version (HTTP/1.1 for an HTTP/1.1 client, h2
// for an h2 client), and every request of a kept-alive HTTP/1.1 connection
// is judged and logged on its own, requests with bodies included.
func TestTLSUpstreamProtocolFollowsClient(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile)
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)

	for _, tc := range []struct{ flag, want string }{{"--http1.1", "HTTP/1.1"}, {"--http2", "HTTP/2.0"}} {
		body, _, code := curl(t, p, "--cacert", p.env["SSL_CERT_FILE"], tc.flag, "https://"+target+"/proto")
		if code != 200 {
			t.Fatalf("curl %s: %d %s", tc.flag, code, body)
		}
		if e := echoOf(t, body); e.Proto != tc.want {
			t.Fatalf("curl %s: the origin saw %s, want %s", tc.flag, e.Proto, tc.want)
		}
	}

	tc, br := h1Through(t, p, target)
	paths := []string{"/keep-1", "/keep-2", "/keep-3"}
	for i, path := range paths {
		body := fmt.Sprintf("body %d", i)
		fmt.Fprintf(tc, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", path, target, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		e := echoOf(t, string(got))
		if resp.StatusCode != 200 || e.Path != path || e.Body != body || e.Proto != "HTTP/1.1" {
			t.Fatalf("%s: %d %+v", path, resp.StatusCode, e)
		}
	}
	decisions := waitRequestRecords(t, p.audit, audit.TypeDecision, paths)
	closes := waitRequestRecords(t, p.audit, audit.TypeClose, paths)
	for i, path := range paths {
		d, c := decisions[i], closes[i]
		if d.Decision != audit.Allow || d.ID != decisions[0].ID || c.ID != d.ID || c.Status != 200 ||
			c.BytesUp != int64(len("body 0")) || c.BytesDown == 0 {
			t.Fatalf("%s: decision %+v close %+v", path, d, c)
		}
	}
}

// waitRequestRecords polls the audit log (at most 5 s) for one record of
// type typ for each request path, and returns them in the order of paths.
func waitRequestRecords(t *testing.T, log string, typ audit.Type, paths []string) []audit.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		byPath := map[string]audit.Record{}
		for _, r := range readAudit(t, log) {
			if r.Type == typ && r.Path != "" {
				byPath[r.Path] = r
			}
		}
		var out []audit.Record
		for _, path := range paths {
			if r, ok := byPath[path]; ok {
				out = append(out, r)
			}
		}
		if len(out) == len(paths) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s records for %v", len(out), len(paths), typ, paths)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
