package policy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustPattern(t *testing.T, raw string) Pattern {
	t.Helper()
	p, err := ParsePattern(raw)
	if err != nil {
		t.Fatalf("ParsePattern(%q): %v", raw, err)
	}
	return p
}

// samePattern reports whether two patterns match exactly the same things.
func samePattern(a, b Pattern) bool {
	return a.Name == b.Name && a.Wildcard == b.Wildcard && a.Prefix == b.Prefix && slices.Equal(a.Ports, b.Ports)
}

func TestParsePattern(t *testing.T) {
	tests := []struct {
		raw      string
		name     string
		wildcard bool
		prefix   string
		ports    []int
		str      string
	}{
		{"example.com", "example.com", false, "", []int{80, 443}, "example.com"},
		{"  Example.COM.  ", "example.com", false, "", []int{80, 443}, "example.com"},
		{"*.example.com", "example.com", true, "", []int{80, 443}, "*.example.com"},
		{"*.Example.com:8443", "example.com", true, "", []int{8443}, "*.example.com:8443"},
		{"example.com:8443", "example.com", false, "", []int{8443}, "example.com:8443"},
		{"example.com:443", "example.com", false, "", []int{443}, "example.com:443"},
		{"example.com:*", "example.com", false, "", nil, "example.com:*"},
		{"*.example.com:*", "example.com", true, "", nil, "*.example.com:*"},
		{"bücher.de", "xn--bcher-kva.de", false, "", []int{80, 443}, "xn--bcher-kva.de"},
		{"*.bücher.de", "xn--bcher-kva.de", true, "", []int{80, 443}, "*.xn--bcher-kva.de"},
		{"_acme.example.com", "_acme.example.com", false, "", []int{80, 443}, "_acme.example.com"},
		{"localhost:3000", "localhost", false, "", []int{3000}, "localhost:3000"},
		{"192.0.2.1", "", false, "192.0.2.1/32", []int{80, 443}, "192.0.2.1"},
		{"192.0.2.1:8080", "", false, "192.0.2.1/32", []int{8080}, "192.0.2.1:8080"},
		{"127.1", "", false, "127.0.0.1/32", []int{80, 443}, "127.0.0.1"},
		{"0xA9FEA9FE:80", "", false, "169.254.169.254/32", []int{80}, "169.254.169.254:80"},
		{"192.0.2.0/24", "", false, "192.0.2.0/24", []int{80, 443}, "192.0.2.0/24"},
		{"192.0.2.77/24", "", false, "192.0.2.0/24", []int{80, 443}, "192.0.2.0/24"},
		{"192.0.2.0/24:5432", "", false, "192.0.2.0/24", []int{5432}, "192.0.2.0/24:5432"},
		{"192.0.2.0/24:*", "", false, "192.0.2.0/24", nil, "192.0.2.0/24:*"},
		{"1.2.3.4/32", "", false, "1.2.3.4/32", []int{80, 443}, "1.2.3.4"},
		{"[2001:db8::1]", "", false, "2001:db8::1/128", []int{80, 443}, "[2001:db8::1]"},
		{"[2001:DB8::1]:443", "", false, "2001:db8::1/128", []int{443}, "[2001:db8::1]:443"},
		{"[2001:db8::1]:*", "", false, "2001:db8::1/128", nil, "[2001:db8::1]:*"},
		{"2001:db8::1", "", false, "2001:db8::1/128", []int{80, 443}, "[2001:db8::1]"},
		{"2001:db8::/32", "", false, "2001:db8::/32", []int{80, 443}, "[2001:db8::/32]"},
		{"[2001:db8::/32]:443", "", false, "2001:db8::/32", []int{443}, "[2001:db8::/32]:443"},
		{"[::ffff:192.0.2.1]", "", false, "192.0.2.1/32", []int{80, 443}, "192.0.2.1"},
		{"::ffff:10.0.0.0/104", "", false, "10.0.0.0/8", []int{80, 443}, "10.0.0.0/8"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			p := mustPattern(t, tt.raw)
			if p.Raw != tt.raw {
				t.Errorf("Raw = %q, want %q", p.Raw, tt.raw)
			}
			if p.Name != tt.name || p.Wildcard != tt.wildcard {
				t.Errorf("Name, Wildcard = %q, %v; want %q, %v", p.Name, p.Wildcard, tt.name, tt.wildcard)
			}
			var want netip.Prefix
			if tt.prefix != "" {
				want = netip.MustParsePrefix(tt.prefix)
			}
			if p.Prefix != want || p.IsAddr() != (tt.prefix != "") {
				t.Errorf("Prefix = %v (IsAddr %v), want %v", p.Prefix, p.IsAddr(), want)
			}
			if !slices.Equal(p.Ports, tt.ports) || (p.Ports == nil) != (tt.ports == nil) {
				t.Errorf("Ports = %v, want %v", p.Ports, tt.ports)
			}
			if s := p.String(); s != tt.str {
				t.Errorf("String() = %q, want %q", s, tt.str)
			}
		})
	}
}

func TestParsePatternRefuses(t *testing.T) {
	tests := []struct {
		raw, errHas string
	}{
		{"", "empty pattern"},
		{"   ", "empty pattern"},
		{"*", "'*'"},
		{"*:443", "'*'"},
		{"*.com", "top-level domain"},
		{"*.com.", "top-level domain"},
		{"*.*.example.com", "'*'"},
		{"a.*.com", "'*'"},
		{"*example.com", "'*'"},
		{"ex*ample.com", "'*'"},
		{"*.", `pattern "*.": '*.' needs the name it covers the subdomains of after it, as in *.example.com`},
		{"*.:443", "as in *.example.com"},
		{"*.192.0.2.1", "wildcard needs a name"},
		{"*.127.1", "wildcard needs a name"},
		{"example.com:0", "not a number from 1 to 65535"},
		{"example.com:99999", "not a number from 1 to 65535"},
		{"example.com:65536", "not a number from 1 to 65535"},
		{"example.com:https", "not a number"},
		{"example.com:", "port"},
		{"example.com:**", "not a number"},
		{"[::1]:", "port"},
		{"[::1", "unbalanced"},
		{"[::1]443", "after ']'"},
		{"[192.0.2.1]", "IPv6"},
		{"[example.com]", "IPv6"},
		{"1.2.3.4/33", "CIDR"},
		{"2001:db8::/129", "CIDR"},
		{"example.com/24", "not a path: write example.com"},
		{"example.com/v1/models", "not a path: write example.com"},
		{"1.2.3.4/abc", "CIDR"},
		{"10.0.0.0/8]", "bracket"},
		{"::1/128]", "bracket"},
		{"[10.0.0.0/8]", "bracket"},
		{"fe80::%eth0/64", "CIDR"},
		{"fe80::1%eth0", "'%'"},
		{"[fe80::1%25eth0]:443", "'%'"},
		{"example.com..", "empty label"},
		{"example.123", "not an IPv4 address"},
		{"1.2.3.256", "not an IPv4 address"},
		{"http://example.com", "is a URL; an entry names a host, with an optional port: write example.com"},
		{"https://api.example.com:8443/v1", "write api.example.com:8443"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			p, err := ParsePattern(tt.raw)
			if err == nil {
				t.Fatalf("ParsePattern(%q) = %v, want an error containing %q", tt.raw, p, tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("ParsePattern(%q) error %q does not contain %q", tt.raw, err, tt.errHas)
			}
			if tt.raw != "" && strings.TrimSpace(tt.raw) != "" && !strings.Contains(err.Error(), tt.raw) {
				t.Errorf("ParsePattern(%q) error %q does not name the entry", tt.raw, err)
			}
		})
	}
}

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, host string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "www.example.com", false},
		{"example.com", "notexample.com", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "notexample.com", false},
		{"*.example.com", "www.notexample.com", false},
		{"*.example.com", "example.com.evil.test", false},
		{"*.example.com", "www.example.com.evil.test", false},
		{"*.example.com", "wwwexample.com", false},
		{"192.0.2.0/24", "192.0.2.77", true},
		{"192.0.2.0/24", "192.0.3.1", false},
		{"192.0.2.0/24", "example.com", false},
		{"192.0.2.1", "192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
		{"[2001:db8::1]", "2001:db8::1", true},
		{"2001:db8::/32", "2001:db8:ffff::1", true},
		{"2001:db8::/32", "2001:db9::1", false},
		{"::ffff:10.0.0.0/104", "10.1.2.3", true},
		{"0.0.0.0/0", "2001:db8::1", false},
		{"::/0", "192.0.2.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.host, func(t *testing.T) {
			if got := mustPattern(t, tt.pattern).MatchHost(tt.host); got != tt.want {
				t.Fatalf("%q.MatchHost(%q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
			}
		})
	}
}

func TestMatchAddrAndPort(t *testing.T) {
	tests := []struct {
		pattern string
		addr    string
		port    int
		addrOK  bool
		portOK  bool
	}{
		{"192.0.2.0/24", "192.0.2.9", 443, true, true},
		{"192.0.2.0/24", "::ffff:192.0.2.9", 80, true, true},
		{"192.0.2.0/24", "192.0.2.9", 8443, true, false},
		{"192.0.2.0/24:8443", "192.0.2.9", 8443, true, true},
		{"192.0.2.0/24:8443", "192.0.2.9", 443, true, false},
		{"192.0.2.0/24:*", "192.0.2.9", 22, true, true},
		{"192.0.2.0/24", "198.51.100.1", 443, false, true},
		{"example.com", "192.0.2.9", 443, false, true},
		{"[2001:db8::1]:443", "2001:db8::1", 443, true, true},
		{"[2001:db8::1]:443", "2001:db8::2", 443, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.addr, func(t *testing.T) {
			p := mustPattern(t, tt.pattern)
			if got := p.MatchAddr(netip.MustParseAddr(tt.addr)); got != tt.addrOK {
				t.Errorf("%q.MatchAddr(%s) = %v, want %v", tt.pattern, tt.addr, got, tt.addrOK)
			}
			if got := p.MatchPort(tt.port); got != tt.portOK {
				t.Errorf("%q.MatchPort(%d) = %v, want %v", tt.pattern, tt.port, got, tt.portOK)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		p, q string
		want bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "www.example.com", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "notexample.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "*.api.example.com", true},
		{"*.api.example.com", "*.example.com", false},
		{"*.example.com", "*.notexample.com", false},
		{"example.com", "*.example.com", false},
		{"www.example.com", "*.example.com", false},

		{"example.com", "example.com:443", true},
		{"example.com", "example.com:80", true},
		{"example.com", "example.com:8443", false},
		{"example.com:443", "example.com", false},
		{"example.com:*", "example.com", true},
		{"example.com:*", "example.com:8443", true},
		{"example.com", "example.com:*", false},
		{"example.com:8443", "example.com:*", false},
		{"*.example.com:*", "api.example.com:22", true},
		{"*.example.com:443", "*.example.com", false},

		{"10.0.0.0/8", "10.1.0.0/16", true},
		{"10.0.0.0/8", "10.1.2.3", true},
		{"10.0.0.0/8", "10.0.0.0/8", true},
		{"10.1.0.0/16", "10.0.0.0/8", false},
		{"10.0.0.0/8", "11.0.0.0/16", false},
		{"10.0.0.0/8", "0.0.0.0/0", false},
		{"0.0.0.0/0", "192.0.2.1", true},
		{"0.0.0.0/0", "[2001:db8::1]", false},
		{"::/0", "192.0.2.1", false},
		{"2001:db8::/32", "[2001:db8::1]", true},
		{"2001:db8::/32", "2001:db8::/31", false},
		{"10.0.0.0/8", "10.1.2.3:8443", false},
		{"10.0.0.0/8:*", "10.1.2.3:8443", true},

		{"10.0.0.0/8", "example.com", false},
		{"example.com", "10.1.2.3", false},
		{"*.example.com", "10.1.2.3", false},
	}
	for _, tt := range tests {
		t.Run(tt.p+" covers "+tt.q, func(t *testing.T) {
			if got := mustPattern(t, tt.p).Covers(mustPattern(t, tt.q)); got != tt.want {
				t.Fatalf("%q.Covers(%q) = %v, want %v", tt.p, tt.q, got, tt.want)
			}
		})
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"example.com", "*.example.com", "*.example.com:8443", "example.com:*",
		"192.0.2.0/24", "192.0.2.0/24:443", "[2001:db8::1]:443", "2001:db8::/32",
		"[2001:db8::/32]:443", "::ffff:10.0.0.0/104", "127.1", "bücher.de",
		"*", "*.com", "a.*.com", "example.com:0", "example.com:99999", "[::1",
		"1.2.3.4/33", "example.com:", "10.0.0.0/8]", "[::1]:*", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParsePattern(raw)
		if err != nil {
			return
		}
		if p.IsAddr() == (p.Name != "") {
			t.Fatalf("ParsePattern(%q) = %+v: exactly one of Name and Prefix must be set", raw, p)
		}
		s := p.String()
		q, err := ParsePattern(s)
		if err != nil {
			t.Fatalf("ParsePattern(%q).String() = %q, which does not parse: %v", raw, s, err)
		}
		if !samePattern(p, q) {
			t.Fatalf("ParsePattern(%q) = %+v, but its String %q parses to %+v", raw, p, s, q)
		}
		if q.String() != s {
			t.Fatalf("String is not stable: %q -> %q -> %q", raw, s, q.String())
		}
		if !p.Covers(q) || !q.Covers(p) {
			t.Fatalf("%q and its String %q do not cover each other", raw, s)
		}
	})
}
