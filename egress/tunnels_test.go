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

// TestTunnelsBounded: a session holds at most MaxTunnels tunnels open at
// once. One more is refused (503, too_many_tunnels) before it is dialled,
// and logged; once a tunnel closes, its slot serves the next. Without the
// bound, a box that opens connections without end would make cordon hold
// two sockets and two goroutines for each, outside the box's limits.
func TestTunnelsBounded(t *testing.T) {
	// The far end: a TCP service that counts its connections and holds
	// each until its client goes.
	far, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := far.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	target := far.Addr().String()
	rules, err := policy.Compile([]string{target}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	aw, err := audit.Open(logPath, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	token := NewToken()
	s, err := New(Config{Rules: rules, Dialer: &Dialer{Rules: rules}, Audit: aw, Token: token, MaxTunnels: 2})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	auth := base64.StdEncoding.EncodeToString([]byte("cordon:" + token))
	connect := func() (net.Conn, *http.Response) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return c, resp
	}
	waitAccepted := func() {
		t.Helper()
		select {
		case <-accepted:
		case <-time.After(5 * time.Second):
			t.Fatal("the far end saw no connection")
		}
	}
	first, resp := connect()
	if resp.StatusCode != 200 {
		t.Fatalf("first tunnel: %d", resp.StatusCode)
	}
	waitAccepted()
	second, resp := connect()
	if resp.StatusCode != 200 {
		t.Fatalf("second tunnel: %d", resp.StatusCode)
	}
	waitAccepted()
	defer second.Close()
	third, resp := connect()
	third.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Cordon-Reason") != string(ReasonTooManyTunnels) {
		t.Fatalf("a third tunnel at once: %d %q, want 503 %s", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"), ReasonTooManyTunnels)
	}
	select {
	case <-accepted:
		t.Fatal("the refused tunnel was dialled")
	case <-time.After(100 * time.Millisecond):
	}
	deny := false
	data, _ := os.ReadFile(logPath)
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
		c, resp := connect()
		c.Close()
		if resp.StatusCode == 200 {
			waitAccepted()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed tunnel's slot never came back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
