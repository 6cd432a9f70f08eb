package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/regular"
	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/policy"
)

func init() { register("audit", newAuditCmd) }

// auditFlags are the flags of `cordon audit`, as typed.
type auditFlags struct {
	file, session, decision, host, since, typ string
	json, summary, follow                     bool
}

// topDenyReasons is how many deny reasons --summary shows per host.
const topDenyReasons = 3

func newAuditCmd() *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the allow/deny audit log: who asked for what, what was decided and why",
		Long: `audit reads cordon's JSONL audit log (default $CORDON_AUDIT, else
$XDG_STATE_HOME/cordon/audit.jsonl, else ~/.local/state/cordon/audit.jsonl) and
prints the records that match every filter given: as a table, as the raw
JSON lines (--json), or totalled per host (--summary). With --follow it
then waits for more, printing each matching record as it is written, until
interrupted.`,
		Example: `  cordon audit --decision deny --since 1h
  cordon audit --host '*.github.com' --summary
  cordon audit --session 3f2a --json | jq .
  cordon audit --follow --since 1m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAudit(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, time.Now())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "", "audit log to read (default $CORDON_AUDIT or ~/.local/state/cordon/audit.jsonl)")
	fl.StringVar(&f.session, "session", "", "only this session: its id or a prefix of it")
	fl.StringVar(&f.decision, "decision", "", "only allow or deny decisions")
	fl.StringVar(&f.host, "host", "", "only this host, or its subdomains with a leading '*.' (*.example.com)")
	fl.StringVar(&f.since, "since", "", "only records from the last DURATION (10m, 2h, 7d) or after an RFC 3339 time")
	fl.StringVar(&f.typ, "type", "", "only one record type: "+typeNames())
	fl.BoolVar(&f.json, "json", false, "print matching records as JSON lines, exactly as logged")
	fl.BoolVar(&f.summary, "summary", false, "total allows, denies, bytes and top deny reasons per host")
	fl.BoolVarP(&f.follow, "follow", "f", false, "then wait for more records, printing each as it is written, until interrupted")
	return cmd
}

func typeNames() string {
	names := make([]string, len(audit.Types))
	for i, t := range audit.Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// filter turns the flags into an audit.Filter, refusing bad values
// and outputs that cannot go together.
func (f auditFlags) filter(now time.Time) (audit.Filter, error) {
	flt := audit.Filter{Session: f.session}
	switch {
	case f.summary && f.json:
		return flt, errors.New("--summary and --json cannot go together: --summary totals the matching records per host, --json prints each of them; give one")
	case f.summary && f.follow:
		return flt, errors.New("--summary and --follow cannot go together: a summary is totalled once the log has been read to its end, which --follow never reaches; give one")
	}
	var err error
	if f.decision != "" {
		if flt.Decision, err = audit.ParseDecision(f.decision); err != nil {
			return flt, fmt.Errorf("--decision: %w", err)
		}
	}
	if f.typ != "" {
		if flt.Type, err = audit.ParseType(f.typ); err != nil {
			return flt, fmt.Errorf("--type: %w", err)
		}
	}
	if f.since != "" {
		if flt.Since, err = audit.ParseSince(f.since, now); err != nil {
			return flt, fmt.Errorf("--since: %w", err)
		}
	}
	if f.host != "" {
		name, wildcard := strings.CutPrefix(f.host, "*.")
		h, err := policy.NormalizeHost(name)
		if err != nil {
			return flt, fmt.Errorf("--host: %w; give a host such as example.com, *.example.com or 192.0.2.1", err)
		}
		if wildcard {
			h = "*." + h
		}
		flt.Host = h
	}
	return flt, nil
}

// openLog opens the log at path for reading when it is a regular file:
// a named pipe held cordon in its open(2), deaf to Ctrl-C, which --follow
// and the interrupt handler take, and a device (/dev/zero) was read
// without end, at a core's full speed.
func openLog(path string) (*os.File, error) {
	f, _, err := regular.Open(path, os.O_RDONLY, 0)
	var nr *regular.NotRegular
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%s is %s, not a file; name the log file itself with --file or $CORDON_AUDIT", path, nr.Kind())
	}
	return f, err
}

// runAudit prints the records of the log f names that match f's filters;
// with f.follow, it then prints each new one as it is written, until ctx
// ends.
func runAudit(ctx context.Context, stdout, stderr io.Writer, f auditFlags, now time.Time) error {
	flt, err := f.filter(now)
	if err != nil {
		return err
	}
	path := f.file
	if path == "" {
		if path, err = audit.DefaultPath(); err != nil {
			return err
		}
	}
	warn := func(msg string) { fmt.Fprintf(stderr, "cordon: warning: %s\n", msg) }
	file, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) && f.follow {
		file, err = awaitLog(ctx, path, warn)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no audit log at %s: one is written by `cordon run` and `cordon proxy`; run one of them first, or name an existing log with --file or $CORDON_AUDIT", path)
	}
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	// A log others may have written, or put in place, is read all the
	// same (one a user was given, or found), with that said.
	if fi, err := file.Stat(); err == nil {
		if err := audit.Unshared(path, fi); err != nil {
			warn(err.Error())
		}
	}
	var src io.Reader = file
	if f.follow {
		t := &tail{ctx: ctx, path: path, f: file, warn: warn}
		defer t.close()
		src = t
	} else {
		defer file.Close()
	}

	// A log may hold millions of matching lines: unless each must show
	// as it comes (--follow), they go out in large writes, not a write
	// (or, through the table's alignment, several) per line.
	var bw *bufio.Writer
	if !f.follow {
		bw = bufio.NewWriterSize(stdout, 64<<10)
		defer bw.Flush() // what was read before an error
		stdout = bw
	}
	// Each skipped line is named up to maxSkipWarnings, then counted: a
	// log of 100,000 lines that are not cordon's wrote 100,000 warnings.
	skipped := 0
	rd := audit.NewReader(src, func(line int, err error) {
		if skipped++; skipped <= maxSkipWarnings {
			fmt.Fprintf(stderr, "cordon: warning: %s:%d: skipped: %v\n", path, line, err)
		}
		if skipped == maxSkipWarnings {
			fmt.Fprintf(stderr, "cordon: warning: %s: further lines skipped are counted, not named\n", path)
		}
	})
	var out recordSink
	switch {
	case f.json:
		out = &jsonSink{w: stdout}
	case f.summary:
		out = &summarySink{w: stdout, warn: warn}
	default:
		out = newTableSink(stdout, f.follow)
	}
	for rd.Next() {
		if flt.Match(rd.Record()) {
			if err := out.add(rd.Record(), rd.Raw()); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
	if err := rd.Err(); err != nil {
		return err
	}
	if err := out.flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if bw != nil {
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if n := rd.Skipped(); n > 0 {
		fmt.Fprintf(stderr, "cordon: warning: skipped %d malformed or over-long line(s) in %s\n", n, path)
	}
	return nil
}

// maxSkipWarnings bounds the skipped lines of a log cordon audit names.
const maxSkipWarnings = 20

// recordSink is one output format.
type recordSink interface {
	add(r audit.Record, raw []byte) error
	flush() error
}

// jsonSink passes matching lines through byte for byte, but for the
// characters a terminal could act on, which cordon writes escaped but an
// older cordon left raw (audit.EscapeUnprintable).
type jsonSink struct{ w io.Writer }

func (s *jsonSink) add(_ audit.Record, raw []byte) error {
	if _, err := s.w.Write(audit.EscapeUnprintable(raw)); err != nil {
		return err
	}
	_, err := io.WriteString(s.w, "\n")
	return err
}

func (s *jsonSink) flush() error { return nil }

// tableSink prints one aligned row per record. A live table (--follow)
// prints each row as it comes, so its columns have fixed widths instead of
// the widest cell's. Any other is aligned a block of tableBlock rows at a
// time: a tabwriter holds every row until it is flushed, and a log holds
// as many rows as the sandboxed commands made decisions (millions, a
// session's budget of them), which held at once would take more memory
// than the log's size.
type tableSink struct {
	tw   *tabwriter.Writer // nil for a live table
	w    io.Writer
	rows int
}

// tableBlock is how many rows a table aligns together (tableSink).
const tableBlock = 1000

// liveWidths are a live table's column widths, but the last's: enough for
// every type, kind and decision, and most hosts and reasons; a longer cell
// pushes the rest of its row along.
var liveWidths = [...]int{19, shortSession, 9, 11, 8, 30, 18}

func newTableSink(w io.Writer, live bool) *tableSink {
	s := &tableSink{w: w}
	if !live {
		s.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	s.line([]string{"TIME", "SESSION", "TYPE", "KIND", "DECISION", "HOST:PORT", "REASON", "DETAIL"})
	return s
}

// line prints one row of cells.
func (s *tableSink) line(cells []string) error {
	if s.tw != nil {
		_, err := fmt.Fprintln(s.tw, strings.Join(cells, "\t"))
		return err
	}
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(liveWidths) {
			b.WriteString(strings.Repeat(" ", max(liveWidths[i]-utf8.RuneCountInString(c), 0)+2))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(s.w, b.String())
	return err
}

// shortSession is how many characters of a session id a table shows.
const shortSession = 8

// maxCell bounds one table cell, in runes.
const maxCell = 80

func (s *tableSink) add(r audit.Record, _ []byte) error {
	s.rows++
	session := r.Session
	if len(session) > shortSession {
		session = session[:shortSession]
	}
	target := ""
	if r.Host != "" {
		target = r.Host
		if r.Port != 0 {
			target = policy.JoinHostPort(r.Host, r.Port)
		}
	}
	cells := []string{
		r.Time.Local().Format(time.DateTime), session, string(r.Type), string(r.Kind),
		r.Decision, target, r.Reason, recordDetail(r),
	}
	for i, c := range cells {
		cells[i] = cell(c)
	}
	if err := s.line(cells); err != nil {
		return err
	}
	if s.tw != nil && s.rows%tableBlock == 0 {
		return s.tw.Flush()
	}
	return nil
}

func (s *tableSink) flush() error {
	if s.tw == nil {
		return nil // a live table's rows are out; it ends when interrupted
	}
	if s.rows == 0 {
		if _, err := fmt.Fprintln(s.tw, "(no matching records)"); err != nil {
			return err
		}
	}
	return s.tw.Flush()
}

// recordDetail is the table's last column: what was asked (method, path,
// status), what moved (bytes), what ran (command and outcome), for a file
// removed or set aside after a run which it was, first, and why, or, for a
// budget line, what it means.
func recordDetail(r audit.Record) string {
	var parts []string
	if r.Method != "" {
		parts = append(parts, r.Method, r.Path)
	}
	if r.Status != 0 {
		parts = append(parts, strconv.Itoa(r.Status))
	}
	if r.Type == audit.TypeClose {
		parts = append(parts, "up "+formatBytes(r.BytesUp), "down "+formatBytes(r.BytesDown))
	}
	if r.Credential != "" {
		parts = append(parts, "credential "+r.Credential)
	}
	if len(r.Command) > 0 {
		parts = append(parts, strings.Join(r.Command, " "))
	}
	if r.ExitCode != nil {
		parts = append(parts, "exit "+strconv.Itoa(*r.ExitCode))
	}
	if r.Signal != "" {
		parts = append(parts, "signal "+r.Signal)
	}
	if r.Outcome != "" {
		parts = append(parts, r.Outcome)
	}
	if r.Type == audit.TypeRemoved || r.Type == audit.TypeSetAside || r.Type == audit.TypeClosed || r.Type == audit.TypeHidden {
		parts = append(parts, r.Path)
	}
	if r.Type == audit.TypeBudget || r.Type == audit.TypeRemoved || r.Type == audit.TypeSetAside || r.Type == audit.TypeClosed || r.Type == audit.TypeHidden || r.Type == audit.TypeTerminal {
		parts = append(parts, r.Detail)
	}
	return strings.Join(parts, " ")
}

// cell makes a logged string safe and short for a terminal table: the log
// holds what sandboxed clients sent, so control characters (and tabs, the
// column separator) are escaped, and long values are cut.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return termtext.Printable(s, maxCell)
}

// formatBytes prints a byte count in binary units, one decimal place.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// summarySink totals records per host and prints them at the end; warn
// says when some hosts had to be totalled together.
type summarySink struct {
	w    io.Writer
	warn func(string)
	sum  audit.Summary
}

func (s *summarySink) add(r audit.Record, _ []byte) error {
	s.sum.Add(r)
	return nil
}

func (s *summarySink) flush() error {
	hosts := s.sum.Hosts(topDenyReasons)
	if s.sum.Capped() {
		s.warn(fmt.Sprintf("the summary totals %d hosts apart, and the decisions of every host after them together, in the row %s: narrow it with --session, --since or --host", audit.MaxSummaryHosts, audit.OtherHosts))
	}
	if len(hosts) == 0 {
		_, err := fmt.Fprintln(s.w, "(no matching decisions)")
		return err
	}
	tw := tabwriter.NewWriter(s.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tALLOWED\tDENIED\tUP\tDOWN\tTOP DENY REASONS")
	for _, h := range hosts {
		reasons := make([]string, len(h.DenyReasons))
		for i, rc := range h.DenyReasons {
			reasons[i] = fmt.Sprintf("%s (%d)", rc.Reason, rc.Count)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", cell(h.Host), h.Allowed, h.Denied,
			formatBytes(h.BytesUp), formatBytes(h.BytesDown), cell(strings.Join(reasons, ", ")))
	}
	return tw.Flush()
}
