//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// newPseudoTerminal opens a pseudo-terminal and returns its master and
// its terminal's name; the caller opens the terminal, so that it is not
// the test's controlling terminal.
func newPseudoTerminal(t *testing.T) (master *os.File, name string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	return master, fmt.Sprintf("/dev/pts/%d", n)
}

// openWriteOnly opens the terminal name for writing alone, blocking, as
// a shell hands cordon its stdout and stderr.
func openWriteOnly(t *testing.T, name string) *os.File {
	t.Helper()
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return os.NewFile(uintptr(fd), name)
}

// TestShareTerminalOneWriterPerTerminal: the command's stdout and stderr
// on one terminal it does not get (another pane's, cordon run … >
// /dev/pts/N 2>&1) reach it through one Display. Through one each, a
// write of one the kernel cut short (non-blocking, as a program sharing
// the terminal may leave it, with its buffer full; or one a signal
// interrupts, whose rest the other's write can precede) left the
// terminal in the middle of a sequence it passed, which the other's
// next write ended: the command's stdout cut after ESC [ and its stderr
// 6n made a cursor position report, typed to that pane's shell. The
// command fills the terminal with a colour reset, each try cut
// somewhere, until a cut lands in a sequence (a bounded number of tries).
func TestShareTerminalOneWriterPerTerminal(t *testing.T) {
	const tries = 30
	inSequence := 0
	for try := range tries {
		master, name := newPseudoTerminal(t)
		out, errw := openWriteOnly(t, name), openWriteOnly(t, name)
		s := &sandbox.Spec{Stdout: out, Stderr: errw}
		if shareTerminal(s) {
			t.Fatal("the command was given a terminal it may not read")
		}
		if err := unix.SetNonblock(int(out.Fd()), true); err != nil {
			t.Fatal(err)
		}
		fill := strings.Repeat("x", try%3) + strings.Repeat("\x1b[m", 100000)
		if _, err := s.Stdout.Write([]byte(fill)); err == nil {
			t.Fatal("the terminal took the whole write: no cut to test")
		}
		if err := unix.SetNonblock(int(out.Fd()), false); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() { b, _ := io.ReadAll(master); got <- string(b) }()
		if _, err := s.Stderr.Write([]byte("6n")); err != nil {
			t.Fatal(err)
		}
		out.Close()
		errw.Close()
		tail := strings.TrimLeft(strings.ReplaceAll(<-got, "\x1b[m", ""), "x")
		if strings.Contains(tail, "\x1b[6n") || strings.Contains(tail, "\x1b6n") {
			t.Fatalf("try %d: the terminal was asked: it got %q after the colour resets", try, tail)
		}
		if strings.HasPrefix(tail, "\x1b") {
			inSequence++
		}
	}
	if inSequence == 0 {
		t.Fatalf("none of %d cuts landed in a sequence", tries)
	}
}
