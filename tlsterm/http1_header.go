package tlsterm

import (
	"net/http"
	"net/url"
	"strings"
)

// Header and query rules the HTTP/1.x path applies as net/http did.

// isIdempotent says whether a request may be sent twice, as net/http's
// Transport judges it for its retries.
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// isHopHeader says whether a canonical header name is hop-by-hop: those
// of RFC 9110 section 7.6.1, and the proxy ones.
func isHopHeader(name string) bool {
	switch name {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// RemoveHopByHop removes the hop-by-hop headers and those Connection names.
func RemoveHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for name := range h {
		if isHopHeader(name) {
			delete(h, name)
		}
	}
}

// upgradeType is the protocol a header asks to switch to, "" for none.
func upgradeType(h http.Header) string {
	if !HasToken(h, "Connection", "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// isPrint says whether s is printable ASCII.
func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// cleanQuery drops the query parameters net/url cannot parse (a ';'
// separator, a bad escape), re-encoding the query only when there is one,
// so that no parameter is read one way here and another way upstream.
func cleanQuery(q string) string {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return reencodeQuery(q)
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return reencodeQuery(q)
			}
			i += 2
		}
	}
	return q
}

func reencodeQuery(q string) string {
	v, _ := url.ParseQuery(q)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// keysOf lists a header's names.
func keysOf(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}
