//go:build linux

package linux

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestChild(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdio := []*os.File{null, null, null}
	for _, c := range []struct {
		name string
		argv []string
		kill bool
		want string
	}{
		{"exit 0", []string{"/bin/sh", "-c", "exit 0"}, false, ""},
		{"exit 3", []string{"/bin/sh", "-c", "exit 3"}, false, "exit status 3"},
		{"killed", []string{"/bin/sh", "-c", "sleep 30"}, true, "signal: killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch, err := startChild(c.argv, nil, stdio, &syscall.SysProcAttr{Setpgid: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.kill {
				ch.signal(unix.SIGKILL)
			}
			err = ch.wait()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("wait() = %q; want %q", got, c.want)
			}
			// Reaped: its pid may belong to another process now, so a
			// signal must not be sent.
			ch.mu.Lock()
			reaped := ch.reaped
			ch.mu.Unlock()
			if !reaped {
				t.Error("wait returned before the child was marked reaped")
			}
			ch.signal(unix.SIGKILL) // must not panic or reach anyone
		})
	}
	if _, err := startChild([]string{"/nonexistent/cordon-child"}, nil, stdio, nil, nil); err == nil {
		t.Error("startChild of a missing program succeeded")
	}
}
