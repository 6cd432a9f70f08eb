package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// auditT0 is the time of the first test record.
var auditT0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

// runAuditCmd runs `cordon audit ARGS...` in-process.
func runAuditCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = execute(&out, &errOut, append([]string{"audit"}, args...)...)
	return out.String(), errOut.String(), err
}

// writeLog writes records (and any extra raw lines after them) to a log file.
func writeLog(t *testing.T, recs []audit.Record, extra ...string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sampleLog() []audit.Record {
	code := 0
	at := func(s int) time.Time { return auditT0.Add(time.Duration(s) * time.Second) }
	return []audit.Record{
		{Time: at(0), Session: "aaaa1111bbbb2222", Type: audit.TypeLaunch, Command: []string{"npm", "test"}, Network: "restricted"},
		{Time: at(1), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindConnect, ID: 1,
			Host: "registry.npmjs.org", Port: 443, Decision: audit.Allow, Reason: "allowlisted", Rule: "registry.npmjs.org"},
		{Time: at(2), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindConnect, ID: 1,
			Host: "registry.npmjs.org", Port: 443, Method: "GET", Path: "/left-pad", Decision: audit.Allow, Reason: "allowlisted"},
		{Time: at(3), Session: "aaaa1111bbbb2222", Type: audit.TypeClose, Kind: audit.KindConnect, ID: 1,
			Host: "registry.npmjs.org", Port: 443, Method: "GET", Path: "/left-pad", Status: 200, BytesUp: 120, BytesDown: 5 << 20},
		{Time: at(4), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindConnect,
			Host: "evil.example", Port: 443, Decision: audit.Deny, Reason: "not_allowlisted",
			Detail: "evil.example:443 is not on the allowlist; allow it with --allow evil.example"},
		{Time: at(5), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindHTTP,
			Host: "api.github.com", Port: 8080, Decision: audit.Deny, Reason: "port_not_allowed"},
		{Time: at(6), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindConnect,
			Host: "evil.example", Port: 22, Decision: audit.Deny, Reason: "not_allowlisted"},
		{Time: at(7), Session: "aaaa1111bbbb2222", Type: audit.TypeDecision, Kind: audit.KindConnect,
			Host: "2001:db8::1", Port: 443, Decision: audit.Deny, Reason: "deny_rule"},
		{Time: at(8), Session: "aaaa1111bbbb2222", Type: audit.TypeExit, Command: []string{"npm", "test"}, ExitCode: &code, Outcome: "ok"},
		{Time: at(600), Session: "cccc3333dddd4444", Type: audit.TypeBlock, Command: []string{"curl", "evil.example"}, Reason: "denied_command"},
		{Time: at(601), Session: "cccc3333dddd4444", Type: audit.TypeDecision, Kind: audit.KindConnect,
			Host: "x.api.github.com", Port: 443, Decision: audit.Allow, Reason: "allowlisted"},
	}
}

// tableRows returns the data rows of a table, split into cells.
func tableRows(t *testing.T, out string) (header string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 {
		t.Fatalf("no output")
	}
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return lines[0], rows
}

func TestAuditTable(t *testing.T) {
	path := writeLog(t, sampleLog())
	out, stderr, err := runAuditCmd(t, "--file", path)
	if err != nil || stderr != "" {
		t.Fatalf("audit: %v, stderr %q", err, stderr)
	}
	header, rows := tableRows(t, out)
	for _, col := range []string{"TIME", "SESSION", "TYPE", "KIND", "DECISION", "HOST:PORT", "REASON", "DETAIL"} {
		if !strings.Contains(header, col) {
			t.Errorf("header %q lacks %s", header, col)
		}
	}
	if len(rows) != len(sampleLog()) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(sampleLog()), out)
	}
	// Columns line up: every row's DECISION starts where the header's does.
	col := strings.Index(header, "DECISION")
	for _, l := range strings.Split(out, "\n")[1:] {
		if l != "" && (len(l) < col || l[col-1] != ' ') {
			t.Errorf("row not aligned to the header at column %d: %q", col, l)
		}
	}
	lines := strings.Split(out, "\n")
	wantTime := auditT0.Add(4 * time.Second).Local().Format("2006-01-02 15:04:05")
	tests := []struct {
		row  int
		want []string
	}{
		{0, []string{"aaaa1111", "launch", "npm test"}},
		{1, []string{"decision", "connect", "allow", "registry.npmjs.org:443", "allowlisted"}},
		{2, []string{"GET /left-pad"}},
		{3, []string{"close", "GET /left-pad 200", "up 120 B", "down 5.0 MiB"}},
		{4, []string{wantTime, "deny", "evil.example:443", "not_allowlisted"}},
		{5, []string{"http", "deny", "api.github.com:8080", "port_not_allowed"}},
		{7, []string{"[2001:db8::1]:443", "deny_rule"}},
		{8, []string{"exit", "npm test exit 0 ok"}},
		{9, []string{"cccc3333", "block", "curl evil.example", "denied_command"}},
	}
	for _, tt := range tests {
		l := lines[tt.row+1]
		for _, w := range tt.want {
			if !strings.Contains(l, w) {
				t.Errorf("row %d %q lacks %q", tt.row, l, w)
			}
		}
	}
	if strings.Contains(out, "bbbb2222") {
		t.Errorf("table shows full session ids; want the short form:\n%s", out)
	}
	if strings.Contains(out, "allow it with") {
		t.Errorf("table shows detail sentences; want them only in --json:\n%s", out)
	}
	for _, r := range rows {
		if len(r) < 7 {
			t.Errorf("row with empty cells collapsed: %q", r)
		}
	}
}

func TestAuditFilters(t *testing.T) {
	path := writeLog(t, sampleLog())
	// now is just after the last record, so --since 5m keeps only the
	// second session.
	tests := []struct {
		name  string
		args  []string
		rows  int
		has   []string
		hasNo []string
	}{
		{"deny", []string{"--decision", "deny"}, 4, []string{"evil.example:443", "evil.example:22", "api.github.com:8080"}, []string{"allow "}},
		{"allow", []string{"--decision", "allow"}, 3, []string{"registry.npmjs.org", "x.api.github.com"}, []string{"deny"}},
		{"host exact", []string{"--host", "EVIL.example."}, 2, []string{"evil.example:22"}, nil},
		{"host wildcard", []string{"--host", "*.github.com"}, 2, []string{"api.github.com:8080", "x.api.github.com:443"}, nil},
		{"host wildcard not apex", []string{"--host", "*.api.github.com"}, 1, []string{"x.api.github.com"}, nil},
		{"host IPv6 bracketed", []string{"--host", "[2001:DB8::1]"}, 1, []string{"deny_rule"}, nil},
		{"session prefix", []string{"--session", "cccc"}, 2, []string{"block", "x.api.github.com"}, []string{"aaaa1111"}},
		{"type", []string{"--type", "close"}, 1, []string{"5.0 MiB"}, nil},
		{"since RFC 3339", []string{"--since", auditT0.Add(599 * time.Second).Format(time.RFC3339)}, 2, []string{"cccc3333"}, []string{"aaaa1111"}},
		{"combined", []string{"--decision", "deny", "--host", "evil.example", "--type", "decision", "--session", "aaaa"}, 2, nil, nil},
		{"nothing matches", []string{"--host", "nowhere.example"}, 1, []string{"(no matching records)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runAuditCmd(t, append([]string{"--file", path}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if _, rows := tableRows(t, out); len(rows) != tt.rows {
				t.Errorf("%d rows, want %d:\n%s", len(rows), tt.rows, out)
			}
			for _, s := range tt.has {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.hasNo {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestAuditSinceRelative(t *testing.T) {
	path := writeLog(t, sampleLog())
	now := auditT0.Add(602 * time.Second)
	var out, errOut bytes.Buffer
	if err := runAudit(t.Context(), &out, &errOut, auditFlags{file: path, since: "5m"}, now); err != nil {
		t.Fatal(err)
	}
	if _, rows := tableRows(t, out.String()); len(rows) != 2 || strings.Contains(out.String(), "aaaa1111") {
		t.Fatalf("--since 5m kept the wrong rows:\n%s", out.String())
	}
}

func TestAuditJSONPassthrough(t *testing.T) {
	// Odd but valid spellings must come out byte for byte, not re-encoded.
	lines := []string{
		`{"time":"2025-03-04T10:00:00Z","session":"s1","type":"decision","host":"a.example","port":443,"decision":"deny","reason":"not_allowlisted","future_field":{"x":[1,2]}}`,
		`{ "type" : "decision", "time":"2025-03-04T10:00:01.123456789+01:00", "session":"s1", "host":"b.example", "decision":"allow" }`,
		`{"time":"2025-03-04T10:00:02Z","session":"s1","type":"decision","host":"c.example","decision":"deny","detail":"caf\u00e9 \u2028"}`,
	}
	path := writeLog(t, nil, lines...)
	out, stderr, err := runAuditCmd(t, "--file", path, "--json")
	if err != nil || stderr != "" {
		t.Fatalf("audit --json: %v, stderr %q", err, stderr)
	}
	if want := strings.Join(lines, "\n") + "\n"; out != want {
		t.Fatalf("--json output differs from the log:\n%s\nwant\n%s", out, want)
	}
	out, _, err = runAuditCmd(t, "--file", path, "--json", "--decision", "deny")
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[0] + "\n" + lines[2] + "\n"; out != want {
		t.Fatalf("--json --decision deny =\n%s\nwant\n%s", out, want)
	}
}

func TestAuditSummary(t *testing.T) {
	path := writeLog(t, sampleLog())
	out, _, err := runAuditCmd(t, "--file", path, "--summary")
	if err != nil {
		t.Fatal(err)
	}
	header, rows := tableRows(t, out)
	for _, col := range []string{"HOST", "ALLOWED", "DENIED", "UP", "DOWN", "TOP DENY REASONS"} {
		if !strings.Contains(header, col) {
			t.Errorf("header %q lacks %s", header, col)
		}
	}
	want := [][]string{
		{"evil.example", "0", "2", "0", "B", "0", "B", "not_allowlisted", "(2)"},
		{"2001:db8::1", "0", "1", "0", "B", "0", "B", "deny_rule", "(1)"},
		{"api.github.com", "0", "1", "0", "B", "0", "B", "port_not_allowed", "(1)"},
		{"registry.npmjs.org", "2", "0", "120", "B", "5.0", "MiB", "-"},
		{"x.api.github.com", "1", "0", "0", "B", "0", "B", "-"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d summary rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i := range want {
		if strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("summary row %d = %q, want %q", i, rows[i], want[i])
		}
	}
}

func TestAuditSkipsBadLines(t *testing.T) {
	huge := `{"detail":"` + strings.Repeat("x", audit.MaxLineBytes) + `"}`
	path := writeLog(t, sampleLog()[:2], "not json", huge, `{"time":1}`)
	out, stderr, err := runAuditCmd(t, "--file", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, rows := tableRows(t, out); len(rows) != 2 {
		t.Errorf("%d rows, want the 2 good records:\n%s", len(rows), out)
	}
	for _, w := range []string{path + ":3: skipped", path + ":4: skipped: longer than", path + ":5: skipped", "skipped 3 malformed"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if len(stderr) > 4096 {
		t.Errorf("stderr echoes the huge line (%d bytes)", len(stderr))
	}
}

func TestAuditEscapesHostileFields(t *testing.T) {
	recs := []audit.Record{{Time: auditT0, Session: "s", Type: audit.TypeDecision, Kind: audit.KindHTTP,
		Host: "a\tb\x1b[31mred\u202e", Decision: audit.Deny, Reason: "bad_host", Method: "GET",
		Path: "/" + strings.Repeat("p", 500) + "\n\r"}}
	out, _, err := runAuditCmd(t, "--file", writeLog(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out, "\t\x1b\r\u202e") || strings.Count(out, "\n") != 2 {
		t.Fatalf("control characters reached the terminal: %q", out)
	}
	for _, w := range []string{`a\tb\x1b[31mred\u202e`, "…"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q: %q", w, out)
		}
	}
	if strings.Count(out, "p") > maxCell {
		t.Errorf("a 500-character path was not cut: %q", out)
	}
}

func TestAuditErrors(t *testing.T) {
	good := writeLog(t, sampleLog())
	missing := filepath.Join(t.TempDir(), "nope", "audit.jsonl")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the check, opening the FIFO waited for a writer: one comes
	// every half second, so the test fails rather than hangs.
	unblock := time.NewTicker(500 * time.Millisecond)
	defer unblock.Stop()
	go func() {
		for range unblock.C {
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				w.Close()
			}
		}
	}()
	tests := []struct {
		name string
		args []string
		env  string
		has  []string
	}{
		{"missing file", []string{"--file", missing}, "", []string{missing, "cordon run", "--file"}},
		{"missing default file", nil, missing, []string{missing, "$CORDON_AUDIT"}},
		{"bad decision", []string{"--file", good, "--decision", "denied"}, "", []string{"--decision", `"denied"`, "allow or deny"}},
		{"bad type", []string{"--file", good, "--type", "request"}, "", []string{"--type", `"request"`, "decision"}},
		{"bad since", []string{"--file", good, "--since", "yesterday"}, "", []string{"--since", `"yesterday"`, "10m", "RFC 3339"}},
		{"negative since", []string{"--file", good, "--since", "-5m"}, "", []string{"--since"}},
		{"bad host", []string{"--file", good, "--host", "a..b"}, "", []string{"--host", "empty label", "*.example.com"}},
		{"bad host zone", []string{"--file", good, "--host", "fe80::1%eth0"}, "", []string{"--host", "'%'"}},
		{"bad wildcard", []string{"--file", good, "--host", "*."}, "", []string{"--host"}},
		{"bare star", []string{"--file", good, "--host", "*"}, "", []string{"--host"}},
		{"json and summary", []string{"--file", good, "--json", "--summary"}, "", []string{"--summary and --json cannot go together", "give one"}},
		{"follow and summary", []string{"--file", good, "--follow", "--summary"}, "", []string{"--summary and --follow cannot go together", "give one"}},
		{"stray argument", []string{"--file", good, "deny"}, "", []string{`takes no arguments, got "deny"`}},
		{"a directory", []string{"--file", dir}, "", []string{dir + " is a directory, not a file; name the log file itself with --file or $CORDON_AUDIT"}},
		{"a named pipe", []string{"--file", fifo}, "", []string{fifo + " is a named pipe (FIFO), not a file"}},
		{"a device", nil, os.DevNull, []string{os.DevNull + " is a device, not a file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CORDON_AUDIT", tt.env)
			out, _, err := runAuditCmd(t, tt.args...)
			if err == nil {
				t.Fatalf("audit %q succeeded:\n%s", tt.args, out)
			}
			for _, s := range tt.has {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {1 << 62, "4.0 EiB"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestAuditTableBudgetLine: a budget line shows what it means.
func TestAuditTableBudgetLine(t *testing.T) {
	path := writeLog(t, []audit.Record{{Time: auditT0, Session: "aaaa1111bbbb2222", Type: audit.TypeBudget,
		Detail: "this session wrote its budget of 65536 bytes of audit lines (limits.audit_budget): every later connection is denied, unlogged"}})
	out, _, err := runAuditCmd(t, "--file", path, "--type", "budget")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "budget") || !strings.Contains(out, "this session wrote its budget of 65536 bytes") {
		t.Errorf("the budget line does not say what it means:\n%s", out)
	}
}

func TestAuditJSONEscapesUnprintable(t *testing.T) {
	// As an older cordon wrote a request path a sandboxed command chose:
	// C1 controls (CSI erasing the line, OSC setting the title), a bidi
	// override and a zero-width space, raw.
	line := "{\"time\":\"2025-03-04T10:00:00Z\",\"session\":\"s1\",\"type\":\"decision\",\"host\":\"a.example\",\"decision\":\"allow\",\"method\":\"GET\",\"path\":\"/\u009b1A\u009b2K\u009d0;t\u009c\u202eexe.\u200b\"}"
	out, stderr, err := runAuditCmd(t, "--file", writeLog(t, nil, line), "--json")
	if err != nil || stderr != "" {
		t.Fatalf("audit --json: %v, stderr %q", err, stderr)
	}
	if strings.ContainsAny(out, "\u009b\u009d\u009c\u202e\u200b") {
		t.Fatalf("--json printed what a terminal acts on raw: %q", out)
	}
	want := `{"time":"2025-03-04T10:00:00Z","session":"s1","type":"decision","host":"a.example","decision":"allow","method":"GET","path":"/\u009b1A\u009b2K\u009d0;t\u009c\u202eexe.\u200b"}` + "\n"
	if out != want {
		t.Fatalf("--json =\n%s\nwant\n%s", out, want)
	}
}

// TestAuditTableBounded: a table is written a block of rows at a time, not
// held whole until the log's end, which for a log of millions of
// decisions took more memory than the log's size.
func TestAuditTableBounded(t *testing.T) {
	var out bytes.Buffer
	s := newTableSink(&out, false)
	rec := sampleLog()[4]
	for range tableBlock {
		if err := s.add(rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != tableBlock+1 {
		t.Fatalf("after %d rows the table wrote %d lines, want them all and the header", tableBlock, n)
	}
	if err := s.add(rec, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	header, rows := tableRows(t, out.String())
	if len(rows) != tableBlock+1 || !strings.HasPrefix(header, "TIME") {
		t.Fatalf("%d rows, header %q", len(rows), header)
	}
}

func TestAuditSummaryBounded(t *testing.T) {
	recs := make([]audit.Record, audit.MaxSummaryHosts+2)
	for i := range recs {
		recs[i] = audit.Record{Time: auditT0, Session: "s", Type: audit.TypeDecision, Kind: audit.KindDNS,
			Host: fmt.Sprintf("n%d.example", i), Decision: audit.Deny, Reason: "not_allowlisted"}
	}
	out, stderr, err := runAuditCmd(t, "--file", writeLog(t, recs), "--summary")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "the summary totals 10000 hosts apart") || !strings.Contains(stderr, "--session, --since or --host") {
		t.Errorf("stderr does not say the summary was bounded: %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != audit.MaxSummaryHosts+2 || strings.Join(strings.Fields(lines[len(lines)-1])[:4], " ") != audit.OtherHosts+" 0 2" {
		t.Fatalf("%d lines, the last %q; want the header, %d hosts and %s with 2 denied", len(lines), lines[len(lines)-1], audit.MaxSummaryHosts, audit.OtherHosts)
	}
}

// TestAuditTableNamesWhatWasSetAside: a removed or set_aside row names
// the path, before the reason (which the table cuts): the row said why,
// never which.
func TestAuditTableNamesWhatWasSetAside(t *testing.T) {
	long := "a repository the sandboxed command made or changed (its .git, or the HEAD of a directory git takes for a git directory): look at it"
	path := writeLog(t, []audit.Record{
		{Time: auditT0, Session: "s", Type: audit.TypeSetAside, Path: "/ws/sub/.git.cordon-set-aside-1", Detail: long},
		{Time: auditT0, Session: "s", Type: audit.TypeRemoved, Path: "/ws/.git/commondir", Detail: long},
	})
	out, _, err := runAuditCmd(t, "--file", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"/ws/sub/.git.cordon-set-aside-1 a repository", "/ws/.git/commondir a repository"} {
		if !strings.Contains(out, w) {
			t.Errorf("the table does not name %q:\n%s", w, out)
		}
	}
}

// TestAuditWarnsOfALogOthersMayHaveWritten: cordon audit reads a log
// other users may have written, or put in place, saying so: another user
// could move a log aside in a directory they may write in and plant one
// of theirs, which was shown without a word (red team, round 6).
func TestAuditWarnsOfALogOthersMayHaveWritten(t *testing.T) {
	recs := []audit.Record{{Time: auditT0, Session: "s", Type: audit.TypeDecision, Kind: audit.KindHTTP, Host: "example.com", Decision: audit.Allow, Reason: "allowlisted"}}
	for _, c := range []struct {
		name      string
		file, dir os.FileMode
		warning   string
	}{
		{"the user's own", 0o600, 0o700, ""},
		{"writable by others", 0o666, 0o700, "has mode 0666, so other users may rewrite it"},
		{"in a directory others may write in", 0o600, 0o777, "which another user owns or may write in"},
		{"in a sticky directory", 0o600, 0o777 | os.ModeSticky, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := writeLog(t, recs)
			if err := os.Chmod(log, c.file); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Dir(log), c.dir); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(filepath.Dir(log), 0o700)
			out, stderr, err := runAuditCmd(t, "--file", log)
			if err != nil || !strings.Contains(out, "example.com") {
				t.Fatalf("the log was not read: %v\n%s%s", err, out, stderr)
			}
			switch {
			case c.warning == "" && stderr != "":
				t.Errorf("a warning for a log of the user's own: %q", stderr)
			case c.warning != "" && !strings.Contains(stderr, c.warning):
				t.Errorf("stderr %q, want a warning saying %q", stderr, c.warning)
			}
		})
	}
}

// TestAuditSkippedLinesBounded: the lines of a log that are not cordon's
// are named up to maxSkipWarnings, then counted: a log of 100,000 such
// lines wrote as many warnings (red team, round 6).
func TestAuditSkippedLinesBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(strings.Repeat("not json\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runAuditCmd(t, "--file", path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stderr, "\n"); n != maxSkipWarnings+2 {
		t.Errorf("%d lines of warnings for 1,000 skipped lines, want %d named, one saying the rest are counted, and the count:\n%s", n, maxSkipWarnings, stderr)
	}
	if !strings.Contains(stderr, "skipped 1000 malformed") {
		t.Errorf("the count is missing: %s", stderr)
	}
}
