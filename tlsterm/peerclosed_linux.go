package tlsterm

import "golang.org/x/sys/unix"

// peerClosed says whether the other end of the TCP socket fd has shut its
// sending side or reset the connection, even with bytes still unread
// (a TLS close_notify comes before the end).
func peerClosed(fd uintptr) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0 && pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}
