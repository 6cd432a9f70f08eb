package connlimit

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestListenerBound: past the bound, Accept waits until a connection is
// closed or released, and onFull is called once; Close ends a waiting
// Accept.
func TestListenerBound(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fulls := 0
	l := NewListener(inner, 2, func() { fulls++ })
	for range 4 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	accept := func() <-chan net.Conn {
		got := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				c = nil
			}
			got <- c
		}()
		return got
	}
	first, second := <-accept(), <-accept()
	if first == nil || second == nil {
		t.Fatal("an Accept within the bound failed")
	}
	third := accept()
	select {
	case <-third:
		t.Fatal("an Accept past the bound did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close gives back nothing more
	var c3 net.Conn
	select {
	case c3 = <-third:
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection's place was not given back")
	}
	fourth := accept()
	select {
	case <-fourth:
		t.Fatal("a second Close gave back a second place")
	case <-time.After(100 * time.Millisecond):
	}
	c3.(*Conn).Release()
	select {
	case c := <-fourth:
		if c == nil {
			t.Fatal("Accept after a Release failed")
		}
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a released connection's place was not given back")
	}
	if fulls != 1 {
		t.Errorf("onFull called %d times, want once", fulls)
	}
	fifth := accept()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case c := <-fifth:
		if c != nil {
			t.Fatal("Accept after Close returned a connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Accept")
	}
	second.Close()
}

// failing is a listener whose Accept fails with err.
type failing struct {
	net.Listener
	err error
}

func (f failing) Accept() (net.Conn, error) { return nil, f.err }

// TestListenerPausesWhenOutOfDescriptors: an Accept that fails for want
// of descriptors waits before it returns, longer at each failure in a
// row (its callers retry at once), and gives its place back; other
// failures return at once.
func TestListenerPausesWhenOutOfDescriptors(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	l := NewListener(failing{err: emfile}, 1, func() { t.Error("the bound was reached by failed Accepts") })
	for i, least := range []time.Duration{minPause, 2 * minPause, 4 * minPause} {
		start := time.Now()
		if _, err := l.Accept(); !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("Accept %d: %v, want EMFILE", i, err)
		}
		if took := time.Since(start); took < least {
			t.Errorf("Accept %d failing with EMFILE returned after %v, want at least %v", i, took, least)
		}
	}
	other := NewListener(failing{err: net.ErrClosed}, 1, nil)
	start := time.Now()
	for range 100 {
		if _, err := other.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took >= 100*minPause {
		t.Errorf("100 Accepts failing otherwise took %v: they paused", took)
	}
}
