package egress

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// panicReader stands for a bug in code cordon runs for one connection:
// its Read panics.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("a bug in a reader") }

// panicConn is a connection whose reads and writes panic, and which says
// when it is closed.
type panicConn struct {
	net.Conn
	closed chan struct{}
}

func (panicConn) Read([]byte) (int, error)  { panic("a bug in a reader") }
func (panicConn) Write([]byte) (int, error) { panic("a bug in a writer") }
func (c panicConn) Close() error {
	close(c.closed)
	return c.Conn.Close()
}

// TestPanicsBecomeErrors: a panic in what cordon runs for one connection,
// on a goroutine nothing else recovers (net/http's Transport's, or one of
// cordon's own), fails that connection instead of ending cordon (and
// cordon run before its aftercare). Before, each of these ended the test
// binary.
func TestPanicsBecomeErrors(t *testing.T) {
	within := func(t *testing.T, what string, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal(what)
		}
	}
	t.Run("countedBody", func(t *testing.T) {
		body := newCountedBody(io.NopCloser(panicReader{}), func(int64, int64, error) {})
		var err error
		done := make(chan struct{})
		go func() { // as net/http's Transport reads a request's body
			_, err = body.Read(make([]byte, 16))
			close(done)
		}()
		within(t, "the read did not return", done)
		if err == nil || !strings.Contains(err.Error(), "a bug in a reader") {
			t.Fatalf("the read's error is %v, want the panic", err)
		}
	})
	t.Run("sniff", func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		up, upPeer := net.Pipe()
		defer up.Close()
		defer upPeer.Close()
		done := make(chan struct{})
		var proto protocol
		go func() {
			proto, _, _, _ = sniff(panicConn{Conn: a, closed: make(chan struct{})}, up, 2*time.Second)
			close(done)
		}()
		within(t, "sniff did not return", done)
		if proto != protoEnded && proto != protoRefused {
			t.Fatalf("a tunnel whose opening could not be read was taken for %v, want it ended or refused", proto)
		}
	})
	t.Run("maskedConn", func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		conn := panicConn{Conn: a, closed: make(chan struct{})}
		c := newMaskedConn(nil, "x-test", conn, "up.test", 80)
		go c.Write([]byte("hello")) // guarded, then written to conn, which panics
		within(t, "the switched connection was not closed after its writer failed", conn.closed)
	})
}
