package egress

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// peerSocket looks up, with the kernel's socket diagnostics (what ss(8)
// reads), the TCP socket on this host whose own address is remote and
// whose peer is local: the client's end of a connection this proxy
// accepted. found is false when no socket here is that end (a client on
// another machine, or one already gone).
func peerSocket(local, remote netip.AddrPort) (p peer, found bool, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return peer{}, false, fmt.Errorf("open the kernel's socket diagnostics: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; the bound is for a kernel that never does.
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return peer{}, false, fmt.Errorf("socket diagnostics: %w", err)
	}
	if err := unix.Sendto(fd, diagRequest(local, remote), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return peer{}, false, fmt.Errorf("ask the kernel's socket diagnostics: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return peer{}, false, fmt.Errorf("read the kernel's socket diagnostics: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return peer{}, false, fmt.Errorf("read the kernel's socket diagnostics: %d bytes that are no answer", n)
	}
	m := msgs[0]
	if m.Header.Type == unix.NLMSG_ERROR {
		if len(m.Data) >= 4 {
			if errno := syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))); errno == syscall.ENOENT {
				return peer{}, false, nil
			} else if errno != 0 {
				return peer{}, false, fmt.Errorf("the kernel's socket diagnostics: %w", errno)
			}
		}
		return peer{}, false, fmt.Errorf("the kernel's socket diagnostics answered with an error")
	}
	// struct inet_diag_msg: family, state, timer, retrans; the socket id
	// (ports at 4 and 6, addresses at 8 and 24, interface, cookie); then
	// expires, rqueue, wqueue, uid (64), inode (68).
	d := m.Data
	if m.Header.Type != unix.SOCK_DIAG_BY_FAMILY || len(d) < 72 {
		return peer{}, false, fmt.Errorf("the kernel's socket diagnostics answered with message type %d", m.Header.Type)
	}
	// Found by its ports and addresses, the socket must be that end: a
	// lookup that finds no connection falls back to a listener on the
	// client's port, whose peer port is 0.
	if binary.BigEndian.Uint16(d[4:]) != remote.Port() || binary.BigEndian.Uint16(d[6:]) != local.Port() {
		return peer{}, false, nil
	}
	return peer{uid: binary.NativeEndian.Uint32(d[64:]), open: binary.NativeEndian.Uint32(d[68:]) != 0}, true, nil
}

// diagRequest is a netlink message asking for the one TCP socket whose
// own address is remote and whose peer is local (struct nlmsghdr, then
// struct inet_diag_req_v2).
func diagRequest(local, remote netip.AddrPort) []byte {
	const hdr, req = 16, 56
	b := make([]byte, hdr+req)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], hdr+req)
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	r := b[hdr:]
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	r[0] = unix.AF_INET6
	if la.Is4() && ra.Is4() {
		r[0] = unix.AF_INET
	}
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xffffffff) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], remote.Port())
	binary.BigEndian.PutUint16(id[2:], local.Port())
	putDiagAddr(id[4:20], ra)
	putDiagAddr(id[20:36], la)
	// No cookie to match (INET_DIAG_NOCOOKIE).
	ne.PutUint32(id[40:], 0xffffffff)
	ne.PutUint32(id[44:], 0xffffffff)
	return b
}

// putDiagAddr writes a as the kernel's socket id holds it: an IPv4
// address in the first four bytes, an IPv6 one in all sixteen.
func putDiagAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}
