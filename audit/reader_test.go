package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var t0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

// line encodes one record as the writer does.
func line(t testing.TB, r Record) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

type skipped struct {
	line int
	err  string
}

// readAll reads every record and every warning from data.
func readAll(t testing.TB, data string) ([]Record, []string, []skipped, *Reader) {
	t.Helper()
	var warns []skipped
	rd := NewReader(strings.NewReader(data), func(line int, err error) {
		warns = append(warns, skipped{line, err.Error()})
	})
	var recs []Record
	var raws []string
	for rd.Next() {
		recs = append(recs, rd.Record())
		raws = append(raws, string(rd.Raw()))
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	return recs, raws, warns, rd
}

// readChecked reads data, checks that it holds records records, and returns
// the lines it warned about, checking that each warning contains warnHas.
func readChecked(t *testing.T, data string, records int, warnHas string) ([]int, *Reader) {
	t.Helper()
	recs, _, warns, rd := readAll(t, data)
	if len(recs) != records {
		t.Errorf("read %d records, want %d", len(recs), records)
	}
	var lines []int
	for _, w := range warns {
		lines = append(lines, w.line)
		if !strings.Contains(w.err, warnHas) {
			t.Errorf("warning for line %d = %q, want it to contain %q", w.line, w.err, warnHas)
		}
	}
	return lines, rd
}

func TestReaderReadsWriterOutput(t *testing.T) {
	path := t.TempDir() + "/audit.jsonl"
	w, err := Open(path, "s1")
	if err != nil {
		t.Fatal(err)
	}
	code := 3
	want := []Record{
		{Time: t0, Type: TypeLaunch, Command: []string{"make", "test"}, Network: "restricted"},
		{Time: t0.Add(time.Second), Type: TypeDecision, Kind: KindConnect, ID: 1, Host: "example.com", Port: 443, Decision: Allow, Reason: "allowlisted"},
		{Time: t0.Add(2 * time.Second), Type: TypeClose, Kind: KindConnect, ID: 1, Host: "example.com", Port: 443, BytesUp: 10, BytesDown: 2048},
		{Time: t0.Add(3 * time.Second), Type: TypeExit, ExitCode: &code},
	}
	for _, r := range want {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(must(t, path))
	if err != nil {
		t.Fatal(err)
	}
	recs, raws, warns, rd := readAll(t, string(data))
	if len(warns) != 0 || rd.Skipped() != 0 {
		t.Fatalf("warnings on the writer's own output: %v", warns)
	}
	if len(recs) != len(want) {
		t.Fatalf("read %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		want[i].Session = "s1"
		if got, exp := line(t, r), line(t, want[i]); got != exp {
			t.Errorf("record %d = %s, want %s", i, got, exp)
		}
	}
	if got := strings.Join(raws, "\n") + "\n"; got != string(data) {
		t.Errorf("raw lines differ from the file:\n%s\nwant\n%s", got, data)
	}
}

func must(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReaderSkipsBadLines(t *testing.T) {
	good := line(t, Record{Time: t0, Type: TypeDecision, Host: "a.example", Decision: Deny})
	tests := []struct {
		name      string
		data      string
		records   int
		warnLines []int
		warnHas   string
	}{
		{"empty file", "", 0, nil, ""},
		{"only newlines", "\n\n\n", 0, nil, ""},
		{"blank lines are not warnings", good + "\n   \n" + good, 2, nil, ""},
		{"no final newline", good + strings.TrimSuffix(good, "\n"), 2, nil, ""},
		{"CRLF line", strings.TrimSuffix(good, "\n") + "\r\n", 1, nil, ""},
		{"truncated JSON", good + `{"time":"2025-03-04T10:00:00Z","ty` + "\n" + good, 2, []int{2}, "not an audit record"},
		{"not JSON", "hello\n" + good, 1, []int{1}, "not a JSON object"},
		{"JSON null", "null\n" + good, 1, []int{1}, "not a JSON object"},
		{"JSON array", "[1,2]\n" + good, 1, []int{1}, "not a JSON object"},
		{"wrong field type", `{"port":"443"}` + "\n" + good, 1, []int{1}, "not an audit record"},
		{"bad time", `{"time":"yesterday"}` + "\n" + good, 1, []int{1}, "not an audit record"},
		// A write cut short (a full disk) leaves the start of a line; the
		// next line written goes on from there, and is still read.
		{"a record glued to one cut short", good + good[:len(good)/2] + good, 2, []int{2}, "not an audit record"},
		{"records glued to pieces cut short", good[:40] + good[:10] + strings.TrimSuffix(good, "\n") + good[:len(good)-2] + good, 2, []int{1}, "not an audit record"},
		{"two records on a line, none cut", strings.TrimSuffix(good, "\n") + good, 2, nil, ""},
		{"a record start in a string is escaped", line(t, Record{Time: t0, Path: `/{"time":"x`}), 1, nil, ""},
		{"several bad lines", "x\n" + good + "y\n" + good + "{\n", 2, []int{1, 3, 5}, ""},
		{"unknown fields are kept compatible", `{"type":"future","new_field":1}` + "\n", 1, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, rd := readChecked(t, tt.data, tt.records, tt.warnHas)
			if !slices.Equal(lines, tt.warnLines) {
				t.Errorf("warned about lines %v, want %v", lines, tt.warnLines)
			}
			if rd.Skipped() != len(tt.warnLines) {
				t.Errorf("Skipped() = %d, want %d", rd.Skipped(), len(tt.warnLines))
			}
		})
	}
}

// A last line that no newline ends and that holds no whole record may be
// one a session is writing: a reader sees the first part of a write
// another process is making (some 1 in 150 reads of a log two writers
// append 700-byte lines to, here). It is said to be incomplete, not
// counted as a malformed line, where `cordon audit` run beside a session
// warned of a malformed line in a log nothing was wrong with.
func TestReaderIncompleteLastLine(t *testing.T) {
	good := line(t, Record{Time: t0, Type: TypeDecision, Host: "a.example", Decision: Deny})
	tests := []struct {
		name      string
		data      string
		records   int
		warnLines []int
		skipped   int
	}{
		{"the start of a record", good + good[:len(good)/2], 1, []int{2}, 0},
		{"a record and the start of the next on one line", good + strings.TrimSuffix(good, "\n") + good[:20], 2, []int{2}, 0},
		{"a line cut short before it", good[:30] + "\n" + good + good[:20], 1, []int{1, 3}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, _, warns, rd := readAll(t, tt.data)
			if len(recs) != tt.records {
				t.Errorf("read %d records, want %d", len(recs), tt.records)
			}
			var lines []int
			for _, w := range warns {
				lines = append(lines, w.line)
			}
			if !slices.Equal(lines, tt.warnLines) {
				t.Errorf("warned about lines %v, want %v", lines, tt.warnLines)
			}
			if last := warns[len(warns)-1]; !strings.Contains(last.err, "a session may still be writing it") {
				t.Errorf("the last line's warning is %q, want it said incomplete", last.err)
			}
			if rd.Skipped() != tt.skipped {
				t.Errorf("Skipped() = %d, want %d", rd.Skipped(), tt.skipped)
			}
		})
	}
}

func TestReaderHugeLine(t *testing.T) {
	good := line(t, Record{Time: t0, Type: TypeDecision, Host: "a.example", Decision: Allow})
	atLimit := `{"detail":"` + strings.Repeat("x", MaxLineBytes-len(`{"detail":""}`)) + `"}`
	tests := []struct {
		name    string
		data    string
		records int
		skipped []int
	}{
		{"line at the limit is read", atLimit + "\n" + good, 2, nil},
		{"one byte over is skipped", `{"detail":"x` + atLimit[len(`{"detail":"`):] + "\n" + good, 1, []int{1}},
		{"huge line in the middle", good + strings.Repeat("y", 5*MaxLineBytes) + "\n" + good, 2, []int{2}},
		{"huge last line without newline", good + strings.Repeat("z", 3*MaxLineBytes), 1, []int{2}},
		{"two huge lines", strings.Repeat("a", 2*MaxLineBytes) + "\n" + strings.Repeat("b", 2*MaxLineBytes) + "\n" + good, 1, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, rd := readChecked(t, tt.data, tt.records, "longer than")
			if !slices.Equal(lines, tt.skipped) || rd.Skipped() != len(tt.skipped) {
				t.Errorf("skipped lines %v (count %d), want %v", lines, rd.Skipped(), tt.skipped)
			}
			if cap(rd.buf) > 2*MaxLineBytes {
				t.Errorf("line buffer grew to %d bytes, want at most about %d", cap(rd.buf), MaxLineBytes)
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	good := line(t, Record{Time: t0, Type: TypeDecision, Host: "a.example", Decision: Allow})
	boom := errors.New("disk on fire")
	rd := NewReader(io.MultiReader(strings.NewReader(good), iotest.ErrReader(boom)), nil)
	n := 0
	for rd.Next() {
		n++
	}
	if n != 1 {
		t.Errorf("read %d records before the error, want 1", n)
	}
	if err := rd.Err(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Err() = %v, want the read error after line 1", err)
	}
	if rd.Next() {
		t.Error("Next() after an error returned true")
	}
}

func TestFilterMatch(t *testing.T) {
	rec := Record{Time: t0, Session: "3f2a9c0d11223344", Type: TypeDecision, Kind: KindConnect,
		Host: "api.example.com", Port: 443, Decision: Deny, Reason: "not_allowlisted"}
	tests := []struct {
		name string
		f    Filter
		r    Record
		want bool
	}{
		{"zero filter", Filter{}, rec, true},
		{"zero filter, zero record", Filter{}, Record{}, true},
		{"session exact", Filter{Session: "3f2a9c0d11223344"}, rec, true},
		{"session prefix", Filter{Session: "3f2a9c0d"}, rec, true},
		{"session other", Filter{Session: "3f2b"}, rec, false},
		{"session longer than id", Filter{Session: "3f2a9c0d112233445"}, rec, false},
		{"decision deny", Filter{Decision: Deny}, rec, true},
		{"decision allow", Filter{Decision: Allow}, rec, false},
		{"decision on a launch line", Filter{Decision: Deny}, Record{Type: TypeLaunch}, false},
		{"type match", Filter{Type: TypeDecision}, rec, true},
		{"type other", Filter{Type: TypeClose}, rec, false},
		{"since before", Filter{Since: t0.Add(-time.Minute)}, rec, true},
		{"since equal", Filter{Since: t0}, rec, true},
		{"since after", Filter{Since: t0.Add(time.Nanosecond)}, rec, false},
		{"since, no time", Filter{Since: t0}, Record{Type: TypeDecision}, false},
		{"host exact", Filter{Host: "api.example.com"}, rec, true},
		{"host apex is not a sub", Filter{Host: "example.com"}, rec, false},
		{"host wildcard sub", Filter{Host: "*.example.com"}, rec, true},
		{"host wildcard deep sub", Filter{Host: "*.example.com"}, Record{Host: "a.b.example.com"}, true},
		{"host wildcard not apex", Filter{Host: "*.example.com"}, Record{Host: "example.com"}, false},
		{"host wildcard not lookalike", Filter{Host: "*.example.com"}, Record{Host: "notexample.com"}, false},
		{"host wildcard not suffix trick", Filter{Host: "*.example.com"}, Record{Host: "example.com.evil.test"}, false},
		{"host on a hostless line", Filter{Host: "example.com"}, Record{Type: TypeLaunch}, false},
		{"host IPv6", Filter{Host: "2001:db8::1"}, Record{Host: "2001:db8::1"}, true},
		// A name cordon could not normalise, logged as it was asked for.
		{"host wildcard, a bad name as asked", Filter{Host: "*.evil.com"}, Record{Host: "c2VjcmV0!.EVIL.com."}, true},
		{"host exact, a bad name as asked", Filter{Host: "x!y.evil.com"}, Record{Host: "X!Y.Evil.COM."}, true},
		{"host wildcard, a bad name elsewhere", Filter{Host: "*.evil.com"}, Record{Host: "c2VjcmV0!.EVIL.com.org."}, false},
		{"all together", Filter{Session: "3f2a", Decision: Deny, Host: "*.example.com", Since: t0, Type: TypeDecision}, rec, true},
		{"all but one", Filter{Session: "3f2a", Decision: Deny, Host: "*.example.com", Since: t0, Type: TypeClose}, rec, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Match(tt.r); got != tt.want {
				t.Fatalf("%+v.Match(%+v) = %v, want %v", tt.f, tt.r, got, tt.want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"0s", now},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"2025-03-04T11:00:00Z", time.Date(2025, 3, 4, 11, 0, 0, 0, time.UTC)},
		{"2025-03-04T11:00:00.5+01:00", time.Date(2025, 3, 4, 10, 0, 0, 5e8, time.UTC)},
	}
	for _, tt := range tests {
		got, err := ParseSince(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "10", "ten minutes", "-5m", "-1d", "d", "1.5d", "99999999999d", "2025-03-04", "2025-03-04 11:00:00", "2025-13-04T11:00:00Z"} {
		if got, err := ParseSince(bad, now); err == nil || !strings.Contains(err.Error(), "10m") {
			t.Errorf("ParseSince(%q) = %v, %v; want an error showing a valid example", bad, got, err)
		}
	}
}

func TestParseTypeAndDecision(t *testing.T) {
	for _, typ := range Types {
		if got, err := ParseType(string(typ)); err != nil || got != typ {
			t.Errorf("ParseType(%q) = %q, %v", typ, got, err)
		}
	}
	if _, err := ParseType("decisions"); err == nil || !strings.Contains(err.Error(), "decision, ") {
		t.Errorf("ParseType(decisions) error = %v; want the list of types", err)
	}
	for _, d := range []string{Allow, Deny} {
		if got, err := ParseDecision(d); err != nil || got != d {
			t.Errorf("ParseDecision(%q) = %q, %v", d, got, err)
		}
	}
	for _, bad := range []string{"", "DENY", "denied", "block"} {
		if _, err := ParseDecision(bad); err == nil || !strings.Contains(err.Error(), "allow or deny") {
			t.Errorf("ParseDecision(%q) error = %v; want one that names allow and deny", bad, err)
		}
	}
}

func TestSummary(t *testing.T) {
	dec := func(host, verdict, reason string) Record {
		return Record{Type: TypeDecision, Host: host, Port: 443, Decision: verdict, Reason: reason}
	}
	closed := func(host string, up, down int64) Record {
		return Record{Type: TypeClose, Host: host, Port: 443, BytesUp: up, BytesDown: down}
	}
	recs := []Record{
		{Type: TypeLaunch, Command: []string{"make"}},
		dec("a.example", Allow, "allowlisted"),
		closed("a.example", 100, 1000),
		dec("a.example", Allow, "allowlisted"),
		closed("a.example", 50, 24),
		dec("b.example", Deny, "not_allowlisted"),
		dec("b.example", Deny, "not_allowlisted"),
		dec("b.example", Deny, "port_not_allowed"),
		dec("b.example", Deny, "deny_rule"),
		dec("b.example", Deny, "bad_host"),
		dec("b.example", Deny, "bad_host"),
		dec("b.example", Deny, "bad_host"),
		dec("b.example", Allow, "allowlisted"),
		dec("c.example", Deny, "not_allowlisted"),
		dec("c.example", Deny, "deny_rule"),
		dec("d.example", Deny, "deny_rule"),
		dec("c.example", Deny, "deny_rule"),
		dec("", Deny, "proxy_auth"),
		closed("e.example", 7, 0),
		{Type: TypeExit},
		{Type: TypeSession},
	}
	var s Summary
	for _, r := range recs {
		s.Add(r)
	}
	got := s.Hosts(3)
	want := []HostSummary{
		{Host: "b.example", Allowed: 1, Denied: 7, DenyReasons: []ReasonCount{{"bad_host", 3}, {"not_allowlisted", 2}, {"deny_rule", 1}}},
		{Host: "c.example", Denied: 3, DenyReasons: []ReasonCount{{"deny_rule", 2}, {"not_allowlisted", 1}}},
		{Host: NoHost, Denied: 1, DenyReasons: []ReasonCount{{"proxy_auth", 1}}},
		{Host: "d.example", Denied: 1, DenyReasons: []ReasonCount{{"deny_rule", 1}}},
		{Host: "a.example", Allowed: 2, BytesUp: 150, BytesDown: 1024},
		{Host: "e.example", BytesUp: 7},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("Hosts(3) =\n%+v\nwant\n%+v", got, want)
	}
	if one := s.Hosts(1); len(one[0].DenyReasons) != 1 || one[0].DenyReasons[0].Reason != "bad_host" {
		t.Errorf("Hosts(1)[0].DenyReasons = %v, want only the top reason", one[0].DenyReasons)
	}
	var empty Summary
	if h := empty.Hosts(3); len(h) != 0 {
		t.Errorf("empty summary has hosts %v", h)
	}
}

// FuzzReadRecords feeds arbitrary bytes as a log: the reader must never
// panic, never return more records than there are lines, and account for
// every non-blank line as either a record or a skip.
func FuzzReadRecords(f *testing.F) {
	good := line(f, Record{Time: t0, Session: "s", Type: TypeDecision, Host: "a.example", Port: 443, Decision: Allow})
	for _, s := range []string{
		"", "\n", good, good + good, good + "garbage\n" + good, `{"time":`, "null\n",
		strings.TrimSuffix(good, "\n"), "{}\r\n{}", `{"exit_code":1,"command":["a"]}`,
		`{"time":"2025-01-01T00:00:00Z","bytes_up":-1}`, "\xff\xfe{}\n", strings.TrimSuffix(good+good, "\n"), "{" + good,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		nonBlank := 0
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				nonBlank++
			}
		}
		warned, incomplete := 0, 0
		rd := NewReader(bytes.NewReader(data), func(line int, err error) {
			warned++
			if line < 1 || line > lines || err == nil {
				t.Fatalf("warning for line %d of %d: %v", line, lines, err)
			}
			if errors.Is(err, errIncomplete) {
				// Said of the last line alone, when no newline ends it.
				incomplete++
				if line != lines || data[len(data)-1] == '\n' {
					t.Fatalf("line %d of %d said to be incomplete", line, lines)
				}
			}
		})
		n := 0
		for rd.Next() {
			n++
			if raw := rd.Raw(); bytes.IndexByte(raw, '\n') >= 0 || !bytes.Contains(data, raw) {
				t.Fatalf("Raw() = %q is not one line of the input", raw)
			}
		}
		if err := rd.Err(); err != nil {
			t.Fatalf("Err() = %v on an in-memory reader", err)
		}
		if glued := bytes.Count(data, recordStart); n > lines+glued {
			t.Fatalf("%d records from %d lines holding %d record starts", n, lines, glued)
		}
		if warned != rd.Skipped()+incomplete {
			t.Fatalf("warned %d times but Skipped() = %d and %d incomplete", warned, rd.Skipped(), incomplete)
		}
		// Each non-blank line gives a record, a skip or (the last) an
		// incomplete warning, and a line of records glued together
		// (splitGlued) gives one record each and a skip for a torn piece.
		if n+rd.Skipped()+incomplete < nonBlank || rd.Skipped()+incomplete > nonBlank {
			t.Fatalf("%d records + %d skipped + %d incomplete from %d non-blank lines", n, rd.Skipped(), incomplete, nonBlank)
		}
	})
}

// TestSummaryBounded: a summary totals MaxSummaryHosts hosts apart and
// the rest together, as OtherHosts, last: a sandboxed command chooses how
// many names it asks for.
func TestSummaryBounded(t *testing.T) {
	var s Summary
	s.Add(Record{Type: TypeDecision, Host: "first.example", Decision: Deny, Reason: "not_allowlisted"})
	for i := range MaxSummaryHosts + 4 {
		s.Add(Record{Type: TypeDecision, Host: fmt.Sprintf("h%d.example", i), Decision: Deny, Reason: "not_allowlisted"})
	}
	s.Add(Record{Type: TypeDecision, Host: "first.example", Decision: Allow})
	s.Add(Record{Type: TypeClose, Host: "late.example", BytesUp: 9})
	hosts := s.Hosts(3)
	if len(hosts) != MaxSummaryHosts+1 || !s.Capped() {
		t.Fatalf("%d hosts (capped %v), want %d and %s", len(hosts), s.Capped(), MaxSummaryHosts, OtherHosts)
	}
	other := hosts[len(hosts)-1]
	want := HostSummary{Host: OtherHosts, Denied: 5, BytesUp: 9, DenyReasons: []ReasonCount{{"not_allowlisted", 5}}}
	if fmt.Sprintf("%+v", other) != fmt.Sprintf("%+v", want) {
		t.Errorf("last row %+v, want %+v", other, want)
	}
	if i := slices.IndexFunc(hosts, func(h HostSummary) bool { return h.Host == "first.example" }); i < 0 || hosts[i].Allowed != 1 || hosts[i].Denied != 1 {
		t.Errorf("first.example, seen before the cap, is not totalled apart: %v", i)
	}
}

// TestSummaryCountsCutRequests: a close line that says its request was
// refused on the way (its decision line said allow) counts as a deny, with
// its reason; one that failed of itself counts only its bytes.
func TestSummaryCountsCutRequests(t *testing.T) {
	var s Summary
	for _, r := range []Record{
		{Type: TypeDecision, Host: "a.example", Decision: Allow, Reason: "allowlisted"},
		{Type: TypeClose, Host: "a.example", Decision: Deny, Reason: "secret_leak", BytesUp: 100},
		{Type: TypeDecision, Host: "a.example", Decision: Allow, Reason: "allowlisted"},
		{Type: TypeClose, Host: "a.example", Reason: "upstream_error", BytesDown: 5},
	} {
		s.Add(r)
	}
	want := []HostSummary{{Host: "a.example", Allowed: 2, Denied: 1, BytesUp: 100, BytesDown: 5, DenyReasons: []ReasonCount{{"secret_leak", 1}}}}
	if got := s.Hosts(3); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("Hosts(3) = %+v, want %+v", got, want)
	}
}
