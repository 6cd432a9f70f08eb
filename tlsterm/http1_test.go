package tlsterm

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// testOrigin answers the paths the HTTP/1.x tests use.
func testOrigin(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("origin: read body: %v", err)
		}
		fmt.Fprintf(w, "%s %s host=%s ua=%q xff=%q proxy-auth=%q expect=%q body=%s",
			r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("User-Agent"), r.Header.Get("X-Forwarded-For"),
			r.Header.Get("Proxy-Authorization"), r.Header.Get("Expect"), b)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		for i := range 3 {
			fmt.Fprintf(w, "part %d;", i)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Sum", "three")
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(code)
		w.Write([]byte("hello"))
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "closing")
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, strings.Repeat("x", 100))
		w.(http.Flusher).Flush()
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || !HasToken(r.Header, "Connection", "upgrade") {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo: "+line)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * staleCheck)
		io.WriteString(w, "slow")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	})
	return mux
}

// dial opens a connection through the rig, over TLS unless plaintext.
func (r *rig) dial(t *testing.T, plaintext bool) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if !plaintext {
		tc := tls.Client(c, &tls.Config{ServerName: r.Host, RootCAs: r.ClientRoots, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		c = tc
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// authority is how requests name the rig's origin.
func (r *rig) authority() string { return net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) }

// readResp reads one response to a request with method and its body.
func readResp(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return resp, string(b)
}

// waitRecords waits (at most 5 s) until the audit log holds n records of
// type typ, and returns them.
func (r *rig) waitRecords(t *testing.T, typ audit.Type, n int) []audit.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []audit.Record
		f, err := os.Open(r.AuditPath)
		if err != nil {
			t.Fatal(err)
		}
		ar := audit.NewReader(f, nil)
		for ar.Next() {
			if ar.Record().Type == typ {
				got = append(got, ar.Record())
			}
		}
		f.Close()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%d %s records, want %d: %+v", len(got), typ, n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectClosed wants the client connection to end.
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("the connection stayed open (read %q)", b)
	}
}

func TestHTTP1Requests(t *testing.T) {
	for _, plaintext := range []bool{false, true} {
		t.Run(fmt.Sprintf("plaintext=%v", plaintext), func(t *testing.T) {
			r := newRig(t, testOrigin(t), rigOptions{plaintext: plaintext})
			auth := r.authority()
			c, br := r.dial(t, plaintext)

			// Two requests in one write: both answered, in order.
			fmt.Fprintf(c, "GET /one HTTP/1.1\r\nHost: %s\r\n\r\nGET /two?a=1 HTTP/1.1\r\nHost: %s\r\n\r\n", auth, auth)
			for _, want := range []string{"ok /one", "ok /two"} {
				if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != want {
					t.Fatalf("pipelined: %d %q, want %q", resp.StatusCode, body, want)
				}
			}

			// Bodies with a length and chunked; hop-by-hop, proxy and
			// forwarding headers stay here, User-Agent is not made up.
			fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nProxy-Authorization: Basic eDp5\r\nX-Forwarded-For: 10.1.1.1\r\n\r\nhello", auth)
			if _, body := readResp(t, br, "POST"); body != `POST /echo host=`+auth+` ua="" xff="" proxy-auth="" expect="" body=hello` {
				t.Fatalf("length body: %q", body)
			}
			fmt.Fprintf(c, "PUT /echo HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nUser-Agent: t\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", auth)
			if _, body := readResp(t, br, "PUT"); !strings.HasSuffix(body, `ua="t" xff="" proxy-auth="" expect="" body=abcde`) {
				t.Fatalf("chunked body: %q", body)
			}

			// A chunked response with a trailer.
			fmt.Fprintf(c, "GET /chunked HTTP/1.1\r\nHost: %s\r\nTE: trailers\r\n\r\n", auth)
			resp, body := readResp(t, br, "GET")
			if body != "part 0;part 1;part 2;" || resp.Trailer.Get("X-Sum") != "three" || resp.TransferEncoding[0] != "chunked" {
				t.Fatalf("chunked response: %q trailer %v te %v", body, resp.Trailer, resp.TransferEncoding)
			}

			// Responses without a body, then the connection goes on.
			for _, tc := range []struct {
				method, path string
				status       int
			}{{"HEAD", "/status/200", 200}, {"GET", "/status/204", 204}, {"GET", "/status/304", 304}} {
				fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\n\r\n", tc.method, tc.path, auth)
				if resp, body := readResp(t, br, tc.method); resp.StatusCode != tc.status || body != "" {
					t.Fatalf("%s %s: %d %q", tc.method, tc.path, resp.StatusCode, body)
				}
			}

			// The upstream closing after its response leaves the client's
			// connection open: the next request goes over a new one.
			fmt.Fprintf(c, "GET /close HTTP/1.1\r\nHost: %s\r\n\r\n", auth)
			if resp, body := readResp(t, br, "GET"); body != "closing" || resp.Close {
				t.Fatalf("upstream close: %q close=%v", body, resp.Close)
			}
			fmt.Fprintf(c, "GET /after HTTP/1.1\r\nHost: %s\r\n\r\n", auth)
			if _, body := readResp(t, br, "GET"); body != "ok /after" {
				t.Fatalf("after the upstream closed: %q", body)
			}

			// Expect: 100-continue is answered, and the body goes up.
			fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n", auth)
			if resp, _ := readResp(t, br, "POST"); resp.StatusCode != 100 {
				t.Fatalf("expect: %d, want 100", resp.StatusCode)
			}
			io.WriteString(c, "hi")
			if _, body := readResp(t, br, "POST"); !strings.HasSuffix(body, "body=hi") {
				t.Fatalf("after 100-continue: %q", body)
			}

			// The client closing: the response says so, and the connection ends.
			fmt.Fprintf(c, "GET /last HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", auth)
			if resp, body := readResp(t, br, "GET"); !resp.Close || body != "ok /last" {
				t.Fatalf("client close: %q close=%v", body, resp.Close)
			}
			expectClosed(t, br)

			closes := r.waitRecords(t, audit.TypeClose, 12)
			allows := r.waitRecords(t, audit.TypeDecision, 12)
			for i, rec := range closes {
				if rec.Status == 0 || rec.Reason != "" || allows[i].Decision != audit.Allow || rec.Path != allows[i].Path {
					t.Fatalf("request %d: decision %+v close %+v", i, allows[i], rec)
				}
			}
			if closes[2].BytesUp != 5 || closes[3].BytesUp != 5 || closes[4].BytesDown != int64(len("part 0;part 1;part 2;")) {
				t.Fatalf("byte counts: %+v %+v %+v", closes[2], closes[3], closes[4])
			}
		})
	}
}

func TestHTTP1Refusals(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{})
	auth := r.authority()
	for _, tc := range []struct {
		name, request string
		status        int
		reason        string
	}{
		{"another host", "GET /a HTTP/1.1\r\nHost: other.test\r\n\r\n", 421, "authority_mismatch"},
		{"absolute form", "GET https://other.test/a HTTP/1.1\r\nHost: " + auth + "\r\n\r\n", 421, "authority_mismatch"},
		// Its URL has no host, only an opaque part, which went upstream
		// as the target: "GET http://other.test/a".
		{"opaque URI", "GET https:http://other.test/a HTTP/1.1\r\nHost: " + auth + "\r\n\r\n", 421, "authority_mismatch"},
		{"CL and TE", "POST /a HTTP/1.1\r\nHost: " + auth + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "bad_framing"},
		{"h2c", "GET /a HTTP/1.1\r\nHost: " + auth + "\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", 403, "h2c_upgrade"},
		// Its body would be the new tunnel's bytes to a server that
		// takes the CONNECT (TestHTTP2NestedConnectRefused).
		{"CONNECT", "CONNECT " + auth + " HTTP/1.1\r\nHost: " + auth + "\r\nContent-Length: 29\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 403, "nested_connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := r.dial(t, false)
			// An allowed request first: a refusal after it still closes.
			fmt.Fprintf(c, "GET /first HTTP/1.1\r\nHost: %s\r\n\r\n%s", auth, tc.request)
			if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			resp, body := readResp(t, br, "GET")
			if resp.StatusCode != tc.status || resp.Header.Get("X-Cordon-Reason") != tc.reason || !resp.Close ||
				!strings.HasPrefix(body, "cordon: "+tc.reason+": ") {
				t.Fatalf("got %d %v %q, want %d %s", resp.StatusCode, resp.Header, body, tc.status, tc.reason)
			}
			expectClosed(t, br)
		})
	}
	denies := 0
	for _, rec := range r.waitRecords(t, audit.TypeDecision, 12) {
		if rec.Decision == audit.Deny {
			denies++
		}
	}
	if denies != 6 {
		t.Fatalf("%d deny lines, want 6", denies)
	}
}

func TestHTTP1MalformedRequests(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{})
	for _, tc := range []struct {
		name, request string
		status        int
	}{
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad header name", "GET / HTTP/1.1\r\nHost: " + r.authority() + "\r\nBad Name: x\r\n\r\n", 400},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"space in the query", "GET /v?a=x QUERYSECRET HTTP/1.1\r\nHost: " + r.authority() + "\r\n\r\n", 400},
		{"header line without a colon", "GET /a HTTP/1.1\r\nHost: " + r.authority() + "\r\nAuthorization Bearer QUERYSECRET\r\n\r\n", 400},
		{"bad escape in the path", "GET /a%zz HTTP/1.1\r\nHost: " + r.authority() + "\r\n\r\n", 400},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: " + r.authority() + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", 501},
		{"unknown expectation", "GET / HTTP/1.1\r\nHost: " + r.authority() + "\r\nExpect: teapot\r\n\r\n", 417},
		{"huge header", "GET / HTTP/1.1\r\nHost: " + r.authority() + "\r\nX: " + strings.Repeat("y", 2*maxRequestHeader) + "\r\n\r\n", 431},
		{"no version", "GET /v?api_key=QUERYSECRET\r\nHost: " + r.authority() + "\r\n\r\n", 400},
		{"too many header fields", "GET / HTTP/1.1\r\nHost: " + r.authority() + "\r\n" + strings.Repeat("A: QUERYSECRET\r\n", 4*MaxHeaderFields) + "\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := r.dial(t, false)
			go io.WriteString(c, tc.request)
			resp, _ := readResp(t, br, "GET")
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("got %d close=%v, want %d", resp.StatusCode, resp.Close, tc.status)
			}
		})
	}
	// None reached the origin; each is refused in the log, saying why,
	// and no query or header line with it.
	recs := r.waitRecords(t, audit.TypeDecision, 12)
	for _, rec := range recs {
		if strings.Contains(rec.Detail, "QUERYSECRET") {
			t.Errorf("a query or a header line in the log: %q", rec.Detail)
		}
	}
	for _, want := range []string{"missing required Host header", "too many Host headers", "invalid header name", "malformed MIME header",
		"unsupported protocol version", "invalid URL escape", "too many transfer encodings", "unsupported expectation", "header is over", "header has over 256 fields",
		`malformed HTTP request "GET /v"`} {
		found := false
		for _, rec := range recs {
			found = found || rec.Decision == audit.Deny && rec.Reason == string(ReasonBadRequest) && strings.Contains(rec.Detail, want)
		}
		if !found {
			t.Errorf("no bad_request deny saying %q among %+v", want, recs)
		}
	}
}

func TestHTTP1Upgrade(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{})
	c, br := r.dial(t, false)
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", r.authority())
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "GET / HTTP/1.1 is not judged now\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: GET / HTTP/1.1 is not judged now\n" {
		t.Fatalf("upgraded stream: %q %v", line, err)
	}
	expectClosed(t, br) // the origin is done
	c.Close()
	rec := r.waitRecords(t, audit.TypeClose, 1)[0]
	if rec.Status != 101 || rec.BytesUp != 33 || rec.BytesDown != 39 {
		t.Fatalf("close line: %+v", rec)
	}

	// An upgrade the client did not ask for is refused.
	c, br = r.dial(t, false)
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n\r\n", r.authority())
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 400 {
		t.Fatalf("Upgrade without Connection: upgrade reached the origin as one: %d", resp.StatusCode)
	}
}

func TestHTTP1BrokenBodies(t *testing.T) {
	got := make(chan error, 1)
	origin := testOrigin(t).(*http.ServeMux)
	origin.HandleFunc("/slurp", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
	})
	r := newRig(t, origin, rigOptions{})

	t.Run("upstream closes mid-body", func(t *testing.T) {
		c, br := r.dial(t, false)
		fmt.Fprintf(c, "GET /cut HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("cut response: %v %v", resp, err)
		}
		if b, err := io.ReadAll(resp.Body); err == nil || len(b) != 100 {
			t.Fatalf("a cut body arrived whole: %d bytes, %v", len(b), err)
		}
		rec := r.waitRecords(t, audit.TypeClose, 1)[0]
		if rec.Reason != string(ReasonUpstreamError) || !strings.Contains(rec.Detail, "response body") || rec.BytesDown != 100 {
			t.Fatalf("close line: %+v", rec)
		}
	})
	t.Run("client closes mid-body", func(t *testing.T) {
		c, _ := r.dial(t, false)
		fmt.Fprintf(c, "POST /slurp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n0123456789", r.authority())
		time.Sleep(50 * time.Millisecond)
		c.Close()
		select {
		case err := <-got:
			if err == nil {
				t.Fatal("the origin read a whole body the client never sent")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the origin still waits for the body")
		}
		rec := r.waitRecords(t, audit.TypeClose, 2)[1]
		if rec.Path != "/slurp" || rec.BytesUp != 10 {
			t.Fatalf("close line: %+v", rec)
		}
	})
}

func TestHTTP1StaleUpstream(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{idle: 50 * time.Millisecond})
	c, br := r.dial(t, false)
	for i, req := range []string{
		"GET /a HTTP/1.1\r\nHost: %s\r\n\r\n",
		"GET /b HTTP/1.1\r\nHost: %s\r\n\r\n",                           // retried on a fresh connection
		"POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 1\r\n\r\nz", // found stale before it is sent
	} {
		if i > 0 {
			time.Sleep(200 * time.Millisecond) // the origin closes the idle connection
		}
		fmt.Fprintf(c, req, r.authority())
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d after the upstream went idle: %d %s", i, resp.StatusCode, body)
		}
	}
}

// TestHTTP1LingeringUpstream: an upstream that closed its idle connection
// by shutting its write side and reading on (as Apache's httpd does) sent
// its end while cordon was not waiting; the next request, read and dropped
// there, draws neither a reply nor a reset. It must still be answered, on
// a fresh connection, and promptly.
func TestHTTP1LingeringUpstream(t *testing.T) {
	for _, plaintext := range []bool{false, true} {
		r := newRig(t, testOrigin(t), rigOptions{idle: 50 * time.Millisecond, linger: true, plaintext: plaintext, h1Only: true})
		c, br := r.dial(t, plaintext)
		for i := range 3 {
			if i > 0 {
				time.Sleep(200 * time.Millisecond) // the origin half-closes the idle connection
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET /echo?n=%d HTTP/1.1\r\nHost: %s\r\n\r\n", i, r.authority())
			if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 {
				t.Fatalf("plaintext %v, request %d after the upstream went idle: %d %s", plaintext, i, resp.StatusCode, body)
			}
		}
	}
}

// TestHTTP1SlowUpstream: a response slower than writeAwaiting's
// staleCheck, on a fresh connection and a kept-alive one, is waited for.
func TestHTTP1SlowUpstream(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{h1Only: true})
	c, br := r.dial(t, false)
	for i := range 2 {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "slow" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
}

// bodyIgnoringOrigin serves each connection as Python's http.server does
// with a handler that never reads the body: a request's body is read as
// the next request, and answered, each answer written on its own. Every
// request is sent on answered once its answer is written, so on loopback
// it waits in the reader's socket.
func bodyIgnoringOrigin(answered chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			body := "you asked " + r.Method + " " + r.URL.Path
			fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			if brw.Flush() != nil {
				return
			}
			answered <- r.Method + " " + r.URL.Path
			if r, err = http.ReadRequest(brw.Reader); err != nil {
				return
			}
		}
	})
}

// TestHTTP1UnsolicitedResponseDropped: a POST whose body is a request of
// its own, to a server that answers it without reading the body, draws
// two responses; the second is for no request cordon sent. It reached the client as the
// response to its next GET (kept-alive connections were looked at before
// a request only if it could not simply be sent again, and then not at
// the records TLS had already read), and the log gave it that GET's path.
// The second GET must get its own response, over a new connection, and
// the bytes be logged as refused.
func TestHTTP1UnsolicitedResponseDropped(t *testing.T) {
	for _, plaintext := range []bool{false, true} {
		answered := make(chan string, 10)
		next := func() string {
			select {
			case a := <-answered:
				return a
			case <-time.After(5 * time.Second):
				t.Fatalf("plaintext %v: the origin answered nothing more", plaintext)
				return ""
			}
		}
		r := newRig(t, bodyIgnoringOrigin(answered), rigOptions{h1Only: true, plaintext: plaintext})
		c, br := r.dial(t, plaintext)
		smuggled := fmt.Sprintf("DELETE /smuggled HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		fmt.Fprintf(c, "POST /a HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", r.authority(), len(smuggled), smuggled)
		if resp, body := readResp(t, br, "POST"); resp.StatusCode != 200 || body != "you asked POST /a" {
			t.Fatalf("plaintext %v, POST /a: %d %q", plaintext, resp.StatusCode, body)
		}
		if got := []string{next(), next()}; !slices.Equal(got, []string{"POST /a", "DELETE /smuggled"}) {
			t.Fatalf("plaintext %v: the origin answered %q", plaintext, got)
		}
		fmt.Fprintf(c, "GET /b HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "you asked GET /b" {
			t.Fatalf("plaintext %v, GET /b got another request's response: %d %q", plaintext, resp.StatusCode, body)
		}
		recs := r.waitRecords(t, audit.TypeDecision, 3)
		if !slices.ContainsFunc(recs, func(d audit.Record) bool {
			return d.Decision == audit.Deny && d.Reason == string(ReasonUnsolicitedResponse) && d.Method == "POST" && d.Path == "/a"
		}) {
			t.Fatalf("plaintext %v: the unsolicited response was not logged as refused after POST /a: %+v", plaintext, recs)
		}
	}
}

// TestHTTP2UnsolicitedResponseDropped: the same POST from an HTTP/2
// client, whose requests to an HTTP/1.1 upstream go through net/http's
// Transport, draws the same two responses. The second reached no log but
// net/http's line on cordon's standard error, with its content, and when
// the next request took the connection before net/http had looked, it
// was that request's response. It must be logged as refused, after
// POST /a, and the next GET get its own response.
func TestHTTP2UnsolicitedResponseDropped(t *testing.T) {
	answered := make(chan string, 10)
	r := newRig(t, bodyIgnoringOrigin(answered), rigOptions{h1Only: true})
	c := r.client(r.ClientRoots, true)
	get := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, r.url(path), strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "you asked " + method + " " + path; resp.StatusCode != 200 || string(got) != want || resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: %s %d %q, want %q", method, path, resp.Proto, resp.StatusCode, got, want)
		}
	}
	get("POST", "/a", fmt.Sprintf("DELETE /smuggled HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority()))
	for _, want := range []string{"POST /a", "DELETE /smuggled"} {
		select {
		case a := <-answered:
			if a != want {
				t.Fatalf("the origin answered %q, want %q", a, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the origin did not answer %s", want)
		}
	}
	// The answer nobody asked for is found once it comes (while the
	// connection is idle, or waiting when POST /a's response ended).
	// One that came later than the next request would be taken as its
	// response, as on the HTTP/1.1 path.
	recs := r.waitRecords(t, audit.TypeDecision, 2)
	if d := recs[1]; d.Decision != audit.Deny || d.Reason != string(ReasonUnsolicitedResponse) || d.Method != "POST" || d.Path != "/a" {
		t.Fatalf("the unsolicited response was not logged as refused after POST /a: %+v", recs)
	}
	get("GET", "/b", "")
	r.waitRecords(t, audit.TypeDecision, 3)
}

// TestHTTP1GetBodyRefused: a GET or HEAD with a body is refused and
// logged, and nothing of it reaches the origin: a server that ignores
// such a body (Python's http.server does) read it as a request of its
// own, which cordon never judged or logged.
func TestHTTP1GetBodyRefused(t *testing.T) {
	for _, plaintext := range []bool{false, true} {
		for _, method := range []string{"GET", "HEAD"} {
			origin := &untouchedOrigin{}
			r := newRig(t, origin, rigOptions{h1Only: true, plaintext: plaintext, connState: origin.connState})
			c, br := r.dial(t, plaintext)
			smuggled := "DELETE /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"
			fmt.Fprintf(c, "%s /a HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", method, r.authority(), len(smuggled), smuggled)
			resp, _ := readResp(t, br, method)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Cordon-Reason") != string(ReasonBadFraming) {
				t.Fatalf("plaintext %v, %s with a body: %d %v, want 400 %s", plaintext, method, resp.StatusCode, resp.Header, ReasonBadFraming)
			}
			if d := r.waitRecords(t, audit.TypeDecision, 1)[0]; d.Decision != audit.Deny || d.Reason != string(ReasonBadFraming) || d.Method != method {
				t.Fatalf("plaintext %v, %s with a body: decision line %+v, want a deny", plaintext, method, d)
			}
			expectClosed(t, br)
			origin.expectNone(t)
		}
	}
}

func TestHTTP10Client(t *testing.T) {
	r := newRig(t, testOrigin(t), rigOptions{})
	c, br := r.dial(t, false)
	io.WriteString(c, "GET /chunked HTTP/1.0\r\n\r\n")
	resp, body := readResp(t, br, "GET")
	if resp.ProtoMinor != 0 || body != "part 0;part 1;part 2;" || len(resp.TransferEncoding) != 0 {
		t.Fatalf("HTTP/1.0: %s %q %v", resp.Proto, body, resp.TransferEncoding)
	}
	expectClosed(t, br)
}

func TestCleanQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a=1&b=2", "a=1&b=2"},
		{"b=%41&a", "b=%41&a"},
		{"a=1;b=2", ""},
		{"a=1&b=%zz", "a=1"},
		{"a=%4", ""},
	} {
		if got := cleanQuery(tc.in); got != tc.want {
			t.Errorf("cleanQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWithoutQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"GET /x HTTP/1.1", "GET /x HTTP/1.1"},
		{"GET http://allowed.test/x?api_key=S1 HTTP/1.1", "GET http://allowed.test/x HTTP/1.1"},
		{"GET /x?a=1?b=2&c HTTP/1.1", "GET /x HTTP/1.1"},
		{"GET /x?", "GET /x"},
		{"GET /x?api_key=S1", "GET /x"},                           // no version
		{"GET /x?q=two words&key=S1 HTTP/1.1", "GET /x HTTP/1.1"}, // a space unescaped
		{"GET /x?key=S1 HTTP/1.1?S2", "GET /x HTTP/1.1"},
		{"GET /x?key=S1 HTTP/1.1 tail?S2", "GET /x tail"},
		{"/x?key=S1", "/x"}, // a URI alone
		{"?key=S1", ""},
		{"GET /x#frag HTTP/1.1", "GET /x#frag HTTP/1.1"},
	} {
		if got := WithoutQuery(tc.in); got != tc.want {
			t.Errorf("WithoutQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWithoutQuotedQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`malformed HTTP request "GET /x?api_key=S1"`, `malformed HTTP request "GET /x"`},
		{`malformed HTTP request "GET /x?k=\"S1\" y"`, `malformed HTTP request "GET /x y"`},
		{`malformed HTTP version "HTTP/1.1?S1"`, `malformed HTTP version "HTTP/1.1"`},
		{`malformed HTTP request "GET /x"`, `malformed HTTP request "GET /x"`},
		{"missing required Host header", "missing required Host header"},
		{`quoted, then more "GET /x?S1" then more`, `quoted, then more "GET /x more`},
	} {
		if got := withoutQuotedQuery(tc.in); got != tc.want {
			t.Errorf("withoutQuotedQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// bufferedReader holds data, then fails every further read with
// errBeyond: a read past what was buffered shows.
func bufferedReader(data string) *bufio.Reader {
	br := bufio.NewReaderSize(io.MultiReader(strings.NewReader(data), iotest.ErrReader(errBeyond)), 1<<16)
	br.Peek(len(data))
	return br
}

var errBeyond = errors.New("read past the buffered bytes")

func TestHeaderBuffered(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
		{"GET / HTTP/1.1\nHost: a\n\n", true},
		{"GET / HTTP/1.1\r\nHost: a\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r", false},
		{"\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n", true},
	} {
		if got := headerBuffered(bufferedReader(tc.in)); got != tc.want {
			t.Errorf("headerBuffered(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzHeaderBuffered checks what readRequest relies on: when
// headerBuffered says so, ReadRequest reads nothing from the connection
// (so it needs no deadline).
func FuzzHeaderBuffered(f *testing.F) {
	for _, s := range []string{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.1\r\nA: b\r\n \r\n\r\n", "\n\n", "GET / HTTP/1.1\r\nA:\r\n\tb\n\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		br := bufferedReader(in)
		if !headerBuffered(br) {
			return
		}
		if _, err := http.ReadRequest(br); errors.Is(err, errBeyond) {
			t.Fatalf("ReadRequest read past a buffered header in %q", in)
		}
	})
}

func TestRemoveHopByHop(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   http.Header
		want []string // the names left, sorted
	}{
		{"none", http.Header{"Accept": {"*/*"}}, []string{"Accept"}},
		{"every standard one", http.Header{"Connection": {"keep-alive"}, "Proxy-Connection": {"x"}, "Keep-Alive": {"timeout=5"},
			"Proxy-Authenticate": {"x"}, "Proxy-Authorization": {"x"}, "Te": {"trailers"}, "Trailer": {"X"},
			"Transfer-Encoding": {"chunked"}, "Upgrade": {"websocket"}, "Content-Type": {"text/plain"}}, []string{"Content-Type"}},
		{"named by Connection, any case, twice", http.Header{"Connection": {"x-hop, ,X-OTHER", "accept"}, "X-Hop": {"1"},
			"X-Other": {"2"}, "Accept": {"*/*"}, "X-Kept": {"3"}}, []string{"X-Kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			RemoveHopByHop(tc.in)
			got := keysOf(tc.in)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("left %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzCleanQuery(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "a=1;b=2", "x=%zz&y=%41", "%", "&&=", "a=%4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := cleanQuery(q)
		if _, err := url.ParseQuery(out); err != nil {
			t.Fatalf("cleanQuery(%q) = %q, which does not parse: %v", q, out, err)
		}
		if again := cleanQuery(out); again != out {
			t.Fatalf("cleanQuery is not stable: %q -> %q -> %q", q, out, again)
		}
	})
}

func TestHTTP1Credentials(t *testing.T) {
	const secret = "s3cr3t-value-for-the-test"
	creds, err := credinject.Load([]policy.Credential{
		{Name: "api", Source: policy.Source{Env: "API_SECRET"}, Hosts: []string{"127.0.0.1:*"}, Header: "Authorization: Bearer {}", Env: "API_KEY"},
		{Name: "other", Source: policy.Source{Env: "OTHER_SECRET"}, Hosts: []string{"elsewhere.test"}, Header: "X-Key: {}", Env: "OTHER_KEY"},
	}, []string{"api", "other"}, credinject.Options{Env: func(name string) string {
		return map[string]string{"API_SECRET": secret, "OTHER_SECRET": "another-secret-value"}[name]
	}})
	if err != nil {
		t.Fatal(err)
	}
	placeholder := func(env string) string {
		for _, kv := range creds.Env() {
			if v, ok := strings.CutPrefix(kv, env+"="); ok {
				return v
			}
		}
		t.Fatalf("no placeholder for %s", env)
		return ""
	}
	origin := testOrigin(t).(*http.ServeMux)
	origin.HandleFunc("/leak", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Leak")
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		io.WriteString(w, "body has "+secret)
		w.(http.Flusher).Flush()
		w.Header().Set("X-Leak", secret)
	})
	origin.HandleFunc("/wsleak", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nnew protocol says "+secret+"\n")
	})
	origin.HandleFunc("/wsecho", func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(c, rw)
	})
	r := newRig(t, origin, rigOptions{creds: creds})
	c, br := r.dial(t, false)

	// Injected upstream; masked in the header, body and trailer coming back.
	fmt.Fprintf(c, "GET /leak HTTP/1.1\r\nHost: %s\r\nTE: trailers\r\n\r\n", r.authority())
	resp, body := readResp(t, br, "GET")
	api := placeholder("API_KEY")
	if resp.Header.Get("X-Seen") != "Bearer "+api || body != "body has "+api || resp.Trailer.Get("X-Leak") != api {
		t.Fatalf("not masked: header %v body %q trailer %v", resp.Header, body, resp.Trailer)
	}

	// Another host's placeholder in a small body: refused whole, before
	// anything goes up; the connection goes on.
	misrouted := "data=" + placeholder("OTHER_KEY")
	fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", r.authority(), len(misrouted), misrouted)
	if resp, body := readResp(t, br, "POST"); resp.StatusCode != 403 || resp.Close || !strings.Contains(body, "other") {
		t.Fatalf("misrouted placeholder: %d close=%v %q", resp.StatusCode, resp.Close, body)
	}
	fmt.Fprintf(c, "GET /after HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
	if _, body := readResp(t, br, "GET"); body != "ok /after" {
		t.Fatalf("after a refused body: %q", body)
	}
	var refused bool
	for _, rec := range r.waitRecords(t, audit.TypeDecision, 3) {
		refused = refused || rec.Decision == audit.Deny && rec.Credential == "other"
	}
	if !refused {
		t.Fatal("no deny line names the misrouted credential")
	}

	// The bytes of a switched protocol are masked too.
	c, br = r.dial(t, false)
	fmt.Fprintf(c, "GET /wsleak HTTP/1.1\r\nHost: %s\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", r.authority())
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if line, _ := br.ReadString('\n'); line != "new protocol says "+api+"\n" {
		t.Fatalf("switched protocol not masked: %q", line)
	}

	// Another host's placeholder sent over a switched protocol: the
	// connection is cut, and the request's close line says why.
	c, br = r.dial(t, false)
	fmt.Fprintf(c, "GET /wsecho HTTP/1.1\r\nHost: %s\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", r.authority())
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	fmt.Fprintf(c, "hello\n")
	if line, _ := br.ReadString('\n'); line != "hello\n" {
		t.Fatalf("echo over the switched protocol: %q", line)
	}
	fmt.Fprintf(c, "misrouted %s\n", placeholder("OTHER_KEY"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(br); err != nil || strings.Contains(string(rest), placeholder("OTHER_KEY")) {
		t.Fatalf("after the misrouted placeholder: %q, %v; want the connection cut", rest, err)
	}
	cut := false
	for _, rec := range r.waitRecords(t, audit.TypeClose, 3) {
		cut = cut || rec.Path == "/wsecho" && rec.Reason == string(credinject.ReasonMisroute)
	}
	if !cut {
		t.Fatal("no close line says the switched protocol was cut for a misrouted placeholder")
	}
}

func TestHTTP1Streaming(t *testing.T) {
	next := make(chan struct{})
	origin := testOrigin(t).(*http.ServeMux)
	origin.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
				return
			}
		}
	})
	r := newRig(t, origin, rigOptions{})
	c, br := r.dial(t, false)
	fmt.Fprintf(c, "GET /stream HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(resp.Body)
	// Each event must arrive before the origin sends the next one.
	for i := range 3 {
		if line, err := lines.ReadString('\n'); err != nil || line != fmt.Sprintf("event %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		next <- struct{}{}
	}
}

// panicBody is a request body whose read panics, standing in for any
// bug its reading reaches.
type panicBody struct{}

func (panicBody) Read([]byte) (int, error) { panic("a bug reached by the client's body") }

// TestRequestWriterPanicIsAnError: a panic while a request's body goes
// upstream, on the goroutine of its own it goes on, is the request's
// error, and the upstream connection is closed; nothing else recovers
// that goroutine, so it ended cordon (and cordon run before its
// aftercare).
func TestRequestWriterPanicIsAnError(t *testing.T) {
	c, far := net.Pipe()
	defer far.Close()
	go io.Copy(io.Discard, far)
	up := &upstream1{conn: c, bw: bufio.NewWriter(c)}
	req, err := http.NewRequest(http.MethodPost, "https://a.test/", panicBody{})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	select {
	case err := <-startWrite(up, req):
		if err == nil || !strings.Contains(err.Error(), "a bug reached by the client's body") {
			t.Fatalf("the write's error: %v, want the panic's", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write never ended")
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("the upstream connection is still open")
	}
}
