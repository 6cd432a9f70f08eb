package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// boundRig is a proxy with MaxTunnels set, in front of a TCP service on
// 127.0.0.1 that reports each connection it accepts and holds it until
// its client goes.
type boundRig struct {
	t        *testing.T
	proxy    string
	target   string
	auth     string
	logPath  string
	accepted chan struct{}
}

func newBoundRig(t *testing.T, max int) *boundRig {
	far, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { far.Close() })
	r := &boundRig{t: t, target: far.Addr().String(), accepted: make(chan struct{}, 16)}
	go func() {
		for {
			c, err := far.Accept()
			if err != nil {
				return
			}
			r.accepted <- struct{}{}
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	r.proxy, r.auth, r.logPath = startProxy(t, r.target, max)
	return r
}

// startProxy serves a proxy, with MaxTunnels set to max, that allows
// target only; it returns the proxy's address, the Basic credentials of
// its token, and its audit log's path.
func startProxy(t *testing.T, target string, max int) (proxy, auth, logPath string) {
	t.Helper()
	s, aw, token, logPath := newTestServer(t, target, max)
	return serveOnLoopback(t, s, aw), base64.StdEncoding.EncodeToString([]byte("cordon:" + token)), logPath
}

// serveOnLoopback serves s on a loopback port until the test ends, then
// closes its audit writer aw; it returns the port's address.
func serveOnLoopback(t *testing.T, s *Server, aw *audit.Writer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
		aw.Close()
	})
	return ln.Addr().String()
}

// newTestServer makes a Server, with MaxTunnels set to max, that allows
// target only, logging to a fresh audit log; it returns the server, the
// log's writer (closed by the caller), the token and the log's path.
func newTestServer(t *testing.T, target string, max int) (s *Server, aw *audit.Writer, token, logPath string) {
	t.Helper()
	rules, err := policy.Compile([]string{target}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(t.TempDir(), "audit.jsonl")
	if aw, err = audit.Open(logPath, "test"); err != nil {
		t.Fatal(err)
	}
	token = NewToken()
	if s, err = New(Config{Rules: rules, Dialer: &Dialer{Rules: rules}, Audit: aw, Token: token, MaxTunnels: max}); err != nil {
		t.Fatal(err)
	}
	return s, aw, token, logPath
}

// dial opens a client connection to the proxy.
func (r *boundRig) dial() net.Conn {
	r.t.Helper()
	c, err := net.Dial("tcp", r.proxy)
	if err != nil {
		r.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r.t.Cleanup(func() { c.Close() })
	return c
}

// connect asks for a tunnel to the target over c and reads the answer.
func (r *boundRig) connect(c net.Conn) *http.Response {
	r.t.Helper()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", r.target, r.target, r.auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// waitAccepted waits (5 s at most) for the far end to see a connection.
func (r *boundRig) waitAccepted() {
	r.t.Helper()
	select {
	case <-r.accepted:
	case <-time.After(5 * time.Second):
		r.t.Fatal("the far end saw no connection")
	}
}

// TestTunnelsBounded: a session holds at most MaxTunnels tunnels open at
// once. One more is refused (503, too_many_tunnels) before it is dialled,
// and logged; once a tunnel closes, its slot serves the next. Without the
// bound, a box that opens connections without end would make cordon hold
// two sockets and two goroutines for each, outside the box's limits.
func TestTunnelsBounded(t *testing.T) {
	r := newBoundRig(t, 2)
	first := r.dial()
	if resp := r.connect(first); resp.StatusCode != 200 {
		t.Fatalf("first tunnel: %d", resp.StatusCode)
	}
	r.waitAccepted()
	if resp := r.connect(r.dial()); resp.StatusCode != 200 {
		t.Fatalf("second tunnel: %d", resp.StatusCode)
	}
	r.waitAccepted()
	third := r.dial()
	resp := r.connect(third)
	third.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Cordon-Reason") != string(ReasonTooManyTunnels) {
		t.Fatalf("a third tunnel at once: %d %q, want 503 %s", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"), ReasonTooManyTunnels)
	}
	select {
	case <-r.accepted:
		t.Fatal("the refused tunnel was dialled")
	case <-time.After(100 * time.Millisecond):
	}
	deny := false
	data, _ := os.ReadFile(r.logPath)
	for _, line := range strings.Split(string(data), "\n") {
		deny = deny || strings.Contains(line, `"decision":"deny"`) && strings.Contains(line, string(ReasonTooManyTunnels))
	}
	if !deny {
		t.Fatalf("no deny line for the refused tunnel:\n%s", data)
	}

	// A tunnel that ends gives its slot back.
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := r.dial()
		resp := r.connect(c)
		c.Close()
		if resp.StatusCode == 200 {
			r.waitAccepted()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed tunnel's slot never came back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientConnectionsBounded: at most MaxTunnels client connections
// speak HTTP to the proxy at once; the next waits, unserved, until one of
// them closes, and reaching the bound is logged once. Connections that
// became tunnels leave that count.
func TestClientConnectionsBounded(t *testing.T) {
	r := newBoundRig(t, 2)
	// Two tunnels: their connections no longer count as HTTP clients.
	for range 2 {
		if resp := r.connect(r.dial()); resp.StatusCode != 200 {
			t.Fatalf("tunnel: %d", resp.StatusCode)
		}
		r.waitAccepted()
	}
	// Two idle clients fill the bound (each is accepted at once: the
	// tunnels left room).
	idle := []net.Conn{r.dial(), r.dial()}
	time.Sleep(100 * time.Millisecond)
	// A third client's request waits.
	waiting := r.dial()
	fmt.Fprintf(waiting, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", r.target, r.target)
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(waiting), nil)
		if err != nil {
			answered <- -1
			return
		}
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("a client past the bound was served at once: %d", code)
	case <-time.After(300 * time.Millisecond):
	}
	// Reaching the bound is logged, once.
	data, _ := os.ReadFile(r.logPath)
	if n := strings.Count(string(data), string(ReasonTooManyConnections)); n != 1 {
		t.Fatalf("%d lines say %s, want 1:\n%s", n, ReasonTooManyConnections, data)
	}
	idle[0].Close()
	select {
	case code := <-answered:
		if code != http.StatusProxyAuthRequired {
			t.Fatalf("the waiting client, once let in: %d, want 407 (it sent no token)", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting client was never served after a slot freed")
	}
}
