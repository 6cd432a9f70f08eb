// Package credinject keeps real credentials out of the sandbox. The sandbox
// holds only a per-session placeholder for each secret; on the way out the
// proxy swaps the placeholder for the real value, but only on requests to
// the hosts the credential is bound to and only over verified TLS (or plain
// HTTP where the credential allows it). A placeholder or a real value headed
// anywhere else is refused. On the way back, real values are turned into
// placeholders again, and a sandboxed command's output has them masked.
//
// Everything here is pure and per request: the TLS layer calls Apply and
// wraps response bodies; cordon run wraps the command's output.
package credinject

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/regular"
	"github.com/cordon-sandbox/cordon/policy"
)

// Set is the credentials loaded for one session, with their placeholders.
// It is read-only after Load and safe for concurrent use.
type Set struct {
	// creds is sorted by name.
	creds []*cred
	// secrets finds the real values in every spelling Apply sends them
	// in; needle k is spellings[k].
	secrets   *matcher
	spellings []spelling
	// folded is secrets in lower case, for replaceFolded (header names);
	// needle k is spellings[k] too.
	folded *matcher
	// scrubber finds what secrets finds, then the placeholders spelt the
	// same ways, in lower case for replaceFolded: needle k is of
	// spellings[k % len(spellings)].
	scrubber *matcher
}

// spelling is one way a secret leaves cordon, with the placeholder spelt
// the same way.
type spelling struct {
	cred                int
	secret, placeholder string
}

// cred is one loaded credential.
type cred struct {
	name        string
	secret      string
	placeholder string
	// prefix starts the placeholder (placeholder_prefix).
	prefix   string
	patterns []policy.Pattern
	// header and headerValue are the header name and its value template
	// (exactly one "{}"), for the header form.
	header, headerValue string
	// basicUser is the user name, for the basic_auth form.
	basicUser string
	// query is the parameter name, for the query form.
	query string
	// pathBefore and pathAfter surround the secret in the path template,
	// for the path form (pathBefore starts with '/').
	pathBefore, pathAfter string
	env                   string
	allowPlaintext        bool
	// files are shown to the sandbox masked (the credential's files key).
	files []string
}

// emptySet is what a nil *Set behaves as.
var emptySet = newSet(nil)

func (s *Set) orEmpty() *Set {
	if s == nil {
		return emptySet
	}
	return s
}

// newSet indexes creds, which must be sorted by name.
func newSet(creds []*cred) *Set {
	s := &Set{creds: creds}
	for k, c := range creds {
		for _, spell := range c.spellings() {
			sp := spelling{k, spell(c.secret), spell(c.placeholder)}
			if !slices.ContainsFunc(s.spellings, func(o spelling) bool { return o.secret == sp.secret }) {
				s.spellings = append(s.spellings, sp)
			}
		}
	}
	var needles [][]byte
	for _, sp := range s.spellings {
		needles = append(needles, []byte(sp.secret))
	}
	s.secrets = newMatcher(needles)
	s.secrets.window = max(s.secrets.window, s.window())
	s.folded = newMatcher(lowerAll(needles))
	for _, sp := range s.spellings {
		needles = append(needles, []byte(sp.placeholder))
	}
	s.scrubber = newMatcher(lowerAll(needles))
	return s
}

// spellings are the ways Apply puts the credential's secret on a request:
// as written (header values), path- and query-escaped (URL), and in the
// credential's own Basic credentials; and the secret with every byte but
// RFC 3986's unreserved ones percent-encoded, in capitals and in lower
// case, as git writes a password into ~/.git-credentials (%2f, %20),
// which no escaping of Go's matches for a secret holding a '/', a '+', a
// ':' or a space. An upstream that echoes any of them is masked, and
// none reaches an audit line. Each of these is also a spelling as a JSON
// string's content in the ways common encoders write it (jsonStyles): an
// upstream that quotes a request header in a JSON body (an error message,
// an echo) escapes a '"', '\\', '<', '>', '&' or '/' of the key, and the
// box read the key one decoding away. (A file shown masked is also
// searched inside every base64 token, which covers a password in base64
// alone, as an .npmrc's _password holds it: see MaskBytes.)
func (c *cred) spellings() []func(string) string {
	sp := []func(string) string{
		func(v string) string { return v },
		url.PathEscape,
		url.QueryEscape,
		func(v string) string { return percentEncode(v, "0123456789ABCDEF") },
		func(v string) string { return percentEncode(v, "0123456789abcdef") },
	}
	if c.basicUser != "" {
		sp = append(sp, func(v string) string { return base64.StdEncoding.EncodeToString([]byte(c.basicUser + ":" + v)) })
	}
	for _, spell := range slices.Clone(sp) {
		for _, style := range jsonStyles {
			sp = append(sp, func(v string) string { return style.escape(spell(v)) })
		}
	}
	// As an HTML or XML page quotes it (an error page, an echo), and as a
	// JSON string quotes that: only the key as written holds what they
	// escape.
	for _, r := range htmlStyles {
		sp = append(sp, r.Replace)
		for _, style := range jsonStyles {
			sp = append(sp, func(v string) string { return style.escape(r.Replace(v)) })
		}
	}
	return sp
}

// htmlStyles are the ways common HTML escapers write the ampersand, the
// angle brackets, the double quote and the apostrophe: Go's
// html.EscapeString and markupsafe (Jinja), Python's html.escape and
// Django, PHP's htmlspecialchars, Rails. An upstream
// whose error page quoted a key holding one of them gave the box the key
// one HTML decoding away (red team, round 8), and a key holding a '+'
// through html/template (the round's third look). Each is at most six
// bytes a character, eleven once a JSON string quotes it (\u0026#x3C;),
// as window allows for.
var htmlStyles = []*strings.Replacer{
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#039;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;"),
	// Go's html/template, which writes a '+' as &#43; too (an AWS-style
	// key holds one).
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;"),
	// XML's escapers: the three it needs (Python's saxutils.escape,
	// html.escape with quote=False), and the quotes too (&apos;); Java's
	// escapeHtml4, the double quote alone.
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;"),
	// Every one as a numeric reference, decimal and hexadecimal.
	strings.NewReplacer("&", "&#38;", "<", "&#60;", ">", "&#62;", `"`, "&#34;", "'", "&#39;"),
	strings.NewReplacer("&", "&#x26;", "<", "&#x3C;", ">", "&#x3E;", `"`, "&#x22;", "'", "&#x27;"),
	strings.NewReplacer("&", "&#x26;", "<", "&#x3c;", ">", "&#x3e;", `"`, "&#x22;", "'", "&#x27;"),
	// mustache.js, which writes '/', '`' and '=' as references too (an
	// AWS-style key holds a '/'; a base64 key ends in '='), and
	// Handlebars, '`' and '=' (the round's fourth look).
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;", "/", "&#x2F;", "`", "&#x60;", "=", "&#x3D;"),
	strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;", "`", "&#x60;", "=", "&#x3D;"),
	// OWASP ESAPI's encodeForHTML: named references for the four, every
	// other byte but letters, digits and , . - _ and space as &#xNN; in
	// lower case; then every byte as a reference, decimal or
	// hexadecimal, as escapers that encode all punctuation write it.
	// These leave the bytes of most API keys (letters, digits, - . _ ~)
	// as they are, as every other spelling does: a key of those alone is
	// held back no longer than itself (window).
	punctuationReplacer(map[string]string{"&": "&amp;", "<": "&lt;", ">": "&gt;", `"`: "&quot;"}, ",.-_~ ", "&#x%x;"),
	punctuationReplacer(nil, "-._~", "&#%d;"),
	punctuationReplacer(nil, "-._~", "&#x%x;"),
	punctuationReplacer(nil, "-._~", "&#x%X;"),
}

// punctuationReplacer writes each printable ASCII byte but letters,
// digits and those in keep as named gives it, or else as format makes
// of its code.
func punctuationReplacer(named map[string]string, keep, format string) *strings.Replacer {
	var pairs []string
	for c := byte('!'); c <= '~'; c++ {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(keep, c) >= 0:
			continue
		}
		to, ok := named[string(c)]
		if !ok {
			to = fmt.Sprintf(format, c)
		}
		pairs = append(pairs, string(c), to)
	}
	if strings.IndexByte(keep, ' ') < 0 {
		pairs = append(pairs, " ", fmt.Sprintf(format, ' '))
	}
	return strings.NewReplacer(pairs...)
}

// window is how many bytes a masking stream holds back: one less than a
// bound on every secret's longest spelling, made from the secrets'
// lengths (which the placeholders show), the basic_auth users' and two
// facts a quiet stream shows anyway (see stream.flushApart): whether a
// spelling holds a '%' (a secret holds a byte percent-encoding escapes)
// and whether one holds a '/'. Holding back one less than the longest
// spelling told a sandbox whose bytes an upstream echoes, by how much of
// a run of letters came before a pause, how much longer than its key
// that spelling is: how many of the key's bytes percent-encoding or JSON
// escapes. A secret of letters, digits and -._~ is its every spelling
// but Basic credentials; any other byte is at most eleven (a '<' as
// \u0026#x3C; in JSON quoting HTML; six as \u0026 in JSON or &quot; in
// HTML; %XX is three, as a character beyond ASCII written \uXXXX is at
// most six). Basic credentials' base64 is at most twice as long in JSON
// (each '/' as \/), and as long where no spelling holds a '/'.
func (s *Set) window() int {
	escaped, slash := !s.secrets.apart['%'], !s.secrets.apart['/']
	bound := 0
	for _, c := range s.creds {
		n := len(c.secret)
		if escaped {
			n *= 11
		}
		if c.basicUser != "" {
			b := base64.StdEncoding.EncodedLen(len(c.basicUser) + 1 + len(c.secret))
			if slash {
				b *= 2
			}
			n = max(n, b)
		}
		bound = max(bound, n)
	}
	return max(bound-1, 0)
}

// jsonStyle is how a family of JSON encoders writes a string's content:
// every one escapes '"' and '\\'; html adds '<', '>' and '&' as \u003c,
// \u003e and \u0026, slash '/' as \/, and ascii every other character
// than ASCII as \uXXXX (a UTF-16 surrogate pair above U+FFFF), all in
// lower case. (A secret holds no control character: Load refuses one.)
type jsonStyle struct{ html, slash, ascii bool }

// jsonStyles are the ways common JSON encoders write a string by default.
var jsonStyles = []jsonStyle{
	{},                         // JavaScript's JSON.stringify, serde_json, Jackson
	{html: true},               // Go's encoding/json, Rails
	{ascii: true},              // Python's json.dumps
	{slash: true, ascii: true}, // PHP's json_encode
}

// escape returns v as the style writes it inside a JSON string.
func (j jsonStyle) escape(v string) string {
	var b strings.Builder
	for len(v) > 0 {
		r, n := utf8.DecodeRuneInString(v)
		switch {
		case r == '"' || r == '\\' || r == '/' && j.slash:
			b.WriteByte('\\')
			b.WriteByte(v[0])
		case j.html && (r == '<' || r == '>' || r == '&'), j.ascii && n > 1:
			for _, u := range utf16.AppendRune(nil, r) {
				fmt.Fprintf(&b, "\\u%04x", u)
			}
		default:
			b.WriteString(v[:n])
		}
		v = v[n:]
	}
	return b.String()
}

// percentEncode returns v with each byte but letters, digits, '-', '.',
// '_' and '~' written as '%' and two of digits (capitals or lower case).
func percentEncode(v, digits string) string {
	var b strings.Builder
	for _, c := range []byte(v) {
		if isAlnum(c) || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&0xf])
	}
	return b.String()
}

// Names returns the loaded credentials' names, sorted.
func (s *Set) Names() []string {
	var names []string
	for _, c := range s.orEmpty().creds {
		names = append(names, c.name)
	}
	return names
}

// Env returns "VAR=placeholder" lines for the sandbox's environment, sorted.
func (s *Set) Env() []string {
	var env []string
	for _, c := range s.orEmpty().creds {
		env = append(env, c.env+"="+c.placeholder)
	}
	slices.Sort(env)
	return env
}

// Hosts returns the host patterns the loaded credentials add to the
// effective allowlist, canonical, sorted and without duplicates.
func (s *Set) Hosts() []string {
	var hosts []string
	for _, c := range s.orEmpty().creds {
		for _, p := range c.patterns {
			hosts = append(hosts, p.String())
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// replaceWithPlaceholder is the emit function turning spelling k of a
// secret into its placeholder, spelt the same way.
func (s *Set) replaceWithPlaceholder(dst []byte, k int) ([]byte, error) {
	return append(dst, s.spellings[k].placeholder...), nil
}

// credOf returns the credential behind needle k of secrets or scrubber.
func (s *Set) credOf(k int) *cred {
	return s.creds[s.spellings[k%len(s.spellings)].cred]
}

// Scrub returns text with every secret and every placeholder, in any
// spelling Apply sends and in any case, replaced by "[masked:NAME]": for
// audit lines and error pages, which hold neither. (A host name is logged
// in lower case: a placeholder with capitals in its prefix was logged
// when the box asked for a host named after it.)
func (s *Set) Scrub(text string) string {
	s = s.orEmpty()
	if len(s.creds) == 0 {
		return text
	}
	out, _ := s.scrubber.replaceFolded(make([]byte, 0, len(text)), []byte(text), s.maskedName)
	return string(out)
}

// MaskBytes returns b with every real secret replaced by its placeholder,
// for showing a file such as an .npmrc to the sandbox: in every spelling
// Apply sends, and inside any base64 token that decodes to text holding a
// secret (an .npmrc's _auth or a Docker config's auth is "user:secret" in
// base64, where no fixed spelling finds it).
func (s *Set) MaskBytes(b []byte) []byte {
	s = s.orEmpty()
	if len(s.creds) == 0 {
		return b
	}
	st := stream{m: s.secrets, emit: s.replaceWithPlaceholder}
	out, _, _ := st.scan(make([]byte, 0, len(b)), b, true)
	return s.maskBase64(out)
}

// minBase64 is the shortest run of base64 characters maskBase64 decodes:
// the encoding of MinSecretLen bytes.
const minBase64 = (MinSecretLen + 2) / 3 * 4

// maskBase64 re-encodes each base64 token of b whose decoding holds a
// secret, with the secret replaced by its placeholder.
func (s *Set) maskBase64(b []byte) []byte { return rewriteBase64(b, s.maskToken) }

// rewriteBase64 returns b with each base64 token (a run of at least
// minBase64 characters of the standard alphabet, with its padding) for
// which rewrite says so replaced by what it returns.
func rewriteBase64(b []byte, rewrite func(tok []byte) ([]byte, bool)) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(b); {
		if !isBase64(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && isBase64(b[j]) {
			j++
		}
		end := j
		for end < len(b) && end-j < 2 && b[end] == '=' {
			end++
		}
		if masked, ok := rewrite(b[i:end]); ok {
			out = append(append(out, b[done:i]...), masked...)
			done = end
		}
		i = end
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// decodeToken decodes one base64 token, padded or not, and returns its
// decoding and encoding if the decoding holds a secret.
func (s *Set) decodeToken(tok []byte) ([]byte, *base64.Encoding, bool) {
	if len(tok) < minBase64 {
		return nil, nil, false
	}
	enc := base64.StdEncoding
	if len(tok)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	raw, err := enc.DecodeString(string(tok))
	if err != nil || !slices.ContainsFunc(s.creds, func(c *cred) bool { return c.heldIn(raw) }) {
		return nil, nil, false
	}
	return raw, enc, true
}

// heldIn reports whether b holds the credential's secret.
func (c *cred) heldIn(b []byte) bool { return bytes.Contains(b, []byte(c.secret)) }

// maskToken decodes one base64 token, padded or not, and if it holds a
// secret returns it masked and encoded the same way.
func (s *Set) maskToken(tok []byte) ([]byte, bool) {
	raw, enc, ok := s.decodeToken(tok)
	if !ok {
		return nil, false
	}
	st := stream{m: s.secrets, emit: s.replaceWithPlaceholder}
	masked, _, _ := st.scan(nil, raw, true)
	return []byte(enc.EncodeToString(masked)), true
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/'
}

// maxMaskedFile bounds a file shown masked; such files are small configs.
const maxMaskedFile = 1 << 20

// MaskedFiles reads every file the credentials list under files and
// returns it, by path, with every secret replaced by its placeholder.
func (s *Set) MaskedFiles() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, c := range s.orEmpty().creds {
		for _, path := range c.files {
			// A regular file: a named pipe would hold the read until a
			// writer came.
			f, _, err := regular.Open(path, os.O_RDONLY, 0)
			var nr *regular.NotRegular
			if errors.As(err, &nr) {
				return nil, fmt.Errorf("credential %q: files: read %s: %s, not a regular file; list the file itself", c.name, path, nr.Kind())
			}
			if err != nil {
				return nil, fmt.Errorf("credential %q: files: %w", c.name, err)
			}
			b, err := io.ReadAll(io.LimitReader(f, maxMaskedFile+1))
			f.Close()
			switch {
			case err != nil:
				return nil, fmt.Errorf("credential %q: files: read %s: %w", c.name, path, err)
			case len(b) > maxMaskedFile:
				return nil, fmt.Errorf("credential %q: files: %s is over %d bytes; list only small config files", c.name, path, maxMaskedFile)
			}
			masked := s.MaskBytes(b)
			if o := s.heldEscaped(masked); o != nil {
				return nil, fmt.Errorf("credential %q: files: %s holds the secret of %q escaped in a way masking does not follow (XML references of several kinds mixed, JSON escapes such as \\u0026 beside \\/, or percent-encoding in mixed case), so the box would read it; leave the file out of files:, or use a secret without the characters the file escapes",
					c.name, path, o.name)
			}
			out[path] = masked
		}
	}
	return out, nil
}

// heldEscaped returns the credential whose secret b still holds once
// decoded as a config file's format escapes text (XML or HTML entities,
// JSON string escapes, percent-encoding in any case), or nil: a file
// masked in the spellings cordon knows may hold the secret in its own.
func (s *Set) heldEscaped(b []byte) *cred {
	text := string(b)
	for _, decoded := range []string{html.UnescapeString(text), unescapeJSON(text), unescapePercent(text)} {
		for _, c := range s.creds {
			if strings.Contains(decoded, c.secret) {
				return c
			}
		}
	}
	return nil
}

// unescapeJSON undoes the escapes of JSON strings (\", \\, \/, \b,
// \f, \n, \r, \t and \uXXXX, two of which spell a character past
// U+FFFF) wherever they are in text, leaving anything else, a malformed
// escape included, as it is.
func unescapeJSON(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' || i+1 == len(text) {
			b.WriteByte(text[i])
			continue
		}
		if r, ok := jsonEscapes[text[i+1]]; ok {
			b.WriteByte(r)
			i++
			continue
		}
		if r, ok := jsonUnit(text[i:]); ok {
			// A character past U+FFFF is a pair of escapes (surrogates).
			if low, ok := jsonUnit(text[i+6:]); ok && utf16.IsSurrogate(r) {
				if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
					b.WriteRune(pair)
					i += 11
					continue
				}
			}
			b.WriteRune(r)
			i += 5
			continue
		}
		b.WriteByte(text[i])
	}
	return b.String()
}

// jsonUnit reads the \uXXXX escape that starts s, if one does.
func jsonUnit(s string) (rune, bool) {
	if len(s) < 6 || s[:2] != `\u` {
		return 0, false
	}
	u, err := strconv.ParseUint(s[2:6], 16, 16)
	return rune(u), err == nil
}

var jsonEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescapePercent decodes every %XX in text, in either case, leaving a
// '%' not followed by two hex digits as it is.
func unescapePercent(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '%' && i+2 < len(text) {
			if v, err := strconv.ParseUint(text[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(text[i])
	}
	return b.String()
}

// MaskString is MaskBytes for a string, such as a response header value.
func (s *Set) MaskString(v string) string {
	return string(s.MaskBytes([]byte(v)))
}

// MaskHeader replaces real secrets with placeholders in a response
// header's names and values, in place. A name, and each name the Trailer
// header lists, is masked in any case (see maskName).
func (s *Set) MaskHeader(h http.Header) {
	for name, values := range h {
		for i, v := range values {
			values[i] = s.maskValue(name, v)
		}
		if masked := s.maskName(name); masked != name {
			delete(h, name)
			h[masked] = append(h[masked], values...)
		}
	}
}

// maskValue masks a value of the header name: the list of names a
// Trailer header holds in any case, as names are (maskName), any other
// value as written.
func (s *Set) maskValue(name, v string) string {
	if name == "Trailer" {
		if masked, ok := s.maskFolded(v); ok {
			return masked
		}
	}
	return s.MaskString(v)
}

// maskName masks a header name (one with http.TrailerPrefix, as a
// handler names a trailer it did not announce, keeps it). A name is
// case-insensitive, and HTTP libraries re-case it as they read it (Go's
// turns "x-sk-abc" into "X-Sk-Abc", HTTP/2 lowercases every name), and as
// they list it in a Trailer header: a secret in one is looked for in any
// case, and a name that held one goes out in canonical form, with the
// placeholder in the secret's place.
func (s *Set) maskName(name string) string {
	rest, trailer := strings.CutPrefix(name, http.TrailerPrefix)
	masked, ok := s.maskFolded(rest)
	switch {
	case !ok:
		return s.MaskString(name)
	case trailer:
		return http.TrailerPrefix + http.CanonicalHeaderKey(masked)
	}
	return http.CanonicalHeaderKey(masked)
}

// maskFolded returns text with every real secret, found in any case,
// replaced by its placeholder, and whether it held one.
func (s *Set) maskFolded(text string) (string, bool) {
	out, found := s.orEmpty().folded.replaceFolded(nil, []byte(text), s.replaceWithPlaceholder)
	return string(out), found
}

// MaskBody wraps a response body so that every real secret in it reaches
// the sandbox as its placeholder, whatever the chunking and the pauses. It
// holds back the last bytes read (as many whatever they are: Set.window)
// until more arrive or the body ends; after 50 ms of quiet it
// hands out those up to the last byte no secret holds (letters and digits
// aside), which no secret can cross. Holding back only what might start a
// secret would tell a sandbox whose bytes an upstream echoes, by what comes
// back and when, whether its guess starts one; handing out the whole tail
// at a pause sent out a secret the pause split. The body's length changes
// when a secret and its placeholder differ
// in length: drop Content-Length. Its Close returns once nothing reads
// body any more, so body's Close must end a read in progress (a
// connection's does), or the caller must end it before closing.
func (s *Set) MaskBody(body io.ReadCloser) io.ReadCloser {
	s = s.orEmpty()
	return newMaskReader(body, s.secrets, s.replaceWithPlaceholder)
}

// Masker masks one message that arrives in pieces, such as a WebSocket
// message spread over frames: every real secret in it becomes its
// placeholder wherever the pieces split it. Mask holds back the last bytes
// fed (as many as MaskBody), whatever they are, until more come or End. A Masker is for one goroutine at a time.
type Masker struct {
	st      stream
	scratch []byte
}

// NewMasker returns a Masker for the secrets of s.
func (s *Set) NewMasker() *Masker {
	s = s.orEmpty()
	return &Masker{st: stream{m: s.secrets, emit: s.replaceWithPlaceholder, window: true}}
}

// Mask feeds p and appends to dst what is decided.
func (m *Masker) Mask(dst, p []byte) []byte {
	dst, m.scratch, _ = m.st.write(dst, p, m.scratch) // emit never fails for a mask
	return dst
}

// End ends the message, appending what was held back to dst; the Masker
// then starts the next.
func (m *Masker) End(dst []byte) []byte {
	dst, _ = m.st.flush(dst)
	return dst
}
