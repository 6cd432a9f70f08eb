package pty

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpen: what the slave writes, the master reads, through the line
// discipline (LF written as CR LF); what the master writes, the slave
// reads as typed (echoed back to the master); and once the slave is
// closed the master reads what was left, then fails.
func TestOpen(t *testing.T) {
	m, s, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS); err != nil {
		t.Fatalf("the slave is not a terminal: %v", err)
	}
	if _, err := m.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 64)
	n, err := s.Read(line)
	if err != nil || string(line[:n]) != "typed\n" {
		t.Fatalf("the slave read %q, %v; want %q", line[:n], err, "typed\n")
	}
	if _, err := s.Write([]byte("out\n")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	m.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(m)
	if !bytes.Equal(all, []byte("typed\r\nout\r\n")) {
		t.Errorf("the master read %q (%v), want the echo and the output, LF as CR LF", all, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the master's reads did not end when the slave closed")
	}
}
