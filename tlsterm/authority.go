package tlsterm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cordon-sandbox/cordon/policy"
)

// Reasons tlsterm gives for refusing a stream or a request.
const (
	ReasonSNIMismatch       policy.Reason = "sni_mismatch"
	ReasonAuthorityMismatch policy.Reason = "authority_mismatch"
	ReasonH2CUpgrade        policy.Reason = "h2c_upgrade"
	ReasonUpstreamTLS       policy.Reason = "upstream_tls"
	ReasonUpstreamError     policy.Reason = "upstream_error"
	ReasonHandshake         policy.Reason = "client_handshake"
	ReasonBadFraming        policy.Reason = "bad_framing"
	// ReasonClientGone is a request whose client left before its response
	// was complete; its upstream leg was cut.
	ReasonClientGone policy.Reason = "client_gone"
	// ReasonBadRequest is a request that could not be read as HTTP.
	ReasonBadRequest policy.Reason = "bad_request"
	// ReasonTooManyRequests is an HTTP/2 request past the bound on
	// requests in flight at once (Config.MaxRequests).
	ReasonTooManyRequests policy.Reason = "too_many_requests"
	// ReasonNestedConnect is a CONNECT request inside a terminated stream.
	ReasonNestedConnect policy.Reason = "nested_connect"
	// ReasonUnsolicitedResponse is an upstream connection that sent bytes
	// no request asked for, dropped with them.
	ReasonUnsolicitedResponse policy.Reason = "unsolicited_response"
	// ReasonAuditFailed is what could not be logged, and so was refused.
	ReasonAuditFailed policy.Reason = "audit_failed"
)

// AuditFailed is the refusal of what could not be logged. Its detail
// leaves out the writer's error, which names the log's path: the box is
// kept from the log's directory, and the operator is told the error where
// it happens.
func AuditFailed(host string, port int) policy.Decision {
	return policy.Decision{Host: host, Port: port, Reason: ReasonAuditFailed,
		Detail: "the audit log cannot be written, so nothing is allowed"}
}

// CheckSNI decides a ClientHello's server name against the tunnel's host.
// A missing SNI means the tunnel's host (clients send none for IP
// literals).
func CheckSNI(sni, host string, port int) policy.Decision {
	d := policy.Decision{Host: host, Port: port}
	if sni == "" {
		d.Allow, d.Reason = true, policy.ReasonAllowed
		return d
	}
	n, err := policy.NormalizeHost(sni)
	if err != nil || n != host {
		d.Reason = ReasonSNIMismatch
		d.Detail = fmt.Sprintf("TLS server name %q does not match the tunnel's host %s; one connection speaks to one authority", clip(sni), host)
		return d
	}
	d.Allow, d.Reason = true, policy.ReasonAllowed
	return d
}

// CheckRequest decides one request inside a terminated stream: its
// authority (HTTP/1.1 Host or absolute-form URI, HTTP/2 :authority) must
// name the stream's host and port, with the scheme's default port elided,
// and it may not try to switch protocols to h2c, nor open a tunnel of its
// own with CONNECT, nor carry an opaque URI, which names no authority,
// nor a space in its query, nor be a GET or HEAD with a body.
func CheckRequest(r *http.Request, host string, port, defaultPort int) policy.Decision {
	d := policy.Decision{Host: host, Port: port}
	if HasToken(r.Header, "Upgrade", "h2c") || r.Header.Get("HTTP2-Settings") != "" {
		d.Reason = ReasonH2CUpgrade
		d.Detail = "an Upgrade to h2c inside a tunnel is refused: it would hide later requests from the authority check"
		return d
	}
	if r.Method == http.MethodConnect {
		// What follows a CONNECT is the new tunnel's bytes, which nothing
		// here reads: an HTTP/2 stream's DATA went upstream raw after an
		// HTTP/1.1 CONNECT line, where the server read them as requests
		// of their own.
		d.Reason = ReasonNestedConnect
		d.Detail = "a CONNECT inside a tunnel is refused: the bytes after it would reach the server unread"
		return d
	}
	if r.ContentLength > 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Servers are not expected to read such a body, and some do not
		// (Python's http.server): they read it as the next request, one
		// nothing here judged or logged, with any Host. A body of unknown
		// length goes upstream chunked, where it starts with a chunk size,
		// which no server reads as a request line.
		d.Reason = ReasonBadFraming
		d.Detail = "a GET or HEAD request with a body is refused: a server that does not read the body reads it as a request of its own, which cordon never judged; send the body with POST"
		return d
	}
	if r.URL.Opaque != "" {
		// An absolute URI without "//" ("https:http://other/x") names no
		// authority to check, and goes upstream as written: as an
		// absolute-form target naming another host, which the server
		// takes over Host. Not quoted: its query is never logged.
		d.Reason = ReasonAuthorityMismatch
		d.Detail = fmt.Sprintf("an opaque request URI (a scheme without \"//\") names no authority to check against the tunnel's %s, and would go upstream as written; one connection speaks to one authority", policy.JoinHostPort(host, port))
		return d
	}
	if q := r.URL.RawQuery; !isPrint(q) || strings.Contains(q, " ") {
		// An HTTP/2 :path may hold a space, which goes upstream raw: into
		// an HTTP/1.1 request line, which a server splits at its spaces
		// ("GET /x?a HTTP/1.0 b HTTP/1.1"). So may either protocol's hold
		// a byte no URI holds unescaped, 0xA0 (no-break space) or 0x85
		// (next line) among them, at which a server that splits on any
		// white space (Python's str.split) split the line, acting on
		// another target than the one forwarded (red team, round 7). Not
		// quoted: its query is never logged.
		d.Reason = ReasonBadRequest
		d.Detail = "the request's query holds a space, a control or a byte that is not ASCII, which a server may split the request line it goes upstream in at; percent-encode it (%20, %C3%A9)"
		return d
	}
	if d2 := CheckAuthority(r.Host, host, port, defaultPort); !d2.Allow {
		return d2
	}
	if r.URL.IsAbs() {
		if d2 := CheckAuthority(r.URL.Host, host, port, defaultPort); !d2.Allow {
			return d2
		}
	}
	d.Allow, d.Reason = true, policy.ReasonAllowed
	return d
}

// RefusalStatus is the status a request CheckRequest refuses for reason
// is answered with.
func RefusalStatus(reason policy.Reason) int {
	switch reason {
	case ReasonH2CUpgrade, ReasonNestedConnect:
		return http.StatusForbidden
	case ReasonBadFraming, ReasonBadRequest:
		return http.StatusBadRequest
	}
	return http.StatusMisdirectedRequest
}

// Authority is the one spelling of host and port that requests name
// upstream: the judged host, and the port unless it is defaultPort, the
// scheme's. A request goes upstream under it whatever spelling the client
// wrote, so the server is asked for the authority cordon judged and
// logged, not another that a spelling cordon maps to it stands for there.
func Authority(host string, port, defaultPort int) string {
	hp := policy.JoinHostPort(host, port)
	if port == defaultPort {
		return strings.TrimSuffix(hp, ":"+strconv.Itoa(port))
	}
	return hp
}

// CheckAuthority compares one authority ("host" or "host:port") with the
// stream's host and port. An empty authority (HTTP/1.0) is the stream's.
func CheckAuthority(authority, host string, port, defaultPort int) policy.Decision {
	d := policy.Decision{Host: host, Port: port}
	if authority != "" {
		h, p, err := policy.SplitHostPort(authority, defaultPort)
		if err != nil || h != host || p != port {
			d.Reason = ReasonAuthorityMismatch
			d.Detail = fmt.Sprintf("request authority %q does not match the tunnel's %s; one connection speaks to one authority", clip(authority), policy.JoinHostPort(host, port))
			return d
		}
	}
	d.Allow, d.Reason = true, policy.ReasonAllowed
	return d
}

// HasToken reports whether a comma-separated header (Connection, Upgrade)
// lists token, in any case.
func HasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// clip keeps untrusted strings short in audit lines and error pages.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
