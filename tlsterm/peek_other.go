//go:build !unix

package tlsterm

import "net"

// peekIdle cannot look at a connection here: it is taken as idle.
func peekIdle(net.Conn) idleState { return idleEmpty }
