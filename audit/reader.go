package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxLineBytes is the longest line a Reader decodes; longer lines are
// skipped with a warning, so one bad line cannot exhaust memory.
const MaxLineBytes = 1 << 20

// Reader streams records from a JSONL audit log. A line that is too long
// or is not a JSON object is skipped and reported; reading goes on.
type Reader struct {
	br      *bufio.Reader
	buf     []byte
	line    int
	rec     Record
	raw     []byte
	err     error
	skipped int
	warn    func(line int, err error)
	// glued holds the records still to return of a line that held more
	// than one (see splitGlued), each with its raw bytes.
	glued []gluedRecord
}

// gluedRecord is one record found in a line that held more than one.
type gluedRecord struct {
	rec Record
	raw []byte
}

// NewReader reads records from r; warn, if not nil, is told about every
// skipped line (1-based line number and why).
func NewReader(r io.Reader, warn func(line int, err error)) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), warn: warn}
}

// Next advances to the next well-formed record, skipping blank and bad
// lines; it returns false at the end of input or on a read error.
func (r *Reader) Next() bool {
	for r.err == nil || len(r.glued) > 0 {
		if len(r.glued) > 0 {
			r.rec, r.raw = r.glued[0].rec, r.glued[0].raw
			r.glued = r.glued[1:]
			return true
		}
		line, tooLong, err := r.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("read audit log after line %d: %w", r.line, err)
			return false
		}
		atEOF := err != nil
		if atEOF && len(line) == 0 && !tooLong {
			r.err = io.EOF
			return false
		}
		r.line++
		if tooLong {
			r.skip(fmt.Errorf("longer than %d bytes", MaxLineBytes))
		} else if rec, ok := r.decode(line, atEOF); ok {
			r.rec, r.raw = rec, line
			return true
		}
		if atEOF {
			r.err = io.EOF
		}
	}
	return false
}

// errIncomplete is why the log's last line, which no newline ends, is
// not read: a session may still be writing it (a reader can see the first
// part of a write another process is making), or its write was cut short.
// It is said, but not counted among the skipped lines.
var errIncomplete = errors.New("incomplete: no newline ends it, and it holds no whole record: a session may still be writing it (read the log again to see it), or its write was cut short")

// decode parses one line, atEOF when no newline ended it; blank lines
// are ignored without a warning.
func (r *Reader) decode(line []byte, atEOF bool) (Record, bool) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return Record{}, false
	}
	if trimmed[0] != '{' {
		r.skip(errors.New("not a JSON object"))
		return Record{}, false
	}
	var rec Record
	err := json.Unmarshal(trimmed, &rec)
	if err == nil {
		return rec, true
	}
	// Next returns what is found, in order.
	found, torn := splitGlued(trimmed)
	switch {
	case torn && atEOF:
		if r.warn != nil {
			r.warn(r.line, errIncomplete)
		}
	case torn:
		r.skip(fmt.Errorf("not an audit record: %w", err))
	}
	r.glued = found
	return Record{}, false
}

// recordStart is how every line the Writer makes begins (time is its
// first field). A line holds it nowhere else: the quotes of the strings
// in it are escaped.
var recordStart = []byte(`{"time":"`)

// splitGlued finds the records in a line that is not one: a write the
// filesystem had room for only part of (a full disk, which a sandboxed
// command can bring about) leaves the start of a line in the log, and a
// session already running when it was cut appends its next line to it.
// Each piece from a recordStart to the next is decoded; torn says some
// piece (the part left of the cut line) was not a record.
func splitGlued(line []byte) (found []gluedRecord, torn bool) {
	for len(line) > 0 {
		end := bytes.Index(line[1:], recordStart) + 1
		if end == 0 {
			end = len(line)
		}
		var rec Record
		if bytes.HasPrefix(line, recordStart) && json.Unmarshal(line[:end], &rec) == nil {
			found = append(found, gluedRecord{rec: rec, raw: slices.Clone(line[:end])})
		} else {
			torn = true
		}
		line = line[end:]
	}
	return found, torn
}

func (r *Reader) skip(err error) {
	r.skipped++
	if r.warn != nil {
		r.warn(r.line, err)
	}
}

// readLine returns the next line without its newline. A line longer than
// MaxLineBytes is read to its end but not kept, and reported as tooLong.
func (r *Reader) readLine() (line []byte, tooLong bool, err error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if !tooLong && len(r.buf)+len(chunk) > MaxLineBytes {
			tooLong, r.buf = true, r.buf[:0]
		}
		if !tooLong {
			r.buf = append(r.buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return r.buf, tooLong, err
	}
}

// Record returns the record Next stopped at.
func (r *Reader) Record() Record { return r.rec }

// Raw returns the record's line exactly as stored, without the newline.
// It is valid until the next call to Next.
func (r *Reader) Raw() []byte { return r.raw }

// Err returns the read error that ended Next, or nil at a clean end.
func (r *Reader) Err() error {
	if errors.Is(r.err, io.EOF) {
		return nil
	}
	return r.err
}

// Skipped returns how many lines were skipped as too long or malformed.
func (r *Reader) Skipped() int { return r.skipped }

// Filter selects records; a zero field matches everything.
type Filter struct {
	// Session matches a session id or any prefix of it (the short form
	// shown in tables).
	Session string
	// Decision is Allow or Deny.
	Decision string
	// Host is a normalised host, matched exactly, or "*.NAME" matching
	// strict subdomains of NAME (the allowlist's wildcard rule), against
	// the record's host in lower case and without a final dot (foldHost).
	Host string
	// Since drops records stamped before it.
	Since time.Time
	Type  Type
}

// Match reports whether a record passes every set field of the filter.
func (f Filter) Match(r Record) bool {
	switch {
	case f.Session != "" && !strings.HasPrefix(r.Session, f.Session):
		return false
	case f.Decision != "" && r.Decision != f.Decision:
		return false
	case f.Type != "" && r.Type != f.Type:
		return false
	case !f.Since.IsZero() && r.Time.Before(f.Since):
		return false
	case f.Host == "":
		return true
	}
	host := foldHost(r.Host)
	if suffix, ok := strings.CutPrefix(f.Host, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == f.Host
}

// foldHost is a logged host as a filter compares it: in lower case and
// without a final dot. A name cordon could not normalise is logged as the
// client sent it (a DNS question for c2VjcmV0!.EVIL.com.), and --host
// *.evil.com, normalised, would otherwise pass over it.
func foldHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// Types lists every record type, in the order a run writes them.
var Types = []Type{TypeSession, TypeBlock, TypeLaunch, TypeDecision, TypeInject, TypeClose, TypeBudget, TypeExit, TypeRemoved, TypeSetAside, TypeClosed, TypeHidden, TypeTerminal}

// ParseType checks a record type named on the command line.
func ParseType(s string) (Type, error) {
	if slices.Contains(Types, Type(s)) {
		return Type(s), nil
	}
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return "", fmt.Errorf("unknown record type %q; use one of %s", s, strings.Join(names, ", "))
}

// ParseDecision checks a decision named on the command line.
func ParseDecision(s string) (string, error) {
	if s != Allow && s != Deny {
		return "", fmt.Errorf("unknown decision %q; use %s or %s", s, Allow, Deny)
	}
	return s, nil
}

// ParseSince turns "10m", "36h", "7d" (before now) or an RFC 3339 time
// such as 2025-01-02T15:04:05Z into the earliest time to show.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
		if err == nil && n > 1e5 {
			err = errors.New("too many days")
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("since %q: not a duration such as 10m, 2h or 7d, nor an RFC 3339 time such as 2025-01-02T15:04:05Z", s)
	}
	return now.Add(-d), nil
}

// HostSummary totals one host's decisions and traffic.
type HostSummary struct {
	Host      string
	Allowed   int
	Denied    int
	BytesUp   int64
	BytesDown int64
	// DenyReasons counts denies by reason, most frequent first.
	DenyReasons []ReasonCount
}

// ReasonCount is how often one deny reason was given.
type ReasonCount struct {
	Reason string
	Count  int
}

// Summary groups decision and close records by host, MaxSummaryHosts of
// them at most.
type Summary struct {
	hosts map[string]*hostTotals
	// other totals the hosts past MaxSummaryHosts, nil until there is one.
	other *hostTotals
}

// MaxSummaryHosts bounds how many hosts a Summary totals apart: a
// sandboxed command chooses how many names it asks for (a DNS question
// for each of a million random names), and a summary holding each would
// take more memory than the log's size. The decisions of the hosts seen
// after the first MaxSummaryHosts are totalled together, as OtherHosts.
const MaxSummaryHosts = 10000

// OtherHosts is the summary row of the hosts past MaxSummaryHosts.
const OtherHosts = "(other hosts)"

type hostTotals struct {
	HostSummary
	reasons map[string]int
}

// NoHost is the summary key for decisions that name no host.
const NoHost = "-"

// Add counts one record: decisions by verdict and reason, closes by bytes,
// and a close that says its request was refused on the way (a
// credential's guard cut its body off) as a deny too, with its reason.
// Other record types name no host and are ignored.
func (s *Summary) Add(r Record) {
	if r.Type != TypeDecision && r.Type != TypeClose {
		return
	}
	host := r.Host
	if host == "" {
		host = NoHost
	}
	h := s.totals(host)
	if r.Type == TypeClose {
		h.BytesUp += r.BytesUp
		h.BytesDown += r.BytesDown
	}
	switch {
	case r.Type == TypeDecision && r.Decision == Allow:
		h.Allowed++
	case r.Decision == Deny:
		h.Denied++
		h.reasons[r.Reason]++
	}
}

// totals returns host's totals, or OtherHosts' once MaxSummaryHosts
// hosts have theirs.
func (s *Summary) totals(host string) *hostTotals {
	if h := s.hosts[host]; h != nil {
		return h
	}
	if len(s.hosts) >= MaxSummaryHosts {
		if s.other == nil {
			s.other = newTotals(OtherHosts)
		}
		return s.other
	}
	if s.hosts == nil {
		s.hosts = map[string]*hostTotals{}
	}
	h := newTotals(host)
	s.hosts[host] = h
	return h
}

func newTotals(host string) *hostTotals {
	return &hostTotals{HostSummary: HostSummary{Host: host}, reasons: map[string]int{}}
}

// Capped says whether some hosts were totalled together as OtherHosts.
func (s *Summary) Capped() bool { return s.other != nil }

// Hosts returns one summary per host, most denied first, then by host,
// and last OtherHosts' if some were totalled together; each keeps at most
// top deny reasons.
func (s *Summary) Hosts(top int) []HostSummary {
	out := make([]HostSummary, 0, len(s.hosts)+1)
	for _, h := range s.hosts {
		out = append(out, h.summary(top))
	}
	slices.SortFunc(out, func(a, b HostSummary) int {
		if a.Denied != b.Denied {
			return b.Denied - a.Denied
		}
		return strings.Compare(a.Host, b.Host)
	})
	if s.other != nil {
		out = append(out, s.other.summary(top))
	}
	return out
}

// summary is h with its top deny reasons, most frequent first.
func (h *hostTotals) summary(top int) HostSummary {
	hs := h.HostSummary
	hs.DenyReasons = nil
	for reason, n := range h.reasons {
		hs.DenyReasons = append(hs.DenyReasons, ReasonCount{Reason: reason, Count: n})
	}
	slices.SortFunc(hs.DenyReasons, func(a, b ReasonCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	if len(hs.DenyReasons) > top {
		hs.DenyReasons = hs.DenyReasons[:top]
	}
	return hs
}
