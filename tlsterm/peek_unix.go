//go:build unix

package tlsterm

import (
	"io"
	"net"
	"syscall"
)

// peekIdle looks, without blocking or consuming anything, at what waits on
// an idle connection (the TCP connection under TLS).
func peekIdle(c net.Conn) idleState {
	if d := rawOf(c); d != nil && d.buffered() {
		return idleData
	}
	rc := sysConn(c)
	if rc == nil {
		return idleEmpty
	}
	state := idleEmpty
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		case err != nil || n == 0:
			state = idleClosed
		default:
			state = idleData
		}
		return true
	})
	if err != nil {
		return idleClosed
	}
	return state
}

// sysConn is the descriptor of the socket under c (under TLS, a
// drainConn, a replayed prefix), or nil when there is none (a pipe).
func sysConn(c net.Conn) syscall.RawConn {
	for {
		switch w := c.(type) {
		case interface{ NetConn() net.Conn }:
			c = w.NetConn()
			continue
		case *drainConn:
			c = w.Conn
			continue
		}
		break
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// atHandRead reads what waits on a socket without waiting. It keeps the
// socket's RawConn and its callback, so that a read allocates nothing.
type atHandRead struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool
	p    []byte
	n    int
	rerr error
}

// read reads what waits on the socket under c into p: errNotAtHand when
// nothing does, io.EOF at its end.
func (a *atHandRead) read(c net.Conn, p []byte) (int, error) {
	if a.rc == nil {
		if a.rc = sysConn(c); a.rc == nil {
			return c.Read(p)
		}
		a.fn = func(fd uintptr) bool {
			a.n, a.rerr = syscall.Read(int(fd), a.p)
			return true
		}
	}
	a.p = p
	err := a.rc.Read(a.fn)
	n, rerr := a.n, a.rerr
	a.p, a.rerr = nil, nil
	switch {
	case err != nil:
		return 0, err
	case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
		return 0, errNotAtHand
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
