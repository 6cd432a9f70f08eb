package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// ReasonOtherUser refuses a client connection from another user's socket
// on this host (Config.OwnUserOnly).
const ReasonOtherUser policy.Reason = "other_user"

// errPeerUnknown says this system cannot tell who owns a client's socket.
var errPeerUnknown = errors.New("this system does not say who owns a client's socket")

// peer is the client's end of a connection, as the kernel knows it.
type peer struct {
	uid uint32
	// open says a process still holds the socket: one closed since is
	// the kernel's alone, and reported as root's (uid 0).
	open bool
}

// peerVerdict says whether a client connection may speak to the proxy,
// from what the kernel said of its socket: only the proxy's own user, or
// root, who can read that user's token anyway. A socket on this host
// that is another user's, that no process holds any more, or that cannot
// be found although it is on this host's loopback, is refused; one not on
// this host (a client of --listen-nonlocal) is left to the token. ok is
// false with the refusal's detail.
func peerVerdict(remote netip.Addr, p peer, found bool, lookupErr error, own uint32) (detail string, ok bool) {
	switch {
	case lookupErr != nil:
		return fmt.Sprintf("cannot tell which user this client is (%v), so it is refused: only your own user's clients may use your proxy", lookupErr), false
	case !found && remote.Unmap().IsLoopback():
		return "no socket on this host is this client's end: it is refused, as only your own user's clients may use your proxy", false
	case !found:
		return "", true
	case !p.open:
		return "this client's socket is no process's any more: it is refused, as only your own user's clients may use your proxy", false
	case p.uid == own || p.uid == 0:
		return "", true
	}
	return fmt.Sprintf("this client is another user's on this host (uid %d): only your own user's clients (uid %d), and root's, may use your proxy, token or not", p.uid, own), false
}

// judgePeer says whether the client connection c may speak to the
// proxy (Config.OwnUserOnly); a refusal is logged, within the bound of
// refusals of clients that have not shown the token. A system that
// cannot say who owns a socket lets every client through to the token.
func (s *Server) judgePeer(c net.Conn) bool {
	local, lerr := netip.ParseAddrPort(c.LocalAddr().String())
	remote, rerr := netip.ParseAddrPort(c.RemoteAddr().String())
	var (
		p     peer
		found bool
		err   = errors.Join(lerr, rerr)
	)
	if err == nil {
		p, found, err = peerSocket(local, remote)
	}
	if errors.Is(err, errPeerUnknown) {
		return true
	}
	detail, ok := peerVerdict(remote.Addr(), p, found, err, uint32(os.Getuid()))
	if !ok {
		s.recordUnauthenticated(audit.Record{Type: audit.TypeDecision, Client: remote.String(),
			Decision: audit.Deny, Reason: string(ReasonOtherUser), Detail: detail})
	}
	return ok
}
