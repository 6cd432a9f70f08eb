package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Reason is a stable code saying why a decision went the way it did.
// Audit lines, 403 pages and tests compare these codes, never the text.
type Reason string

// The reasons Rules can give. Other packages add their own (egress: the
// dialer and authentication; tlsterm: authority checks).
const (
	ReasonAllowed       Reason = "allowlisted"
	ReasonNotAllowed    Reason = "not_allowlisted"
	ReasonDenyRule      Reason = "deny_rule"
	ReasonPortNotAllow  Reason = "port_not_allowed"
	ReasonBadHost       Reason = "bad_host"
	ReasonNetworkOff    Reason = "network_off"
	ReasonNetworkOpen   Reason = "network_open"
	ReasonBlockedAddr   Reason = "blocked_address"
	ReasonPrivateAddr   Reason = "private_address"
	ReasonResolveFailed Reason = "resolve_failed"
)

// Decision is the verdict on one host and port. It is computed by a pure
// function, then logged and enforced, so the proxy, the audit, doctor and
// the tests all read the same value.
type Decision struct {
	Allow  bool
	Reason Reason
	// Detail is a human sentence: what was asked and how to allow it.
	Detail string
	// Host and Port are the normalised target.
	Host string
	Port int
	// Rule is the pattern that matched, if any.
	Rule string
}

// Rules is a compiled allowlist and denylist. Deny wins.
type Rules struct {
	Allow []Pattern
	Deny  []Pattern
}

// Compile parses allow and deny entries; the error names the bad entry.
func Compile(allow, deny []string) (*Rules, error) {
	r := &Rules{}
	for _, s := range allow {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("allow: %w", err)
		}
		r.Allow = append(r.Allow, p)
	}
	for _, s := range deny {
		p, err := ParseDenyPattern(s)
		if err != nil {
			return nil, fmt.Errorf("deny: %w", err)
		}
		r.Deny = append(r.Deny, p)
	}
	return r, nil
}

// Decide judges a raw host (as the client wrote it) and port.
func (r *Rules) Decide(rawHost string, port int) Decision {
	host, err := NormalizeHost(rawHost)
	if err != nil {
		return Decision{Reason: ReasonBadHost, Detail: err.Error(), Host: rawHost, Port: port}
	}
	return r.DecideNormalized(host, port)
}

// DecideNormalized judges a host that NormalizeHost already returned.
func (r *Rules) DecideNormalized(host string, port int) Decision {
	d := Decision{Host: host, Port: port}
	if port < 1 || port > 65535 {
		// A transparent connection carries the port the box dialled,
		// 0 included: no rule names it, and none may suggest it.
		d.Reason, d.Detail = ReasonBadHost, fmt.Sprintf("port %d of %s is not a port one can connect to (1 to 65535)", port, host)
		return d
	}
	for _, p := range r.Deny {
		if p.MatchHost(host) && p.MatchPort(port) {
			d.Reason, d.Rule = ReasonDenyRule, p.Raw
			d.Detail = fmt.Sprintf("%s is denied by rule %q", JoinHostPort(host, port), p.Raw)
			return d
		}
	}
	var hostOnly *Pattern
	for i, p := range r.Allow {
		if !p.MatchHost(host) {
			continue
		}
		if p.MatchPort(port) {
			d.Allow, d.Reason, d.Rule = true, ReasonAllowed, p.Raw
			d.Detail = fmt.Sprintf("%s is allowed by rule %q", JoinHostPort(host, port), p.Raw)
			return d
		}
		if hostOnly == nil {
			hostOnly = &r.Allow[i]
		}
	}
	if hostOnly != nil {
		d.Reason, d.Rule = ReasonPortNotAllow, hostOnly.Raw
		d.Detail = fmt.Sprintf("port %d of %s is not allowed by rule %q; allow it with --allow %s:%d", port, host, hostOnly.Raw, hostForPattern(host), port)
		return d
	}
	d.Reason = ReasonNotAllowed
	d.Detail = fmt.Sprintf("%s is not on the allowlist; allow it with --allow %s", JoinHostPort(host, port), suggestion(host, port))
	return d
}

// DecideAddr judges an address the dialer is about to dial: it is denied
// if a deny entry covers it, and counts as allowlisted only if an IP or
// CIDR allow entry names it and the port.
func (r *Rules) DecideAddr(a netip.Addr, port int) Decision {
	a = a.Unmap()
	d := Decision{Host: a.String(), Port: port}
	if p, ok := r.DenyRule(a, port); ok {
		d.Reason, d.Rule = ReasonDenyRule, p.Raw
		d.Detail = fmt.Sprintf("address %s is denied by rule %q", JoinHostPort(a.String(), port), p.Raw)
		return d
	}
	if p, ok := r.AllowRule(a, port); ok {
		d.Allow, d.Reason, d.Rule = true, ReasonAllowed, p.Raw
		d.Detail = fmt.Sprintf("address %s is allowed by rule %q", JoinHostPort(a.String(), port), p.Raw)
		return d
	}
	d.Reason = ReasonNotAllowed
	d.Detail = fmt.Sprintf("address %s is not on the allowlist", JoinHostPort(a.String(), port))
	return d
}

// DenyRule returns the first address deny entry covering a and port.
func (r *Rules) DenyRule(a netip.Addr, port int) (Pattern, bool) { return firstAddr(r.Deny, a, port) }

// AllowRule returns the first address allow entry covering a and port.
func (r *Rules) AllowRule(a netip.Addr, port int) (Pattern, bool) { return firstAddr(r.Allow, a, port) }

func firstAddr(ps []Pattern, a netip.Addr, port int) (Pattern, bool) {
	for _, p := range ps {
		if p.MatchAddr(a) && p.MatchPort(port) {
			return p, true
		}
	}
	return Pattern{}, false
}

// Names lists the allow entries in their canonical form (Pattern.String),
// for the effective allowlist shown by run --json, proxy and doctor.
func (r *Rules) Names() []string {
	out := make([]string, 0, len(r.Allow))
	for _, p := range r.Allow {
		out = append(out, p.String())
	}
	return out
}

func hostForPattern(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

func suggestion(host string, port int) string {
	if port == 80 || port == 443 {
		return hostForPattern(host)
	}
	return fmt.Sprintf("%s:%d", hostForPattern(host), port)
}

// UnknownCredential is the error for a --credential name that no
// configured credential has; known are the names configured, sorted.
func UnknownCredential(name string, known []string) error {
	if len(known) == 0 {
		return fmt.Errorf("unknown credential %q: no credentials are configured; add it under credentials: in the cordon config", name)
	}
	return fmt.Errorf("unknown credential %q; configured credentials: %s", name, strings.Join(known, ", "))
}

// EffectiveAllow is the allowlist a session really uses: the policy's
// allow entries plus the hosts of the credentials requested for it. A
// credential that is only configured adds nothing; the operator's posture
// is never widened by a saved credential.
func (p *Policy) EffectiveAllow(credentials []string) ([]string, error) {
	out := append([]string(nil), p.Allow...)
	for _, name := range credentials {
		i := slices.IndexFunc(p.Credentials, func(c Credential) bool { return c.Name == name })
		if i < 0 {
			names := make([]string, len(p.Credentials))
			for j, c := range p.Credentials {
				names[j] = c.Name
			}
			slices.Sort(names)
			return nil, UnknownCredential(name, names)
		}
		for _, h := range p.Credentials[i].Hosts {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out, nil
}
