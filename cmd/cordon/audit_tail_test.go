package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// waitFor waits, at most 5 s, for buf to hold want.
func waitFor(t *testing.T, buf *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 5s; output so far:\n%s", want, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// appendDeny appends a deny decision for host to the log at path with
// cordon's own writer, as a running session would.
func appendDeny(t *testing.T, path, host string) {
	t.Helper()
	w, err := audit.Open(path, "ffff0000eeee1111")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(
		audit.Record{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: "allowed-" + host, Port: 443, Decision: audit.Allow, Reason: "allowlisted"},
		audit.Record{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: host, Port: 443, Decision: audit.Deny, Reason: "not_allowlisted"},
	); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditFollow: --follow prints the matching records already logged,
// then each matching one as it is written, in a table whose columns line
// up though its rows come one at a time; a line written in two parts is
// one record; a log truncated, or moved aside and replaced, is followed on,
// with a warning; an interrupt ends it cleanly.
func TestAuditFollow(t *testing.T) {
	path := writeLog(t, sampleLog())
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runAudit(ctx, &out, &errOut, auditFlags{file: path, decision: audit.Deny, follow: true}, time.Now())
	}()
	waitFor(t, &out, "[2001:db8::1]:443")

	appendDeny(t, path, "late.example")
	waitFor(t, &out, "late.example:443")

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := `{"time":"2025-03-04T10:20:00Z","session":"ffff0000eeee1111","type":"decision","kind":"connect",`
	if _, err := f.WriteString(half); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * tailPoll)
	if _, err := f.WriteString(`"host":"split.example","port":443,"decision":"deny","reason":"not_allowlisted"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, &out, "split.example:443")

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendDeny(t, path, "after-truncate.example")
	waitFor(t, &out, "after-truncate.example:443")
	waitFor(t, &errOut, "was truncated")

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendDeny(t, path, "rotated.example")
	waitFor(t, &out, "rotated.example:443")
	waitFor(t, &errOut, "was replaced")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end within 5s of the interrupt")
	}

	got := out.String()
	if strings.Contains(got, "allowed-") {
		t.Errorf("an allow decision passed --decision deny:\n%s", got)
	}
	if strings.Contains(errOut.String(), "skipped") {
		t.Errorf("a line written in two parts was skipped: %s", errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if n := len(lines) - 1; n != 4+4 {
		t.Errorf("%d rows, want the log's 4 denials and 4 written after:\n%s", n, got)
	}
	col := strings.Index(lines[0], "DECISION")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "deny ") {
			t.Errorf("row not aligned to the header's DECISION at column %d: %q", col, l)
		}
	}
}

// TestAuditFollowTruncatedAndWrittenAgain: a log truncated and written
// past where the follower had read, between two of its looks, is read
// again from its start: it was read on from the old offset, mid-line, the
// first new record lost as a line that is no JSON object (red team,
// round 6).
func TestAuditFollowTruncatedAndWrittenAgain(t *testing.T) {
	path := writeLog(t, nil)
	appendDeny(t, path, "first.example")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runAudit(ctx, &out, &errOut, auditFlags{file: path, decision: audit.Deny, follow: true}, time.Now())
	}()
	waitFor(t, &out, "first.example:443")
	time.Sleep(2 * tailPoll) // the follower is at the log's end
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // written past the old end before the next look
		appendDeny(t, path, fmt.Sprintf("again-%d.example", i))
	}
	for i := range 3 {
		waitFor(t, &out, fmt.Sprintf("again-%d.example:443", i))
	}
	waitFor(t, &errOut, "was truncated")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut.String(), "skipped") {
		t.Errorf("a record was skipped: %s", errOut.String())
	}
}

// TestAuditFollowJSON: with --json, each new matching line is passed
// through as written.
func TestAuditFollowJSON(t *testing.T) {
	path := writeLog(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runAudit(ctx, &out, &errOut, auditFlags{file: path, host: "json.example", json: true, follow: true}, time.Now())
	}()
	appendDeny(t, path, "json.example")
	waitFor(t, &out, `"host":"json.example"`)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(string(data), "\n")[1] + "\n"
	if out.String() != want {
		t.Errorf("--json --follow printed %q, want the logged line %q", out.String(), want)
	}
}

// TestAuditFollowAwaitsTheLog: --follow before any session has made the
// log says it waits, then follows the log once one makes it.
func TestAuditFollowAwaitsTheLog(t *testing.T) {
	path := t.TempDir() + "/audit.jsonl"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runAudit(ctx, &out, &errOut, auditFlags{file: path, follow: true}, time.Now())
	}()
	waitFor(t, &errOut, "no audit log at "+path+" yet: waiting")
	appendDeny(t, path, "first.example")
	waitFor(t, &out, "first.example:443")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
