package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// maxHostLen is the longest DNS name, in presentation form without the
// trailing dot.
const maxHostLen = 253

// hostProfile maps Unicode names to ASCII the way resolvers do (UTS #46,
// non-transitional), so that "ＥＸＡＭＰＬＥ。com" and "example.com" are the
// same host. Label syntax is checked by validLabel, which also allows '_'.
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
)

// NormalizeHost returns the one canonical spelling of a host as it appears
// in a URL, a CONNECT line, a Host header, an SNI or an allowlist entry:
// IP literals in netip's canonical form (IPv4-mapped IPv6 unmapped, no
// brackets), names in lower-case punycode with one trailing dot removed.
// Names that end in a number are judged as the IPv4 address a resolver
// library would make of them (inet_aton forms such as "2852039166",
// "0xA9FEA9FE" or "127.1") and refused when they are not one.
func NormalizeHost(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty host")
	}
	if len(s) > 4*maxHostLen {
		return "", fmt.Errorf("host %q...: longer than %d characters", s[:64], maxHostLen)
	}
	if strings.ContainsAny(s, "%") {
		return "", fmt.Errorf("host %q: '%%' (a zone id or escape) is not allowed in a host", s)
	}
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return "", fmt.Errorf("host %q: unbalanced '['", s)
		}
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		if err != nil || !a.Is6() {
			return "", fmt.Errorf("host %q: brackets must hold an IPv6 address", s)
		}
		return canonicalAddr(a), nil
	}
	if strings.ContainsAny(s, "[]") {
		return "", fmt.Errorf("host %q: brackets are only allowed around an IPv6 address", s)
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return sameOrCanonical(s, a), nil
	}
	if strings.Contains(s, ":") {
		return "", fmt.Errorf("host %q: not a valid name or IP address (a port belongs outside the host)", s)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("host %q: not valid UTF-8", s)
	}
	name, err := hostProfile.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("host %q: not a valid international name: %v", s, err)
	}
	if len(name) > maxHostLen+1 {
		return "", fmt.Errorf("host %q: longer than %d characters", s, maxHostLen)
	}
	// Some names pass only before mapping (the bidi rule sees the mapped
	// labels); the canonical form must itself be a valid name.
	if again, err := hostProfile.ToASCII(name); err != nil || again != name {
		return "", fmt.Errorf("host %q: not a valid international name once mapped to %q", s, name)
	}
	name = strings.ToLower(name)
	name = strings.TrimSuffix(name, ".")
	if name == "" || strings.HasSuffix(name, ".") {
		return "", fmt.Errorf("host %q: empty label", s)
	}
	labels := strings.Split(name, ".")
	if endsInNumber(labels[len(labels)-1]) {
		a, ok := parseInetAton(name)
		if !ok {
			return "", fmt.Errorf("host %q: ends in a number but is not an IPv4 address", s)
		}
		return a.String(), nil
	}
	if len(name) > maxHostLen {
		return "", fmt.Errorf("host %q: longer than %d characters", s, maxHostLen)
	}
	for _, l := range labels {
		if err := validLabel(l); err != nil {
			return "", fmt.Errorf("host %q: %v", s, err)
		}
	}
	return name, nil
}

// canonicalAddr prints an address the one way cordon compares it.
func canonicalAddr(a netip.Addr) string {
	return a.Unmap().WithZone("").String()
}

// sameOrCanonical is s when it is already a's canonical form, which spares
// the copy a fresh string costs (hosts are normalized once per request).
func sameOrCanonical(s string, a netip.Addr) string {
	var buf [48]byte
	if b := a.Unmap().WithZone("").AppendTo(buf[:0]); string(b) == s {
		return s
	}
	return canonicalAddr(a)
}

func validLabel(l string) error {
	switch {
	case l == "":
		return errors.New("empty label")
	case len(l) > 63:
		return fmt.Errorf("label %q is longer than 63 characters", l)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("label %q holds %q; names are letters, digits, '-' and '_'", l, c)
		}
	}
	return nil
}

// endsInNumber reports whether a last label is numeric in the WHATWG URL
// sense: decimal digits, or a 0x hex number. Such a name is an IPv4 address
// or nothing.
func endsInNumber(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		for _, c := range l[2:] {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseInetAton parses the legacy numeric IPv4 forms that inet_aton and
// browsers accept: one to four parts, each decimal, octal (leading 0) or
// hex (0x), the last part filling the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var ip uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		ip |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// SplitHostPort splits "host:port" (or "[v6]:port"), normalises the host
// and parses the port. A missing port is defaultPort; defaultPort 0 makes
// the port mandatory.
func SplitHostPort(hostport string, defaultPort int) (string, int, error) {
	host, portStr := hostport, ""
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.HasSuffix(hostport, "]") {
		if strings.HasPrefix(hostport, "[") || strings.Count(hostport, ":") == 1 {
			host, portStr = hostport[:i], hostport[i+1:]
		}
	}
	port := defaultPort
	if portStr != "" || host != hostport {
		p, err := ParsePort(portStr)
		if err != nil {
			return "", 0, fmt.Errorf("%q: %w", hostport, err)
		}
		port = p
	}
	if port == 0 {
		return "", 0, fmt.Errorf("%q: a port is required (host:port)", hostport)
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return "", 0, err
	}
	return h, port, nil
}

// ParsePort reads a port number, 1 to 65535, written in decimal.
func ParsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	p, _ := strconv.Atoi(s)
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return p, nil
}

// JoinHostPort is the inverse of SplitHostPort for normalised hosts.
func JoinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
