package tlsterm

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// panicReader stands for a bug in code cordon runs for one connection:
// its Read panics.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("a bug in a reader") }

// panicConn is a connection whose reads panic.
type panicConn struct{ net.Conn }

func (panicConn) Read([]byte) (int, error) { panic("a bug in a reader") }

// TestPanicsBecomeErrors: a panic in what cordon runs for one connection,
// on a goroutine nothing else recovers (net/http's Transport's, or one of
// cordon's own), fails that connection's read instead of ending cordon
// (and cordon run before its aftercare). Before, each of these ended the
// test binary.
func TestPanicsBecomeErrors(t *testing.T) {
	t.Run("ResponseConn", func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := NewResponseConn(panicConn{a}, nil)
		done := make(chan error, 1)
		go func() { // as net/http's Transport reads it: on a goroutine of its own
			_, err := c.Read(make([]byte, 16))
			done <- err
		}()
		expectPanicError(t, done)
	})
	t.Run("countingBody", func(t *testing.T) {
		var n atomic.Int64
		body := &countingBody{ReadCloser: io.NopCloser(panicReader{}), n: &n}
		done := make(chan error, 1)
		go func() {
			_, err := body.Read(make([]byte, 16))
			done <- err
		}()
		expectPanicError(t, done)
	})
	t.Run("relayBoth", func(t *testing.T) {
		client, clientPeer := net.Pipe()
		upstream, upstreamPeer := net.Pipe()
		defer clientPeer.Close()
		defer upstreamPeer.Close()
		ended := make(chan struct{})
		go func() {
			relayBoth(client, upstream, panicReader{}, upstream)
			close(ended)
		}()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("the relay did not end when its client direction failed")
		}
	})
}

// expectPanicError waits for a read's error and checks that it carries
// the panic.
func expectPanicError(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a bug in a reader") {
			t.Fatalf("the read's error is %v, want the panic", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not return")
	}
}
