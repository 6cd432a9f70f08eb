package integration

import (
	"bufio"
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

	tc, err := tlsThrough(t, p, target, originName, "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(tc)
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
	var id uint64
	for _, path := range paths {
		d := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Decision: audit.Allow, Path: path})
		c := waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Path: path})
		if id == 0 {
			id = d.ID
		}
		if d.ID != id || c.ID != id || c.Status != 200 || c.BytesUp != int64(len("body 0")) || c.BytesDown == 0 {
			t.Fatalf("%s: decision %+v close %+v (tunnel %d)", path, d, c, id)
		}
	}
}
