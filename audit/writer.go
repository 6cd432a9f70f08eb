package audit

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/internal/owner"
	"github.com/cordon-sandbox/cordon/internal/regular"
)

// maxKeptLine bounds the line buffer a Writer keeps between records.
const maxKeptLine = 64 << 10

// laterDelay bounds how long a record given to Later waits for a Write to
// go out with.
const laterDelay = 100 * time.Millisecond

// Writer appends records to one JSONL file. Each Write is a single
// unbuffered write(2) of whole lines, so a record is in the kernel before
// the caller lets bytes flow; Sync additionally fsyncs it. Once a write
// fails the Writer stays failed: every later Write returns the first error,
// and callers deny.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	session string
	now     func() time.Time
	err     error
	buf     []byte      // the lines being written, under mu
	later   []byte      // lines queued by Later, under mu
	timer   *time.Timer // writes later's lines after laterDelay
	// armed says timer is pending, under mu.
	armed bool
	// unsynced says lines were written since the last fsync, under mu.
	unsynced bool
	fsync    func(*os.File) error
	// budget bounds the bytes written (0: no bound), written counts them
	// (but WriteApart's), and spent says the budget is spent: from then
	// on only Sync records, and those written in a Room, are written.
	// Under mu.
	budget, written int64
	spent           bool
	// reserved is the room Reserve keeps for writes to come, under mu.
	reserved int64
	// told says a failure was reported to the operator (Report).
	told bool
	// midLine says the log ended part-way through a line when it was
	// opened (see endsMidLine): the next write starts with a newline.
	// Under mu.
	midLine bool
	// redact takes what must never be logged out of free text (SetRedact).
	redact func(string) string
	// observe sees each record Write or Sync wrote (SetObserver).
	observe func(Record)
}

// SetObserver has f see each record that Write or Sync writes, as written
// (stamped, redacted), once it is in the log, under the Writer's lock: f
// must be quick and must not write.
func (w *Writer) SetObserver(f func(Record)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observe = f
}

// SetRedact passes the free text of every later record (host, path,
// detail, rule, method, client, work directory and command) through f,
// which takes out what must never reach the log: the session's secrets and
// placeholders, however a request spelt them.
func (w *Writer) SetRedact(f func(string) string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.redact = f
}

// ErrBudgetSpent is what Write returns once the session's audit budget
// is spent: the caller denies, as for any failed write.
var ErrBudgetSpent = errors.New("the session's audit budget is spent: every later connection is denied, unlogged")

// Report says whether err, which a write returned, should be told to the
// operator: only the first failure is, since every later write fails the
// same way (a failed log stays failed, a spent budget stays spent) and a
// command that keeps trying would otherwise flood the terminal.
func (w *Writer) Report(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil || w.told {
		return false
	}
	w.told = true
	return true
}

// SetBudget bounds the bytes the session may write to n (0: no bound).
// The Write that would pass it writes instead one TypeBudget record, and
// it and every later Write return ErrBudgetSpent; Sync records (launch
// and exit lines, what a run's aftercare did) are still written, and
// Later ones dropped.
func (w *Writer) SetBudget(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.budget = n
}

// DefaultPath is $CORDON_AUDIT, else $XDG_STATE_HOME/cordon/audit.jsonl,
// else ~/.local/state/cordon/audit.jsonl. $CORDON_AUDIT must be absolute:
// set once for every directory cordon starts in, a relative one would put
// a log in each, inside the repository there. A relative $XDG_STATE_HOME
// is ignored, as the XDG base directory specification says (and as
// cordon's config does $XDG_CONFIG_HOME).
func DefaultPath() (string, error) {
	if p := os.Getenv("CORDON_AUDIT"); p != "" {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("$CORDON_AUDIT=%q is not an absolute path: it would name another log in each directory cordon starts in, inside the repository there; set it to an absolute path, or name the log for one command (--audit; cordon audit's --file)", p)
		}
		return p, nil
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home, err := homedir.Dir()
		if err != nil {
			return "", fmt.Errorf("audit path: no $XDG_STATE_HOME, and %w", err)
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "cordon", "audit.jsonl"), nil
}

// Open opens (creating, mode 0600) the log at path for a new session.
func Open(path, session string) (*Writer, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	mid, err := endsMidLine(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{f: f, session: session, now: time.Now, fsync: (*os.File).Sync, midLine: mid}, nil
}

// endsMidLine says whether the log f ends part-way through a line: a
// write the filesystem had room for only part of (a full disk, which a
// sandboxed command can bring about through its workspace) leaves the
// start of a line, and the next session's first line, appended there,
// would be glued to it and unreadable (its launch line, say).
func endsMidLine(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil {
		return false, fmt.Errorf("audit log %s: read its last byte: %w", f.Name(), err)
	}
	return last[0] != '\n', nil
}

// CheckWritable says whether Open would open the log at path (creating it
// and its directory as Open does), without writing to it.
func CheckWritable(path string) error {
	f, err := openLog(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// Fix is what to do when the log at path cannot be opened.
func Fix(path string) string {
	return fmt.Sprintf("make %s a regular file you can write, or point --audit or CORDON_AUDIT at one", path)
}

// openLog opens the log at path for appending, creating it (mode 0600)
// and its directory (0700). It must be a regular file of the user's own,
// named by path itself and by no other name: cordon appends to it, on the
// host, lines with text a sandboxed command chose (a request's path), so a
// symbolic link there (to ~/.bashrc, say) would have cordon write into
// whatever it pointed to, and a second name (a hard link) could be one a
// later box reads and rewrites. A log's directory is kept out of every
// box's reach, but a box that once reached it (before this check, or
// under another --audit) could have planted either; both are refused, as
// is a file another user owns, or one whose mode lets another user write
// it (cordon makes its logs 0600; such a mode is one set by hand).
//
// Its directory, and each above it, must be beyond other users' reach
// too (owner.ReplaceableAt): one they may write in let them move the
// log, or a directory above it, aside and put one of theirs in its
// place, which cordon audit then read.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		if err := dirShared(path); err != nil {
			return nil, err
		}
	case !fi.Mode().IsRegular():
		return nil, notRegular(path, fi.Mode().Type())
	default:
		// Before the open too: another user's mode would refuse it as
		// "permission denied", which says nothing of whose it is.
		if err := Unshared(path, fi); err != nil {
			return nil, err
		}
	}
	// A FIFO put there after the check fails the open instead of
	// holding it until a reader comes; a link put there fails it too
	// (O_NOFOLLOW).
	// Read too, for endsMidLine.
	f, fi, err := regular.Open(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	var nr *regular.NotRegular
	switch {
	case errors.As(err, &nr):
		return nil, notRegular(path, nr.Type)
	case errors.Is(err, syscall.ELOOP):
		return nil, notRegular(path, os.ModeSymlink)
	case err != nil:
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Nlink) > 1 {
		f.Close()
		return nil, fmt.Errorf("audit log %s has %d names (hard links), and another name could be where a sandboxed command reads and rewrites it: cordon appends only to a log with no other name; move it aside (cordon starts a new one) or point --audit or CORDON_AUDIT at another file", path, st.Nlink)
	}
	if err := Unshared(path, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Unshared says why the log at path, which fi describes, may hold lines
// that are not cordon's: another user owns it, may write it, or may
// replace it or a directory above it (dirShared); nil when none may.
// cordon appends to no such log, and cordon audit reads one with this as
// a warning.
func Unshared(path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("audit log %s belongs to uid %d, not to you (uid %d): cordon appends only to a log of your own; move it aside (cordon starts a new one) or point --audit or CORDON_AUDIT at another file", path, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("audit log %s has mode %04o, so other users may rewrite it (erase a session's lines, or add lines of their own): cordon appends only to a log no one else may write; fix with `chmod 600 %s`", path, fi.Mode().Perm(), path)
	}
	return dirShared(path)
}

// dirShared says why another user could put a log of their own at path:
// they own, or may write in, its directory or one above it
// (owner.ReplaceableAt), and could move the log, or a directory above it,
// aside; nil when none.
func dirShared(path string) error {
	if d, di := owner.ReplaceableAt(filepath.Dir(path)); d != "" {
		return fmt.Errorf("audit log %s lies under %s, which another user owns or may write in (mode %04o), so they could move the log, or a directory above it, aside and put lines of their own in its place; keep it in a directory of yours that only you may write, with none above it that others may (cordon's default, ~/.local/state/cordon, is so), or under one with the sticky bit, as /tmp has", path, d, di.Mode().Perm())
	}
	return nil
}

// notRegular is the error for an audit log that is not a regular file: a
// FIFO would hold every run until a reader came, and neither it nor a
// device can be fsynced, as the launch line must be.
func notRegular(path string, t os.FileMode) error {
	kind := "not a regular file"
	switch {
	case t&os.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return fmt.Errorf("audit log %s is a symbolic link (to %s): cordon writes its log only to the file named, never through a link, which a sandboxed command could have planted to have cordon append to another file (~/.bashrc, say); point --audit or CORDON_AUDIT at the file itself", path, target)
	case t&os.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case t&os.ModeDevice != 0:
		kind = "a device"
	case t&os.ModeDir != 0:
		kind = "a directory"
	case t&os.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Errorf("audit log %s is %s: cordon appends to a regular file and fsyncs the launch line before anything starts", path, kind)
}

// NewSessionID returns a fresh random session id. It names a session's
// lines and is no secret, so it comes from the runtime's generator
// (seeded by the kernel, per process), which costs no system call; a
// process's first crypto/rand read costs about 0.2 ms here.
func NewSessionID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// Session returns the session id stamped on every record.
func (w *Writer) Session() string { return w.session }

// Path returns the file the writer appends to.
func (w *Writer) Path() string { return w.f.Name() }

// RealPath returns where the file the writer appends to really is, as the
// kernel names the open file (/proc/self/fd): what was opened, whatever
// links and ".." the path named it by; "" where the kernel does not say
// (no /proc).
func (w *Writer) RealPath() string {
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", w.f.Fd()))
	if err != nil || !filepath.IsAbs(real) {
		return ""
	}
	return real
}

// Write stamps time and session on each record and appends them, a line
// each, in one write(2): a decision and what it led to (the credentials
// put on a request) reach the log together.
func (w *Writer) Write(rs ...Record) error { return w.write(rs, false, true, nil) }

// WriteApart is Write for lines the budget does not count, whose number
// the caller bounds itself: the refusals of clients outside the session
// (any local user can connect to a proxy), which would otherwise spend
// the budget the session's own client needs. Once the budget is spent
// they are dropped, as every other line but Sync's is.
func (w *Writer) WriteApart(rs ...Record) error { return w.write(rs, false, false, nil) }

// Room is space in the budget kept for one write to come (Reserve).
type Room struct {
	w *Writer
	n int64
	// used says the room was written in or given back, under w.mu.
	used bool
}

// Reserve keeps n bytes of the budget for one write to come (Room.Write),
// and fails as a Write would where there is no such room, spending the
// budget: for a line that must go out once something it names has
// happened (a name looked up, which the line then names). Checked before
// and written after, such a line could find the budget spent meanwhile by
// other connections, and a box that held many lookups open as it spent
// the budget had each name reach the resolver unlogged. Release gives
// unused room back.
func (w *Writer) Reserve(n int64) (*Room, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return nil, w.err
	case w.spent:
		return nil, ErrBudgetSpent
	case w.budget > 0 && w.written+int64(len(w.later))+w.reserved+n > w.budget:
		return nil, w.spendLocked()
	}
	w.reserved += n
	return &Room{w: w, n: n}, nil
}

// Write writes rs in the room the first time, whatever the budget (their
// own size is charged, and the room given back); after that, as the
// Writer's Write.
func (r *Room) Write(rs ...Record) error { return r.w.write(rs, false, true, r) }

// Unused says the room was neither written in nor given back.
func (r *Room) Unused() bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return !r.used
}

// Release gives the room back unless it was written in.
func (r *Room) Release() {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.useLocked(r)
}

// useLocked marks r used and gives its room back, and says whether it was
// not used yet.
func (w *Writer) useLocked(r *Room) bool {
	if r == nil || r.used {
		return false
	}
	r.used = true
	w.reserved -= r.n
	return true
}

// Sync is Write followed by fsync, past the budget too: for launch lines
// that must be durable before anything starts, and for cordon's own
// records of a run, which a sandboxed command cannot multiply without
// spending as much of the disk itself (its exit, what was removed or set
// aside after it).
func (w *Writer) Sync(rs ...Record) error { return w.write(rs, true, true, nil) }

// Later queues r to be appended just before the next Write's record, in
// the same write(2), or on its own within laterDelay: for a record of what
// already happened (a request's close line), so a busy keep-alive
// connection pays one write(2) per request, not two. Its time is stamped
// now. A failed write of it fails the Writer, as a Write's would.
//
// Once the budget is spent, a record that denies (a request cut for a
// secret it carried) is still written, at once, where any other is
// dropped: only requests already let through can be cut then, as every
// later one is refused, so they are as many as were in flight.
func (w *Writer) Later(r Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return
	case w.spent && r.Decision == Deny:
		r = w.stamp(r)
		w.flushLocked(append(r.appendJSON(nil), '\n'))
		return
	case w.spent:
		return
	}
	r = w.stamp(r)
	w.later = append(r.appendJSON(w.later), '\n')
	switch {
	case len(w.later) >= maxKeptLine:
		w.flushLocked(nil)
	case w.armed:
		// The pending timer fires sooner than laterDelay from now. Left
		// pending after a Write took the lines it was set for, it spares
		// a busy connection a timer change per request.
	case w.timer == nil:
		w.timer, w.armed = time.AfterFunc(laterDelay, w.flushLater), true
	default:
		w.timer.Reset(laterDelay)
		w.armed = true
	}
}

func (w *Writer) flushLater() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if w.err == nil && !w.spent && len(w.later) > 0 {
		w.flushLocked(nil)
	}
}

// stamp sets r's time, unless set, and session.
func (w *Writer) stamp(r Record) Record {
	if r.Time.IsZero() {
		r.Time = w.now().UTC()
	}
	r.Session = w.session
	if f := w.redact; f != nil {
		for _, p := range []*string{&r.Host, &r.Path, &r.Detail, &r.Rule, &r.Method, &r.Client, &r.Workdir} {
			*p = f(*p)
		}
		if r.Command != nil {
			cmd := make([]string, len(r.Command))
			for i, a := range r.Command {
				cmd[i] = f(a)
			}
			r.Command = cmd
		}
	}
	return r
}

// flushLocked writes the queued lines and then line, if any, in one
// write(2), after a newline if the log ended mid-line (midLine).
func (w *Writer) flushLocked(line []byte) error {
	out := line
	if len(w.later) > 0 {
		out = append(w.later, line...)
		if cap(out) <= maxKeptLine {
			w.later = out[:0]
		} else {
			w.later = nil
		}
	}
	if w.midLine {
		out = append([]byte{'\n'}, out...)
	}
	if _, err := w.f.Write(out); err != nil {
		w.err = fmt.Errorf("audit log %s: %w", w.f.Name(), err)
		return w.err
	}
	w.written += int64(len(out))
	w.unsynced, w.midLine = true, false
	return nil
}

// spendLocked writes the TypeBudget record and marks the budget spent.
func (w *Writer) spendLocked() error {
	w.spent = true
	r := w.stamp(Record{Type: TypeBudget, Detail: fmt.Sprintf("this session wrote its budget of %d bytes of audit lines (limits.audit_budget): every later connection is denied, unlogged", w.budget)})
	if err := w.flushLocked(append(r.appendJSON(nil), '\n')); err != nil {
		return err
	}
	return ErrBudgetSpent
}

// syncLocked fsyncs the lines written since the last fsync.
func (w *Writer) syncLocked() error {
	if !w.unsynced {
		return nil
	}
	if err := w.fsync(w.f); err != nil {
		return fmt.Errorf("audit log %s: fsync: %w", w.f.Name(), err)
	}
	w.unsynced = false
	return nil
}

// write writes rs, fsyncs them if sync, and counts them against the
// budget if charged; in room, if not used yet, whatever the budget.
func (w *Writer) write(rs []Record, sync, charged bool, room *Room) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	inRoom := w.useLocked(room)
	switch {
	case w.err != nil:
		return w.err
	case w.spent && !sync && !inRoom:
		return ErrBudgetSpent
	}
	lines := w.buf[:0]
	var stamped []Record // for observe
	for _, r := range rs {
		r = w.stamp(r)
		lines = append(r.appendJSON(lines), '\n')
		if w.observe != nil {
			stamped = append(stamped, r)
		}
	}
	if cap(lines) <= maxKeptLine {
		w.buf = lines
	}
	if !sync && charged && !inRoom && w.budget > 0 && w.written+int64(len(w.later)+len(lines))+w.reserved > w.budget {
		return w.spendLocked()
	}
	if err := w.flushLocked(lines); err != nil {
		return err
	}
	if !charged {
		w.written -= int64(len(lines))
	}
	if sync {
		if err := w.syncLocked(); err != nil {
			w.err = err
			return w.err
		}
	}
	for _, r := range stamped {
		w.observe(r)
	}
	return nil
}

// Close writes what Later queued, fsyncs what is not yet (a log whose
// last record went out with Sync needs no second fsync) and closes the
// file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.err == nil && len(w.later) > 0 {
		w.flushLocked(nil)
	}
	if err := w.syncLocked(); err != nil && w.err == nil {
		w.err = err
	}
	return w.f.Close()
}
