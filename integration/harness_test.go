//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// result is how a command run by the tests ended.
type result struct {
	stdout, stderr string
	code           int
}

// cordonIn prepares `cordon ARGS...` as the test user with dir as its
// working directory; env entries override the defaults asUser sets.
func cordonIn(t testing.TB, dir string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := asUser(t, env, cordonBin(t), args...)
	cmd.Dir = dir
	return cmd
}

// runResult runs cmd to completion within timeout, keeping stdout and
// stderr apart. A command still running at the deadline fails the test.
func runResult(t testing.TB, timeout time.Duration, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr syncbuf.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %q did not finish within %s, and processes it left still hold its output after it was killed; stderr:\n%s", cmd.Path, cmd.Args[1:], timeout, stderr.String())
		}
		t.Fatalf("%s %q did not finish within %s; stderr:\n%s", cmd.Path, cmd.Args[1:], timeout, stderr.String())
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("wait %s: %v", cmd.Path, err)
	}
	return r
}

// procsRunning returns the pids of live processes whose command line is
// exactly argv.
func procsRunning(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// childrenOf returns the pids of the live processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); err == nil && i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				pids = append(pids, child)
			}
		}
	}
	return pids
}

// eventually polls cond every 20ms until it holds or within passes.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
