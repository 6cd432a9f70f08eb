package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
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
	serveTransparent(t, s, aw, ln, dest)
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

// TestTransparentPanicCutsOnlyItsConnection: a redirected connection
// whose serving panics (here its destination lookup stands in for any
// step) is cut and logged, and the listener serves the next, as net/http
// serves a proxy client. Nothing recovered it before, so a panic ended
// cordon run before its aftercare set aside what the box had planted.
func TestTransparentPanicCutsOnlyItsConnection(t *testing.T) {
	s, aw, _, logPath := newTestServer(t, "127.0.0.1", 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	dest := func(net.Conn) (netip.AddrPort, error) {
		if calls.Add(1) == 1 {
			panic("a bug reached by the box's bytes")
		}
		return netip.AddrPort{}, errors.New("not redirected")
	}
	serveTransparent(t, s, aw, ln, dest)
	for _, want := range []policy.Reason{ReasonInternalError, ReasonNoDestination} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("read %d bytes, want the connection cut", n)
		}
		c.Close()
		data, _ := os.ReadFile(logPath)
		if !strings.Contains(string(data), `"decision":"deny","reason":"`+string(want)+`"`) {
			t.Fatalf("no deny line with reason %s:\n%s", want, data)
		}
	}
}

// serveTransparent serves ln's redirected connections, each to the
// destination dest names, until the test ends; then it checks that
// serving ended cleanly and closes the audit log.
func serveTransparent(t *testing.T, s *Server, aw *audit.Writer, ln net.Listener, dest func(net.Conn) (netip.AddrPort, error), own ...netip.Prefix) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.ServeTransparent(ctx, ln, dest, own) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		aw.Close()
	})
}

// TestTransparentRefusesSandboxAddresses: a connection redirected to an
// address the sandbox's network has of its own (its loopback, where the
// transparent listener is, or its gateway on a port but the proxy's) is
// refused and logged as sandbox_address, and not dialled, even when the
// allowlist names that address: from the host it would reach another
// machine, or the host's own loopback, than the one the box named.
// Before, it was judged as an address of the host's network.
func TestTransparentRefusesSandboxAddresses(t *testing.T) {
	own := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.2.2/32")}
	for _, tc := range []struct {
		name    string
		own     []netip.Prefix
		dialled bool
	}{
		{"an address of the sandbox's own", own, false},
		{"control: the same address, not the sandbox's", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, aw, _, logPath := newTestServer(t, "127.0.0.1:*", 4)
			upstream, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer upstream.Close()
			accepted := make(chan struct{}, 1)
			go func() {
				if c, err := upstream.Accept(); err == nil {
					accepted <- struct{}{}
					c.Close()
				}
			}()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dst := netip.MustParseAddrPort(upstream.Addr().String())
			serveTransparent(t, s, aw, ln, func(net.Conn) (netip.AddrPort, error) { return dst, nil }, tc.own...)
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case <-accepted:
				if !tc.dialled {
					t.Fatalf("%s was dialled from the host", dst)
				}
			case <-time.After(2 * time.Second):
				if tc.dialled {
					data, _ := os.ReadFile(logPath)
					t.Fatalf("%s was not dialled:\n%s", dst, data)
				}
			}
			data, _ := os.ReadFile(logPath)
			refused := strings.Contains(string(data), `"decision":"deny","reason":"`+string(ReasonSandboxAddress)+`"`)
			if refused == tc.dialled {
				t.Fatalf("refused as %s: %v, want %v:\n%s", ReasonSandboxAddress, refused, !tc.dialled, data)
			}
		})
	}
}
