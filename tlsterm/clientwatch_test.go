package tlsterm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// hangOrigin answers /hang only when its request is cancelled (it reports
// the cancellation on cancelled), /dribble with a header and part of a
// body, the rest never, and /stream with a body that never ends. started
// says a request reached it.
func hangOrigin(started, cancelled chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/dribble":
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		case "/stream":
			started <- r.URL.Path
			for i := 0; i < 2000 && r.Context().Err() == nil; i++ {
				io.WriteString(w, "data: more\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
			if r.Context().Err() != nil {
				cancelled <- r.URL.Path
			}
			return
		}
		started <- r.URL.Path
		select {
		case <-r.Context().Done():
			cancelled <- r.URL.Path
		case <-time.After(20 * time.Second):
		}
	})
}

// TestClientGoneCancelsUpstream: a client that leaves while its request is
// upstream (waiting for the response header, or in the middle of the
// body) gets that request cancelled at the origin, and the request's line
// says why (client_gone). An agent that is interrupted in the middle of a
// long, non-streaming API call must not leave the call running, and
// billed, for nobody.
func TestClientGoneCancelsUpstream(t *testing.T) {
	type leave func(tc, raw net.Conn)
	closeTLS := func(tc, raw net.Conn) { tc.Close() }                        // close_notify, then the end
	killed := func(tc, raw net.Conn) { raw.Close() }                         // the end only, as when a process dies
	halfClosed := func(tc, raw net.Conn) { raw.(*net.TCPConn).CloseWrite() } // as net/http's server takes it
	for _, tc := range []struct {
		name      string
		plaintext bool
		request   string
		leave     leave
	}{
		{"GET header wait", false, "GET /hang HTTP/1.1\r\nHost: %s\r\n\r\n", closeTLS},
		{"GET killed client", false, "GET /hang HTTP/1.1\r\nHost: %s\r\n\r\n", killed},
		{"GET half-closed", false, "GET /hang HTTP/1.1\r\nHost: %s\r\n\r\n", halfClosed},
		{"POST header wait", false, "POST /hang HTTP/1.1\r\nHost: %s\r\nContent-Length: 11\r\n\r\n{\"q\": \"hi\"}", closeTLS},
		{"GET mid-body", false, "GET /dribble HTTP/1.1\r\nHost: %s\r\n\r\n", closeTLS},
		{"GET streaming", false, "GET /stream HTTP/1.1\r\nHost: %s\r\n\r\n", killed},
		{"plaintext GET", true, "GET /hang HTTP/1.1\r\nHost: %s\r\n\r\n", killed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, cancelled := make(chan string, 1), make(chan string, 1)
			r := newRig(t, hangOrigin(started, cancelled), rigOptions{h1Only: true, plaintext: tc.plaintext})
			raw, err := net.Dial("tcp", r.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c := raw
			if !tc.plaintext {
				c = tls.Client(raw, &tls.Config{ServerName: r.Host, RootCAs: r.ClientRoots, NextProtos: []string{"http/1.1"}})
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, tc.request, r.authority())
			path := waitFor(t, started, "the request to reach the origin")
			if path != "/hang" {
				if _, err := io.ReadFull(c, make([]byte, 10)); err != nil {
					t.Fatalf("read the response's start: %v", err)
				}
			}
			tc.leave(c, raw)
			waitFor(t, cancelled, "the origin's request to be cancelled")
			rec := r.waitRecords(t, audit.TypeClose, 1)[0]
			if rec.Path != path || rec.Reason != string(ReasonClientGone) {
				t.Fatalf("close line %+v, want %s with reason %s", rec, path, ReasonClientGone)
			}
		})
	}
}

// TestClientGoneHTTP2 is TestClientGoneCancelsUpstream over HTTP/2, where
// the client cancels its stream.
func TestClientGoneHTTP2(t *testing.T) {
	for _, path := range []string{"/hang", "/dribble"} {
		t.Run(path, func(t *testing.T) {
			started, cancelled := make(chan string, 1), make(chan string, 1)
			r := newRig(t, hangOrigin(started, cancelled), rigOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", r.url(path), nil)
			errc := make(chan error, 1)
			go func() {
				resp, err := r.client(r.ClientRoots, true).Do(req)
				if err == nil {
					if resp.ProtoMajor != 2 {
						err = fmt.Errorf("spoke %s, want HTTP/2", resp.Proto)
					} else {
						_, err = io.ReadAll(resp.Body)
					}
					resp.Body.Close()
				}
				errc <- err
			}()
			waitFor(t, started, "the request to reach the origin")
			time.Sleep(50 * time.Millisecond) // the response's start on its way
			cancel()
			if err := <-errc; err == nil || !strings.Contains(err.Error(), "context canceled") {
				t.Fatalf("client: %v, want its cancellation", err)
			}
			waitFor(t, cancelled, "the origin's request to be cancelled")
			rec := r.waitRecords(t, audit.TypeClose, 1)[0]
			if rec.Path != path || rec.Reason != string(ReasonClientGone) {
				t.Fatalf("close line %+v, want %s with reason %s", rec, path, ReasonClientGone)
			}
		})
	}
}

// TestSlowResponseLiveClient: a live client's request outlasts several
// looks of the watch and is answered.
func TestSlowResponseLiveClient(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(3 * watchEvery)
		io.WriteString(w, "late")
	}), rigOptions{h1Only: true})
	c, br := r.dial(t, false)
	for i := range 2 {
		fmt.Fprintf(c, "GET /late HTTP/1.1\r\nHost: %s\r\n\r\n", r.authority())
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "late" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	for _, rec := range r.waitRecords(t, audit.TypeClose, 2) {
		if rec.Status != 200 || rec.Reason != "" {
			t.Fatalf("close line %+v, want a plain 200", rec)
		}
	}
}

// waitFor receives from c within 5 s.
func waitFor(t *testing.T, c <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// TestHTTP2CutResponseLogged: an HTTP/2 response the origin cuts short in
// its body resets the client's stream and is logged as an upstream error.
func TestHTTP2CutResponseLogged(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}), rigOptions{})
	resp, err := r.client(r.ClientRoots, true).Get(r.url("/cut"))
	if err == nil {
		if resp.ProtoMajor != 2 {
			t.Fatalf("spoke %s, want HTTP/2", resp.Proto)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("the cut response read as whole")
	}
	rec := r.waitRecords(t, audit.TypeClose, 1)[0]
	if rec.Path != "/cut" || rec.Reason != string(ReasonUpstreamError) {
		t.Fatalf("close line %+v, want /cut with reason %s", rec, ReasonUpstreamError)
	}
}

// TestClientGoneMidUpload: a client that leaves in the middle of its
// request body ends the request with client_gone, and the origin sees its
// request end.
func TestClientGoneMidUpload(t *testing.T) {
	started, cancelled := make(chan string, 1), make(chan string, 1)
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		started <- req.URL.Path
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			cancelled <- req.URL.Path
		}
	}), rigOptions{h1Only: true})
	c, _ := r.dial(t, false)
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n%s", r.authority(), strings.Repeat("x", 1000))
	waitFor(t, started, "the request to reach the origin")
	c.Close()
	waitFor(t, cancelled, "the origin's request body to end early")
	rec := r.waitRecords(t, audit.TypeClose, 1)[0]
	if rec.Path != "/upload" || rec.Reason != string(ReasonClientGone) {
		t.Fatalf("close line %+v, want /upload with reason %s", rec, ReasonClientGone)
	}
}

// TestFailure: the reason and detail a failed upstream leg is logged
// with, whichever path it failed on.
func TestFailure(t *testing.T) {
	ce := &credinject.Error{Reason: credinject.ReasonMisroute, Credential: "github", Target: "evil.test:443"}
	for _, tc := range []struct {
		name      string
		err       error
		reason    policy.Reason
		detailHas string
	}{
		{"credential refusal", fmt.Errorf("write body: %w", ce), ce.Reason, ce.Error()},
		{"unverified upstream", &upstreamTLSError{errors.New("x509: unknown authority")}, ReasonUpstreamTLS, "unknown authority"},
		{"watch found the client gone", errClientGone, ReasonClientGone, "cancelled"},
		{"client cut its upload", clientLost{io.ErrUnexpectedEOF}, ReasonClientGone, "unexpected EOF"},
		{"HTTP/2 stream cancelled", fmt.Errorf("net/http: request canceled: %w", context.Canceled), ReasonClientGone, "cancelled"},
		{"anything else", errors.New("connection reset by peer"), ReasonUpstreamError, "connection reset by peer"},
	} {
		d := Failure(tc.err, nil)
		if d.Reason != tc.reason || !strings.Contains(d.Detail, tc.detailHas) || d.Allow {
			t.Errorf("%s: Failure(%v) = %+v, want reason %s and a detail with %q", tc.name, tc.err, d, tc.reason, tc.detailHas)
		}
	}
}

// TestClientBodyLost: which errors reading a request body mean the
// client's connection is gone. A timeout is not one: abortWrite sets a
// deadline of its own to stop the body's writer.
func TestClientBodyLost(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name string
		err  error
		eof  bool
		lost error
	}{
		{"the body's end", io.EOF, true, nil},
		{"cut short", io.ErrUnexpectedEOF, false, io.ErrUnexpectedEOF},
		{"reset", reset, false, reset},
		{"cordon's own deadline", timeout, false, nil},
		{"a malformed chunk", errors.New("malformed chunked encoding"), false, nil},
	} {
		b := &clientBody{ReadCloser: io.NopCloser(iotest.ErrReader(tc.err))}
		b.Read(make([]byte, 8))
		if b.eof != tc.eof || b.lost != tc.lost {
			t.Errorf("%s: eof %v lost %v, want %v %v", tc.name, b.eof, b.lost, tc.eof, tc.lost)
		}
	}
}

// TestFailureScrubs: an upstream error that quotes the request (net/http
// quotes an Upgrade header it refuses) reaches the page and the log with
// the credential's secret and placeholder taken out.
func TestFailureScrubs(t *testing.T) {
	const secret = "s3cr3t-value-for-the-test"
	creds, err := credinject.Load([]policy.Credential{
		{Name: "api", Source: policy.Source{Env: "API_SECRET"}, Hosts: []string{"api.test"}, Header: "Authorization: Bearer {}", Env: "API_KEY"},
	}, []string{"api"}, credinject.Options{Env: func(string) string { return secret }})
	if err != nil {
		t.Fatal(err)
	}
	ph := strings.TrimPrefix(creds.Env()[0], "API_KEY=")
	for _, quoted := range []string{secret, ph} {
		d := Failure(fmt.Errorf("client tried to switch to invalid protocol %q", quoted+"\tx"), creds)
		if strings.Contains(d.Detail, quoted) || !strings.Contains(d.Detail, "[masked:api]") {
			t.Errorf("Failure detail %q", d.Detail)
		}
	}
}
