//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/audit"
)

// ttyRelay runs argv[3:] in directory argv[1] as the foreground job of a
// new 24x80 pseudo-terminal, the user's terminal, and plays the steps in
// argv[2] (JSON: [text to wait for, "type", "flood" or "resize",
// argument]) against it: what is typed is written to the terminal's
// master, as keys; a flood is that many keys, typed for 3 s at most. It
// prints a JSON object: the job's exit code, everything the terminal was
// sent (as Latin-1 text), and the terminal's device ("major:minor", in
// hex, as stat -c %t:%T has it).
const ttyRelay = `
import fcntl, json, os, pty, struct, subprocess, sys, termios, threading, time
master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
got, lock = bytearray(), threading.Lock()
def reader():
    while True:
        try:
            d = os.read(master, 4096)
        except OSError:
            return
        if not d:
            return
        with lock:
            got.extend(d)
threading.Thread(target=reader, daemon=True).start()
def child():
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
p = subprocess.Popen(sys.argv[3:], stdin=slave, stdout=slave, stderr=slave, cwd=sys.argv[1], preexec_fn=child)
deadline = time.time() + 30
for want, action, arg in json.loads(sys.argv[2]):
    while time.time() < deadline:
        with lock:
            if want.encode() in got:
                break
        time.sleep(0.02)
    if action == "type":
        os.write(master, arg.encode())
    elif action == "flood":
        os.set_blocking(master, False)
        left, stop = arg, time.time() + 3
        while left > 0 and time.time() < stop:
            try:
                left -= os.write(master, b"y" * min(left, 1000))
            except BlockingIOError:
                time.sleep(0.01)
        os.set_blocking(master, True)
    elif action == "resize":
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", arg[0], arg[1], 0, 0))
try:
    code = p.wait(timeout=max(1, deadline - time.time()))
except subprocess.TimeoutExpired:
    p.kill()
    code = "timeout"
time.sleep(0.2)
dev = os.fstat(slave).st_rdev
with lock:
    out = bytes(got)
print(json.dumps({"exit": code, "terminal": out.decode("latin-1"), "device": "%x:%x" % (os.major(dev), os.minor(dev))}))
`

// relayed is what ttyRelay prints.
type relayed struct {
	Exit     any    `json:"exit"`
	Terminal string `json:"terminal"`
	Device   string `json:"device"`
}

// onTerminal runs cordon run with args as the foreground job of a new
// terminal (ttyRelay), playing steps, and returns what ttyRelay saw.
func (b *box) onTerminal(steps string, args ...string) relayed {
	b.t.Helper()
	return b.onTerminalAs(steps, append([]string{cordonBin(b.t), "run", "--audit", b.audit}, args...)...)
}

// onTerminalAs runs argv as the foreground job of a new terminal
// (ttyRelay), as onTerminal does.
func (b *box) onTerminalAs(steps string, argv ...string) relayed {
	b.t.Helper()
	argv = append([]string{"-c", ttyRelay, b.ws, steps}, argv...)
	r := runResult(b.t, runTimeout, asUser(b.t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
	var got relayed
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		b.t.Fatalf("%q: %v\n%s%s", argv, err, r.stdout, r.stderr)
	}
	return got
}

// TestRunTerminalRelayDropsWhatActsBeyondTheScreen: a run in the
// foreground was handed the user's terminal, and what it wrote there
// reached it byte for byte: OSC 52 set the clipboard (for the user to
// paste into a shell), tmux's passthrough (DCS) carried OSC 52 to the
// terminal outside tmux, and the kitty graphics protocol (APC) has the
// terminal read files on its host. The box now has a pseudo-terminal of
// cordon's, none of its descriptors is the user's terminal, and its
// output reaches the terminal without them, with its text, colours and
// title, and each kind dropped is logged. So is DECRQCRA, a checksum of
// an area of the screen, whose answers rebuilt the user's earlier output
// in the box a cell at a time (red team, round 7).
func TestRunTerminalRelayDropsWhatActsBeyondTheScreen(t *testing.T) {
	const script = `printf 'A\033]52;c;ZWNobyBwd25lZA==\007B\033Ptmux;\033\033]52;c;eA==\007\033\\C\033_Gf=100,t=f;L2V0Yy9wYXNzd2Q=\033\\D\033]0;title\007E\033[31mred\033[0m\033[1;1;1;1;1;1*y\n'; stat -L -c %t:%T /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 /dev/stdout`
	for _, args := range [][]string{
		{"--net", "off"},
		{"--net", "restricted"},
	} {
		b := newBox(t)
		got := b.onTerminal(`[]`, append(args, "--", "sh", "-c", script)...)
		if got.Exit != float64(0) {
			t.Errorf("%q: exit %v\n%q", args, got.Exit, got.Terminal)
		}
		for _, want := range []string{"ABCD", "\x1b]0;title\aE\x1b[31mred\x1b[0m"} {
			if !strings.Contains(got.Terminal, want) {
				t.Errorf("%q: the terminal did not get %q: %q", args, want, got.Terminal)
			}
		}
		for _, never := range []string{"\x1b]52", "\x1bP", "\x1b_", "ZWNobyBwd25lZA", "L2V0Yy9wYXNzd2Q", "*y"} {
			if strings.Contains(got.Terminal, never) {
				t.Errorf("%q: the terminal got %q: %q", args, never, got.Terminal)
			}
		}
		if strings.Count(got.Terminal, ":") < 4 || strings.Contains(got.Terminal, got.Device+"\r\n") {
			t.Errorf("%q: the box holds the user's terminal (%s) or did not say what it holds: %q", args, got.Device, got.Terminal)
		}
		if logged := b.terminalDrops(); !logged["OSC 52"] || !logged["DCS"] || !logged["APC"] || !logged["CSI * y"] {
			t.Errorf("%q: logged as dropped: %v, want OSC 52, DCS, APC and CSI * y", args, logged)
		}
	}
}

// TestRunTerminalRelayKeys: on the box's pseudo-terminal, what is typed
// reaches the command, Ctrl-C interrupts a command that reads lines
// (130), and one that waits on a child, which it reaches too (a shell
// waiting on sleep took SIGINT only when the sleep ended, or when cordon
// ended the box 10 s later, 137), and reaches one in raw mode as a byte,
// Ctrl-Z ends the run (148,
// as when the terminal stopped cordon's job), and the command sees the
// terminal's size, and its changes. A run whose box left its terminal's
// input full (it read nothing of what was typed) ends: cordon, which
// waited to write more of it there, hung.
func TestRunTerminalRelayKeys(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  string
		args   []string
		exit   float64
		output []string
	}{
		{"a line, then Ctrl-C", `[["ready", "type", "hello\r"], ["got=hello", "type", "\u0003"]]`,
			[]string{"--net", "off", "--", "sh", "-c", "echo ready; read x; echo got=$x; read y; echo not reached"}, 130, []string{"got=hello"}},
		{"Ctrl-C, restricted", `[["ready", "type", "\u0003"]]`,
			[]string{"--net", "restricted", "--", "sh", "-c", "echo ready; read x; echo not reached"}, 130, nil},
		{"Ctrl-C reaches the command's children", `[["ready", "type", "\u0003"]]`,
			[]string{"--net", "off", "--", "sh", "-c", "echo ready; sleep 30; echo not reached"}, 130, nil},
		{"Ctrl-C reaches the command's children, restricted", `[["ready", "type", "\u0003"]]`,
			[]string{"--net", "restricted", "--", "sh", "-c", "echo ready; sleep 30; echo not reached"}, 130, nil},
		{"Ctrl-Z", `[["ready", "type", "\u001a"]]`,
			[]string{"--net", "off", "--", "sh", "-c", "echo ready; sleep 30"}, 148, []string{"SIGTSTP"}},
		{"Ctrl-C in raw mode", `[["ready", "type", "\u0003"]]`,
			[]string{"--net", "off", "--", "sh", "-c", "stty raw -echo; echo ready; dd bs=1 count=1 2>/dev/null | od -An -c; stty sane"}, 0, []string{"003"}},
		{"typed while the box reads nothing", `[["ready", "flood", 40000]]`,
			[]string{"--net", "off", "--", "sh", "-c", "stty raw; echo ready; sleep 2"}, 0, nil},
		{"the window's size", `[["ready", "resize", [40, 120]]]`,
			[]string{"--net", "off", "--", "sh", "-c", `stty size; echo ready; for i in $(seq 200); do [ "$(stty size)" = "40 120" ] && echo resized && exit 0; sleep 0.05; done; exit 1`}, 0, []string{"24 80", "resized"}},
	} {
		b := newBox(t)
		got := b.onTerminal(c.steps, c.args...)
		if got.Exit != c.exit {
			t.Errorf("%s: exit %v, want %v\n%q", c.name, got.Exit, c.exit, got.Terminal)
		}
		for _, want := range c.output {
			if !strings.Contains(got.Terminal, want) {
				t.Errorf("%s: the terminal did not get %q: %q", c.name, want, got.Terminal)
			}
		}
	}
}

// terminalDrops are the kinds of control string the run's audit log says
// were dropped from its output to a terminal.
func (b *box) terminalDrops() map[string]bool {
	b.t.Helper()
	logged := map[string]bool{}
	for _, rec := range b.records() {
		if rec.Type == audit.TypeTerminal && rec.Decision == audit.Deny && rec.Reason == "terminal_control" {
			if what, _, ok := strings.Cut(strings.TrimPrefix(rec.Detail, "the sandboxed command wrote "), " to the terminal"); ok {
				logged[what] = true
			}
		}
	}
	return logged
}

// TestRunTerminalRelayLogsWhatMattersFirst: the kinds of control string
// a run logs as dropped are bounded, as the command chooses an OSC's
// number; the bound was one for all, first come first served, so a box
// that spent it on sixteen harmless kinds kept OSC 52 and tmux's
// passthrough out of the log. The kinds cordon knows to act beyond the
// screen are logged whatever came first, and one line says that more
// went unlogged; an OSC is known by its value (052 is 52), and links to
// schemes of the box's choosing are one kind, logged once. The title
// report, whose answer is the box's own text (which reached the user's
// shell as typed when the terminal answered after the run), is dropped
// and logged too, however its number is written.
func TestRunTerminalRelayLogsWhatMattersFirst(t *testing.T) {
	var script strings.Builder
	script.WriteString("printf '")
	for _, n := range []int{3, 6, 20, 21, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35} { // none of them passed
		fmt.Fprintf(&script, `\033]%d;x\007`, n)
	}
	script.WriteString(`A\033]052;c;ZWNobyBwd25lZA==\007B\033Ptmux;\033\033]52;c;eA==\007\033\\C\033]2;;touch pwned\007\033[021tD`)
	// Links to 40 schemes of the box's choosing: one line, as one kind.
	for i := range 40 {
		fmt.Fprintf(&script, `\033]8;;x%d://a\007l\033]8;;\007`, i)
	}
	script.WriteString(`\n'`)
	b := newBox(t)
	got := b.onTerminal(`[]`, "--net", "off", "--", "sh", "-c", script.String())
	if got.Exit != float64(0) || !strings.Contains(got.Terminal, "ABC\x1b]2;;touch pwned\aD") || strings.Contains(got.Terminal, "\x1b[21t") {
		t.Errorf("exit %v; want ABCD on the terminal without the title report: %q", got.Exit, got.Terminal)
	}
	logged := b.terminalDrops()
	for _, want := range []string{"OSC 52", "DCS", "CSI 21 t"} {
		if !logged[want] {
			t.Errorf("%s not logged: %v", want, logged)
		}
	}
	links := 0
	for what := range logged {
		if strings.HasPrefix(what, "OSC 8 to ") {
			links++
		}
	}
	if links != 1 {
		t.Errorf("%d lines for the links, want 1: %v", links, logged)
	}
	more := 0
	for _, rec := range b.records() {
		if rec.Type == audit.TypeTerminal && strings.HasPrefix(rec.Detail, "more kinds than the 16 logged") {
			more++
		}
	}
	if unknown := len(logged) - 4; unknown != 16 || more != 1 {
		t.Errorf("%d other kinds logged and %d lines saying more went unlogged, want 16 and 1: %v", unknown, more, logged)
	}
}

// TestRunTerminalProcessSubstitutionKeptFromTheBox: cordon run … >
// >(less) has the shell fork the pager before it becomes cordon, so the
// pager is cordon's own child, in its job, and was not counted as sharing
// it (cordon's own children were not): the box got a terminal fed from
// the keys typed to the pager. Now it gets none, as with a pipe.
func TestRunTerminalProcessSubstitutionKeptFromTheBox(t *testing.T) {
	b := newBox(t)
	const box = `stat -L -c 'stdin %t:%T' /proc/self/fd/0`
	got := b.onTerminalAs(`[]`, "/bin/bash", "-c", `exec "$0" run --audit "$1" --net off -- sh -c "$2" 2> >(sleep 3)`, cordonBin(t), b.audit, box)
	if !strings.Contains(got.Terminal, "stdin 1:3") {
		t.Errorf("the box's stdin is not /dev/null: %q", got.Terminal)
	}
}

// TestRunTerminalPipedToAPagerKeptFromTheBox: cordon run … | less is one
// job, whose terminal the pager reads as the box runs, so the box cannot
// have a terminal of its own fed from it. It was handed the terminal
// itself, on stdin and stderr: OSC 52 on stderr reached the terminal, and
// it could read the pager's keys. It now has /dev/null for stdin and a
// pipe for stderr, which cordon copies to the terminal without what the
// terminal would answer or acts beyond it (as for a run in the
// background), and the drops are logged.
func TestRunTerminalPipedToAPagerKeptFromTheBox(t *testing.T) {
	b := newBox(t)
	script := `printf 'A\033]52;c;ZWNobyBwd25lZA==\007B\n' >&2; stat -L -c 'stdin %t:%T' /proc/self/fd/0 >&2`
	argv := []string{"-c", ttyPipeline, b.ws, cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--", "sh", "-c", script}
	r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
	for _, want := range []string{"AB", "stdin 1:3", "pager sees icanon=0 echo=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "^[]52") || strings.Contains(r.stdout, "ZWNobyBwd25lZA") {
		t.Errorf("OSC 52 reached the terminal:\n%s", r.stdout)
	}
	if logged := b.terminalDrops(); !logged["OSC 52"] {
		t.Errorf("logged as dropped: %v, want OSC 52", logged)
	}
}

// TestRunTerminalRelayKeysTheBoxChose: the box may make any key a signal
// on its terminal (stty intr e), and cordon sends the signal when that
// key is typed. Sent to cordon's job, as the terminal sends the user's own
// Ctrl-C, it reached the programs cordon runs under (a script, make): the
// box had the user's ordinary typing interrupt them. A key the box chose
// now signals cordon alone, which passes it to the command, and that is
// logged; the user's Ctrl-C still reaches the whole job, unlogged.
func TestRunTerminalRelayKeysTheBoxChose(t *testing.T) {
	for _, c := range []struct {
		name, box, typed string
		survives         bool
	}{
		{"a key the box chose", "stty intr e; echo ready; read x; echo not reached", "e", true},
		{"the user's Ctrl-C", "echo ready; read x; echo not reached", "\u0003", false},
	} {
		b := newBox(t)
		steps, err := json.Marshal([][]string{{"ready", "type", c.typed}})
		if err != nil {
			t.Fatal(err)
		}
		const job = `"$0" run --audit "$1" --net off -- sh -c "$2"; echo cordon $?; echo the script goes on`
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", "-c", ttyRelay, b.ws, string(steps), "sh", "-c", job, cordonBin(t), b.audit, c.box))
		var got relayed
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%s: %v\n%s%s", c.name, err, r.stdout, r.stderr)
		}
		if strings.Contains(got.Terminal, "not reached") {
			t.Errorf("%s: the command was not interrupted: %q", c.name, got.Terminal)
		}
		if survived := strings.Contains(got.Terminal, "cordon 130") && strings.Contains(got.Terminal, "the script goes on"); survived != c.survives {
			t.Errorf("%s: the script cordon runs under went on: %v, want %v (exit %v): %q", c.name, survived, c.survives, got.Exit, got.Terminal)
		}
		logged := false
		for _, rec := range b.records() {
			logged = logged || rec.Type == audit.TypeTerminal && rec.Decision == audit.Deny && rec.Reason == "terminal_key" &&
				strings.Contains(rec.Detail, `made "e" a key that sends SIGINT`)
		}
		if logged != c.survives {
			t.Errorf("%s: the key the box chose logged: %v, want %v", c.name, logged, c.survives)
		}
	}
}

// TestRunTerminalEightBitLocale: under a locale whose character set is
// not UTF-8, the user's terminal decodes bytes and reads one from 0x80 to
// 0x9F as a C1 control, and a character cordon passed as UTF-8 carried
// one: U+011D (C4 9D) then "52;c;…" set the clipboard of an xterm run
// with LANG=C (red team, round 7). Such a character now reaches the
// terminal as "?", and the run's log says so (é, C3 A9, holds no such
// byte and passes); a UTF-8 locale's run passes it.
func TestRunTerminalEightBitLocale(t *testing.T) {
	const script = `printf 'A\304\23552;c;OGJpdA==\007B\303\251C\n'`
	for _, c := range []struct {
		lang, want string
		logged     bool
	}{
		{"C", "A?52;c;OGJpdA==\aB\u00e9C", true},
		{"en_US.ISO-8859-1", "A?52;c;OGJpdA==\aB\u00e9C", true},
		{"C.UTF-8", "A\u011d52;c;OGJpdA==\aB\u00e9C", false},
	} {
		b := newBox(t)
		got := b.onTerminalAs(`[]`, "/usr/bin/env", "LC_ALL=", "LC_CTYPE=", "LANG="+c.lang, cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--", "sh", "-c", script)
		if got.Exit != float64(0) {
			t.Errorf("LANG=%s: exit %v\n%q", c.lang, got.Exit, got.Terminal)
		}
		if !strings.Contains(got.Terminal, latin1(c.want)) {
			t.Errorf("LANG=%s: the terminal did not get %q: %q", c.lang, c.want, got.Terminal)
		}
		if logged := b.terminalDrops(); logged["C1 byte in a character"] != c.logged {
			t.Errorf("LANG=%s: logged as dropped: %v, want the C1 byte logged: %v", c.lang, logged, c.logged)
		}
	}
}

// latin1 is s's bytes as ttyRelay reports a terminal's: one character
// each.
func latin1(s string) string {
	runes := make([]rune, len(s))
	for i := range len(s) {
		runes[i] = rune(s[i])
	}
	return string(runes)
}
