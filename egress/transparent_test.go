package egress

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTransparentConnectionsBounded: at most MaxTunnels redirected
// connections are judged at once; the next waits in the listen queue
// until one is, and reaching the bound is logged once. Without the bound,
// a box whose connections each waited on a slow lookup of an allowed name
// made cordon hold a socket and a goroutine for every one.
func TestTransparentConnectionsBounded(t *testing.T) {
	const max = 2
	s, aw, _, logPath := newTestServer(t, "127.0.0.1", max)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	judging := make(chan struct{}, 8)
	release := make(chan struct{})
	// dest stands in for a slow judgement: it holds each connection
	// until released, then names a closed port (refused, logged).
	dest := func(net.Conn) (netip.AddrPort, error) {
		judging <- struct{}{}
		<-release
		return netip.MustParseAddrPort("127.0.0.1:9"), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.ServeTransparent(ctx, ln, dest) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		aw.Close()
	}()
	for range max + 1 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for range max {
		select {
		case <-judging:
		case <-time.After(5 * time.Second):
			t.Fatal("a connection within the bound was not judged")
		}
	}
	select {
	case <-judging:
		t.Fatal("a connection past the bound was judged at once")
	case <-time.After(300 * time.Millisecond):
	}
	data, _ := os.ReadFile(logPath)
	if n := strings.Count(string(data), string(ReasonTooManyConnections)); n != 1 {
		t.Fatalf("%d lines say %s, want 1:\n%s", n, ReasonTooManyConnections, data)
	}
	close(release)
	select {
	case <-judging:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was never judged after the others were")
	}
}
