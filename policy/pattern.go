package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// defaultPorts are the ports an entry without ":PORT" allows.
var defaultPorts = []int{80, 443}

// Pattern is one parsed allowlist or denylist entry.
type Pattern struct {
	// Raw is the entry as written, for audit lines and error messages.
	Raw string
	// Name is a normalised host name; for a wildcard, the suffix after "*.".
	Name string
	// Wildcard makes Name match strict subdomains only, never the apex.
	Wildcard bool
	// Prefix is set for IP and CIDR entries (a single IP is a /32 or /128).
	Prefix netip.Prefix
	// Ports lists the allowed ports; nil means any port.
	Ports []int
}

// ParsePattern parses "example.com", "*.example.com", "192.0.2.0/24" or
// "[2001:db8::1]", each with an optional ":PORT" or ":*" suffix. Without a
// port, an allow entry means ports 80 and 443.
func ParsePattern(raw string) (Pattern, error) {
	return parsePattern(raw, defaultPorts)
}

// ParseDenyPattern is ParsePattern for deny entries: without a port, a
// deny entry covers every port.
func ParseDenyPattern(raw string) (Pattern, error) {
	return parsePattern(raw, nil)
}

func parsePattern(raw string, portless []int) (Pattern, error) {
	p := Pattern{Raw: raw, Ports: portless}
	s := strings.TrimSpace(raw)
	if s == "" {
		return p, fmt.Errorf("empty pattern; write a host such as example.com or *.example.com")
	}
	if _, rest, ok := strings.Cut(s, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		return p, fmt.Errorf("pattern %q is a URL; an entry names a host, with an optional port: write %s", raw, host)
	}
	host, port, hasPort, err := splitPatternPort(s)
	if err != nil {
		return p, fmt.Errorf("pattern %q: %w", raw, err)
	}
	switch {
	case port == "" && !hasPort:
	case port == "":
		return p, fmt.Errorf("pattern %q: empty port after ':'; write host:PORT or host:*", raw)
	case port == "*":
		p.Ports = nil
	default:
		n, err := ParsePort(port)
		if err != nil {
			return p, fmt.Errorf("pattern %q: %w", raw, err)
		}
		p.Ports = []int{n}
	}
	if strings.HasPrefix(host, "[") {
		inner := strings.TrimSuffix(host[1:], "]")
		if !strings.HasSuffix(host, "]") || !strings.Contains(inner, ":") {
			return p, fmt.Errorf("pattern %q: brackets are only for IPv6 addresses and ranges, e.g. [2001:db8::1]:443", raw)
		}
		if !strings.Contains(inner, "/") {
			host = inner
		}
	} else if strings.ContainsAny(host, "[]") {
		return p, fmt.Errorf("pattern %q: unbalanced bracket", raw)
	}
	if strings.Contains(host, "/") {
		addr, _, _ := strings.Cut(strings.Trim(host, "[]"), "/")
		if _, err := netip.ParseAddr(addr); err != nil && !strings.Contains(addr, "%") {
			return p, fmt.Errorf("pattern %q: an entry names a host, not a path: write %s (a range of addresses is written 192.0.2.0/24)", raw, addr)
		}
		pfx, err := netip.ParsePrefix(strings.Trim(host, "[]"))
		if err != nil || pfx.Addr().Zone() != "" {
			return p, fmt.Errorf("pattern %q: not a CIDR range such as 192.0.2.0/24", raw)
		}
		p.Prefix = pfx.Masked()
		if p.Prefix.Addr().Is4In6() && p.Prefix.Bits() >= 96 {
			p.Prefix = netip.PrefixFrom(p.Prefix.Addr().Unmap(), p.Prefix.Bits()-96)
		}
		return p, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		if rest == "" {
			return p, fmt.Errorf("pattern %q: '*.' needs the name it covers the subdomains of after it, as in *.example.com", raw)
		}
		p.Wildcard, host = true, rest
	}
	if strings.Contains(host, "*") {
		return p, fmt.Errorf("pattern %q: '*' is only allowed as the whole first label (*.example.com) or as the port (:*)", raw)
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return p, fmt.Errorf("pattern %q: %w", raw, err)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if p.Wildcard {
			return p, fmt.Errorf("pattern %q: a wildcard needs a name, not an address", raw)
		}
		p.Prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	if p.Wildcard && !strings.Contains(h, ".") {
		return p, fmt.Errorf("pattern %q: a wildcard must cover a registered name such as *.example.com, not a top-level domain", raw)
	}
	p.Name = h
	return p, nil
}

// splitPatternPort separates an optional ":PORT" or ":*" suffix, telling a
// port apart from the colons of a bare IPv6 address.
func splitPatternPort(s string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("unbalanced '['")
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, "", false, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", false, fmt.Errorf("unexpected %q after ']'", rest)
		}
		return host, rest[1:], true, nil
	}
	if strings.Count(s, ":") > 1 {
		return s, "", false, nil // a bare IPv6 address or range
	}
	h, p, ok := strings.Cut(s, ":")
	return h, p, ok, nil
}

// IsAddr reports whether the pattern names addresses rather than names.
func (p Pattern) IsAddr() bool { return p.Prefix.IsValid() }

// MatchHost reports whether a normalised host (name or IP literal) falls
// under the pattern, ignoring the port.
func (p Pattern) MatchHost(host string) bool {
	if p.IsAddr() {
		a, err := netip.ParseAddr(host)
		return err == nil && p.Prefix.Contains(a.Unmap())
	}
	if p.Wildcard {
		return strings.HasSuffix(host, "."+p.Name)
	}
	return host == p.Name
}

// MatchAddr reports whether an address falls under an IP or CIDR pattern.
func (p Pattern) MatchAddr(a netip.Addr) bool {
	return p.IsAddr() && p.Prefix.Contains(a.Unmap())
}

// MatchPort reports whether the pattern allows the port.
func (p Pattern) MatchPort(port int) bool {
	return p.Ports == nil || slices.Contains(p.Ports, port)
}

// Covers reports whether every host and port q matches is matched by p too.
// Project files use it: an entry they keep must be covered by the global
// list, or it would widen the posture.
func (p Pattern) Covers(q Pattern) bool {
	if p.Ports != nil {
		if q.Ports == nil {
			return false
		}
		for _, port := range q.Ports {
			if !p.MatchPort(port) {
				return false
			}
		}
	}
	switch {
	case p.IsAddr() || q.IsAddr():
		return p.IsAddr() && q.IsAddr() && p.Prefix.Bits() <= q.Prefix.Bits() && p.Prefix.Contains(q.Prefix.Addr())
	case !q.Wildcard:
		return p.MatchHost(q.Name)
	case p.Wildcard:
		return q.Name == p.Name || strings.HasSuffix(q.Name, "."+p.Name)
	}
	return false
}

// String renders the pattern canonically: name or range, then the ports.
func (p Pattern) String() string {
	var host string
	switch {
	case p.IsAddr() && p.Prefix.IsSingleIP():
		host = p.Prefix.Addr().String()
		if p.Prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	case p.IsAddr():
		host = p.Prefix.String()
		if p.Prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	case p.Wildcard:
		host = "*." + p.Name
	default:
		host = p.Name
	}
	switch {
	case p.Ports == nil:
		return host + ":*"
	case slices.Equal(p.Ports, defaultPorts):
		return host
	default:
		return fmt.Sprintf("%s:%d", host, p.Ports[0])
	}
}
