package audit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriterLater: a record given to Later is not written at once; it goes
// out just before the next Write's record, or on its own after laterDelay,
// or at Close, and the log keeps the order the records were given in.
func TestWriterLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	paths := func() []string {
		t.Helper()
		_, recs := readLog(t, path)
		var out []string
		for _, r := range recs {
			out = append(out, r.Path)
		}
		return out
	}
	want := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("log holds %q, want %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("log holds %q, want %q", got, want)
			}
		}
	}

	w.Later(Record{Type: TypeClose, Path: "/1"})
	want(paths())
	if err := w.Write(Record{Type: TypeDecision, Path: "/2"}); err != nil {
		t.Fatal(err)
	}
	want(paths(), "/1", "/2")

	w.Later(Record{Type: TypeClose, Path: "/3"})
	w.Later(Record{Type: TypeClose, Path: "/4"})
	deadline := time.Now().Add(5 * time.Second)
	for len(paths()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("Later's records were not written on their own: %q", paths())
		}
		time.Sleep(10 * time.Millisecond)
	}
	want(paths(), "/1", "/2", "/3", "/4")

	// The timer, once fired, is set again.
	w.Later(Record{Type: TypeClose, Path: "/5"})
	for len(paths()) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("a Later record after the timer fired was not written on its own: %q", paths())
		}
		time.Sleep(10 * time.Millisecond)
	}

	w.Later(Record{Type: TypeClose, Path: "/6"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want(paths(), "/1", "/2", "/3", "/4", "/5", "/6")
}

// TestWriterWritesTogether: the records of one Write land in the order
// given, after what Later queued, all or none: a budget the first record
// fits and the two do not writes neither (a decision never lands without
// the inject lines it led to).
func TestWriterWritesTogether(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	decision := Record{Type: TypeDecision, Decision: Allow, Host: "api.example", Path: "/1"}
	inject := Record{Type: TypeInject, Host: "api.example", Path: "/1", Credential: "api"}
	w.Later(Record{Type: TypeClose, Path: "/0"})
	if err := w.Write(decision, inject); err != nil {
		t.Fatal(err)
	}
	data, recs := readLog(t, path)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Type)+" "+r.Path)
		if r.Session != "s" || r.Time.IsZero() {
			t.Errorf("record not stamped: %+v", r)
		}
	}
	if want := "close /0,decision /1,inject /1"; strings.Join(got, ",") != want {
		t.Errorf("log holds %q, want %q", got, want)
	}

	w.SetBudget(int64(len(data)) + int64(len(data))/3)
	decision.Path, inject.Path = "/2", "/2"
	if err := w.Write(decision, inject); err != ErrBudgetSpent {
		t.Fatalf("a Write past the budget: %v, want ErrBudgetSpent", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, recs = readLog(t, path)
	for _, r := range recs {
		if r.Path == "/2" {
			t.Errorf("a record of the Write past the budget was written: %+v", r)
		}
	}
}

// TestWriterSyncs: Sync fsyncs its record and Close fsyncs whatever was
// written since the last fsync, and nothing twice.
func TestWriterSyncs(t *testing.T) {
	for _, c := range []struct {
		name  string
		calls string // w: Write, s: Sync, l: Later
		want  int    // fsyncs, Close's included
	}{
		{"nothing", "", 0},
		{"write", "w", 1},
		{"sync", "s", 1},
		{"sync then write", "sw", 2},
		{"write then sync", "ws", 1},
		{"later", "l", 1},
		{"sync then later", "sl", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), "s")
			if err != nil {
				t.Fatal(err)
			}
			fsyncs := 0
			w.fsync = func(f *os.File) error { fsyncs++; return f.Sync() }
			for _, op := range c.calls {
				r := Record{Type: TypeDecision, Path: "/" + string(op)}
				switch op {
				case 'w':
					err = w.Write(r)
				case 's':
					err = w.Sync(r)
				case 'l':
					w.Later(r)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if fsyncs != c.want {
				t.Errorf("%d fsyncs, want %d", fsyncs, c.want)
			}
		})
	}
}

// TestNewSessionID: ids are 16 hex digits and do not repeat.
func TestNewSessionID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("session id %q is not 16 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("session id %q repeated", id)
		}
		seen[id] = true
	}
}

// TestWriterBudget: past its budget a session writes one budget record,
// every later Write fails (so the caller denies), Later records are
// dropped, and Sync records (the exit line) still go out.
func TestWriterBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 2000
	w.SetBudget(budget)
	if err := w.Sync(Record{Type: TypeLaunch, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 100; n++ {
		w.Later(Record{Type: TypeClose, Host: "a.example", Port: 443})
		if err := w.Write(Record{Type: TypeDecision, Decision: Deny, Host: "denied.example", Port: 443, Reason: "not_allowlisted"}); err != nil {
			if err != ErrBudgetSpent {
				t.Fatalf("write %d: %v, want ErrBudgetSpent", n, err)
			}
			break
		}
	}
	if n == 0 || n == 100 {
		t.Fatalf("the budget was spent after %d writes", n)
	}
	if err := w.Write(Record{Type: TypeDecision, Decision: Allow, Host: "x.example"}); err != ErrBudgetSpent {
		t.Errorf("a write after the budget: %v, want ErrBudgetSpent", err)
	}
	if w.Report(nil) || !w.Report(ErrBudgetSpent) || w.Report(ErrBudgetSpent) {
		t.Error("Report: want true for the first failure only")
	}
	w.Later(Record{Type: TypeClose, Host: "late.example"})
	// A request let through before, and cut since for a secret it
	// carried: its deny is written all the same.
	w.Later(Record{Type: TypeClose, Host: "cut.example", Decision: Deny, Reason: "secret_leak"})
	if err := w.Sync(Record{Type: TypeExit, Command: []string{"true"}}); err != nil {
		t.Errorf("the exit line after the budget: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, recs := readLog(t, path)
	var types []string
	for _, r := range recs {
		types = append(types, string(r.Type))
		if r.Host == "late.example" || r.Host == "x.example" {
			t.Errorf("a record after the budget was written: %+v", r)
		}
	}
	last := strings.Join(types[len(types)-3:], ",")
	if last != "budget,close,exit" || recs[len(recs)-2].Host != "cut.example" {
		t.Errorf("the log ends %s, want budget,close (the cut request's deny),exit", last)
	}
	exit := len(strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")[len(recs)-1])
	if size := len(data) - exit; size > budget+600 {
		t.Errorf("the session wrote %d bytes before its exit line, over its budget of %d and one budget line", size, budget)
	}
}

// The observer sees what Write and Sync put in the log, stamped and
// redacted as written, and nothing the budget kept out of it.
func TestWriterObserver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var seen []Record
	w.SetObserver(func(r Record) { seen = append(seen, r) })
	w.SetRedact(func(s string) string { return strings.ReplaceAll(s, "sk-secret", "[masked:k]") })
	w.SetBudget(600)
	if err := w.Write(Record{Type: TypeDecision, Decision: Deny, Host: "a.example", Path: "/sk-secret"}); err != nil {
		t.Fatal(err)
	}
	for err == nil {
		err = w.Write(Record{Type: TypeDecision, Decision: Deny, Host: "flood.example"})
	}
	if err := w.Sync(Record{Type: TypeExit}); err != nil {
		t.Fatal(err)
	}
	_, recs := readLog(t, path)
	if len(seen) != len(recs)-1 { // the budget line is the Writer's own
		t.Fatalf("observed %d records, the log holds %d and the budget line", len(seen), len(recs)-1)
	}
	if r := seen[0]; r.Session != "s" || r.Time.IsZero() || r.Path != "/[masked:k]" {
		t.Errorf("observed %+v, want it stamped and redacted as logged", r)
	}
	if seen[len(seen)-1].Type != TypeExit {
		t.Errorf("last observed %+v, want the exit line", seen[len(seen)-1])
	}
}

// readLog reads the log at path, every line of which must be a record.
func readLog(t *testing.T, path string) ([]byte, []Record) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, skipped, _ := readAll(t, string(data))
	if len(skipped) > 0 {
		t.Fatalf("unreadable lines: %v", skipped)
	}
	return data, recs
}

// TestOpenRefusesWhatIsNotAFile: the log must be a regular file. A FIFO
// is refused at once, reader or not (opening one for writing would wait
// for a reader, and every run with it), as are a device and a directory,
// which cannot be appended to and fsynced either; CheckWritable, which
// doctor calls, answers alike.
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "named pipe"},
		{os.DevNull, "device"},
		{dir, "directory"},
	} {
		done := make(chan error, 2)
		go func() {
			_, err := Open(c.path, "s")
			done <- err
			done <- CheckWritable(c.path)
		}()
		for _, what := range []string{"Open", "CheckWritable"} {
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s(%s) = %v; want a refusal naming %q", what, c.path, err, c.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s(%s) still waits after 5s", what, c.path)
			}
		}
	}
	if err := CheckWritable(filepath.Join(dir, "new", "audit.jsonl")); err != nil {
		t.Errorf("CheckWritable of a new file: %v", err)
	}
}

// TestWriterRedacts: with a redactor set, no free-text field of any record,
// written at once or later, keeps what it takes out.
func TestWriterRedacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	w.SetRedact(func(s string) string { return strings.ReplaceAll(s, "SECRET", "[masked:x]") })
	all := Record{Type: TypeDecision, Host: "h-SECRET", Path: "/v1/SECRET", Detail: "bad SECRET", Rule: "SECRET",
		Method: "SECRET", Client: "SECRET", Workdir: "/w/SECRET", Command: []string{"curl", "SECRET"}}
	cmd := all.Command
	w.Write(all)
	w.Later(all)
	w.Sync(all)
	w.Close()
	if cmd[1] != "SECRET" {
		t.Errorf("the caller's command slice was changed: %q", cmd)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SECRET") || strings.Count(string(b), "[masked:x]") != 3*8 {
		t.Fatalf("log:\n%s", b)
	}
}

// TestOpenRefusesPlantedLinks: the log is appended to only under its own
// name, as a file of the user's own: a symbolic link (planted to have
// cordon append to ~/.bashrc), a hard link (a second name a box could
// read and rewrite) and another user's file are refused, by Open and
// CheckWritable alike, and nothing is written through them.
func TestOpenRefusesPlantedLinks(t *testing.T) {
	const rc = "# the user's shell start-up file\n"
	tests := []struct {
		name  string
		plant func(t *testing.T, log, other string)
		want  string // "" means opened
	}{
		{"a new file", func(t *testing.T, log, other string) {}, ""},
		{"a file of the user's", func(t *testing.T, log, other string) { write(t, log, "") }, ""},
		{"a link to a file", func(t *testing.T, log, other string) { link(t, other, log) }, "is a symbolic link (to "},
		{"a relative link", func(t *testing.T, log, other string) { link(t, "../"+filepath.Base(other), log) }, "is a symbolic link"},
		{"a link to nothing", func(t *testing.T, log, other string) {
			link(t, filepath.Join(filepath.Dir(other), "absent"), log)
		}, "is a symbolic link"},
		{"a hard link", func(t *testing.T, log, other string) {
			if err := os.Link(other, log); err != nil {
				t.Fatal(err)
			}
		}, "has 2 names (hard links)"},
		{"another user's file", func(t *testing.T, log, other string) {
			if os.Geteuid() != 0 {
				t.Fatal("this case gives a file to another user, which needs root: run the tests as root, as make test does")
			}
			write(t, log, "")
			if err := os.Chown(log, 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 12345"},
		// Another user could erase the session's lines, or add lines of
		// their own (before, such a log was written to).
		{"a file others may write", func(t *testing.T, log, other string) { writeMode(t, log, 0o666) }, "has mode 0666, so other users may rewrite it"},
		{"a file the group may write", func(t *testing.T, log, other string) { writeMode(t, log, 0o620) }, "has mode 0620"},
		{"a file others may read", func(t *testing.T, log, other string) { writeMode(t, log, 0o644) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			other := filepath.Join(base, "bashrc")
			write(t, other, rc)
			log := filepath.Join(base, "state", "audit.jsonl")
			if err := os.Mkdir(filepath.Dir(log), 0o700); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, log, other)
			for _, what := range []string{"CheckWritable", "Open"} {
				var err error
				if what == "Open" {
					var w *Writer
					if w, err = Open(log, "s"); err == nil {
						err = w.Write(Record{Type: TypeDecision, Path: "/x$(touch pwned)"})
						w.Close()
					}
				} else {
					err = CheckWritable(log)
				}
				switch {
				case tt.want == "" && err != nil:
					t.Fatalf("%s: %v", what, err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
					t.Fatalf("%s: %v, want a refusal saying %q", what, err, tt.want)
				}
			}
			if got, _ := os.ReadFile(other); string(got) != rc {
				t.Errorf("the other file now holds %q", got)
			}
			if _, err := os.Stat(filepath.Join(base, "absent")); err == nil {
				t.Errorf("a file was made where a link pointed")
			}
		})
	}
}

// writeMode makes an empty file at path with mode perm, whatever the umask.
func writeMode(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	write(t, path, "")
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// TestOpenEndsACutLine: a log whose last line was cut short (a write that
// ran out of space, a crash) gets a newline before the new session's
// first line, which would otherwise be glued to it and skipped with it.
func TestOpenEndsACutLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cut := `{"time":"2026-11-30T14:37:42Z","session":"old","type":"decision","kind":"dns","host":"ev`
	if err := os.WriteFile(path, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w, err := Open(path, "s")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(Record{Type: TypeLaunch, Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != cut {
		t.Fatalf("log holds %d lines, want the cut one and two launch lines, with no blank line between those:\n%s", len(lines), data)
	}
	recs, _, skipped, _ := readAll(t, string(data))
	if len(recs) != 2 || recs[0].Type != TypeLaunch || recs[1].Type != TypeLaunch || len(skipped) != 1 {
		t.Fatalf("read %d records (%+v), skipped %v; want both launch lines and the cut line skipped", len(recs), recs, skipped)
	}
}

// TestWriterStartsOnALineOfItsOwn: a log that ends part-way through a line
// (a write the full disk had room for only part of) gets a newline before
// the new session's first record, which would otherwise be glued to it;
// a log that ends with a whole line gets no blank line.
func TestWriterStartsOnALineOfItsOwn(t *testing.T) {
	whole := `{"time":"2025-03-04T10:00:00Z","session":"a","type":"launch"}` + "\n"
	for _, before := range []string{"", whole, whole + `{"time":"2025-03-04T10:00:01Z","session":"a","ty`} {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := Open(path, "b")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Record{Type: TypeDecision, Path: "/1"}); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Record{Type: TypeDecision, Path: "/2"}); err != nil {
			t.Fatal(err)
		}
		w.Close()
		data, _ := os.ReadFile(path)
		rest := string(data[len(before):])
		if before != "" && !strings.HasSuffix(before, "\n") {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, "\n"); !ok {
				t.Errorf("after a line cut short, the next session's first record is glued to it:\n%s", data)
			}
		}
		lines := strings.Split(rest, "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], `"path":"/1"`) || !strings.Contains(lines[1], `"path":"/2"`) || lines[2] != "" {
			t.Errorf("after %q the log goes on %q, want a line for each record", before, rest)
		}
	}
}

// TestDefaultPath: $CORDON_AUDIT as given when absolute, refused when
// relative; a relative $XDG_STATE_HOME is ignored, as the XDG base
// directory specification says.
func TestDefaultPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		name, audit, state string
		want, wantErr      string
	}{
		{"default", "", "", filepath.Join(home, ".local/state/cordon/audit.jsonl"), ""},
		{"XDG_STATE_HOME", "", "/srv/state", "/srv/state/cordon/audit.jsonl", ""},
		{"relative XDG_STATE_HOME", "", "state", filepath.Join(home, ".local/state/cordon/audit.jsonl"), ""},
		{"CORDON_AUDIT", "/srv/audit.jsonl", "/srv/state", "/srv/audit.jsonl", ""},
		{"relative CORDON_AUDIT", "audit.jsonl", "", "", `$CORDON_AUDIT="audit.jsonl" is not an absolute path: it would name another log in each directory cordon starts in, inside the repository there; set it to an absolute path, or name the log for one command (--audit; cordon audit's --file)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CORDON_AUDIT", tc.audit)
			t.Setenv("XDG_STATE_HOME", tc.state)
			got, err := DefaultPath()
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("DefaultPath() = %q, %v; want an error saying %q", got, err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("DefaultPath() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOpenRefusesADirectoryOthersMayWrite: a log in a directory other
// users may write in (without the sticky bit) is refused, naming the
// directory: they could move the log aside and put lines of their own in
// its place, which cordon audit read (red team, round 6). One with the
// sticky bit, as /tmp has, keeps them from the log, and is taken.
func TestOpenRefusesADirectoryOthersMayWrite(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		want string // in the refusal; "" to open
	}{
		{0o777, "which another user owns or may write in (mode 0777)"},
		{0o770, "(mode 0770)"},
		{0o777 | os.ModeSticky, ""},
		{0o755, ""},
	} {
		dir := filepath.Join(t.TempDir(), "logs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		w, err := Open(filepath.Join(dir, "audit.jsonl"), "s")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("mode %v: %v", c.mode, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir)):
			t.Errorf("mode %v: err = %v, want a refusal naming %s and saying %q", c.mode, err, dir, c.want)
		}
		if w != nil {
			w.Close()
		}
	}
	// A directory of the user's own below one others may write in is no
	// better: they could move it aside, log and all (red team, round 6).
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(shared, "logs", "audit.jsonl"), "s")
	if err == nil || !strings.Contains(err.Error(), "lies under "+shared) {
		t.Errorf("a log below a directory others may write in: err = %v, want a refusal naming %s", err, shared)
	}
}

// TestWriterWriteApart: lines written with WriteApart are not charged to
// the budget (their writer bounds them), and, once the budget is spent
// by charged lines, are dropped like them.
func TestWriterWriteApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetBudget(1000)
	for i := range 50 {
		if err := w.WriteApart(Record{Type: TypeDecision, Decision: Deny, Host: "stranger.example", Reason: "auth_required"}); err != nil {
			t.Fatalf("apart line %d: %v", i, err)
		}
	}
	if err := w.Write(Record{Type: TypeDecision, Decision: Allow, Host: "own.example"}); err != nil {
		t.Fatalf("a charged line after 50 apart, within its budget: %v", err)
	}
	for i := 0; w.Write(Record{Type: TypeDecision, Decision: Allow, Host: "own.example"}) == nil; i++ {
		if i == 100 {
			t.Fatal("100 charged lines did not spend a budget of 1000 bytes")
		}
	}
	if err := w.WriteApart(Record{Type: TypeDecision, Host: "stranger.example"}); err != ErrBudgetSpent {
		t.Errorf("an apart line after the budget: %v, want ErrBudgetSpent", err)
	}
}

// TestWriterReserve: room Reserve keeps is not the other writes' to
// take; a write in it goes out after the budget is spent by them; room
// given back is theirs again; and Reserve fails, spending the budget,
// where there is no room.
func TestWriterReserve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := Open(path, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetBudget(2000)
	room, err := w.Reserve(1000)
	if err != nil {
		t.Fatal(err)
	}
	spare, err := w.Reserve(500)
	if err != nil {
		t.Fatal(err)
	}
	spare.Release()
	spare.Release() // a second time gives nothing more back
	var err2 error
	for n := 0; n < 100 && err2 == nil; n++ {
		err2 = w.Write(Record{Type: TypeDecision, Decision: Deny, Host: "other.example"})
	}
	if err2 != ErrBudgetSpent {
		t.Fatalf("100 lines did not spend the budget: %v", err2)
	}
	if err := room.Write(Record{Type: TypeDecision, Decision: Allow, Host: "kept.example"}); err != nil {
		t.Errorf("a write in its room after the budget was spent: %v", err)
	}
	if err := room.Write(Record{Type: TypeDecision, Host: "again.example"}); err != ErrBudgetSpent {
		t.Errorf("a second write through the room: %v, want ErrBudgetSpent", err)
	}
	if _, err := w.Reserve(10); err != ErrBudgetSpent {
		t.Errorf("Reserve once spent: %v", err)
	}
	data, recs := readLog(t, path)
	if !slices.ContainsFunc(recs, func(r Record) bool { return r.Host == "kept.example" }) {
		t.Error("the line written in its room is not in the log")
	}
	others := 0
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "other.example") {
			others += len(line)
		}
	}
	if others > 1000 {
		t.Errorf("the other writes took %d bytes of a budget of 2000 with 1000 kept", others)
	}
	// No room at all: Reserve spends the budget.
	w2, err := Open(filepath.Join(t.TempDir(), "audit.jsonl"), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	w2.SetBudget(100)
	_, err = w2.Reserve(1000)
	if after := w2.Write(Record{Type: TypeDecision, Host: "after.example"}); err != ErrBudgetSpent || after != ErrBudgetSpent {
		t.Errorf("Reserve past the budget: %v, then a write: %v; want ErrBudgetSpent", err, after)
	}
}
