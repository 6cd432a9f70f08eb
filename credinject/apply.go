package credinject

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cordon-sandbox/cordon/policy"
)

// The reasons Apply and BodyGuard refuse a request. Audit lines and error
// pages carry these codes.
const (
	// ReasonPlaintext: a bound credential's placeholder on plain HTTP, and
	// the credential does not set allow_plaintext.
	ReasonPlaintext policy.Reason = "credential_plaintext"
	// ReasonMisroute: a placeholder toward a host (or port) its credential
	// is not bound to, or inside the host name itself.
	ReasonMisroute policy.Reason = "credential_misroute"
	// ReasonSecretLeak: a real secret leaving the sandbox, toward any host.
	// The sandbox never holds one, so this means something leaked it in.
	ReasonSecretLeak policy.Reason = "secret_leak"
)

// Error is a refused request. Its message names the credential and where
// the value was found, never a secret or a placeholder.
type Error struct {
	Reason     policy.Reason
	Credential string
	// Where is the part of the request, such as "header X-Api-Key",
	// "URL query" or "request body".
	Where string
	// Target is the host:port the request was headed to.
	Target string
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonPlaintext:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) on plain HTTP to %s; use https, or set allow_plaintext: true on the credential if this host only speaks HTTP",
			e.Credential, e.Where, e.Target)
	case ReasonMisroute:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) toward %s, which is not one of its hosts; if this host should get the secret, add it to the credential's hosts",
			e.Credential, e.Where, e.Target)
	default:
		return fmt.Sprintf("credential %q: refused its real value (in %s) toward %s; the sandbox should only ever hold the placeholder, so find out how the secret got in",
			e.Credential, e.Where, e.Target)
	}
}

// Outcome is what Apply did to a request.
type Outcome struct {
	// Injected names the credentials put on the request, sorted.
	Injected []string
	// Body guards the request body (nil when there is none). Apply has
	// already put it in req.Body; after a failed round trip, Body.Err says
	// whether the guard refused the body.
	Body *BodyGuard
}

// String describes the outcome for an audit line, by credential name only.
func (o Outcome) String() string {
	if len(o.Injected) == 0 {
		return "no credential injected"
	}
	return "injected " + strings.Join(o.Injected, ", ")
}

// Apply prepares a request for upstream. host is the request's normalised
// host, already checked against the connection's authority; secure says the
// request goes over TLS to a verified upstream.
//
// A credential is bound to the request when one of its patterns matches host
// and port. For each bound credential, over TLS or with allow_plaintext, its
// placeholder is replaced by the secret in header values (inside Basic
// credentials too), the URL path and query values, and its header, Basic
// Authorization or query parameter is added when absent. Apply refuses with
// an *Error when a real secret appears anywhere in the request
// (ReasonSecretLeak), a placeholder of an unbound credential appears
// (ReasonMisroute), or a bound placeholder would go over plain HTTP
// (ReasonPlaintext). A refused request is left unchanged. Bound
// credentials are applied in name order, so when two add the same header
// the first name wins. Apply also wraps
// req.Body in a BodyGuard (see GuardBody).
func (s *Set) Apply(req *http.Request, host string, port int, secure bool) (Outcome, error) {
	s = s.orEmpty()
	var out Outcome
	if len(s.creds) == 0 {
		return out, nil
	}
	target := policy.JoinHostPort(host, port)
	bound := make([]bool, len(s.creds))
	for k, c := range s.creds {
		bound[k] = c.boundTo(host, port)
	}
	if err := s.check(requestTexts(req, host), bound, secure, target); err != nil {
		return out, err
	}
	for k, c := range s.creds {
		if bound[k] && (secure || c.allowPlaintext) && c.inject(req) {
			out.Injected = append(out.Injected, c.name)
		}
	}
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = s.GuardBody(req.Body, host, port)
		req.Body, req.GetBody = out.Body, nil
	}
	return out, nil
}

// boundTo reports whether the credential may be sent to host and port.
func (c *cred) boundTo(host string, port int) bool {
	return slices.ContainsFunc(c.patterns, func(p policy.Pattern) bool {
		return p.MatchHost(host) && p.MatchPort(port)
	})
}

// text is one string of a request that leaves the sandbox.
type text struct {
	where, s string
	// fold marks a case-insensitive string (host and header names), held
	// in lower case.
	fold bool
	// host marks the host name.
	host bool
}

func (t text) contains(needle string) bool {
	if t.fold {
		return strings.Contains(t.s, strings.ToLower(needle))
	}
	return strings.Contains(t.s, needle)
}

// check refuses a request carrying a real secret anywhere, a placeholder
// where its credential may not go, or a bound placeholder on plain HTTP
// that the credential does not allow there.
func (s *Set) check(texts []text, bound []bool, secure bool, target string) error {
	for _, t := range texts {
		for _, c := range s.creds {
			if t.contains(c.secret) {
				return s.refusal(ReasonSecretLeak, c, t.where, target)
			}
		}
	}
	for _, t := range texts {
		for k, c := range s.creds {
			switch {
			case !t.contains(c.placeholder):
			case !bound[k] || t.host:
				return s.refusal(ReasonMisroute, c, t.where, target)
			case !secure && !c.allowPlaintext:
				return s.refusal(ReasonPlaintext, c, t.where, target)
			}
		}
	}
	return nil
}

// refusal builds an Error whose free-text fields hold no secret or
// placeholder.
func (s *Set) refusal(reason policy.Reason, c *cred, where, target string) *Error {
	return &Error{
		Reason:     reason,
		Credential: c.name,
		Where:      s.scrub(where, "a header"),
		Target:     s.scrub(target, "the requested host"),
	}
}

// scrub returns text, or fallback if text holds any secret or placeholder.
func (s *Set) scrub(text, fallback string) string {
	lower := strings.ToLower(text)
	for _, c := range s.creds {
		if strings.Contains(lower, strings.ToLower(c.secret)) || strings.Contains(lower, strings.ToLower(c.placeholder)) {
			return fallback
		}
	}
	return text
}

// requestTexts lists every string of req that goes upstream, decoded where
// a client may have encoded a value.
func requestTexts(req *http.Request, host string) []text {
	texts := []text{{where: "host name", s: strings.ToLower(host), fold: true, host: true}}
	names := make([]string, 0, len(req.Header))
	for name := range req.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		texts = append(texts, text{where: "a header name", s: strings.ToLower(name), fold: true})
		for _, v := range req.Header[name] {
			texts = append(texts, text{where: "header " + name, s: v})
			if raw, ok := decodeBasic(v); ok {
				texts = append(texts, text{where: "header " + name + " (Basic credentials)", s: raw})
			}
		}
	}
	u := req.URL
	texts = append(texts,
		text{where: "URL path", s: u.Path},
		text{where: "URL path", s: u.RawPath},
		text{where: "URL", s: u.Opaque},
		text{where: "URL query", s: u.RawQuery},
	)
	if u.User != nil {
		pass, _ := u.User.Password()
		texts = append(texts,
			text{where: "URL user info", s: u.User.String()},
			text{where: "URL user info", s: u.User.Username()},
			text{where: "URL user info", s: pass},
		)
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		for _, comp := range strings.SplitN(part, "=", 2) {
			if v, err := url.QueryUnescape(comp); err == nil {
				texts = append(texts, text{where: "URL query", s: v})
			}
		}
	}
	return texts
}

// inject puts the credential on req, reporting whether it did.
func (c *cred) inject(req *http.Request) bool {
	done := false
	for _, values := range req.Header {
		for i, v := range values {
			nv := strings.ReplaceAll(v, c.placeholder, c.secret)
			if raw, ok := decodeBasic(nv); ok && strings.Contains(raw, c.placeholder) {
				nv = encodeBasic(strings.ReplaceAll(raw, c.placeholder, c.secret))
			}
			if nv != v {
				values[i], done = nv, true
			}
		}
	}
	u := req.URL
	if ep := u.EscapedPath(); strings.Contains(ep, c.placeholder) {
		ep = strings.ReplaceAll(ep, c.placeholder, url.PathEscape(c.secret))
		if p, err := url.PathUnescape(ep); err == nil {
			u.Path, u.RawPath, done = p, ep, true
		}
	}
	if q, ok := replaceInQuery(u.RawQuery, c.placeholder, c.secret); ok {
		u.RawQuery, done = q, true
	}
	switch {
	case c.header != "" && len(req.Header.Values(c.header)) == 0:
		req.Header.Set(c.header, strings.Replace(c.headerValue, "{}", c.secret, 1))
		done = true
	case c.basicUser != "" && len(req.Header.Values("Authorization")) == 0:
		req.Header.Set("Authorization", encodeBasic(c.basicUser+":"+c.secret))
		done = true
	case c.query != "" && !hasQueryParam(u.RawQuery, c.query):
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += url.QueryEscape(c.query) + "=" + url.QueryEscape(c.secret)
		done = true
	}
	return done
}

// decodeBasic returns the "user:password" of a "Basic ..." header value.
func decodeBasic(v string) (string, bool) {
	scheme, b64, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	return string(raw), err == nil
}

// encodeBasic returns the "Basic ..." header value for "user:password".
func encodeBasic(userPass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))
}

// replaceInQuery replaces from with to in a raw query's decoded keys and
// values, re-encoding only the components it changes so that the rest of
// the query, order and encoding included, is sent as the client wrote it.
func replaceInQuery(raw, from, to string) (string, bool) {
	parts := strings.Split(raw, "&")
	changed := false
	for i, part := range parts {
		comps := strings.SplitN(part, "=", 2)
		for j, comp := range comps {
			v, err := url.QueryUnescape(comp)
			if err == nil && strings.Contains(v, from) {
				comps[j], changed = url.QueryEscape(strings.ReplaceAll(v, from, to)), true
			}
		}
		parts[i] = strings.Join(comps, "=")
	}
	return strings.Join(parts, "&"), changed
}

// hasQueryParam reports whether a raw query has the parameter name.
func hasQueryParam(raw, name string) bool {
	for _, part := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if v, err := url.QueryUnescape(k); err == nil && v == name {
			return true
		}
	}
	return false
}

// BodyGuard is an outgoing request body that fails the read which would
// send a real secret or the placeholder of a credential not bound to the
// request's host, whatever the chunking. It holds back fewer bytes than
// the longest such value until it knows they do not start one, so nothing
// of a refused value leaves. Read and Close follow io.ReadCloser.
type BodyGuard struct {
	r       *streamReader
	refused atomic.Pointer[Error]
}

// guardNeedle says what finding needle k of a BodyGuard means.
type guardNeedle struct {
	reason policy.Reason
	cred   *cred
}

// GuardBody wraps an outgoing request body toward host and port. Apply
// calls it itself; call it directly only for bodies Apply does not see.
func (s *Set) GuardBody(body io.ReadCloser, host string, port int) *BodyGuard {
	s = s.orEmpty()
	var needles [][]byte
	var meaning []guardNeedle
	for _, c := range s.creds {
		needles = append(needles, []byte(c.secret))
		meaning = append(meaning, guardNeedle{ReasonSecretLeak, c})
		if !c.boundTo(host, port) {
			needles = append(needles, []byte(c.placeholder))
			meaning = append(meaning, guardNeedle{ReasonMisroute, c})
		}
	}
	target := policy.JoinHostPort(host, port)
	g := &BodyGuard{}
	g.r = newStreamReader(body, newMatcher(needles), func(dst []byte, k int) ([]byte, error) {
		err := s.refusal(meaning[k].reason, meaning[k].cred, "request body", target)
		g.refused.CompareAndSwap(nil, err)
		return dst, err
	})
	return g
}

// Read reads the body, failing with an *Error once a refused value shows.
func (g *BodyGuard) Read(p []byte) (int, error) { return g.r.Read(p) }

// Close closes the wrapped body.
func (g *BodyGuard) Close() error { return g.r.Close() }

// Err returns the *Error that refused the body, or nil.
func (g *BodyGuard) Err() error {
	if err := g.refused.Load(); err != nil {
		return err
	}
	return nil
}
