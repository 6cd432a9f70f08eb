//go:build unix

package tlsterm

import (
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
