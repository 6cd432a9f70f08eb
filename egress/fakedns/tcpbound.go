package fakedns

import (
	"fmt"
	"net"
	"sync"

	"github.com/cordon-sandbox/cordon/audit"
)

// defaultMaxTCPConns is how many TCP connections the resolver serves at
// once, by default. Clients fall back to TCP for a truncated answer, one
// connection per lookup; without a bound, a sandbox that opened
// connections without end, each kept open by a query every few seconds,
// made cordon hold a socket and a goroutine for each, outside the box's
// limits, until cordon ran out of descriptors (and with them its proxy).
const defaultMaxTCPConns = 256

// boundedListener hands out at most cap(slots) connections at once; past
// it, Accept waits for one of them to close, and the next connection
// waits, unserved, in the listen queue. full is called, once, when the
// bound is first reached.
type boundedListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
	full   sync.Once
	onFull func()
}

func newBoundedListener(l net.Listener, max int, onFull func()) *boundedListener {
	return &boundedListener{Listener: l, slots: make(chan struct{}, max), closed: make(chan struct{}), onFull: onFull}
}

func (l *boundedListener) Accept() (net.Conn, error) {
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
		return nil, err
	}
	return &slotConn{Conn: c, slots: l.slots}, nil
}

func (l *boundedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn gives its listener's slot back when it is first closed.
type slotConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}

// tcpFull logs, once per session, that the TCP connections reached their
// bound.
func (r *Resolver) tcpFull() {
	r.write(audit.Record{Type: audit.TypeDecision, Kind: audit.KindDNS, Decision: audit.Deny,
		Reason: string(ReasonTooManyConnections),
		Detail: fmt.Sprintf("the resolver already serves %d TCP connections at once, its most; the next wait in the listen queue until one closes (said once per session)", r.cfg.MaxTCPConns)})
}
