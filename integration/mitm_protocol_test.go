//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

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

// TestTLSHTTP2ProtocolRefusalLogged: an HTTP/2 stream that Go's HTTP/2
// server, terminating the tunnel inside `cordon proxy`, resets itself as
// a protocol error (an extended CONNECT's :protocol, userinfo in
// :authority), before cordon's handler sees a request, is logged as a
// deny on its tunnel's connection, naming the server's error type, and
// never reaches the origin. Such a stream left no line at all.
func TestTLSHTTP2ProtocolRefusalLogged(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", fmt.Sprintf("%s:%d", originName, originHTTPS), resolveOrigin, "--extra-ca", o.caFile)
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)
	for _, tc := range []struct {
		name, method, authority, errType string
		extra                            [][2]string
	}{
		{"extended CONNECT", http.MethodConnect, target, "stream_PROTOCOL_ERROR_bad_connect", [][2]string{{":protocol", "websocket"}}},
		{"userinfo in :authority", http.MethodGet, "user@" + target, "stream_PROTOCOL_ERROR_userinfo_in_authority", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/refused/" + strings.ReplaceAll(tc.name, " ", "-")
			fields := append([][2]string{{":method", tc.method}, {":scheme", "https"}, {":authority", tc.authority}, {":path", path}}, tc.extra...)
			if code := h2ResetThrough(t, p, target, fields); code != http2.ErrCodeProtocol {
				t.Fatalf("the stream was reset with %v, want PROTOCOL_ERROR", code)
			}
			var refusal audit.Record
			found := eventually(5*time.Second, func() bool {
				for _, r := range readAudit(t, p.audit) {
					if r.Type == audit.TypeDecision && strings.HasSuffix(r.Detail, ": "+tc.errType) {
						refusal = r
						return true
					}
				}
				return false
			})
			if !found {
				t.Fatalf("no line for the refused stream (%s); log:\n%s", tc.errType, mustRead(t, p.audit))
			}
			if refusal.Decision != audit.Deny || refusal.Reason != "bad_request" || refusal.Kind != audit.KindConnect ||
				refusal.Host != originName || refusal.Port != originHTTPS {
				t.Fatalf("the refused stream is logged as %+v, want a bad_request deny on %s", refusal, target)
			}
			// The line names the tunnel the stream came over: its
			// CONNECT's allow line has the same id.
			if !slices.ContainsFunc(readAudit(t, p.audit), func(r audit.Record) bool {
				return r.Type == audit.TypeDecision && r.Kind == audit.KindConnect && r.Decision == audit.Allow && r.ID == refusal.ID
			}) {
				t.Fatalf("the refusal's id %d names no CONNECT allowed", refusal.ID)
			}
			if _, ok := seen.Load(path); ok {
				t.Fatalf("%s reached the origin", path)
			}
		})
	}
}

// h2ResetThrough sends one bodyless HTTP/2 request of the given header
// fields (written as frames, so any field goes as it is) over a new
// tunnel to target, and returns the code its stream was reset with; a
// response instead fails t.
func h2ResetThrough(t *testing.T, p *proxyProc, target string, fields [][2]string) http2.ErrCode {
	t.Helper()
	tc, err := tlsThrough(t, p, target, originName, "h2")
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no reset: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return f.ErrCode
		case *http2.HeadersFrame:
			t.Fatalf("the stream was answered (%v), not reset", f)
		}
	}
}
