//go:build !linux

package egress

import "net/netip"

// peerSocket finds the owner of a connection's client socket; only
// Linux's are read (judgePeer lets every client through elsewhere).
func peerSocket(local, remote netip.AddrPort) (peer, bool, error) {
	return peer{}, false, errPeerUnknown
}
