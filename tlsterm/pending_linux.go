package tlsterm

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// pending is how many bytes wait to be read on c, 0 when unknown.
func pending(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	return n
}
