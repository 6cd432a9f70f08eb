//go:build linux

package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunInitCannotBeTraced: the command runs as the same user in the same
// namespaces as cordon's init (pid 1), but cannot attach to it or read its
// environment; it can still debug its own children.
func TestRunInitCannotBeTraced(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--", "python3", "-c", `
import ctypes, os, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
rc = libc.ptrace(PTRACE_ATTACH, 1, 0, 0)
print("attach-init", "ok" if rc == 0 else os.strerror(ctypes.get_errno()))
try:
    open("/proc/1/environ").read(); print("init-environ readable")
except OSError as e:
    print("init-environ", e.strerror)
child = subprocess.Popen(["sleep", "5"])
time.sleep(0.2)
rc = libc.ptrace(PTRACE_ATTACH, child.pid, 0, 0)
print("attach-own-child", "ok" if rc == 0 else os.strerror(ctypes.get_errno()))
child.kill()
`)
	expectCode(t, r, 0)
	for _, want := range []string{"attach-init Operation not permitted", "init-environ Permission denied", "attach-own-child ok"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestRunStopsAfterGrace: a command that ignores SIGTERM is killed, with its
// whole tree, a grace period after cordon is told to stop.
func TestRunStopsAfterGrace(t *testing.T) {
	b := newBox(t)
	marker := uniqueSleep()
	cmd := b.cmd("--net", "off", "--", "sh", "-c", "trap '' TERM; (setsid sh -c 'trap \"\" TERM; exec sleep "+marker+"' &); sleep "+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !eventually(30*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 2 }) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the command did not start: %v", procsRunning("sleep", marker))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("cordon run did not end within 40s of SIGTERM")
	}
	if !eventually(5*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 0 }) {
		t.Fatalf("processes outlived the stop: %v", procsRunning("sleep", marker))
	}
}
