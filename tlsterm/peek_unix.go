//go:build unix

package tlsterm

import (
	"net"
	"syscall"
)

// peekIdle looks, without blocking or consuming anything, at what waits on
// an idle connection (the TCP connection under TLS).
func peekIdle(c net.Conn) idleState {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	if d, ok := c.(*drainConn); ok {
		if d.buffered() {
			return idleData
		}
		c = d.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return idleEmpty
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return idleEmpty
	}
	state := idleEmpty
	err = rc.Read(func(fd uintptr) bool {
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
