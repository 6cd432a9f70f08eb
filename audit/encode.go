package audit

import (
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/termtext"
)

// MaxFieldBytes bounds each string a line holds, and a command's words
// together: a longer one is cut, at a character's start, and ends
// "…[clipped from N bytes]", within MaxFieldBytes. Escaping makes 6 bytes
// of one at most (< as \u003c), so a line stays well below MaxLineBytes
// whatever a client sends. 4 KiB keeps a path of PATH_MAX whole.
const MaxFieldBytes = 4 << 10

// clip returns s, or, when it is longer than n bytes, its start and a mark
// saying how long it was, together n bytes at most (the mark alone when n
// is shorter than it).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := "…[clipped from " + strconv.Itoa(len(s)) + " bytes]"
	cut := max(n-len(mark), 0)
	// Back to the start of a character cut through (4 bytes at most).
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); back++ {
		cut--
	}
	return s[:cut] + mark
}

// clipWords bounds a command's words as one field: words are kept while
// they fit in MaxFieldBytes, counting a byte more each (a space between
// them); the first that does not is clipped to what is left, and a last
// word says how many more were left out.
func clipWords(words []string) []string {
	left := MaxFieldBytes
	for i, w := range words {
		if len(w) < left {
			left -= len(w) + 1
			continue
		}
		out := append(words[:i:i], clip(w, left))
		if more := len(words) - i - 1; more > 0 {
			out = append(out, "…[clipped: "+strconv.Itoa(more)+" more words]")
		}
		return out
	}
	return words
}

// appendJSON appends r as one JSON object, what encoding/json's Marshal
// makes of it (field order, omitempty, HTML-safe string escaping) once each
// string is clipped (MaxFieldBytes) and what it leaves raw that a terminal
// would act on is escaped too (see unprintable), without reflection: the
// proxy writes two of these per request, and Marshal was most of their
// cost.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, "session", r.Session, false)
	b = appendField(b, "type", string(r.Type), false)
	b = appendField(b, "kind", string(r.Kind), true)
	if r.ID != 0 {
		b = append(b, `,"id":`...)
		b = strconv.AppendUint(b, r.ID, 10)
	}
	b = appendField(b, "client", r.Client, true)
	b = appendField(b, "host", r.Host, true)
	b = appendInt(b, "port", int64(r.Port))
	b = appendField(b, "addr", r.Addr, true)
	b = appendField(b, "decision", r.Decision, true)
	b = appendField(b, "reason", r.Reason, true)
	b = appendField(b, "detail", r.Detail, true)
	b = appendField(b, "rule", r.Rule, true)
	b = appendField(b, "method", r.Method, true)
	b = appendField(b, "path", r.Path, true)
	b = appendInt(b, "status", int64(r.Status))
	b = appendInt(b, "bytes_up", r.BytesUp)
	b = appendInt(b, "bytes_down", r.BytesDown)
	b = appendInt(b, "duration_ms", r.DurationMS)
	b = appendField(b, "credential", r.Credential, true)
	if len(r.Command) > 0 {
		b = append(b, `,"command":[`...)
		for i, a := range clipWords(r.Command) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	b = appendField(b, "workdir", r.Workdir, true)
	b = appendField(b, "network", r.Network, true)
	if r.ExitCode != nil {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	b = appendField(b, "signal", r.Signal, true)
	b = appendField(b, "outcome", r.Outcome, true)
	return append(b, '}')
}

// appendField appends ,"name":"value"; an empty value is left out when
// omitEmpty.
func appendField(b []byte, name, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendInt appends ,"name":n unless n is zero.
func appendInt(b []byte, name string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, n, 10)
}

// appendString appends s, clipped to MaxFieldBytes, as a JSON string
// escaped as encoding/json does: quotes, backslashes and control
// characters; <, > and & as \u escapes; invalid UTF-8 as U+FFFD; U+2028
// and U+2029 escaped; and, beyond what encoding/json does, DEL and every
// other unprintable character as a \u escape.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	s = clip(s, MaxFieldBytes)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case unprintable(r):
			b = append(b, s[start:i]...)
			b = appendRuneEscape(b, r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plain holds the bytes appendString copies as they are: printable ASCII
// but for '"', '\\', '<', '>' and '&'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range "\"\\<>&" {
		t[c] = false
	}
	return t
}()

// unprintable says whether a terminal could take r, outside ASCII, for
// something other than a character to show (termtext.Shows): a C1 control
// (U+009B is a CSI, U+009D an OSC, to a terminal that reads UTF-8 C1
// controls), a format character (a bidi override such as U+202E, a
// zero-width space), a separator other than a space (U+2028 and U+2029,
// which encoding/json escapes too), a private-use or unassigned code
// point, one that shows as nothing (a Hangul filler). A request path or a
// DNS name holds what the sandboxed command chose, and the log is read in
// terminals (cordon audit --json, tail -f): escaped, such a character
// decodes to the same string but reaches no terminal raw.
func unprintable(r rune) bool {
	return r >= utf8.RuneSelf && !termtext.Shows(r)
}

// appendRuneEscape appends r as a JSON \u escape, a UTF-16 surrogate pair
// beyond the Basic Multilingual Plane.
func appendRuneEscape(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	var units [2]uint16
	for _, u := range utf16.AppendRune(units[:0], r) {
		b = append(b, '\\', 'u', hex[u>>12&0xF], hex[u>>8&0xF], hex[u>>4&0xF], hex[u&0xF])
	}
	return b
}

// EscapeUnprintable returns line, one JSON value, with each character
// unprintable says a terminal could act on (and DEL) written as a \u
// escape, and each byte that is not UTF-8 as \ufffd: what `cordon audit
// --json` prints of a line an older cordon wrote, or one not of cordon's
// writing. The value it decodes to is the same, since outside its strings
// a JSON value holds only ASCII. A line with nothing to escape is
// returned as it is.
func EscapeUnprintable(line []byte) []byte {
	i := 0
	for i < len(line) {
		c := line[i]
		if c < utf8.RuneSelf && c != 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRune(line[i:])
		if c == 0x7f || r == utf8.RuneError && size == 1 || unprintable(r) {
			break
		}
		i += size
	}
	if i == len(line) {
		return line
	}
	out := append([]byte(nil), line[:i]...)
	for i < len(line) {
		r, size := utf8.DecodeRune(line[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r == 0x7f || unprintable(r):
			out = appendRuneEscape(out, r)
		default:
			out = append(out, line[i:i+size]...)
		}
		i += size
	}
	return out
}
