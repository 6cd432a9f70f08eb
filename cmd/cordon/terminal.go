//go:build linux || darwin

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// keepTerminal saves the state of stdin, stdout and stderr, and of the
// terminal on them, and returns what puts it back. The sandboxed command
// shares them, and what it changes outlives it:
//
//   - the terminal's settings (echo off, raw mode), which a command ended
//     at its deadline, or killed, leaves so: the shell would be left
//     without echo;
//   - exclusive mode (TIOCEXCL), after which only root can open the
//     terminal: sudo, ssh and gpg, which open /dev/tty to prompt, fail
//     with EBUSY. It is cleared unless it was on before the run;
//   - output stopped (tcflow TCOOFF), which the shell's next write waits
//     on for ever (^Q does not undo it), and a break held on a serial
//     line (TIOCSBRK). Output is restarted and the break ended;
//   - the flags of the open file the command shares with the shell
//     (O_NONBLOCK, with which the shell's next read fails with EAGAIN,
//     O_APPEND, O_ASYNC): they are put back when they changed.
//
// The settings are put back only when they changed and cordon is in the
// terminal's foreground process group: from the background they would
// overwrite those of the job in the foreground, and setting them would
// stop cordon with SIGTTOU. Nor when cordon shares its job with another
// program (sharesJob: cordon run … | less), whose settings they may be
// (the pager's raw mode). The rest is undone from the background too.
//
// The command cannot make the terminal its own, or take its foreground
// process group: it runs in a session of its own (bwrap --new-session;
// setsid on macOS). The window size it sets is left as it is, as any
// program's is.
func keepTerminal() (restore func()) {
	var flags [3]int // F_GETFL of each, -1 where it is not open
	for fd := range flags {
		f, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			f = -1
		}
		flags[fd] = f
	}
	type terminal struct {
		fd        int
		settings  *unix.Termios
		exclusive bool
	}
	var terminals []terminal
	for _, fd := range []int{0, 1, 2} {
		saved, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			continue
		}
		terminals = append(terminals, terminal{fd: fd, settings: saved, exclusive: exclusive(fd)})
	}
	return func() {
		for fd, saved := range flags {
			if saved < 0 {
				continue
			}
			if now, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && now != saved {
				_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, saved)
			}
		}
		for _, t := range terminals {
			if !t.exclusive {
				_ = unix.IoctlSetInt(t.fd, unix.TIOCNXCL, 0)
			}
			restartOutput(t.fd)
			now, err := unix.IoctlGetTermios(t.fd, ioctlGetTermios)
			if err != nil || *now == *t.settings {
				continue
			}
			if !inForeground(t.fd) || sharesJob() {
				continue
			}
			_ = unix.IoctlSetTermios(t.fd, ioctlSetTermios, t.settings)
		}
	}
}

// restartOutput restarts the terminal's output and ends a break. The
// kernel answers a process outside the foreground process group that
// asks with SIGTTOU, unless it ignores the signal; cordon does, for the
// moment it asks.
func restartOutput(fd int) {
	if !signal.Ignored(syscall.SIGTTOU) {
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
	}
	startOutput(fd)
	_ = unix.IoctlSetInt(fd, unix.TIOCCBRK, 0)
}

// The box may read a terminal it is handed, whichever job has the
// terminal's foreground: it runs in a session of its own, out of reach of
// the job control (SIGTTIN) that stops a shell's background jobs when they
// read, and a descriptor of the terminal for writing alone (stdout) opens
// it anew for reading through /proc/self/fd. So the box holds the terminal
// only while cordon's job has the foreground (a shell takes it back when
// the job stops, or gives it none, cordon run … &): otherwise it would
// read what is typed to the shell, a sudo or ssh password among it.
// shareTerminal and endOnSuspend keep to that.

// shareTerminal gives s the terminals on its stdin, stdout and stderr
// unless one is cordon's controlling terminal and another process group
// has its foreground, and says whether it did. Then (started in the
// background) the command's stdin is /dev/null and its output reaches the
// terminal through a pipe that cordon copies, without what the terminal
// would answer (keepFromTheBox). So does cordon's controlling terminal
// when cordon shares its job with another program (sharesJob: cordon run
// … | less), which reads the terminal as the box runs: the terminal's
// answers would reach the pager, and the box would read its keys; nor
// can cordon copy the terminal's input to a terminal of the box's own
// (relayTerminal) under the pager. Of a terminal it does not
// control (a pseudo-terminal a program hands it, setsid cordon run) cordon
// cannot tell who else reads it: it is handed over, unless it was given
// for writing alone (cordon run … > /dev/pts/N, another pane of the
// user's): the box would open it anew for reading through /proc/self/fd
// and take what is typed there, to the shell of that pane, so it gets a
// pipe that cordon copies to the terminal instead.
//
// dropped is told each control string the copy drops.
//
// says is the writer of what cordon says on errw, its stderr, while the
// command runs: when the command's output reaches the same terminal
// through cordon, the Aside of that copy's Display, with whose writes
// cordon's lines then take turns; nil when it does not.
func shareTerminal(s *sandbox.Spec, errw io.Writer, dropped func(what string)) (held bool, says io.Writer) {
	var terminals []*os.File
	for _, v := range []any{s.Stdin, s.Stdout, s.Stderr} {
		if f, ok := v.(*os.File); ok && f != nil {
			if _, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios); err == nil {
				terminals = append(terminals, f)
			}
		}
	}
	background := false
	for _, f := range terminals {
		if controlled(f) && !inForeground(int(f.Fd())) {
			background = true
		}
	}
	out, stderr := s.Stdout, s.Stderr
	shared := false
	for _, f := range terminals {
		if controlled(f) && !background {
			shared = sharesJob()
			break
		}
	}
	for _, f := range terminals {
		if !background && !writeOnlyElsewhere(f) && !(shared && controlled(f)) {
			held = true
			continue
		}
		// The first: stdout's, which stderr's gives way to below when
		// both are on one terminal.
		if d := keepFromTheBox(s, f, dropped); d != nil && says == nil && sameTerminal(f, errw) {
			says = d.Aside()
		}
	}
	if _, kept := s.Stdout.(throughCordon); kept && s.Stderr != stderr && sameTerminal(out, stderr) {
		// Stdout and stderr on one terminal, by one name or two
		// (/dev/tty and its own), reach it through one Display (one pipe,
		// one copy). Through one each, a write of one that the kernel
		// cut short (interrupted by a signal, or non-blocking with the
		// terminal's buffer full) could leave the terminal in the middle
		// of a sequence that the other's text then ended: a question,
		// answered to whoever reads the terminal.
		s.Stderr = s.Stdout
	}
	return held, says
}

// sameTerminal says whether a and b are one terminal: one file, or
// cordon's controlling terminal under two names (controllingDevice).
func sameTerminal(a, b any) bool {
	if sandbox.SameFile(a, b) {
		return true
	}
	da, db := controllingDevice(a), controllingDevice(b)
	return da != 0 && da == db
}

// controlled says whether f is cordon's controlling terminal: the kernel
// answers TIOCGPGRP for that one alone.
func controlled(f *os.File) bool {
	_, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil
}

// inForeground says whether fd is cordon's controlling terminal with
// cordon's job in its foreground.
func inForeground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// writeOnlyElsewhere says whether f is a terminal cordon does not control
// opened for writing alone.
func writeOnlyElsewhere(f *os.File) bool {
	if controlled(f) {
		return false
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	return err == nil && flags&unix.O_ACCMODE == unix.O_WRONLY
}

// keepFromTheBox has s give the command, instead of f, /dev/null as its
// stdin or a pipe that cordon copies to f as its stdout or stderr, with
// what the terminal would answer or take as a change of what it sends
// dropped (termtext.Display): its answers would reach whatever reads it,
// the user's shell, as typed, and cordon, which does not read it, cannot
// discard them (settleInput). It returns the Display, nil for stdin.
func keepFromTheBox(s *sandbox.Spec, f *os.File, dropped func(what string)) *termtext.Writer {
	switch {
	case s.Stdin == io.Reader(f):
		s.Stdin = nil
		return nil
	case s.Stdout == io.Writer(f):
		d := termtext.Display(f, dropped)
		s.Stdout = throughCordon{d}
		return d
	default:
		d := termtext.Display(f, dropped)
		s.Stderr = throughCordon{d}
		return d
	}
}

// sharesJob says whether cordon shares its job, its process group, with a
// program that may be using the terminal as cordon ends: one the user's
// shell piped cordon's output or input to or from (cordon run … | less),
// or started for a process substitution (cordon run … > >(less)), which,
// forked before the shell became cordon, is cordon's own child. The
// processes cordon runs under (a script, make: a shell without job
// control runs its commands in its own group) wait for it and are not
// counted. cordon starts none of its own in its group (the capability
// check's bwrap --version, the sandbox and the holder have groups of
// their own, each from its exec on: a fork of cordon's before its exec,
// ownFork, is not counted), and the command cannot join it (it runs in a
// session of its own).
func sharesJob() bool {
	return theProcesses.sharesJob(os.Getpid(), os.Getppid(), unix.Getpgrp())
}

// processes is what sharesJob reads of the machine's processes; its test
// gives it processes of its own.
type processes struct {
	// members lists the processes in a process group; look says what one
	// is now (false: it is gone); ownFork says whether it still runs
	// cordon's own program.
	members func(pgrp int) []int
	look    func(pid int) (process, bool)
	ownFork func(pid int) bool
}

// process is what sharesJob needs to know of one.
type process struct {
	parent, group int
	// ended: it has exited and waits for its parent to reap it.
	ended bool
}

// theProcesses are this machine's.
var theProcesses = processes{members: groupMembers, look: lookProcess, ownFork: ownFork}

// sharesJob is sharesJob's judgement of process group pgrp, cordon's
// (self, whose parent is parent). A member is looked at after it was
// listed, and may have changed since, or be changing: the capability
// check's bwrap --version, listed between its fork and its setpgid, has
// left the group once it runs bwrap; the fork with which Go's runtime
// first checks that clone(CLONE_PIDFD) works exits at once, and waits to
// be reaped in cordon's group (under load, a run took either for a
// program beside cordon and kept the terminal from the box). So a member
// counts only if, once it was found not to be running cordon's program,
// it is still in the group and has not ended: a process that has exited
// uses no terminal.
func (ps processes) sharesJob(self, parent, pgrp int) bool {
	waiting := map[int]bool{self: true}
	for pid := parent; pid > 1 && !waiting[pid]; {
		waiting[pid] = true
		p, ok := ps.look(pid)
		if !ok {
			break
		}
		pid = p.parent
	}
	for _, pid := range ps.members(pgrp) {
		if waiting[pid] {
			continue
		}
		if p, ok := ps.look(pid); !ok || p.parent == self && ps.ownFork(pid) {
			continue
		}
		// Looked at again, after ownFork: it may have left the group, or
		// ended, since it was listed.
		if p, ok := ps.look(pid); ok && p.group == pgrp && !p.ended {
			return true
		}
	}
	return false
}

// answerWait is how long cordon waits, once the box is gone, for a
// terminal's answers to what the box wrote last (settleInput).
const answerWait = 50 * time.Millisecond

// inputDefaults puts back the terminal's modes that decide what it sends
// as input, which a command leaves on when it is killed (a TUI ended by
// --timeout) or on purpose: ANSI mode (out of VT52's, where the terminal
// takes none of the rest) and 7-bit controls in its answers (S7C1T);
// mouse reports (X10, normal, button, any
// event, highlight tracking; UTF-8, SGR and urxvt encodings), focus
// reports, in-band window resize reports and colour-scheme reports (all
// off unless asked for), which then reach the shell as input at each
// click, change of window, resize or change of theme; local echo
// off again (SRM set: xterm's SRM reset echoes what is typed, a password
// at a prompt with echo off among it, on the screen); the keyboard
// unlocked (KAM reset: set, the terminal ignores every key); Enter
// sending CR alone (LNM reset); cursor keys and keypad sending their
// normal codes; xterm's modifyOtherKeys to its initial value and the
// kitty keyboard protocol's flags popped (after which Enter and Ctrl-C
// reach the shell as escape sequences it cannot read); and the cursor
// shown, which a command that hid it and ended cleanly left hidden.
// Bracketed paste is the shell's own, which sets it at each prompt.
const inputDefaults = "\x1b<\x1b F\x1b[?9l\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2048l\x1b[?2031l" +
	"\x1b[12h\x1b[2l\x1b[20l\x1b[?1l\x1b>\x1b[>4m\x1b[<99u\x1b[?25h"

// settleInput, once the box is gone, on a terminal on stdin, stdout or
// stderr that cordon controls with its job in the foreground, puts back
// inputDefaults and, after answerWait, discards what waits to be read. A
// terminal answers some of what is written to it with input (primary
// attributes, the cursor's place, colours, and, where title reporting is
// on, the window title the command set), so a command that asks just
// before it exits has the answers reach the user's shell as if typed, a
// line of its choosing among them; so would what the user typed for the
// command and it did not read. Typed ahead for the shell, it is lost too.
// An answer that comes later than answerWait (a terminal at the far end
// of a slow ssh connection) still reaches the shell. Nothing is done when
// cordon shares its job with another program (sharesJob): a pager cordon's
// output is piped to reads the terminal, in modes of its own.
func settleInput() {
	controlled := -1
	for fd := range 3 {
		if inForeground(fd) {
			controlled = fd
		}
	}
	if controlled < 0 || sharesJob() {
		return
	}
	// Written through a descriptor of cordon's own: the one found may be
	// open for reading alone. Opening it fails in exclusive mode, which
	// was on before the run (keepTerminal clears the command's).
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		io.WriteString(tty, inputDefaults)
		tty.Close()
	}
	time.Sleep(answerWait)
	flushInput(controlled)
}

// throughCordon hides a file from the backend, which then hands the
// command a pipe and copies what comes through it to the file.
type throughCordon struct{ io.Writer }

// suspendSignals stop a job from its terminal: Ctrl-Z, and a background
// job's read or write.
var suspendSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}

// endOnSuspend returns ctx ended, instead of cordon stopped, when one of
// suspendSignals comes: a run whose box holds the terminal ends when its
// job is stopped. The shell would take the foreground back while the box,
// which no signal to cordon's job stops, went on reading the terminal.
// suspended says which signal came, if one did (0 if none); stop stops
// listening.
func endOnSuspend(ctx context.Context) (_ context.Context, suspended func() syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, suspendSignals...)
	var got atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-sigs:
			got.Store(int32(sig.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	suspended = func() syscall.Signal { return syscall.Signal(got.Load()) }
	return ctx, suspended, func() {
		cancel()
		<-done
		signal.Stop(sigs)
	}
}

// suspendedResult is the result of a run that sig, one of suspendSignals,
// ended, the backend's own result (a tree killed, or a sandbox that did
// not start, had the kill come early) aside: exit status 128+N, as a shell
// reports a job that stopped, the reason as its Cause, and no error.
func suspendedResult(res sandbox.Result, sig syscall.Signal) sandbox.Result {
	res.ExitCode, res.Signal, res.TimedOut = 128+int(sig), unix.SignalName(sig), false
	res.Cause = fmt.Sprintf("the run's job was stopped from the terminal (%s; Ctrl-Z sends it), which ends the process tree of a run that holds the terminal: the shell takes the terminal back, and the sandbox would read what is typed to it", res.Signal)
	return res
}

// midRun is the writer of what cordon says while a run goes on (the
// proxy's warnings, a failed record of the exit): its stderr, until the
// run sends it through another writer (through): the Aside of the
// Display the command's output reaches the same terminal through
// (shareTerminal), and once the command is gone, afterTheBox.
type midRun struct {
	mu sync.Mutex
	w  io.Writer
}

func (m *midRun) Write(p []byte) (int, error) {
	m.mu.Lock()
	w := m.w
	m.mu.Unlock()
	return w.Write(p)
}

// through sends what follows to w.
func (m *midRun) through(w io.Writer) {
	m.mu.Lock()
	m.w = w
	m.mu.Unlock()
}

// readableAgain is written to a terminal before the first thing cordon
// says once a run is over. The command shared the terminal and may have
// left it so that what follows cannot be read: inside a string that
// swallows text until it ends (an OSC, which made cordon's warnings a
// window title, a DCS, an unfinished CSI), with text concealed or drawn
// in the background's colour (SGR), in the line-drawing character set, in
// a scrolling region of one line (each warning overwriting the one
// before), with lines cut at the margin (no autowrap), in insert mode or
// with the cursor hidden. CAN ends any string or sequence; the scrolling
// region is reset between a save and a restore of the cursor (resetting
// it homes the cursor), before the rest, which the restore would undo.
// The screen's content, the cursor's place, the alternate screen (leaving
// one the terminal is not in restores a cursor saved long ago) and the
// colours a theme set (OSC 4, 10, 11) are left as they are.
const readableAgain = "\x18\x1b7\x1b[r\x1b8\x1b[0m\x1b(B\x0f\x1b[4l\x1b[?7h\x1b[?25h"

// afterTheBox is the writer of what cordon says once a run is over: w,
// and, when w is a terminal, readableAgain before the first of it.
type afterTheBox struct {
	w    io.Writer
	once sync.Once
}

func (a *afterTheBox) Write(p []byte) (int, error) {
	a.ready()
	return a.w.Write(p)
}

// ready makes the terminal readable again (readableAgain), once: before
// a message that main, not a Write, prints.
func (a *afterTheBox) ready() {
	a.once.Do(func() {
		if f, ok := a.w.(*os.File); ok {
			if _, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios); err == nil {
				io.WriteString(f, readableAgain)
			}
		}
	})
}

// capTerminal is doctor's name for what a run on a terminal gets
// (terminalCapability).
const capTerminal = "terminal"

// maxTerminalRecords bounds the kinds of control string a run logs as
// dropped that terminalWhy does not name (an OSC's number, a link's
// scheme, are the command's to choose), and, apart, the keys it logs.
// The kinds terminalWhy names, few, are always logged: before, the
// command could spend the bound on harmless kinds first and keep its OSC
// 52 out of the log.
const maxTerminalRecords = 16

// terminalDropped logs a control string cordon dropped from the command's
// output to a terminal (relayTerminal's copy, or keepFromTheBox's), the
// first of each kind (logTerminal).
func (r *runState) terminalDropped(what string) {
	detail := fmt.Sprintf("the sandboxed command wrote %s to the terminal, which cordon dropped", what)
	// A link is named with its scheme ("OSC 8 to vscode:").
	kind, _, _ := strings.Cut(what, " to ")
	why, known := terminalWhy[kind]
	if known {
		// Once a kind: a link's scheme is the command's to choose too.
		detail += ": " + why
		what = kind
	}
	r.logTerminal(what, "terminal_control", detail, !known)
}

// terminalKeyRebound logs a key the command made a signal on its
// terminal (stty intr e) and that was typed, once a key and signal a run
// (logTerminal): cordon sent the signal to itself alone, where the
// terminal would have sent it to cordon's whole job.
func (r *runState) terminalKeyRebound(key string, sig unix.Signal) {
	name := unix.SignalName(sig)
	r.logTerminal("key "+key+" "+name, "terminal_key", fmt.Sprintf("the sandboxed command made %q a key that sends %s on its terminal, and it was typed: cordon sent %s to itself alone, which passes it to the command, not to the programs cordon runs under", key, name, name), true)
}

// logTerminal writes a terminal line with reason and detail, the first
// time a run meets kind; of the kinds capped, maxTerminalRecords for each
// reason, and then one line saying that more went unlogged. The copies
// to two terminals and the relay may call it at once.
func (r *runState) logTerminal(kind, reason, detail string, capped bool) {
	r.terminalMu.Lock()
	defer r.terminalMu.Unlock()
	if r.terminalLogged[kind] {
		return
	}
	if r.terminalLogged == nil {
		r.terminalLogged, r.terminalCapped = map[string]bool{}, map[string]int{}
	}
	if capped {
		n := r.terminalCapped[reason]
		if n > maxTerminalRecords {
			return
		}
		r.terminalCapped[reason] = n + 1
		if n == maxTerminalRecords {
			detail = fmt.Sprintf("more kinds than the %d logged (%s): the rest are not logged", maxTerminalRecords, reason)
			kind = ""
		}
	}
	r.terminalLogged[kind] = true
	r.w.Write(audit.Record{Type: audit.TypeTerminal, Decision: audit.Deny, Reason: reason, Detail: detail})
}

// terminalWhy says what the control strings cordon drops most often do.
var terminalWhy = map[string]string{
	"OSC 52":                 "it sets or reads the clipboard, whose content the user may paste into a shell",
	"DCS":                    "tmux passes what is in it to the terminal outside (OSC 52 among it), and kitty's remote control takes commands in it",
	"APC":                    "the kitty graphics protocol in it has the terminal read files on its host",
	"OSC 7":                  "it sets the directory the terminal opens new windows in",
	"OSC 8":                  "a hyperlink not to a web page, a file or mail, which the terminal opens with whatever handles its scheme (an editor's or the desktop's URL handler)",
	"OSC 9":                  "it shows a desktop notification",
	"OSC 777":                "it shows a desktop notification",
	"OSC 1337":               "iTerm2's commands in it write files and set the clipboard",
	"OSC 5113":               "kitty's file transfer in it reads and writes files on the terminal's host",
	"OSC 5522":               "kitty's clipboard protocol in it sets or reads the clipboard",
	"CSI i":                  "media copy: it has the terminal print the screen, or save it to a file",
	"CSI 20 t":               "it asks for the icon label, which the command set, as input: an answer that came after the run would reach the shell as typed",
	"CSI 21 t":               "it asks for the window title, which the command set, as input: an answer that came after the run would reach the shell as typed",
	"ESC %":                  "it changes the character encoding the terminal decodes, out of UTF-8, where bytes of text cordon passes read as controls",
	"ESC SP":                 "it has the terminal send its answers with 8-bit controls, or changes its conformance level",
	"CSI ?2 l":               "it puts the terminal in VT52 mode, in which it takes none of the sequences that put its input modes back after the run (a locked keyboard stays locked)",
	`CSI " p`:                "it sets the terminal's conformance level, and with it 8-bit controls in its answers",
	"CSI * y":                "it asks for a checksum of an area of the screen, which, a cell at a time, reads what the terminal shows (output from before the run) into the box",
	"CSI # |":                "it asks for the colours and attributes of an area of the screen, which shows output from before the run",
	"CSI > t":                "Contour's buffer capture: it asks for lines of the screen, which shows output from before the run, as text",
	"ESC }":                  "Terminology's commands in it show media from a file or URL of the command's choosing",
	"C1 byte in a character": "the locale's character set is not UTF-8, and the terminal would read a byte of the character as a C1 control (OSC, CSI, DCS); it was written as \"?\" (set LC_CTYPE to a UTF-8 locale if the terminal decodes UTF-8)",
}
