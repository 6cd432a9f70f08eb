package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/pty"
	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// relay is the pseudo-terminal a run in the foreground gives the box in
// place of the user's terminal, and cordon's copies between the two. A
// box handed the terminal itself wrote to it unfiltered: OSC 52 set the
// clipboard, for the user to paste into a shell, tmux's passthrough and
// kitty's remote control reached past the terminal. On the relay's
// pseudo-terminal the box has its own line discipline (its settings, its
// echo), the terminal's answers to what it asks reach it and not the
// shell, and what it writes reaches the terminal through
// termtext.Foreground.
type relay struct {
	master, slave *os.File
	tty           *os.File // the user's terminal, opened anew: non-blocking, cordon's alone
	out           *termtext.Writer
	raw           bool          // the terminal is raw: what is typed goes to the box
	found         *unix.Termios // the terminal's settings as cordon found them: the user's keys
	rebound       func(key string, sig unix.Signal)
	outDone       chan struct{} // closed when the copy of the box's output ends
	copied        atomic.Int64  // bytes of the box's output written to the terminal
	inDone        chan struct{} // closed when the copy of what is typed ends (raw only)
	winch         chan os.Signal
	winchDone     chan struct{}
	goneOnce      sync.Once
	stopOnce      sync.Once
}

// Once the box is gone, stop waits for its last output to reach the
// terminal (the pseudo-terminal hangs up when the last of its slave's
// descriptors closes, which is the box's end) while the terminal takes
// some of it every drainWait, drainMost at most. A fixed 2 s for it all
// lost the end of a run's output on a terminal that drains slowly (an ssh
// link at 10 KB/s), and the run said nothing of it (red team, round 7).
const (
	drainWait = 2 * time.Second
	drainMost = 30 * time.Second
)

// relayTerminal gives s a pseudo-terminal in place of each of its stdin,
// stdout and stderr that is cordon's controlling terminal with cordon's
// job in the foreground, and starts the copies (see relay); nil when none
// is. shareTerminal has kept a terminal cordon shares with another
// program of its job from the box. The terminal is made raw only when
// stdin is on it, and what is typed is then copied to the box, with the
// signals its keys send (Ctrl-C, Ctrl-\, Ctrl-Z) sent while the box's
// settings ask for them (ISIG; see signal). dropped is told what
// termtext.Foreground drops, and rebound each key the box made a signal
// of its own that was typed.
func relayTerminal(s *sandbox.Spec, dropped func(what string), rebound func(key string, sig unix.Signal)) (*relay, error) {
	var on [3]bool
	some := false
	for i, v := range []any{s.Stdin, s.Stdout, s.Stderr} {
		if controllingDevice(v) != 0 && inForeground(int(v.(*os.File).Fd())) {
			on[i], some = true, true
		}
	}
	if !some {
		return nil, nil
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	r := &relay{tty: tty, raw: on[0], rebound: rebound, outDone: make(chan struct{}), winch: make(chan os.Signal, 1), winchDone: make(chan struct{})}
	var settings *unix.Termios
	var size *unix.Winsize
	control(tty, func(fd int) {
		if settings, err = unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			size, err = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		}
	})
	if err != nil {
		err = fmt.Errorf("read the terminal's settings and size: %w", err)
	} else {
		r.master, r.slave, err = pty.Open()
	}
	if err == nil {
		if err = unix.IoctlSetTermios(int(r.slave.Fd()), unix.TCSETS, settings); err == nil {
			control(r.master, func(fd int) { err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, size) })
		}
		if err != nil {
			err = fmt.Errorf("give the pseudo-terminal the terminal's settings and size: %w", err)
		}
	}
	if err == nil && r.raw {
		r.found = settings
		control(tty, func(fd int) { err = unix.IoctlSetTermios(fd, unix.TCSETSW, rawMode(*settings)) })
		if err != nil {
			err = fmt.Errorf("make the terminal raw: %w", err)
		}
	}
	if err != nil {
		r.close()
		return nil, err
	}
	if on[0] {
		s.Stdin = r.slave
	}
	if on[1] {
		s.Stdout = r.slave
	}
	if on[2] {
		s.Stderr = r.slave
	}
	r.out = termtext.Foreground(tty, dropped)
	go r.copyOut()
	if r.raw {
		r.inDone = make(chan struct{})
		go r.copyIn()
	}
	signal.Notify(r.winch, unix.SIGWINCH)
	go r.resize()
	return r, nil
}

// rawMode is t as cfmakeraw(3) leaves it: bytes pass as they are typed,
// and the box's line discipline does the rest.
func rawMode(t unix.Termios) *unix.Termios {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	return &t
}

// control runs fn with f's descriptor, leaving f non-blocking (f.Fd()
// would make it blocking).
func control(f *os.File, fn func(fd int)) {
	if c, err := f.SyscallConn(); err == nil {
		c.Control(func(fd uintptr) { fn(int(fd)) })
	}
}

// copyOut copies what the box writes to the terminal, until the
// pseudo-terminal hangs up or the master is closed.
func (r *relay) copyOut() {
	defer close(r.outDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.master.Read(buf)
		if n > 0 {
			r.out.Write(buf[:n])
			r.copied.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}

// copyIn copies what is typed to the box, and sends the signals its keys
// stand for, until stop.
func (r *relay) copyIn() {
	defer close(r.inDone)
	buf := make([]byte, 4096)
	for {
		n, err := r.tty.Read(buf)
		if n > 0 {
			if _, err := r.master.Write(buf[:n]); err != nil {
				return
			}
			r.signal(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// signal sends the signals that the keys in typed stand for, when the
// box's settings ask for them (ISIG): the box's line discipline only
// echoes them (^C) and discards its line, as the box has no controlling
// terminal for it to signal. The user's own keys (Ctrl-C as the terminal
// had it) go to cordon's job, as the terminal itself would send them; a
// key the box made one (stty intr e) goes to cordon alone: the box would
// otherwise have the letters the user types stop or interrupt the
// programs cordon runs under (make, a script). cordon passes SIGINT and
// SIGQUIT to the command, and SIGTSTP ends the run (endOnSuspend).
func (r *relay) signal(typed []byte) {
	var t *unix.Termios
	control(r.master, func(fd int) { t, _ = unix.IoctlGetTermios(fd, unix.TCGETS) })
	if t == nil || t.Lflag&unix.ISIG == 0 {
		return
	}
	for _, k := range []struct {
		cc  int
		sig unix.Signal
	}{{unix.VINTR, unix.SIGINT}, {unix.VQUIT, unix.SIGQUIT}, {unix.VSUSP, unix.SIGTSTP}} {
		// 0 is _POSIX_VDISABLE.
		c := t.Cc[k.cc]
		if c == 0 || bytes.IndexByte(typed, c) < 0 {
			continue
		}
		if c == r.found.Cc[k.cc] {
			unix.Kill(-unix.Getpgrp(), k.sig)
		} else {
			unix.Kill(os.Getpid(), k.sig)
			r.rebound(string(rune(c)), k.sig)
		}
	}
}

// resize gives the pseudo-terminal the terminal's size when it changes.
// The box learns of it from cordon, which passes SIGWINCH on to the
// command, perhaps before the size is set here: so once it is, cordon
// sends itself SIGWINCH again, which the command gets after.
func (r *relay) resize() {
	defer close(r.winchDone)
	for range r.winch {
		var size, now *unix.Winsize
		control(r.tty, func(fd int) { size, _ = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ) })
		control(r.master, func(fd int) { now, _ = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ) })
		if size == nil || now == nil || *size == *now {
			continue
		}
		control(r.master, func(fd int) { unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, size) })
		unix.Kill(os.Getpid(), unix.SIGWINCH)
	}
}

// says is the writer of what cordon says on the terminal while the box
// runs: in turn with the box's output (Aside), and, on a raw terminal,
// each line ended with CR LF.
func (r *relay) says() io.Writer {
	if r.raw {
		return crlf{r.out.Aside()}
	}
	return r.out.Aside()
}

// boxGone is called once the box is gone: nothing more is read from the
// terminal, and the pseudo-terminal's output is restarted, which the box
// may have stopped (tcflow TCOOFF, ^S): cordon still writes to it what a
// --credential mask held back. It may be called more than once.
func (r *relay) boxGone() {
	r.goneOnce.Do(func() {
		if r.inDone != nil {
			// The copy may wait to read, or to write to a terminal whose
			// input the box left full.
			r.tty.SetReadDeadline(time.Now())
			r.master.SetWriteDeadline(time.Now())
			<-r.inDone
		}
		startOutput(int(r.slave.Fd()))
		signal.Stop(r.winch)
		close(r.winch)
		<-r.winchDone
	})
}

// stop ends the relay once the box is gone and cordon has written what
// it writes there: the last output is copied to the terminal. It may be
// called more than once.
func (r *relay) stop() {
	r.boxGone()
	r.stopOnce.Do(func() {
		r.slave.Close()
		if !drained(r.outDone, r.copied.Load, time.After) {
			var left int
			control(r.master, func(fd int) { left, _ = unix.IoctlGetInt(fd, unix.TIOCINQ) })
			// The copy may wait to read, or to write to a terminal
			// that takes nothing.
			r.tty.SetWriteDeadline(time.Now())
			r.master.Close()
			<-r.outDone
			if left > 0 {
				r.tty.SetWriteDeadline(time.Now().Add(drainWait))
				fmt.Fprintf(r.says(), "cordon: the last %d bytes of the command's output were not shown: the terminal took too long to take them\n", left)
			}
		}
		r.close()
	})
}

// drained waits for done while copied (bytes written so far) grows at
// least every drainWait, drainMost at most, and says whether done came;
// after is time.After, or a test's clock.
func drained(done <-chan struct{}, copied func() int64, after func(time.Duration) <-chan time.Time) bool {
	most := after(drainMost)
	for last := copied(); ; {
		select {
		case <-done:
			return true
		case <-most:
			return false
		case <-after(drainWait):
		}
		now := copied()
		if now == last {
			return false
		}
		last = now
	}
}

// close closes what relayTerminal opened.
func (r *relay) close() {
	for _, f := range []*os.File{r.master, r.slave, r.tty} {
		if f != nil {
			f.Close()
		}
	}
}

// crlf ends each line it writes with CR LF, as a terminal that is not raw
// does.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// terminalCapability says whether a run in the foreground of a terminal
// can have a pseudo-terminal of its own (relayTerminal), by opening one;
// without it such a run is refused.
func terminalCapability() sandbox.Capability {
	master, slave, err := pty.Open()
	if err != nil {
		return sandbox.Capability{Name: capTerminal, Status: sandbox.Degraded,
			Reason: "a run in the foreground of a terminal is refused: " + err.Error(),
			Fix:    "mount devpts with /dev/ptmx, or run with stdin, stdout and stderr away from the terminal"}
	}
	master.Close()
	slave.Close()
	return sandbox.Capability{Name: capTerminal, Status: sandbox.Ready,
		Reason: "a run in the foreground of a terminal gets a pseudo-terminal of its own, whose output reaches the terminal without OSC 52 (the clipboard) and the other control strings that act beyond the screen"}
}
