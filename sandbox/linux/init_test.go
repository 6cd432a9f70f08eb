//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestParseInitFlags(t *testing.T) {
	f, err := parseInitFlags([]string{"--status-fd", "5", "--rlimit-data", "100", "--rlimit-nproc", "7", "--exe", "/bin/sh", "--", "sh", "-c", "--exe x"})
	if err != nil {
		t.Fatal(err)
	}
	if f.statusFD != 5 || f.rlimitData != 100 || f.nproc != 7 || f.exe != "/bin/sh" || !slices.Equal(f.argv, []string{"sh", "-c", "--exe x"}) {
		t.Fatalf("parsed %+v", f)
	}
	if _, err := parseInitFlags([]string{"--status-fd", "5", "--"}); err == nil {
		t.Fatal("no command was accepted")
	}
	if _, err := parseInitFlags([]string{"--bogus"}); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
	if f, err := parseInitFlags([]string{"--probe", "/x", "--"}); err != nil || f.probe != "/x" {
		t.Fatalf("probe: %+v %v", f, err)
	}
}

func TestFindExecutable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "exe"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(dir, "plain"), "", 0o644)
	tests := []struct {
		exe, argv0 string
		code       int
	}{
		{filepath.Join(dir, "exe"), "exe", 0},
		{filepath.Join(dir, "plain"), "plain", ExitNotExecutable},
		{dir, "dir", ExitNotExecutable},
		{filepath.Join(dir, "missing"), "missing", ExitNotFound},
		{"", "sh", 0},
		{"", "no-such-command-anywhere", ExitNotFound},
	}
	for _, tt := range tests {
		_, code, err := findExecutable(tt.exe, tt.argv0)
		if code != tt.code || (code == 0) != (err == nil) {
			t.Errorf("findExecutable(%q, %q) = %d, %v; want %d", tt.exe, tt.argv0, code, err, tt.code)
		}
	}
}

func TestStartErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{&os.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOENT}, ExitNotFound},
		{&os.PathError{Op: "fork/exec", Path: "x", Err: syscall.EACCES}, ExitNotExecutable},
		{&os.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOEXEC}, ExitNotExecutable},
		{&os.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOMEM}, ExitLaunchFailed},
		{os.ErrClosed, ExitLaunchFailed},
	}
	for _, tt := range tests {
		if got := startErrorCode(tt.err); got != tt.want {
			t.Errorf("startErrorCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestStatusReader(t *testing.T) {
	r := statusReader{reported: make(chan struct{})}
	r.readBwrap(strings.NewReader(`{ "child-pid": 4242, "mnt-namespace": 1 }
{ "exit-code": 3 }`))
	if r.childPid() != 4242 || r.bwrapExit == nil || *r.bwrapExit != 3 {
		t.Fatalf("bwrap status: pid %d exit %v", r.pid, r.bwrapExit)
	}
	r.readInit(strings.NewReader(`{"started":true}
not json
{"exit":{"code":130,"signal":"SIGINT"}}
`))
	select {
	case <-r.reported:
	default:
		t.Fatal("the first init report did not close reported")
	}
	if !r.started || r.exit == nil || r.exit.Code != 130 || r.exit.Signal != "SIGINT" {
		t.Fatalf("init status: started %v exit %+v", r.started, r.exit)
	}
	e := statusReader{reported: make(chan struct{})}
	e.readInit(strings.NewReader(`{"error":"x: command not found","code":127}`))
	if e.initErr == nil || e.initErr.Code != 127 {
		t.Fatalf("init error: %+v", e.initErr)
	}
}

func TestParseVersion(t *testing.T) {
	for s, want := range map[string]bool{"0.8.0": true, "0.11.1": true, "0.7": true, "x.y": false, "1": false} {
		v, ok := parseVersion(s)
		if ok != want {
			t.Errorf("parseVersion(%q) ok = %v", s, ok)
		}
		if ok && s == "0.7" && !less(v, minBwrap) {
			t.Errorf("0.7 is not older than 0.8.0")
		}
	}
	if v, _ := parseVersion("0.8.0"); less(v, minBwrap) {
		t.Error("0.8.0 is older than itself")
	}
}
