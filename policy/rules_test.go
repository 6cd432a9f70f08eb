package policy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustCompile(t *testing.T, allow, deny []string) *Rules {
	t.Helper()
	r, err := Compile(allow, deny)
	if err != nil {
		t.Fatalf("Compile(%q, %q): %v", allow, deny, err)
	}
	return r
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct {
		allow, deny []string
		errHas      []string
	}{
		{[]string{"example.com", "*.com"}, nil, []string{"allow:", `"*.com"`}},
		{nil, []string{"a.*.com"}, []string{"deny:", `"a.*.com"`}},
		{[]string{"example.com:0"}, nil, []string{"allow:", `"example.com:0"`, "1 to 65535"}},
		{nil, []string{"1.2.3.4/33"}, []string{"deny:", "CIDR"}},
		{[]string{""}, nil, []string{"allow:", "empty pattern"}},
	}
	for _, tt := range tests {
		_, err := Compile(tt.allow, tt.deny)
		if err == nil {
			t.Errorf("Compile(%q, %q) succeeded, want an error", tt.allow, tt.deny)
			continue
		}
		for _, s := range tt.errHas {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Compile(%q, %q) error %q does not contain %q", tt.allow, tt.deny, err, s)
			}
		}
	}
}

func TestDecide(t *testing.T) {
	allow := []string{
		"example.com",
		"*.example.com",
		"api.example.org:8443",
		"git.example.net:*",
		"192.0.2.0/24",
		"[2001:db8::1]:443",
		"_acme.example.io",
	}
	deny := []string{
		"bad.example.com",
		"*.evil.example.com:*",
		"192.0.2.66",
	}
	r := mustCompile(t, allow, deny)
	tests := []struct {
		host   string
		port   int
		allow  bool
		reason Reason
		rule   string
		norm   string
	}{
		{"example.com", 443, true, ReasonAllowed, "example.com", "example.com"},
		{"EXAMPLE.com.", 80, true, ReasonAllowed, "example.com", "example.com"},
		{"www.example.com", 443, true, ReasonAllowed, "*.example.com", "www.example.com"},
		{"a.b.example.com", 80, true, ReasonAllowed, "*.example.com", "a.b.example.com"},
		{"notexample.com", 443, false, ReasonNotAllowed, "", "notexample.com"},
		{"example.com.evil.test", 443, false, ReasonNotAllowed, "", "example.com.evil.test"},
		{"example.org", 443, false, ReasonNotAllowed, "", "example.org"},

		// Deny wins over allow, whatever the order.
		{"bad.example.com", 443, false, ReasonDenyRule, "bad.example.com", "bad.example.com"},
		{"BAD.example.com.", 443, false, ReasonDenyRule, "bad.example.com", "bad.example.com"},
		{"x.evil.example.com", 443, false, ReasonDenyRule, "*.evil.example.com:*", "x.evil.example.com"},
		{"x.evil.example.com", 22, false, ReasonDenyRule, "*.evil.example.com:*", "x.evil.example.com"},
		{"evil.example.com", 443, true, ReasonAllowed, "*.example.com", "evil.example.com"},
		{"192.0.2.66", 443, false, ReasonDenyRule, "192.0.2.66", "192.0.2.66"},
		{"3221226050", 443, false, ReasonDenyRule, "192.0.2.66", "192.0.2.66"},

		// Ports: default 80 and 443, a single port, any port.
		{"example.com", 8443, false, ReasonPortNotAllow, "example.com", "example.com"},
		{"www.example.com", 22, false, ReasonPortNotAllow, "*.example.com", "www.example.com"},
		{"api.example.org", 8443, true, ReasonAllowed, "api.example.org:8443", "api.example.org"},
		{"api.example.org", 443, false, ReasonPortNotAllow, "api.example.org:8443", "api.example.org"},
		{"git.example.net", 22, true, ReasonAllowed, "git.example.net:*", "git.example.net"},
		{"git.example.net", 65535, true, ReasonAllowed, "git.example.net:*", "git.example.net"},
		// Port 0 (a transparent connection may carry it) is no port any
		// rule names, not even :*, and no advice suggests it.
		{"git.example.net", 0, false, ReasonBadHost, "", "git.example.net"},
		{"example.com", 0, false, ReasonBadHost, "", "example.com"},
		{"git.example.net", 65536, false, ReasonBadHost, "", "git.example.net"},

		// IP and CIDR entries match the address a numeric host spells.
		{"192.0.2.10", 443, true, ReasonAllowed, "192.0.2.0/24", "192.0.2.10"},
		{"::ffff:192.0.2.10", 443, true, ReasonAllowed, "192.0.2.0/24", "192.0.2.10"},
		{"0xC000020A", 80, true, ReasonAllowed, "192.0.2.0/24", "192.0.2.10"},
		{"192.0.2.10", 8080, false, ReasonPortNotAllow, "192.0.2.0/24", "192.0.2.10"},
		{"198.51.100.1", 443, false, ReasonNotAllowed, "", "198.51.100.1"},
		{"[2001:DB8::1]", 443, true, ReasonAllowed, "[2001:db8::1]:443", "2001:db8::1"},
		{"2001:db8::1", 80, false, ReasonPortNotAllow, "[2001:db8::1]:443", "2001:db8::1"},
		{"2852039166", 80, false, ReasonNotAllowed, "", "169.254.169.254"},

		{"_acme.example.io", 443, true, ReasonAllowed, "_acme.example.io", "_acme.example.io"},

		// Hosts that do not normalise are refused as bad hosts.
		{"example.com..", 443, false, ReasonBadHost, "", "example.com.."},
		{"fe80::1%eth0", 443, false, ReasonBadHost, "", "fe80::1%eth0"},
		{"1.2.3.256", 443, false, ReasonBadHost, "", "1.2.3.256"},
		{"", 443, false, ReasonBadHost, "", ""},
	}
	for _, tt := range tests {
		t.Run(JoinHostPort(tt.host, tt.port), func(t *testing.T) {
			d := r.Decide(tt.host, tt.port)
			if d.Allow != tt.allow || d.Reason != tt.reason || d.Rule != tt.rule {
				t.Fatalf("Decide(%q, %d) = allow %v reason %q rule %q; want allow %v reason %q rule %q (detail: %s)",
					tt.host, tt.port, d.Allow, d.Reason, d.Rule, tt.allow, tt.reason, tt.rule, d.Detail)
			}
			if d.Host != tt.norm || d.Port != tt.port {
				t.Fatalf("Decide(%q, %d) target = %q, %d; want %q, %d", tt.host, tt.port, d.Host, d.Port, tt.norm, tt.port)
			}
			if d.Detail == "" {
				t.Fatalf("Decide(%q, %d) has no detail", tt.host, tt.port)
			}
		})
	}
}

// A deny entry written without a port must deny the host on every port:
// an operator who writes "deny: bad.example.com" under "*.example.com:*"
// means the host, not only its web ports.
func TestDenyWithoutPortCoversAllPorts(t *testing.T) {
	r := mustCompile(t, []string{"*.example.com:*", "192.0.2.0/24:*"}, []string{"bad.example.com", "192.0.2.66"})
	for _, port := range []int{22, 80, 443, 8443} {
		if d := r.Decide("bad.example.com", port); d.Allow || d.Reason != ReasonDenyRule {
			t.Errorf("Decide(bad.example.com, %d) = allow %v reason %q; want deny_rule", port, d.Allow, d.Reason)
		}
		if d := r.DecideAddr(netip.MustParseAddr("192.0.2.66"), port); d.Allow || d.Reason != ReasonDenyRule {
			t.Errorf("DecideAddr(192.0.2.66, %d) = allow %v reason %q; want deny_rule", port, d.Allow, d.Reason)
		}
	}
	if d := r.Decide("ok.example.com", 22); !d.Allow {
		t.Errorf("Decide(ok.example.com, 22) = %q; want allowed by *.example.com:*", d.Reason)
	}
}

func TestDecideDetailSuggestsFix(t *testing.T) {
	r := mustCompile(t, []string{"example.com", "[2001:db8::1]:443"}, []string{"bad.example.com"})
	tests := []struct {
		host   string
		port   int
		detail []string
	}{
		{"other.example", 443, []string{"other.example:443", "--allow other.example"}},
		{"other.example", 8443, []string{"--allow other.example:8443"}},
		{"example.com", 8443, []string{"port 8443", `"example.com"`, "--allow example.com:8443"}},
		{"2001:db8::1", 80, []string{"--allow [2001:db8::1]:80"}},
		{"2001:db8::2", 443, []string{"[2001:db8::2]:443", "--allow [2001:db8::2]"}},
		{"bad.example.com", 443, []string{"bad.example.com:443", `"bad.example.com"`}},
		{"example.com", 443, []string{"example.com:443", `"example.com"`}},
		{"bad..host", 443, []string{"bad..host", "empty label"}},
	}
	for _, tt := range tests {
		d := r.Decide(tt.host, tt.port)
		for _, s := range tt.detail {
			if !strings.Contains(d.Detail, s) {
				t.Errorf("Decide(%q, %d).Detail = %q; want it to contain %q", tt.host, tt.port, d.Detail, s)
			}
		}
	}
}

func TestDecideAddr(t *testing.T) {
	r := mustCompile(t,
		[]string{"example.com", "localhost", "10.0.0.0/8", "127.0.0.1:8080", "[2001:db8::1]:*"},
		[]string{"10.9.0.0/16", "example.com:*"})
	tests := []struct {
		addr   string
		port   int
		allow  bool
		reason Reason
		rule   string
		host   string
	}{
		{"10.1.2.3", 443, true, ReasonAllowed, "10.0.0.0/8", "10.1.2.3"},
		{"::ffff:10.1.2.3", 80, true, ReasonAllowed, "10.0.0.0/8", "10.1.2.3"},
		{"10.1.2.3", 22, false, ReasonNotAllowed, "", "10.1.2.3"},
		{"10.9.1.1", 443, false, ReasonDenyRule, "10.9.0.0/16", "10.9.1.1"},
		{"::ffff:10.9.1.1", 443, false, ReasonDenyRule, "10.9.0.0/16", "10.9.1.1"},
		{"127.0.0.1", 8080, true, ReasonAllowed, "127.0.0.1:8080", "127.0.0.1"},
		{"127.0.0.1", 443, false, ReasonNotAllowed, "", "127.0.0.1"},
		{"2001:db8::1", 22, true, ReasonAllowed, "[2001:db8::1]:*", "2001:db8::1"},
		{"2001:db8::2", 443, false, ReasonNotAllowed, "", "2001:db8::2"},
		// Name entries never allow or deny an address, whatever it resolves from.
		{"192.0.2.1", 443, false, ReasonNotAllowed, "", "192.0.2.1"},
		{"::1", 443, false, ReasonNotAllowed, "", "::1"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			d := r.DecideAddr(netip.MustParseAddr(tt.addr), tt.port)
			if d.Allow != tt.allow || d.Reason != tt.reason || d.Rule != tt.rule || d.Host != tt.host || d.Port != tt.port {
				t.Fatalf("DecideAddr(%s, %d) = %+v; want allow %v reason %q rule %q host %q", tt.addr, tt.port, d, tt.allow, tt.reason, tt.rule, tt.host)
			}
		})
	}
}

func TestDecideEmptyRules(t *testing.T) {
	var r Rules
	if d := r.Decide("example.com", 443); d.Allow || d.Reason != ReasonNotAllowed {
		t.Errorf("empty rules: Decide = %+v; want not_allowlisted", d)
	}
	if d := r.DecideAddr(netip.MustParseAddr("127.0.0.1"), 443); d.Allow || d.Reason != ReasonNotAllowed {
		t.Errorf("empty rules: DecideAddr = %+v; want not_allowlisted", d)
	}
}

func TestNames(t *testing.T) {
	r := mustCompile(t, []string{" Example.COM ", "*.example.com:8443", "127.1:*", "2001:db8::/32", "[2001:DB8::1]:443"}, []string{"bad.example.com"})
	want := []string{"example.com", "*.example.com:8443", "127.0.0.1:*", "[2001:db8::/32]", "[2001:db8::1]:443"}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	if got := (&Rules{}).Names(); got == nil || len(got) != 0 {
		t.Fatalf("Names() of no rules = %#v, want an empty, non-nil list", got)
	}
}
