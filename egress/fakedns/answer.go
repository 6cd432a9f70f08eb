package fakedns

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// ednsSize is the UDP payload the resolver advertises (the DNS flag day
// 2020 value).
const ednsSize = 1232

// answer builds the reply to one message from client, or nil to drop it.
// tcp lifts the size limit; over UDP the reply fits the client's payload.
func (r *Resolver) answer(req *dns.Msg, client string, tcp bool) *dns.Msg {
	if req.Response {
		return nil
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				m.Question = nil
				m.Rcode = dns.RcodeFormatError
				return m
			}
			opt = o
		}
	}
	if opt != nil {
		m.SetEdns0(ednsSize, false)
	}
	switch {
	case opt != nil && opt.Version() != 0:
		m.Rcode = dns.RcodeBadVers
	case req.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
	case len(req.Question) != 1:
		m.Question = nil
		m.Rcode = dns.RcodeFormatError
	default:
		r.resolve(m, req.Question[0], client)
	}
	m.Truncate(replySize(opt, tcp))
	return m
}

// replySize is the longest reply the client takes: 512 bytes over UDP, or
// its EDNS payload if larger; a whole DNS message over TCP.
func replySize(opt *dns.OPT, tcp bool) int {
	switch {
	case tcp:
		return dns.MaxMsgSize
	case opt != nil && int(opt.UDPSize()) > dns.MinMsgSize:
		return int(opt.UDPSize())
	}
	return dns.MinMsgSize
}

// resolve fills in the answer and rcode for one question.
func (r *Resolver) resolve(m *dns.Msg, q dns.Question, client string) {
	if q.Qclass != dns.ClassINET {
		r.refuse(m, q, client, ReasonClass, fmt.Sprintf("class %s is refused; only class IN is answered", dns.Class(q.Qclass)))
		return
	}
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeHTTPS, dns.TypeSVCB:
		r.resolveName(m, q, client)
	case dns.TypePTR:
		r.resolvePTR(m, q, client)
	default:
		r.refuse(m, q, client, ReasonType, fmt.Sprintf("type %s is refused; the resolver answers A (and an empty AAAA, HTTPS or SVCB) for allowlisted names and PTR for its own addresses", dns.Type(q.Qtype)))
	}
}

func (r *Resolver) resolveName(m *dns.Msg, q dns.Question, client string) {
	var d policy.Decision
	if host, err := policy.NormalizeHost(q.Name); err != nil {
		d = policy.Decision{Host: q.Name, Reason: policy.ReasonBadHost, Detail: err.Error()}
	} else {
		d = DecideName(r.cfg.Rules, host)
	}
	if !d.Allow {
		m.Rcode = dns.RcodeNameError
		r.deny(client, q, d)
		return
	}
	if q.Qtype != dns.TypeA {
		return
	}
	a, err := r.allocate(client, q, d)
	if err != nil {
		m.Rcode = dns.RcodeServerFailure
		if errors.Is(err, errRangeFull) {
			r.deny(client, q, policy.Decision{Host: d.Host, Reason: ReasonRangeFull, Rule: d.Rule,
				Detail: err.Error() + "; names already answered keep working, and a new session starts with a fresh range"})
		}
		return
	}
	m.Answer = append(m.Answer, &dns.A{
		Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL},
		A:   a.AsSlice(),
	})
}

// allocate returns the name's fake address, handing out the next one and
// logging the allow line on the name's first query.
func (r *Resolver) allocate(client string, q dns.Question, d policy.Decision) (netip.Addr, error) {
	r.mu.RLock()
	a, ok := r.byName[d.Host]
	r.mu.RUnlock()
	if ok {
		return a, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.byName[d.Host]; ok {
		return a, nil
	}
	a, err := r.pool.peek()
	if err != nil {
		return a, fmt.Errorf("all %d fake addresses of %s are handed out: %w", len(r.byName), r.pool.prefix, err)
	}
	rec := r.record(client, q, d)
	rec.Addr = a.String()
	rec.Detail += "; answered " + rec.Addr
	if err := r.write(rec); err != nil {
		return netip.Addr{}, err
	}
	r.pool.advance()
	r.byName[d.Host] = a
	r.byAddr[a] = d.Host
	return a, nil
}

func (r *Resolver) resolvePTR(m *dns.Msg, q dns.Question, client string) {
	if a, ok := reverseAddr(q.Name); ok {
		if name, ok := r.NameFor(a); ok {
			m.Answer = append(m.Answer, &dns.PTR{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: TTL},
				Ptr: dns.Fqdn(name),
			})
			return
		}
	}
	m.Rcode = dns.RcodeNameError
	r.deny(client, q, policy.Decision{Host: auditHost(q.Name), Reason: ReasonNoReverse,
		Detail: "only the fake addresses this resolver handed out have reverse names"})
}

// refuse answers REFUSED and logs why.
func (r *Resolver) refuse(m *dns.Msg, q dns.Question, client string, reason policy.Reason, detail string) {
	m.Rcode = dns.RcodeRefused
	r.deny(client, q, policy.Decision{Host: auditHost(q.Name), Reason: reason, Detail: detail})
}

// record is the audit line for a decision on one question.
func (r *Resolver) record(client string, q dns.Question, d policy.Decision) audit.Record {
	return audit.Record{
		Type: audit.TypeDecision, Kind: audit.KindDNS, Client: client, Host: d.Host,
		Decision: audit.Verdict(d.Allow), Reason: string(d.Reason), Rule: d.Rule,
		Detail: fmt.Sprintf("%s query for %s: %s", dns.Type(q.Qtype), q.Name, d.Detail),
	}
}

// write appends one audit line; the first failure is also reported to
// ErrorLog.
func (r *Resolver) write(rec audit.Record) error {
	err := r.cfg.Audit.Write(rec)
	if r.cfg.Audit.Report(err) {
		r.cfg.ErrorLog.Printf("cordon: fakedns: %v", err)
	}
	return err
}

// auditHost is the normalised name when there is one, else the name as
// asked.
func auditHost(name string) string {
	if h, err := policy.NormalizeHost(name); err == nil {
		return h
	}
	return name
}

// reverseAddr parses an in-addr.arpa name (any case, canonical decimal
// octets) into the IPv4 address it stands for.
func reverseAddr(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(strings.ToLower(name), ".in-addr.arpa.")
	if !ok {
		return netip.Addr{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || strconv.FormatUint(n, 10) != p {
			return netip.Addr{}, false
		}
		b[3-i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}
