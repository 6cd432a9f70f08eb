package tlsterm

import "golang.org/x/sys/unix"

// peerClosed says whether the other end of the TCP socket fd has shut its
// sending side or reset the connection, even with bytes still unread
// (a TLS close_notify comes before the end): kqueue reports it as EV_EOF
// on a read filter, which poll(2) on macOS cannot.
func peerClosed(fd uintptr) bool {
	kq, err := unix.Kqueue()
	if err != nil {
		return false
	}
	defer unix.Close(kq)
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], int(fd), unix.EVFILT_READ, unix.EV_ADD)
	n, err := unix.Kevent(kq, ev[:], ev[:], &unix.Timespec{})
	return err == nil && n > 0 && ev[0].Flags&unix.EV_EOF != 0
}
