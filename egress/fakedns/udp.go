package fakedns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
)

// udpWorkers is how many UDP queries the resolver works on at once; past
// them, queries wait in the socket's receive buffer, and the kernel drops
// those that do not fit, as it does for any busy resolver. miekg/dns's
// server starts a goroutine for every packet it reads, however many are
// still being answered, so a box that flooded the resolver while its
// answers were slow (audit writes to a slow disk) made cordon hold a
// goroutine and a buffer for every packet, outside the box's limits:
// some 30,000 goroutines and 300 MB in two seconds of a stalled writer.
const udpWorkers = 64

// headerLen is the length of a DNS message's header.
const headerLen = 12

// serveUDP answers the queries on pc with udpWorkers readers, and closes
// done once pc is closed and every reader has stopped.
func (r *Resolver) serveUDP(pc net.PacketConn, done chan<- struct{}) {
	stopped := make(chan struct{})
	for range udpWorkers {
		go func() {
			defer func() { stopped <- struct{}{} }()
			if err := r.readUDP(pc); !errors.Is(err, net.ErrClosed) {
				r.cfg.ErrorLog.Printf("cordon: fakedns: udp %s: %v; DNS queries over UDP are no longer answered", r.addr, err)
			}
		}()
	}
	for range udpWorkers {
		<-stopped
	}
	close(done)
}

// readUDP reads and answers one query after another until pc fails.
func (r *Resolver) readUDP(pc net.PacketConn) error {
	buf := make([]byte, dns.DefaultMsgSize)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if r.udpBusy.Add(1) == udpWorkers {
			r.udpFull.Do(r.logUDPFull)
		}
		if out := r.replyUDP(buf[:n], from.String()); out != nil {
			// A reply that cannot be sent is the box's to know (see
			// ServeDNS).
			_, _ = pc.WriteTo(out, from)
		}
		r.udpBusy.Add(-1)
	}
}

// replyUDP is the packed reply to one UDP message from client, or nil to
// send none, as miekg/dns's server answers: a message too short for a
// header, or a response, gets none; one whose header reads but whose body
// does not gets FORMERR.
func (r *Resolver) replyUDP(b []byte, client string) []byte {
	if len(b) < headerLen || acceptQuery(dns.Header{Bits: binary.BigEndian.Uint16(b[2:])}) != dns.MsgAccept {
		return nil
	}
	req := new(dns.Msg)
	var m *dns.Msg
	if err := req.Unpack(b); err != nil {
		m = formatError(req)
	} else if m = r.answer(req, client, false); m == nil {
		return nil
	}
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

// formatError is the FORMERR for a message whose header reads but whose
// body does not: the header alone (miekg/dns's server sends what of the
// questions it read too, which may not fit a UDP reply). It reuses req.
func formatError(req *dns.Msg) *dns.Msg {
	req.SetRcodeFormatError(req)
	req.Zero = false
	req.Question, req.Ns, req.Answer, req.Extra = nil, nil, nil, nil
	return req
}

// logUDPFull logs, once per session, that every UDP reader was busy.
func (r *Resolver) logUDPFull() {
	r.write(audit.Record{Type: audit.TypeDecision, Kind: audit.KindDNS, Decision: audit.Deny,
		Reason: string(ReasonTooManyQueries),
		Detail: fmt.Sprintf("the resolver is answering %d UDP queries at once, its most; the next wait in the socket's buffer, and the kernel drops those that do not fit (said once per session)", udpWorkers)})
}
