// Package pty opens pseudo-terminals.
package pty

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Open returns a new pseudo-terminal's master, non-blocking (its reads
// and writes wait in Go's poller, and Close ends them), and its slave,
// both close-on-exec. The slave is had from the master (TIOCGPTPEER,
// Linux 4.13), not opened by name: a name in /dev/pts could be another's
// by the time it was opened.
func Open() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("open a pseudo-terminal: unlock it: %w", err)
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		unix.Close(m)
		return nil, nil, fmt.Errorf("open a pseudo-terminal: its slave (TIOCGPTPEER, Linux 4.13): %w", errno)
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(s, "pty slave"), nil
}
