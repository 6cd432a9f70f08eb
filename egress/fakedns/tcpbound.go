package fakedns

import (
	"fmt"

	"github.com/cordon-sandbox/cordon/audit"
)

// defaultMaxTCPConns is how many TCP connections the resolver serves at
// once, by default. Clients fall back to TCP for a truncated answer, one
// connection per lookup; without a bound, a sandbox that opened
// connections without end, each kept open by a query every few seconds,
// made cordon hold a socket and a goroutine for each, outside the box's
// limits, until cordon ran out of descriptors (and with them its proxy).
const defaultMaxTCPConns = 256

// tcpFull logs, once per session, that the TCP connections reached their
// bound.
func (r *Resolver) tcpFull() {
	r.write(audit.Record{Type: audit.TypeDecision, Kind: audit.KindDNS, Decision: audit.Deny,
		Reason: string(ReasonTooManyConnections),
		Detail: fmt.Sprintf("the resolver already serves %d TCP connections at once, its most; the next wait in the listen queue until one closes (said once per session)", r.cfg.MaxTCPConns)})
}
