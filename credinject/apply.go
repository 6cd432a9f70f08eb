package credinject

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

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
	// ReasonBasicUser: a bound placeholder inside Basic credentials other
	// than the credential's own basic_auth user and the placeholder alone.
	ReasonBasicUser policy.Reason = "credential_basic_user"
	// ReasonPlacement: a bound placeholder somewhere its credential's
	// form does not put the secret (another header, another query
	// parameter, the path of a credential without a path form): filled
	// in there, the service itself could be made to store or pass on the
	// key where others read it (a message's text, a file's name, a
	// metadata header).
	ReasonPlacement policy.Reason = "credential_placement"
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
	// Form says where the credential's form puts the secret, such as
	// "header X-Api-Key or Authorization", for ReasonPlacement.
	Form string
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonPlaintext:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) on plain HTTP to %s; use https, or set allow_plaintext: true on the credential if this host only speaks HTTP",
			e.Credential, e.Where, e.Target)
	case ReasonMisroute:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) toward %s, which is not one of its hosts; if this host should get the secret, add it to the credential's hosts",
			e.Credential, e.Where, e.Target)
	case ReasonBasicUser:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) toward %s: cordon fills in Basic credentials only as the credential's basic_auth user with the placeholder as the whole password, so that an upstream echoing them can be masked; set basic_auth to the user the client sends",
			e.Credential, e.Where, e.Target)
	case ReasonPlacement:
		return fmt.Sprintf("credential %q: refused its placeholder (in %s) toward %s: cordon fills it in only where the credential's form puts the key, %s, so that the service cannot be made to store or pass it on where others read it; send it there, or, if this API takes the key elsewhere, set the credential's form to that place (header, basic_auth, query, or path: \"/prefix{}/\" for a key in the URL path)",
			e.Credential, e.Where, e.Target, e.Form)
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
// placeholder is replaced by the secret only where its form puts it (see
// placed): in its header or Authorization, in Basic Authorization, as its
// query parameter's value, or in the path at its path template's {}; its
// header, Basic Authorization or query parameter is added when absent.
// Apply refuses with an *Error when a real secret appears anywhere in the
// request (ReasonSecretLeak), a placeholder of an unbound credential appears
// (ReasonMisroute), or a bound placeholder would go over plain HTTP
// (ReasonPlaintext), sits anywhere its form does not put the secret
// (ReasonPlacement), or sits in Basic credentials other than the
// credential's own (ReasonBasicUser). A refused request is left unchanged. Bound credentials are applied in name order, so when two
// add the same header the first name wins. A request to a credential's
// host loses its Range, If-Range and Request-Range headers. Apply also wraps req.Body in a
// BodyGuard (see GuardBody), which drops the request's trailers.
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
	if slices.Contains(bound, true) {
		// A part of a response that echoes the secret, now or as an
		// upstream stored it earlier, could not be told for one, and
		// would not be masked.
		for _, name := range rangeHeaders {
			req.Header.Del(name)
		}
	}
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = s.GuardBody(req.Body, host, port)
		out.Body.req = req
		req.Body, req.GetBody = out.Body, nil
	}
	return out, nil
}

// rangeHeaders ask a server for part of a response: Range and If-Range,
// and Request-Range, the name of the draft Netscape 2 and 3 sent, which
// Apache httpd still serves a range for when there is no Range.
var rangeHeaders = []string{"Range", "If-Range", "Request-Range"}

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
	// basic marks the "user:password" decoded from Basic credentials.
	basic bool
	// place is where in the request the string sits, for placed.
	place place
	// name is the header's name, for placeHeader, or the query
	// parameter's, for placeQueryValue.
	name string
	// several marks a value of a header sent more than once, which a
	// server may join with the others ("Basic QUFB,KEY"), so that a value
	// of the box's would choose how the key is decoded.
	several bool
}

// place is a part of a request, as far as where a secret may go.
type place int

const (
	// placeOther is a part where no secret goes: the host name, method,
	// header names, URL user info, an opaque URL, query keys.
	placeOther place = iota
	// placeHeader is a header's value, or the Basic credentials in it.
	placeHeader
	// placeHop is a hop-by-hop header's value, which a proxy never sends
	// on, and cordon never fills in.
	placeHop
	// placePath is the URL path, decoded or as sent.
	placePath
	// placeQuery is the raw query; placeQueryValue one decoded value.
	placeQuery
	placeQueryValue
)

// placed reports whether t is a place c's form puts its secret, where its
// placeholder is filled in: its header, or Authorization (the header
// clients send a key in whatever the API, as gh sends "token KEY"); for
// basic_auth, the Basic credentials in Authorization; for query, its
// parameter's value, when that is the placeholder alone; for path, the
// path, when it starts as the template does and holds the placeholder
// once. Anywhere else, the service the credential is bound to could be
// made to store or pass on the key (a chat message's text, a file's name,
// a storage object's metadata) where others read it.
func (c *cred) placed(t text) bool {
	switch t.place {
	case placeHop:
		return true
	case placeHeader:
		return c.takesHeader(t.name) && !t.several && (t.basic || c.header != "" && c.whole(t.s, c.placeholder))
	case placePath:
		return c.pathBefore != "" && strings.HasPrefix(t.s, c.pathBefore+c.placeholder+c.pathAfter) &&
			strings.Count(t.s, c.placeholder) == 1
	case placeQuery:
		return c.query != ""
	case placeQueryValue:
		return c.query != "" && t.name == c.query && t.s == c.placeholder
	}
	return false
}

// whole reports whether header value v holds key (the placeholder, or the
// secret) as a client sends a key: as the whole value, as the credential's
// header template spells it, or as the whole credentials after a scheme
// other than Basic ("Bearer KEY", "token KEY"). Anywhere else the box
// would choose the bytes around the key, and a server that decodes the
// value could be made to answer with a spelling of the key that masking
// does not know: "Basic PLACEHOLDER" followed by "Ong=" reached the
// server as Basic credentials whose user, quoted back by its 401, was the
// key decoded from base64.
func (c *cred) whole(v, key string) bool {
	if strings.Count(v, key) != 1 {
		// "xKEYy KEY": the scheme's copy amid the box's bytes, which a
		// server may quote back in another case (red team, round 7).
		return false
	}
	if v == key || v == strings.Replace(c.headerValue, "{}", key, 1) {
		return true
	}
	scheme, rest, ok := strings.Cut(v, " ")
	// A scheme's name is a token, as a header's name is.
	return ok && rest == key && httpguts.ValidHeaderFieldName(scheme) && !strings.EqualFold(scheme, "Basic")
}

// takesHeader reports whether c's secret may go in the header name, in
// any case: Authorization, and the header of a header form.
func (c *cred) takesHeader(name string) bool {
	return strings.EqualFold(name, "Authorization") || c.header != "" && strings.EqualFold(name, c.header)
}

// form says where c's form puts the secret, for an error.
func (c *cred) form() string {
	switch {
	case c.header == "Authorization":
		return "header Authorization, as its whole value or after a scheme other than Basic (Bearer {})"
	case c.header != "":
		return "header " + c.header + " or Authorization, as its whole value or after a scheme other than Basic (Bearer {})"
	case c.basicUser != "":
		return "Basic credentials in Authorization, as user " + c.basicUser + " with the placeholder as the password"
	case c.query != "":
		return "query parameter " + c.query + ", as its whole value"
	}
	return "the URL path, where its path template " + c.pathBefore + "{}" + c.pathAfter + " has it"
}

func (t text) contains(needle string) bool {
	if t.fold {
		return strings.Contains(t.s, strings.ToLower(needle))
	}
	return strings.Contains(t.s, needle)
}

// check refuses a request carrying a real secret anywhere, a placeholder
// where its credential may not go, a bound placeholder on plain HTTP
// that the credential does not allow there, or one whose secret would not
// reach the server as written.
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
			case !c.placed(t):
				return s.refusal(ReasonPlacement, c, t.where, target)
			case t.basic && (c.basicUser == "" || t.s != c.basicUser+":"+c.placeholder):
				return s.refusal(ReasonBasicUser, c, t.where, target)
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
		Form:       s.scrub(c.form(), "the place its form names"),
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
	texts := []text{{where: "host name", s: strings.ToLower(host), fold: true, host: true, place: placeOther},
		{where: "request method", s: req.Method, place: placeOther}}
	names := make([]string, 0, len(req.Header))
	for name := range req.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		texts = append(texts, text{where: "a header name", s: strings.ToLower(name), fold: true, place: placeOther})
		value := placeHeader
		if hopHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
			value = placeHop
		}
		several := len(req.Header[name]) > 1
		for _, v := range req.Header[name] {
			texts = append(texts, text{where: "header " + name, s: v, place: value, name: name, several: several})
			if raw, ok := decodeBasic(v); ok {
				texts = append(texts, text{where: "header " + name + " (Basic credentials)", s: raw, basic: true, place: placeHeader, name: name, several: several})
			}
		}
	}
	u := req.URL
	texts = append(texts,
		text{where: "URL path", s: u.Path, place: placePath},
		text{where: "URL path", s: u.RawPath, place: placePath},
		text{where: "URL", s: u.Opaque, place: placeOther},
		text{where: "URL query", s: u.RawQuery, place: placeQuery},
	)
	if u.User != nil {
		pass, _ := u.User.Password()
		texts = append(texts,
			text{where: "URL user info", s: u.User.String(), place: placeOther},
			text{where: "URL user info", s: u.User.Username(), place: placeOther},
			text{where: "URL user info", s: pass, place: placeOther},
		)
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		rawKey, rawValue, hasValue := strings.Cut(part, "=")
		key, err := url.QueryUnescape(rawKey)
		if err == nil {
			texts = append(texts, text{where: "URL query", s: key, place: placeOther})
		}
		if v, verr := url.QueryUnescape(rawValue); hasValue && verr == nil {
			t := text{where: "URL query", s: v, place: placeOther}
			if err == nil {
				t.where, t.place, t.name = "URL query parameter "+key, placeQueryValue, key
			}
			texts = append(texts, t)
		}
	}
	return texts
}

// inject puts the credential on req, reporting whether it did, only where
// its form puts it (check has refused a placeholder anywhere else). Every
// spelling it sends is one of c.spellings, so that an echo of it is masked:
// in Basic credentials, only the credential's own basic_auth user with the
// placeholder as the password is filled in.
func (c *cred) inject(req *http.Request) bool {
	done := false
	for name, values := range req.Header {
		if hopHeaders[name] || !c.takesHeader(name) {
			continue // a hop-by-hop header is never sent on by a proxy
		}
		for i, v := range values {
			nv := v
			if c.header != "" {
				nv = strings.ReplaceAll(v, c.placeholder, c.secret)
			}
			if raw, ok := decodeBasic(v); ok && c.basicUser != "" && raw == c.basicUser+":"+c.placeholder {
				nv = encodeBasic(c.basicUser + ":" + c.secret)
			}
			if nv != v {
				values[i], done = nv, true
			}
		}
	}
	u := req.URL
	if c.fillPath(u) {
		done = true
	}
	if q, ok := replaceQueryValue(u.RawQuery, c.query, c.placeholder, c.secret); c.query != "" && ok {
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

// hopHeaders are the hop-by-hop headers, in canonical form: a proxy
// consumes them, and an error about one may quote its value.
var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Http2-Settings": true,
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

// fillPath puts the secret in u's path where the path template's {} is,
// reporting whether it did: path-escaped, in a path that starts with the
// template's text before {} and the placeholder.
func (c *cred) fillPath(u *url.URL) bool {
	ep := u.EscapedPath()
	rest, ok := strings.CutPrefix(ep, c.pathBefore+c.placeholder)
	if c.pathBefore == "" || !ok {
		return false
	}
	ep = c.pathBefore + url.PathEscape(c.secret) + rest
	p, err := url.PathUnescape(ep)
	if err != nil {
		return false
	}
	u.Path, u.RawPath = p, ep
	return true
}

// replaceQueryValue replaces the values of the raw query's parameter name
// that decode to from with to, query-escaped, leaving the rest of the
// query, order and encoding included, as the client wrote it.
func replaceQueryValue(raw, name, from, to string) (string, bool) {
	parts := strings.Split(raw, "&")
	changed := false
	for i, part := range parts {
		k, v, ok := strings.Cut(part, "=")
		key, kerr := url.QueryUnescape(k)
		value, verr := url.QueryUnescape(v)
		if ok && kerr == nil && verr == nil && key == name && value == from {
			parts[i], changed = k+"="+url.QueryEscape(to), true
		}
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
// send the placeholder of a credential not bound to the request's host, or
// which completes a real secret, whatever the chunking. A placeholder is
// stopped whole: the guard holds back fewer bytes than the longest one
// until it knows they do not start one, which is safe as placeholders are
// the sandbox's own. A real secret is caught once complete, with nothing
// held back for it: holding back what might start a secret would tell a
// sender, by what goes through and when, whether its guess is a prefix of
// one. Read and Close follow io.ReadCloser.
type BodyGuard struct {
	r       io.ReadCloser
	refused atomic.Pointer[Error]
	// req, set by Apply, has its trailers dropped at the body's end,
	// when they have arrived: nothing checks or fills them in.
	req *http.Request
}

// GuardBody wraps an outgoing request body toward host and port. Apply
// calls it itself; call it directly only for bodies Apply does not see.
func (s *Set) GuardBody(body io.ReadCloser, host string, port int) *BodyGuard {
	s = s.orEmpty()
	target := policy.JoinHostPort(host, port)
	g := &BodyGuard{}
	refuse := func(reason policy.Reason, c *cred) error {
		err := s.refusal(reason, c, "request body", target)
		g.refused.CompareAndSwap(nil, err)
		return err
	}
	g.r = &tripwire{src: body, m: s.secrets, trip: func(k int) error { return refuse(ReasonSecretLeak, s.credOf(k)) }}
	var needles [][]byte
	var unbound []*cred
	for _, c := range s.creds {
		if !c.boundTo(host, port) {
			needles = append(needles, []byte(c.placeholder))
			unbound = append(unbound, c)
		}
	}
	if len(needles) > 0 {
		g.r = newStreamReader(g.r, newMatcher(needles), func(dst []byte, k int) ([]byte, error) {
			return dst, refuse(ReasonMisroute, unbound[k])
		})
	}
	return g
}

// Read reads the body, failing with an *Error once a refused value shows.
func (g *BodyGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err == io.EOF && g.req != nil {
		clear(g.req.Trailer)
	}
	return n, err
}

// Close closes the wrapped body.
func (g *BodyGuard) Close() error { return g.r.Close() }

// Err returns the *Error that refused the body, or nil.
func (g *BodyGuard) Err() error {
	if err := g.refused.Load(); err != nil {
		return err
	}
	return nil
}

// tripwire passes a stream through unchanged and fails, with trip's error,
// the read that completes a needle of m, handing out none of that read.
// What it hands out never depends on a partial match.
type tripwire struct {
	src  io.ReadCloser
	m    *matcher
	trip func(k int) error
	// seen is the last m.longest-1 bytes handed out, where a needle that
	// ends in the next read may begin.
	seen []byte
	next []int
	err  error
}

func (t *tripwire) Read(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.src.Read(p)
	if n > 0 {
		if t.err = t.pass(p[:n]); t.err != nil {
			return 0, t.err
		}
	}
	return n, err
}

// pass takes p, the stream's next bytes, failing with trip's error if a
// needle ends in them.
func (t *tripwire) pass(p []byte) error {
	n := len(p)
	if n == 0 || len(t.m.needles) == 0 {
		return nil
	}
	keep := t.m.longest - 1
	// A needle across the last bytes and these, or within these; nothing
	// of p is copied but its first keep bytes.
	across := append(t.seen, p[:min(n, keep)]...)
	k := t.find(across)
	if k < 0 {
		k = t.find(p)
	}
	if k >= 0 {
		return t.trip(k)
	}
	if n >= keep {
		t.seen = append(t.seen[:0], p[n-keep:]...)
	} else {
		t.seen = append(t.seen[:0], across[len(across)-min(keep, len(across)):]...)
	}
	return nil
}

// find returns the index of a needle in b, or -1.
func (t *tripwire) find(b []byte) int {
	t.next = t.next[:0]
	for range t.m.needles {
		t.next = append(t.next, nextUnknown)
	}
	_, k := t.m.leftmost(b, 0, t.next)
	return k
}

func (t *tripwire) Close() error { return t.src.Close() }

// Screen checks what leaves the sandbox in pieces its caller hands it, as
// it reads them from a protocol of its own: a WebSocket's message
// payloads, which a client masks with a key of its own (GuardBody, reading
// the bytes as they pass, would find nothing in them). A real secret, or
// the placeholder of a credential not bound to the host, fails the Check
// that completes it; nothing is held back, so a placeholder's start may
// have gone, as a secret's may. A Screen is for one goroutine at a time.
type Screen struct {
	tw      tripwire
	refused atomic.Pointer[Error]
}

// NewScreen returns a Screen for what goes toward host and port.
func (s *Set) NewScreen(host string, port int) *Screen {
	s = s.orEmpty()
	target := policy.JoinHostPort(host, port)
	needles := slices.Clone(s.secrets.needles)
	var unbound []*cred
	for _, c := range s.creds {
		if !c.boundTo(host, port) {
			needles = append(needles, []byte(c.placeholder))
			unbound = append(unbound, c)
		}
	}
	sc := &Screen{}
	secrets := len(s.secrets.needles)
	const where = "a switched protocol's message"
	sc.tw = tripwire{m: newMatcher(needles), trip: func(k int) error {
		var err *Error
		if k < secrets {
			err = s.refusal(ReasonSecretLeak, s.credOf(k), where, target)
		} else {
			err = s.refusal(ReasonMisroute, unbound[k-secrets], where, target)
		}
		sc.refused.CompareAndSwap(nil, err)
		return err
	}}
	return sc
}

// Check takes p, the next bytes of what the Screen checks, and returns an
// *Error if they complete a refused value; p must not be sent then. Once
// it has refused, every Check does.
func (sc *Screen) Check(p []byte) error {
	if err := sc.refused.Load(); err != nil {
		return err
	}
	return sc.tw.pass(p)
}

// Reset starts a new stretch: what follows is not checked together with
// what came before (a control frame's payload, between the fragments of
// a message).
func (sc *Screen) Reset() { sc.tw.seen = sc.tw.seen[:0] }

// Err returns the *Error that refused, or nil.
func (sc *Screen) Err() error {
	if err := sc.refused.Load(); err != nil {
		return err
	}
	return nil
}
