// Package connlimit bounds how many connections a listener hands out at
// once, so that a client opening connections without end finds them
// waiting in the kernel's listen queue, not each held by a goroutine.
package connlimit

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Listener hands out at most its bound of connections at once. Past it,
// Accept waits for one to be released; onFull is called, once, the first
// time the bound is reached.
type Listener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
	full   sync.Once
	onFull func()
	// pause is how long Accept waits after the process ran out of
	// descriptors (or memory) before it says so, doubled at each failure
	// in a row: callers retry at once, and would spin a core meanwhile.
	pause atomic.Int64
}

// Backoff bounds for an Accept that failed for want of descriptors.
const (
	minPause = 5 * time.Millisecond
	maxPause = time.Second
)

// NewListener bounds l to max connections at once.
func NewListener(l net.Listener, max int, onFull func()) *Listener {
	return &Listener{Listener: l, slots: make(chan struct{}, max), closed: make(chan struct{}), onFull: onFull}
}

// Accept waits for a place under the bound, then for a connection, and
// returns it as a *Conn holding that place.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.full.Do(l.onFull)
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		if Exhausted(err) {
			pause := min(max(2*time.Duration(l.pause.Load()), minPause), maxPause)
			l.pause.Store(int64(pause))
			select {
			case <-time.After(pause):
			case <-l.closed:
			}
		}
		return nil, err
	}
	l.pause.Store(0)
	return &Conn{Conn: c, slots: l.slots}, nil
}

// Exhausted says err is the process or system out of descriptors or
// memory: a failure that lasts until something is freed, after which
// accepting may go on.
func Exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// Close closes the listener and ends an Accept waiting for a place.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Conn holds one place under its listener's bound until Release or its
// first Close.
type Conn struct {
	net.Conn
	slots    chan struct{}
	released sync.Once
}

// Release gives the connection's place back while it stays open (it has
// moved under another bound).
func (c *Conn) Release() { c.released.Do(func() { <-c.slots }) }

// NetConn returns the connection the listener accepted.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and gives its place back.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.Release()
	return err
}
