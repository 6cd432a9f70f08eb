package tlsterm

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// errClientGone ends a request whose client went away before its response
// was done: the upstream leg is cut so the server stops working (and
// billing) for nobody.
var errClientGone = errors.New("the client closed its connection before the response was complete; the upstream request was cancelled")

// clientWatch notices, while a request waits on its upstream, that the
// client has closed its connection, and then closes the upstream
// connection. net/http's server does the same with a background read that
// cancels the request's context; here nothing reads the client: the
// kernel is asked whether the client's end is shut (peerClosed), so the
// watch takes no lock on the connection and consumes no byte of a
// pipelined request.
//
// A request answered within watchEvery costs the watch a timer reset and
// stop; a slower one, a look at the socket every watchEvery.
type clientWatch struct {
	rc    syscall.RawConn
	timer *time.Timer

	mu   sync.Mutex
	up   net.Conn // the upstream connection to cut (its TCP, under TLS); nil when not armed
	gone bool
}

// watchEvery is how often a client is looked at while its request waits.
const watchEvery = 250 * time.Millisecond

// newClientWatch watches the TCP connection under c; nil when there is
// none (a pipe), and a nil watch does nothing.
func newClientWatch(c net.Conn) *clientWatch {
	rc := sysConn(c)
	if rc == nil {
		return nil
	}
	return &clientWatch{rc: rc}
}

// arm starts watching on behalf of a request going to up.
func (w *clientWatch) arm(up net.Conn) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.up = up
	if w.timer == nil {
		w.timer = time.AfterFunc(watchEvery, w.check)
	} else {
		w.timer.Reset(watchEvery)
	}
	w.mu.Unlock()
}

// disarm stops watching and says whether the client was found gone.
func (w *clientWatch) disarm() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.up = nil
	return w.gone
}

// isGone says whether the client was found gone.
func (w *clientWatch) isGone() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gone
}

// check is the timer's: it looks at the client once, and either cuts the
// upstream or looks again later.
func (w *clientWatch) check() {
	w.mu.Lock()
	up := w.up
	if up == nil || w.gone {
		w.mu.Unlock()
		return
	}
	closed := false
	if w.rc.Control(func(fd uintptr) { closed = peerClosed(fd) }) != nil {
		closed = true // the descriptor is gone: so is the client
	}
	if !closed {
		w.timer.Reset(watchEvery)
		w.mu.Unlock()
		return
	}
	w.gone = true
	w.mu.Unlock()
	up.Close() // outside the lock
}
