package fakedns

import (
	"fmt"
	"net/netip"

	"github.com/cordon-sandbox/cordon/policy"
)

// Reasons the resolver gives, beside the policy's.
const (
	// ReasonType: a query type other than A, AAAA, HTTPS, SVCB and PTR.
	ReasonType policy.Reason = "dns_type"
	// ReasonClass: a query class other than IN.
	ReasonClass policy.Reason = "dns_class"
	// ReasonNoReverse: a PTR query for an address this resolver did not
	// hand out.
	ReasonNoReverse policy.Reason = "dns_no_reverse"
	// ReasonRangeFull: every fake address is taken.
	ReasonRangeFull policy.Reason = "dns_range_full"
	// ReasonTooManyConnections: the TCP connections reached their bound
	// (Config.MaxTCPConns); the proxy's own bound says the same.
	ReasonTooManyConnections policy.Reason = "too_many_connections"
	// ReasonTooManyQueries: every UDP reader was busy answering a query
	// (udpWorkers); the kernel holds the next, or drops them.
	ReasonTooManyQueries policy.Reason = "too_many_queries"
)

// DecideName judges whether a normalised host resolves: it does when an
// allow entry names it on some port that no deny entry takes back, so a
// deny entry for every port (no ":PORT") always wins. IP addresses are not
// names and never resolve.
func DecideName(rules *policy.Rules, host string) policy.Decision {
	d := policy.Decision{Host: host}
	if _, err := netip.ParseAddr(host); err == nil {
		d.Reason = policy.ReasonBadHost
		d.Detail = fmt.Sprintf("%s is an IP address written as a name; only names resolve", host)
		return d
	}
	for _, p := range rules.Deny {
		if p.Ports == nil && p.MatchHost(host) {
			d.Reason, d.Rule = policy.ReasonDenyRule, p.Raw
			d.Detail = fmt.Sprintf("%s is denied on every port by rule %q, so it does not resolve", host, p.Raw)
			return d
		}
	}
	var denied *policy.Decision
	for _, p := range rules.Allow {
		if !p.MatchHost(host) {
			continue
		}
		if p.Ports == nil {
			return allowed(d, p.Raw)
		}
		for _, port := range p.Ports {
			pd := rules.DecideNormalized(host, port)
			if pd.Allow {
				return allowed(d, pd.Rule)
			}
			if denied == nil {
				denied = &pd
			}
		}
	}
	if denied != nil {
		d.Reason, d.Rule = denied.Reason, denied.Rule
		d.Detail = fmt.Sprintf("every port the allowlist opens for %s is denied (%s), so it does not resolve", host, denied.Detail)
		return d
	}
	d.Reason = policy.ReasonNotAllowed
	d.Detail = fmt.Sprintf("%s is not on the allowlist, so it does not resolve; allow it with --allow %s", host, host)
	return d
}

func allowed(d policy.Decision, rule string) policy.Decision {
	d.Allow, d.Reason, d.Rule = true, policy.ReasonAllowed, rule
	d.Detail = fmt.Sprintf("%s resolves to a fake address: rule %q allows it", d.Host, rule)
	return d
}
