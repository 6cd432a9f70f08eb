package tlsterm

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestHTTP2RequestsBounded: at most MaxRequests HTTP/2 requests are in
// flight at once; one more is refused (503, too_many_requests) before it
// goes upstream, and logged; once one ends, its slot serves the next.
// Without the bound, one HTTP/2 connection to an upstream that speaks
// only HTTP/1.1 made cordon open an upstream connection per concurrent
// request (net/http allows 250 per connection), 1024 terminated streams a
// quarter of a million.
func TestHTTP2RequestsBounded(t *testing.T) {
	const max = 4
	var upstreams atomic.Int64
	arrived := make(chan struct{}, 2*max)
	release := make(chan struct{})
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		if req.URL.Path == "/hold" {
			<-release
		}
	}), rigOptions{h1Only: true, maxRequests: max, connState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			upstreams.Add(1)
		}
	}})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	c := r.client(r.ClientRoots, true)
	get := func(path string) (*http.Response, error) {
		resp, err := c.Get(r.url(path))
		if err == nil {
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				return nil, fmt.Errorf("spoke %s, want HTTP/2", resp.Proto)
			}
		}
		return resp, err
	}
	held := make(chan error, max)
	for range max {
		go func() {
			_, err := get("/hold")
			held <- err
		}()
	}
	for range max {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("the held requests never all reached the origin")
		}
	}
	for range 2 {
		resp, err := get("/more")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Cordon-Reason") != string(ReasonTooManyRequests) {
			t.Fatalf("a request past the bound: %d %q, want 503 %s", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"), ReasonTooManyRequests)
		}
	}
	select {
	case <-arrived:
		t.Fatal("a refused request reached the origin")
	case <-time.After(100 * time.Millisecond):
	}
	if n := upstreams.Load(); n != max {
		t.Fatalf("the origin saw %d connections, want %d (one per request in flight)", n, max)
	}
	denied := 0
	for _, rec := range r.waitRecords(t, audit.TypeDecision, max+2) {
		if rec.Decision == audit.Deny {
			if rec.Reason != string(ReasonTooManyRequests) || rec.Path != "/more" {
				t.Fatalf("deny line %+v, want /more refused with %s", rec, ReasonTooManyRequests)
			}
			denied++
		}
	}
	if denied != 2 {
		t.Fatalf("%d deny lines, want 2", denied)
	}

	// Requests that end give their slots back.
	free()
	for range max {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	resp, err := get("/after")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request once the others ended: %d, want 200", resp.StatusCode)
	}
}

// TestHTTP2HeaderFieldsBounded: an HTTP/2 request of more than
// MaxHeaderFields header fields is refused (431, bad_request) and
// logged, and never goes upstream, as an HTTP/1.x one is; one of that
// many is served. Held while it waited on its upstream, each such
// request's header map cost cordon some 400 KiB: 1,000 of them from a
// box, 590 MB.
func TestHTTP2HeaderFieldsBounded(t *testing.T) {
	var arrived atomic.Int64
	r := newRig(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { arrived.Add(1) }), rigOptions{})
	c := r.client(r.ClientRoots, true)
	for _, tc := range []struct {
		fields, status int
	}{
		{MaxHeaderFields, http.StatusOK},
		{MaxHeaderFields + 1, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req, _ := http.NewRequest(http.MethodGet, r.url("/fields"), nil)
		req.Header.Del("User-Agent")
		for i := range tc.fields - 1 { // and Accept-Encoding, which the client adds
			req.Header.Set(fmt.Sprintf("A%d", i), "b")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != tc.status {
			t.Fatalf("%d fields: %s %d, want HTTP/2 %d", tc.fields, resp.Proto, resp.StatusCode, tc.status)
		}
	}
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the origin, want 1", n)
	}
	recs := r.waitRecords(t, audit.TypeDecision, 2)
	if rec := recs[1]; rec.Decision != audit.Deny || rec.Reason != string(ReasonBadRequest) || rec.Detail != ErrHeaderFields.Error() {
		t.Fatalf("the refusal's line is %+v, want a bad_request deny saying %q", rec, ErrHeaderFields)
	}
}

// TestResponseHeaderBounded: an upstream's response header past
// MaxResponseHeaderBytes is refused (502, upstream_error, logged), over
// HTTP/1.1 and HTTP/2 alike, where net/http's Transport allowed 10 MiB,
// and so is an HTTP/1.1 upstream's of more than maxResponseFields
// fields; one within them is forwarded. The upstream is the box's to pick among the
// allowed hosts, and a response waiting on a client that does not read
// holds its header.
func TestResponseHeaderBounded(t *testing.T) {
	value := strings.Repeat("v", 8<<10)
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := strconv.Atoi(req.URL.Query().Get("kib"))
		for i := range n / 8 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), value)
		}
		n, _ = strconv.Atoi(req.URL.Query().Get("fields"))
		for i := range n {
			w.Header().Set(fmt.Sprintf("F%d", i), "v")
		}
	}), rigOptions{})
	for _, h2 := range []bool{false, true} {
		c := r.client(r.ClientRoots, h2)
		for _, tc := range []struct {
			kib, status int
		}{
			{MaxResponseHeaderBytes>>10 - 16, http.StatusOK},
			{MaxResponseHeaderBytes>>10 + 16, http.StatusBadGateway},
		} {
			resp, err := c.Get(r.url(fmt.Sprintf("/hdr?kib=%d", tc.kib)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || (resp.ProtoMajor == 2) != h2 {
				t.Fatalf("a response header of %d KiB to an %s client: %s %d, want %d", tc.kib, resp.Proto, resp.Proto, resp.StatusCode, tc.status)
			}
		}
	}
	// An HTTP/1.1 upstream's header of short fields: its bytes are few,
	// its fields (net/http's map entries) are bounded. Content-Length
	// and Date come with them.
	c := r.client(r.ClientRoots, false)
	for _, tc := range []struct {
		fields, status int
	}{
		{maxResponseFields - 2, http.StatusOK},
		{maxResponseFields - 1, http.StatusBadGateway},
	} {
		resp, err := c.Get(r.url(fmt.Sprintf("/fields?fields=%d", tc.fields)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("a response header of %d fields: %d, want %d", tc.fields+2, resp.StatusCode, tc.status)
		}
	}
	recs := r.waitRecords(t, audit.TypeClose, 6)
	refused := 0
	for _, rec := range recs {
		if rec.Status == http.StatusBadGateway && rec.Reason == string(ReasonUpstreamError) {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d upstream_error close lines, want 3: %+v", refused, recs)
	}
}

// fieldsOrigin answers with fields short header fields (plus the
// Content-Length and Date net/http adds), or with a 103 of that many
// before its final response (/early), or with that many in a chunked
// body's trailer (/trailer).
func fieldsOrigin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := strconv.Atoi(req.URL.Query().Get("fields"))
		set := func(prefix string) {
			for i := range n {
				w.Header().Set(fmt.Sprintf("%sF%d", prefix, i), "v")
			}
		}
		switch req.URL.Path {
		case "/early":
			set("")
			w.WriteHeader(http.StatusEarlyHints)
			for k := range w.Header() {
				w.Header().Del(k)
			}
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
		case "/trailer":
			w.Header().Set("Trailer", "T")
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush()
			set(http.TrailerPrefix)
		default:
			set("")
		}
	})
}

// TestTransportResponseFieldsBounded: an HTTP/2 client's request to an
// HTTP/1.1 upstream goes through net/http's Transport, which bounded a
// response header's bytes and not its fields: 256 KiB of short fields
// cost cordon some 8 MB a response. A header of more than
// maxResponseFields fields is refused (502, upstream_error, logged), as
// is a 103's before the final response; one within the bound is
// forwarded, and so is a chunked body with a trailer.
func TestTransportResponseFieldsBounded(t *testing.T) {
	r := newRig(t, fieldsOrigin(), rigOptions{h1Only: true})
	c := r.client(r.ClientRoots, true)
	for _, tc := range []struct {
		path   string
		fields int
		ok     bool
	}{
		{"/fields", maxResponseFields - 2, true},
		{"/fields", maxResponseFields - 1, false},
		{"/early", maxResponseFields, true},
		{"/early", maxResponseFields + 1, false},
		{"/trailer", 10, true},
	} {
		resp, err := c.Get(r.url(fmt.Sprintf("%s?fields=%d", tc.path, tc.fields)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if ok := resp.StatusCode == http.StatusOK && err == nil; ok != tc.ok || resp.ProtoMajor != 2 {
			t.Fatalf("%s with %d fields to an %s client: %d, body read: %v; want it forwarded: %v", tc.path, tc.fields, resp.Proto, resp.StatusCode, err, tc.ok)
		}
	}
	refused := 0
	for _, rec := range r.waitRecords(t, audit.TypeClose, 5) {
		if rec.Reason == string(ReasonUpstreamError) && strings.Contains(rec.Detail, errResponseFields.Error()) {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("%d upstream_error close lines for too many fields, want 2", refused)
	}
}

// TestHTTP2ConnectionsBounded: at most MaxHTTP2Conns terminated streams
// speak HTTP/2 at once, each allowing maxClientStreams streams at once;
// past them a client that offers HTTP/1.1 too is served HTTP/1.1, and
// one that offers HTTP/2 alone is refused at its handshake, logged. One
// that ends gives its place back. net/http's HTTP/2 server holds some
// 5 KiB for each of up to five times a connection's concurrent streams
// when the client resets them as it opens them: 1,000 connections from a
// box took cordon to 3.9 GB.
func TestHTTP2ConnectionsBounded(t *testing.T) {
	const max = 2
	r := newRig(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), rigOptions{maxHTTP2Conns: max})
	var held []*tls.Conn
	for range max {
		c, _, sf := r.h2Conn(t)
		if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != maxClientStreams {
			t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d (sent: %v), want %d", v, ok, maxClientStreams)
		}
		held = append(held, c)
	}
	dial := func(protos ...string) (string, error) {
		c, err := tls.Dial("tcp", r.Addr, &tls.Config{RootCAs: r.ClientRoots, ServerName: r.Host, NextProtos: protos})
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().NegotiatedProtocol, nil
	}
	if p, err := dial("h2", "http/1.1"); err != nil || p != "http/1.1" {
		t.Fatalf("a client offering h2 and http/1.1 past the bound negotiated %q (%v), want http/1.1", p, err)
	}
	if p, err := dial("h2"); err == nil {
		t.Fatalf("a client offering h2 alone past the bound negotiated %q, want its handshake refused", p)
	}
	recs := r.waitRecords(t, audit.TypeDecision, 1)
	if recs[0].Decision != audit.Deny || recs[0].Reason != string(ReasonTooManyRequests) {
		t.Fatalf("the refused handshake's line %+v, want a deny with %s", recs[0], ReasonTooManyRequests)
	}

	held[0].Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, err := dial("h2"); err == nil && p == "h2" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a connection that ended never gave its place back")
		}
	}
}
