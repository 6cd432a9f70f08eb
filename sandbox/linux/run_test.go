//go:build linux

package linux

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStatusReader(t *testing.T) {
	r := newStatusReader()
	r.readBwrap(strings.NewReader(`{ "child-pid": 4242, "mnt-namespace": 1 }
{ "exit-code": 3 }`))
	if r.initPid() != 4242 || r.exit == nil || *r.exit != 3 {
		t.Fatalf("bwrap status: pid %d exit %v", r.pid, r.exit)
	}
	started := newStatusReader()
	started.readBwrap(strings.NewReader(`{ "child-pid": 7 }`))
	if started.waitInit() != 7 || started.exit != nil {
		t.Fatalf("a sandbox that never ran its command has exit %v", started.exit)
	}
	for _, c := range []struct {
		r     *statusReader
		known bool
	}{{r, true}, {started, false}} {
		select {
		case <-c.r.exitKnown:
			if !c.known {
				t.Error("exitKnown is closed without an exit code")
			}
		default:
			if c.known {
				t.Error("exitKnown is open after the exit code")
			}
		}
	}
	failed := newStatusReader()
	failed.readBwrap(strings.NewReader(""))
	if failed.waitInit() != 0 {
		t.Fatal("a bwrap that reported nothing has an init")
	}
	r.readProbe(strings.NewReader(`[{"name":"a","ok":true},{"name":"b","ok":false,"detail":"x"}]`))
	if len(r.probe) != 2 || !r.probe[0].OK || r.probe[1].Detail != "x" {
		t.Fatalf("probe: %+v", r.probe)
	}
	bad := newStatusReader()
	bad.readProbe(strings.NewReader("not json"))
	if bad.probe != nil {
		t.Fatalf("unreadable probe output became %+v", bad.probe)
	}
}

func TestStatusFields(t *testing.T) {
	for _, c := range []struct {
		line string
		want map[string]int64 // nil: refused
	}{
		{`{ "child-pid": 4242, "cgroup-namespace": 4026531835, "mnt-namespace": 1 }`,
			map[string]int64{"child-pid": 4242, "cgroup-namespace": 4026531835, "mnt-namespace": 1}},
		{`{ "exit-code": 0 }`, map[string]int64{"exit-code": 0}},
		{`{"exit-code":-1}`, map[string]int64{"exit-code": -1}},
		{"{\t}\r", map[string]int64{}},
		{`{ "a": 1, "a": 2 }`, map[string]int64{"a": 2}},
		{``, nil},
		{`{ "child-pid": 4242`, nil},
		{`{ "child-pid": "4242" }`, nil},
		{`{ "child-pid": 4.5 }`, nil},
		{`{ "child-pid": 1e3 }`, nil},
		{`{ "child-pid": 012 }`, nil},
		{`{ "child-pid": - }`, nil},
		{`{ "child-pid": 99999999999999999999 }`, nil},
		{`{ "child-pid": 1 } x`, nil},
		{`{ "child-pid": 1, }`, nil},
		{`{ "ch\"ild": 1 }`, nil},
		{`{ child-pid: 1 }`, nil},
		{`[1]`, nil},
	} {
		got, ok := statusFields([]byte(c.line))
		if ok != (c.want != nil) || (ok && !maps.Equal(got, c.want)) {
			t.Errorf("statusFields(%q) = %v, %v; want %v", c.line, got, ok, c.want)
		}
	}
}

// What statusFields reads, encoding/json reads the same: it accepts a
// subset of JSON, never a different meaning.
func FuzzStatusFields(f *testing.F) {
	f.Add([]byte(`{ "child-pid": 4242, "cgroup-namespace": 4026531835 }`))
	f.Add([]byte(`{ "exit-code": 3 }`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := statusFields(line)
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var m map[string]json.Number
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("statusFields read %q as %v; encoding/json refuses it: %v", line, got, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("statusFields read %q whole; encoding/json finds more after the object", line)
		}
		if len(m) != len(got) {
			t.Fatalf("%q: statusFields %v, encoding/json %v", line, got, m)
		}
		for k, n := range m {
			v, err := n.Int64()
			if err != nil || got[k] != v {
				t.Fatalf("%q: %s is %d to statusFields, %s to encoding/json", line, k, got[k], n)
			}
		}
	})
}

func TestExitSignal(t *testing.T) {
	for code, want := range map[int]string{0: "", 1: "", 128: "", 130: "SIGINT", 137: "SIGKILL", 143: "SIGTERM", 255: ""} {
		if got := exitSignal(code); got != want {
			t.Errorf("exitSignal(%d) = %q, want %q", code, got, want)
		}
	}
}

// commandOf finds only pid 2 of a pid namespace among init's children: a
// child of this test process is none.
func TestCommandOfIgnoresOtherChildren(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if c := commandOf(os.Getpid()); c != nil {
		c.close()
		t.Fatalf("pid %d, in no pid namespace of its own, was taken for the command", c.pid)
	}
	if isCommand(cmd.Process.Pid, os.Getpid()) {
		t.Fatal("a plain child passed as pid 2")
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

// The self-test refuses arguments it cannot use (its report through the
// descriptor is covered by every probe: doctor and the memoised check).
func TestProbeArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"5"}, {"x", "/o"}, {"2", "/o"}, {"5", "/o", "extra"}} {
		if code := Probe(args); code != ExitLaunchFailed {
			t.Errorf("Probe(%q) = %d, want %d", args, code, ExitLaunchFailed)
		}
	}
}

// TestStdioFilesSharedWriter: stdout and stderr that are one writer get
// one pipe, so one goroutine writes to it (two would race); the output
// arrives whole by the time done returns.
func TestStdioFilesSharedWriter(t *testing.T) {
	var out bytes.Buffer
	files, done, err := stdioFiles(strings.NewReader("in"), &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if files[1] != files[2] {
		t.Fatal("stdout and stderr, one writer, got two pipes")
	}
	// The command's side: read stdin, write to both.
	got, err := io.ReadAll(files[0])
	if err != nil || string(got) != "in" {
		t.Fatalf("stdin gave %q, %v", got, err)
	}
	files[1].WriteString("out ")
	files[2].WriteString("err")
	done()
	if out.String() != "out err" {
		t.Fatalf("output %q, want %q", out.String(), "out err")
	}

	var o, e bytes.Buffer
	files, done, err = stdioFiles(nil, &o, &e)
	if err != nil {
		t.Fatal(err)
	}
	if files[1] == files[2] {
		t.Fatal("two writers got one pipe")
	}
	files[1].WriteString("o")
	files[2].WriteString("e")
	done()
	if o.String() != "o" || e.String() != "e" {
		t.Fatalf("stdout %q, stderr %q", o.String(), e.String())
	}
}

// TestGoAheadWithheld: bwrap holds the command back until the go-ahead
// byte, and a go-ahead pipe whose outside end is gone (cordon died) never
// lets it start; the sandbox keeps waiting until it is killed.
func TestGoAheadWithheld(t *testing.T) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bubblewrap is needed: ", err)
	}
	for _, tc := range []struct {
		name  string
		allow bool
	}{{"withheld", false}, {"given", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := dir + "/ran"
			rw, w, err := goAheadPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bw, "--ro-bind", "/", "/", "--bind", dir, dir, "--unshare-pid", "--die-with-parent",
				"--block-fd", "3", "--", "/bin/sh", "-c", "echo > "+marker)
			cmd.ExtraFiles = []*os.File{rw}
			// Its own process group, which its sandbox child shares until
			// the go-ahead: killing bwrap alone would leave that child
			// waiting.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			rw.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if tc.allow {
				if _, err := w.Write([]byte{1}); err != nil {
					t.Fatal(err)
				}
			}
			w.Close() // as when cordon dies: its end closes
			select {
			case err := <-exited:
				if !tc.allow {
					t.Fatalf("bwrap went on without the go-ahead: %v", err)
				}
				if _, err := os.Stat(marker); err != nil {
					t.Fatalf("the command did not run after the go-ahead: %v", err)
				}
			case <-time.After(500 * time.Millisecond):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				if tc.allow {
					t.Fatal("the go-ahead did not start the command")
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the command ran without the go-ahead")
				}
			}
		})
	}
}

// TestEndedCommandExitCode: a command whose end its parent has not reaped
// (the sandbox's init, stopped by the command) is seen to end through its
// pidfd, and its exit code is read from its zombie as bwrap would report
// it; once reaped, there is none to read.
func TestEndedCommandExitCode(t *testing.T) {
	for script, want := range map[string]int{"exit 7": 7, "kill -SEGV $$": 139} {
		cmd := exec.Command("sh", "-c", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		c := &process{pid: cmd.Process.Pid, fd: pfd}
		stop := make(chan struct{})
		select {
		case <-c.ended(stop):
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: its end was not seen", script)
		}
		if got := c.exitCode(); got == nil || *got != want {
			t.Errorf("%s: exit code %v, want %d", script, got, want)
		}
		cmd.Wait()
		if got := c.exitCode(); got != nil {
			t.Errorf("%s: reaped, yet exit code %d", script, *got)
		}
		close(stop)
		c.close()
	}
	if s, ok := statExitStatus("42 (a) b (c)) Z " + strings.Repeat("0 ", 48) + "2816 extra"); !ok || s.ExitStatus() != 11 {
		t.Errorf("exit_code after a name holding ') ': %v %v", s, ok)
	}
	if _, ok := statExitStatus("42 (short) Z 1 2"); ok {
		t.Error("a stat line without exit_code gave one")
	}
}

// TestEndedUnreported: why a command let start ended with no report of
// its end; nothing for a box that never got the go-ahead.
func TestEndedUnreported(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wentAhead bool
		stopped   string
		launcher  unix.Signal
		want      string
	}{
		{"never let start", false, "cordon ended it", unix.SIGKILL, ""},
		{"cordon ended the box", true, "cordon ended it", unix.SIGKILL, "cordon ended it"},
		{"launcher killed from outside", true, "", unix.SIGTERM, "the box's launcher (bwrap) was ended by SIGTERM from outside cordon while the command ran, and the box ended with it"},
		{"launcher exited on its own", true, "", 0, ""},
	} {
		if got := endedUnreported(tc.wentAhead, tc.stopped, tc.launcher); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
