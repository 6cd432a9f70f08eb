package tlsterm

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

func TestCheckAuthority(t *testing.T) {
	for _, tc := range []struct {
		authority string
		host      string
		port      int
		allow     bool
	}{
		{"api.example.com", "api.example.com", 443, true},
		{"API.Example.COM.", "api.example.com", 443, true},
		{"api.example.com:443", "api.example.com", 443, true},
		{"", "api.example.com", 443, true},
		{"api.example.com:8443", "api.example.com", 443, false},
		{"api.example.com", "api.example.com", 8443, false},
		{"api.example.com:8443", "api.example.com", 8443, true},
		{"other.example.com", "api.example.com", 443, false},
		{"api.example.com.evil.test", "api.example.com", 443, false},
		{"[2001:db8::1]", "2001:db8::1", 443, true},
		{"[2001:db8::1]:444", "2001:db8::1", 443, false},
		{"0x7f.1", "127.0.0.1", 443, true},
		{"api.example.com:0443", "api.example.com", 443, true},
		{"api.example.com:", "api.example.com", 443, false},
		{"api%2eexample.com", "api.example.com", 443, false},
	} {
		d := CheckAuthority(tc.authority, tc.host, tc.port, 443)
		if d.Allow != tc.allow {
			t.Errorf("CheckAuthority(%q, %s:%d) = %+v, want allow=%v", tc.authority, tc.host, tc.port, d, tc.allow)
		}
		if !d.Allow && d.Reason != ReasonAuthorityMismatch {
			t.Errorf("CheckAuthority(%q): reason %s", tc.authority, d.Reason)
		}
	}
}

// TestAuthority: the authority a request goes upstream under is the host
// and port it was judged for, the scheme's default port elided, and it
// passes CheckAuthority for that host and port.
func TestAuthority(t *testing.T) {
	for _, tc := range []struct {
		host              string
		port, defaultPort int
		want              string
	}{
		{"api.example.com", 443, 443, "api.example.com"},
		{"api.example.com", 8443, 443, "api.example.com:8443"},
		{"api.example.com", 443, 80, "api.example.com:443"},
		{"127.0.0.1", 80, 80, "127.0.0.1"},
		{"2001:db8::1", 443, 443, "[2001:db8::1]"},
		{"2001:db8::1", 8080, 80, "[2001:db8::1]:8080"},
	} {
		got := Authority(tc.host, tc.port, tc.defaultPort)
		if got != tc.want {
			t.Errorf("Authority(%q, %d, %d) = %q, want %q", tc.host, tc.port, tc.defaultPort, got, tc.want)
		}
		if d := CheckAuthority(got, tc.host, tc.port, tc.defaultPort); !d.Allow {
			t.Errorf("Authority(%q, %d, %d) = %q, which CheckAuthority refuses: %+v", tc.host, tc.port, tc.defaultPort, got, d)
		}
	}
}

func TestCheckSNI(t *testing.T) {
	for _, tc := range []struct {
		sni, host string
		allow     bool
	}{
		{"", "api.example.com", true},
		{"api.example.com", "api.example.com", true},
		{"API.EXAMPLE.COM", "api.example.com", true},
		{"other.example.com", "api.example.com", false},
		{"xn--mnchen-3ya.de", "münchen.de", false}, // host is always normalised by the caller
		{"bad..name", "api.example.com", false},
	} {
		if d := CheckSNI(tc.sni, tc.host, 443); d.Allow != tc.allow {
			t.Errorf("CheckSNI(%q, %q) = %+v, want allow=%v", tc.sni, tc.host, d, tc.allow)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	req := func(host, target string, hdr map[string]string) *http.Request {
		u, _ := url.Parse(target)
		r := &http.Request{Method: "GET", Host: host, URL: u, Header: http.Header{}}
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		r      *http.Request
		reason policy.Reason
	}{
		{"origin-form", req("a.test", "/x", nil), policy.ReasonAllowed},
		{"absolute-form same", req("a.test", "https://a.test/x", nil), policy.ReasonAllowed},
		{"absolute-form other", req("a.test", "https://b.test/x", nil), ReasonAuthorityMismatch},
		{"host other", req("b.test", "/x", nil), ReasonAuthorityMismatch},
		{"h2c upgrade", req("a.test", "/x", map[string]string{"Upgrade": "websocket, h2c"}), ReasonH2CUpgrade},
		{"http2-settings", req("a.test", "/x", map[string]string{"HTTP2-Settings": "AAA"}), ReasonH2CUpgrade},
		{"websocket upgrade", req("a.test", "/x", map[string]string{"Upgrade": "websocket"}), policy.ReasonAllowed},
		// Sent as written: "http://b.test/x", absolute-form naming b.test.
		{"opaque URI", req("a.test", "https:http://b.test/x", nil), ReasonAuthorityMismatch},
		{"opaque URI, no slashes", req("a.test", "https:b.test:443/x", nil), ReasonAuthorityMismatch},
		{"absolute-form without host", req("a.test", "https:///x", nil), policy.ReasonAllowed},
		// An HTTP/2 :path may carry one; it would split the HTTP/1.1
		// request line upstream.
		{"space in query", req("a.test", "/x?a HTTP/1.0 b", nil), ReasonBadRequest},
		{"space in path", req("a.test", "/x y", nil), policy.ReasonAllowed}, // sent escaped
		// Nor may any byte no URI holds unescaped, at which a server
		// splitting on any white space split it (red team, round 7).
		{"no-break space in query", req("a.test", "/x?a\xa0b", nil), ReasonBadRequest},
		{"next line in query", req("a.test", "/x?a\x85b", nil), ReasonBadRequest},
		{"UTF-8 in query", req("a.test", "/x?q=caf\xc3\xa9", nil), ReasonBadRequest},
		{"percent-encoded query", req("a.test", "/x?q=caf%C3%A9&b=%A0", nil), policy.ReasonAllowed},
		// A server that ignores the body reads it as a request.
		{"GET with a body", withBody(req("a.test", "/x", nil), "GET", 5), ReasonBadFraming},
		{"HEAD with a body", withBody(req("a.test", "/x", nil), "HEAD", 5), ReasonBadFraming},
		{"GET, body of unknown length", withBody(req("a.test", "/x", nil), "GET", -1), policy.ReasonAllowed}, // sent chunked
		{"POST with a body", withBody(req("a.test", "/x", nil), "POST", 5), policy.ReasonAllowed},
	} {
		if d := CheckRequest(tc.r, "a.test", 443, 443); d.Reason != tc.reason {
			t.Errorf("%s: %+v, want %s", tc.name, d, tc.reason)
		}
	}
}

// withBody makes r a request of method with a body of length n (-1:
// unknown).
func withBody(r *http.Request, method string, n int64) *http.Request {
	r.Method, r.ContentLength = method, n
	return r
}

// FuzzCheckAuthority: an authority is allowed exactly when it normalises to
// the stream's host and port; never a panic, never a different host.
func FuzzCheckAuthority(f *testing.F) {
	for _, s := range []string{"api.example.com", "api.example.com:443", "API.example.com.", "[::1]:443", "0x7f.1", "a.test:8443", "%00", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authority string) {
		d := CheckAuthority(authority, "api.example.com", 443, 443)
		if authority == "" {
			return
		}
		h, p, err := policy.SplitHostPort(authority, 443)
		want := err == nil && h == "api.example.com" && p == 443
		if d.Allow != want {
			t.Fatalf("CheckAuthority(%q) allow=%v, want %v", authority, d.Allow, want)
		}
	})
}

// FuzzCheckSNI: a ClientHello's server name is allowed exactly when it is
// absent or normalises to the tunnel's host.
func FuzzCheckSNI(f *testing.F) {
	for _, s := range []string{"", "api.example.com", "API.EXAMPLE.COM.", "xn--mnchen-3ya.de", "api.example.com.evil.test", "\x00", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sni string) {
		d := CheckSNI(sni, "api.example.com", 443)
		n, err := policy.NormalizeHost(sni)
		want := sni == "" || (err == nil && n == "api.example.com")
		if d.Allow != want {
			t.Fatalf("CheckSNI(%q) allow=%v, want %v", sni, d.Allow, want)
		}
		if !d.Allow && d.Reason != ReasonSNIMismatch {
			t.Fatalf("CheckSNI(%q) reason %s", sni, d.Reason)
		}
	})
}
