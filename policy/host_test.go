package policy

import (
	"net/netip"
	"strings"
	"testing"
)

// repeatLabel returns a label of n copies of c.
func repeatLabel(c string, n int) string { return strings.Repeat(c, n) }

// longUnicode returns one label of n distinct CJK characters, the costliest
// input for punycode encoding.
func longUnicode(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteRune(rune(0x4e00 + i%20000))
	}
	return b.String()
}

// BenchmarkNormalizeHostLongUnicode measures a hostile 30 KB Unicode host,
// which a sandboxed client can put in a CONNECT line or Host header: it must
// be refused in time linear in its length, not quadratic.
func BenchmarkNormalizeHostLongUnicode(b *testing.B) {
	host := longUnicode(10000)
	for b.Loop() {
		if _, err := NormalizeHost(host); err == nil {
			b.Fatal("a 30 KB host was accepted")
		}
	}
}

func BenchmarkNormalizeHost(b *testing.B) {
	for b.Loop() {
		for _, h := range []string{"api.example.com", "Bücher.de", "2852039166", "[2001:db8::1]"} {
			if _, err := NormalizeHost(h); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestNormalizeHost(t *testing.T) {
	long63 := repeatLabel("a", 63)
	// 63+1+63+1+63+1+61 = 253 characters: the longest name allowed.
	name253 := long63 + "." + long63 + "." + long63 + "." + repeatLabel("b", 61)
	tests := []struct {
		name, in, want string
	}{
		{"lower-case", "Example.COM", "example.com"},
		{"already canonical", "example.com", "example.com"},
		{"single label", "localhost", "localhost"},
		{"one trailing dot removed", "example.com.", "example.com"},
		{"underscore label", "_dmarc.example.com", "_dmarc.example.com"},
		{"underscore inside label", "my_host.example.com", "my_host.example.com"},
		{"hyphen inside label", "my-host.example.com", "my-host.example.com"},
		{"hyphens in third and fourth place", "r3---sn-4g5e6nsz.googlevideo.com", "r3---sn-4g5e6nsz.googlevideo.com"},
		{"double hyphen mid-label", "ab--cd.example.com", "ab--cd.example.com"},
		{"name ending in hex-like non-number", "a.0x1g", "a.0x1g"},
		{"name that looks like an exponent", "1e3", "1e3"},
		{"longest name", name253, name253},
		{"longest label", long63 + ".com", long63 + ".com"},

		{"IDNA unicode to punycode", "bücher.de", "xn--bcher-kva.de"},
		{"IDNA upper-case unicode", "BÜCHER.de", "xn--bcher-kva.de"},
		{"IDNA punycode stays", "xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"IDNA punycode upper-case", "XN--BCHER-KVA.DE", "xn--bcher-kva.de"},
		{"IDNA sharp s non-transitional", "ß.de", "xn--zca.de"},
		{"IDNA composed and decomposed agree", "e\u0301xample.com", "xn--xample-9ua.com"},
		{"fullwidth letters and ideographic dot", "ＥＸＡＭＰＬＥ。com", "example.com"},
		{"fullwidth full stop", "example．com", "example.com"},
		{"halfwidth ideographic full stop", "example｡com", "example.com"},
		{"ideographic dot as trailing dot", "example.com。", "example.com"},
		{"fullwidth digits and dots", "１２７。０。０。１", "127.0.0.1"},

		{"IPv4", "192.0.2.1", "192.0.2.1"},
		{"IPv4 trailing dot", "192.0.2.1.", "192.0.2.1"},
		{"IPv6 bare", "2001:db8::1", "2001:db8::1"},
		{"IPv6 bracketed upper-case", "[2001:DB8::1]", "2001:db8::1"},
		{"IPv6 long form", "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"IPv6 loopback bracketed", "[::1]", "::1"},
		{"IPv4-mapped", "::ffff:127.0.0.1", "127.0.0.1"},
		{"IPv4-mapped bracketed", "[::ffff:127.0.0.1]", "127.0.0.1"},
		{"IPv4-mapped hex form", "::ffff:7f00:1", "127.0.0.1"},

		{"decimal integer", "2852039166", "169.254.169.254"},
		{"hex integer", "0xA9FEA9FE", "169.254.169.254"},
		{"hex integer lower-case", "0xa9fea9fe", "169.254.169.254"},
		{"hex integer upper-case X", "0XA9FEA9FE", "169.254.169.254"},
		{"dotted octal", "0251.0376.0251.0376", "169.254.169.254"},
		{"dotted hex", "0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"two parts", "127.1", "127.0.0.1"},
		{"three parts", "127.0.1", "127.0.0.1"},
		{"three parts, last fills two bytes", "169.254.43518", "169.254.169.254"},
		{"hex then decimal", "0x7f.1", "127.0.0.1"},
		{"octal last part", "1.2.3.04", "1.2.3.4"},
		{"octal zero", "00.0.0.0", "0.0.0.0"},
		{"largest integer", "4294967295", "255.255.255.255"},
		{"bare 0x is zero", "0x", "0.0.0.0"},
		{"numeric with trailing dot", "127.1.", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeHost(tt.in)
			if err != nil {
				t.Fatalf("NormalizeHost(%q): unexpected error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("NormalizeHost(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeHostRefuses(t *testing.T) {
	long63 := repeatLabel("a", 63)
	tests := []struct {
		name, in, errHas string
	}{
		{"empty", "", "empty host"},
		{"two trailing dots", "example.com..", "empty label"},
		{"only a dot", ".", "empty label"},
		{"leading dot", ".example.com", "empty label"},
		{"empty inner label", "a..example.com", "empty label"},
		{"percent escape", "exa%6dple.com", "'%'"},
		{"zone id bare", "fe80::1%eth0", "'%'"},
		{"zone id bracketed", "[fe80::1%25eth0]", "'%'"},
		{"zone id bracketed raw", "[fe80::1%eth0]", "'%'"},
		{"bracket inside name", "a[b].example.com", "brackets"},
		{"closing bracket only", "::1]", "brackets"},
		{"unbalanced bracket", "[::1", "unbalanced"},
		{"brackets around IPv4", "[192.0.2.1]", "IPv6"},
		{"brackets around name", "[example.com]", "IPv6"},
		{"empty brackets", "[]", "IPv6"},
		{"host with port", "example.com:443", "port"},
		{"space", "exa mple.com", "' '"},
		{"trailing space", "example.com ", "' '"},
		{"bang", "ex!ample.com", "'!'"},
		{"star", "*.example.com", "'*'"},
		{"slash", "example.com/path", "'/'"},
		{"label too long", repeatLabel("a", 64) + ".com", "longer than 63"},
		{"name too long", long63 + "." + long63 + "." + long63 + "." + repeatLabel("b", 62), "longer than 253"},
		{"zero-width joiner", "a\u200db.example.com", "international"},
		{"bad punycode", "xn--a.example.com", "international"},
		{"leading hyphen", "-a.example.com", "label"},
		{"bad octal", "1.2.3.09", "not an IPv4 address"},
		{"octet over 255", "1.2.3.256", "not an IPv4 address"},
		{"inner part over 255", "256.1", "not an IPv4 address"},
		{"five parts", "1.2.3.4.5", "not an IPv4 address"},
		{"integer over 32 bits", "4294967296", "not an IPv4 address"},
		{"hex over 32 bits", "0x100000000", "not an IPv4 address"},
		{"name ending in a number", "example.123", "not an IPv4 address"},
		{"name ending in hex", "example.0x1f", "not an IPv4 address"},
		{"name ending in bare 0x", "example.0x", "not an IPv4 address"},
		{"fullwidth digits after a name", "a.０x7f", "not an IPv4 address"},
		{"leading space before a number", " 1.2.3.4", "not an IPv4 address"},
		{"invalid UTF-8", "\xc20.example.com", `\xc2`},
		{"bidi rule broken only after mapping", "0ℸ.example.com", "international"},
		{"very long international name", longUnicode(2000), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeHost(tt.in)
			if err == nil {
				t.Fatalf("NormalizeHost(%q) = %q, want an error containing %q", tt.in, got, tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("NormalizeHost(%q) error %q does not contain %q", tt.in, err, tt.errHas)
			}
		})
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		in       string
		def      int
		wantHost string
		wantPort int
	}{
		{"example.com:443", 0, "example.com", 443},
		{"Example.COM.:8443", 0, "example.com", 8443},
		{"example.com", 443, "example.com", 443},
		{"example.com", 80, "example.com", 80},
		{"example.com:080", 0, "example.com", 80},
		{"[2001:DB8::1]:443", 0, "2001:db8::1", 443},
		{"[::1]", 443, "::1", 443},
		{"::1", 443, "::1", 443},
		{"[::ffff:127.0.0.1]:80", 0, "127.0.0.1", 80},
		{"127.1:80", 0, "127.0.0.1", 80},
		{"2852039166:443", 0, "169.254.169.254", 443},
		{"bücher.de:443", 0, "xn--bcher-kva.de", 443},
		{"example.com:65535", 0, "example.com", 65535},
		{"example.com:1", 0, "example.com", 1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, p, err := SplitHostPort(tt.in, tt.def)
			if err != nil {
				t.Fatalf("SplitHostPort(%q, %d): %v", tt.in, tt.def, err)
			}
			if h != tt.wantHost || p != tt.wantPort {
				t.Fatalf("SplitHostPort(%q, %d) = %q, %d; want %q, %d", tt.in, tt.def, h, p, tt.wantHost, tt.wantPort)
			}
		})
	}
}

func TestSplitHostPortRefuses(t *testing.T) {
	tests := []struct {
		in     string
		def    int
		errHas string
	}{
		{"example.com", 0, "port is required"},
		{"[::1]", 0, "port is required"},
		{"example.com:", 443, "not a number"},
		{"[::1]:", 443, "not a number"},
		{"example.com:0", 0, "not a number from 1 to 65535"},
		{"example.com:65536", 0, "not a number from 1 to 65535"},
		{"example.com:99999", 0, "not a number from 1 to 65535"},
		{"example.com:123456", 0, "not a number from 1 to 65535"},
		{"example.com:+443", 0, "not a number"},
		{"example.com:-1", 0, "not a number"},
		{"example.com:https", 0, "not a number"},
		{"example.com: 443", 0, "not a number"},
		{":443", 0, "empty host"},
		{"[]:443", 0, "IPv6"},
		{"[192.0.2.1]:443", 0, "IPv6"},
		{"[::1]x:443", 0, "unbalanced"},
		{"a:b:c", 443, "port"},
		{"[fe80::1%25eth0]:443", 0, "'%'"},
		{"example.com..:443", 0, "empty label"},
		{"1.2.3.256:443", 0, "not an IPv4 address"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, p, err := SplitHostPort(tt.in, tt.def)
			if err == nil {
				t.Fatalf("SplitHostPort(%q, %d) = %q, %d; want an error containing %q", tt.in, tt.def, h, p, tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("SplitHostPort(%q, %d) error %q does not contain %q", tt.in, tt.def, err, tt.errHas)
			}
		})
	}
}

func TestJoinHostPort(t *testing.T) {
	tests := []struct {
		host string
		port int
		want string
	}{
		{"example.com", 443, "example.com:443"},
		{"192.0.2.1", 80, "192.0.2.1:80"},
		{"2001:db8::1", 8443, "[2001:db8::1]:8443"},
	}
	for _, tt := range tests {
		if got := JoinHostPort(tt.host, tt.port); got != tt.want {
			t.Errorf("JoinHostPort(%q, %d) = %q, want %q", tt.host, tt.port, got, tt.want)
		}
		h, p, err := SplitHostPort(tt.want, 0)
		if err != nil || h != tt.host || p != tt.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d", tt.want, h, p, err, tt.host, tt.port)
		}
	}
}

// checkNormalized asserts the invariants of a NormalizeHost result.
func checkNormalized(t *testing.T, in, out string) {
	t.Helper()
	if out == "" {
		t.Fatalf("NormalizeHost(%q) returned an empty host without an error", in)
	}
	if strings.ToLower(out) != out {
		t.Fatalf("NormalizeHost(%q) = %q holds upper-case", in, out)
	}
	if strings.ContainsAny(out, "%[] ") {
		t.Fatalf("NormalizeHost(%q) = %q holds '%%', a bracket or a space", in, out)
	}
	if strings.HasSuffix(out, ".") {
		t.Fatalf("NormalizeHost(%q) = %q ends in a dot", in, out)
	}
	if a, err := netip.ParseAddr(out); err == nil {
		if canon := a.Unmap().WithZone("").String(); canon != out {
			t.Fatalf("NormalizeHost(%q) = %q, an address not in canonical form %q", in, out, canon)
		}
		return
	}
	if len(out) > maxHostLen {
		t.Fatalf("NormalizeHost(%q) = %q is longer than %d", in, out, maxHostLen)
	}
	for _, l := range strings.Split(out, ".") {
		if err := validLabel(l); err != nil {
			t.Fatalf("NormalizeHost(%q) = %q: %v", in, out, err)
		}
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{
		"example.com", "Example.COM.", "example.com..", "_dmarc.example.com",
		"bücher.de", "ＥＸＡＭＰＬＥ。com", "１２７。０。０。１", "xn--bcher-kva.de",
		"r3---sn-4g5e6nsz.googlevideo.com", "[2001:DB8::1]", "::ffff:127.0.0.1",
		"fe80::1%eth0", "[fe80::1%25eth0]", "2852039166", "0xA9FEA9FE",
		"0251.0376.0251.0376", "127.1", "0x7f.1", "1.2.3.04", "1.2.3.09",
		"1.2.3.256", "example.123", "0x", "a.0x1g", "[::1", "a[b].c", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalizeHost(in)
		if err != nil {
			if out != "" {
				t.Fatalf("NormalizeHost(%q) returned %q with error %v", in, out, err)
			}
			return
		}
		checkNormalized(t, in, out)
		again, err := NormalizeHost(out)
		if err != nil {
			t.Fatalf("NormalizeHost(%q) = %q, which is then refused: %v", in, out, err)
		}
		if again != out {
			t.Fatalf("NormalizeHost is not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}

func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{
		"example.com:443", "example.com", "[::1]:80", "[::1]", "::1", "[::1]:",
		"example.com:", ":443", "a:b:c", "[2001:DB8::1]:8443", "127.1:80",
		"example.com:99999", "example.com:0", "[fe80::1%25eth0]:443", "]:80",
	} {
		f.Add(s, 443)
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, in string, def int) {
		if def < 0 || def > 65535 {
			def = 443
		}
		host, port, err := SplitHostPort(in, def)
		if err != nil {
			if host != "" || port != 0 {
				t.Fatalf("SplitHostPort(%q, %d) returned %q, %d with error %v", in, def, host, port, err)
			}
			return
		}
		if port < 1 || port > 65535 {
			t.Fatalf("SplitHostPort(%q, %d) port %d out of range", in, def, port)
		}
		checkNormalized(t, in, host)
		joined := JoinHostPort(host, port)
		h2, p2, err := SplitHostPort(joined, 0)
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("SplitHostPort(%q) = %q, %d; its join %q splits to %q, %d, %v", in, host, port, joined, h2, p2, err)
		}
	})
}
