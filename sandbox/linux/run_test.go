//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
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

// TestStdioFilesHandedOver: a pipe, a socket or a character device is
// given to the command as it is; a regular file or a directory, which the
// box could open anew through /proc/self/fd, goes through a pipe, and
// stdout and stderr that are one file share one.
func TestStdioFilesHandedOver(t *testing.T) {
	dir := t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	socks, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock := os.NewFile(uintptr(socks[0]), "socket")
	defer sock.Close()
	defer unix.Close(socks[1])
	open := func(path string, flag int) *os.File {
		f, err := os.OpenFile(path, flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, tc := range []struct {
		name string
		f    *os.File
		want bool
	}{
		{"pipe", pw, true},
		{"socket", sock, true},
		{"character device", open(os.DevNull, os.O_WRONLY), true},
		{"regular file", open(filepath.Join(dir, "log"), os.O_WRONLY|os.O_CREATE), false},
		{"directory", open(dir, os.O_RDONLY), false},
	} {
		files, done, err := stdioFiles(nil, tc.f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := files[1] == tc.f; got != tc.want {
			t.Errorf("%s: handed over %v, want %v", tc.name, got, tc.want)
		}
		done()
	}

	log := filepath.Join(dir, "both")
	out, errw := open(log, os.O_WRONLY|os.O_CREATE), open(log, os.O_WRONLY)
	files, done, err := stdioFiles(nil, out, errw)
	if err != nil {
		t.Fatal(err)
	}
	if files[1] != files[2] {
		t.Fatal("stdout and stderr, one file, got two pipes")
	}
	files[1].WriteString("out ")
	files[2].WriteString("err")
	done()
	if got, _ := os.ReadFile(log); string(got) != "out err" {
		t.Fatalf("the file holds %q, want %q", got, "out err")
	}
}

// TestGoAheadWithheld: bwrap holds the command back until cordon writes
// the seccomp program (the go-ahead). While cordon withholds it, the box
// waits; once cordon's end of the pipe is gone without it (cordon died),
// bwrap exits without starting the command, and nothing is left waiting.
func TestGoAheadWithheld(t *testing.T) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bubblewrap is needed: ", err)
	}
	prog, err := seccompProgram(runtime.GOARCH, chmodRefused)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// give writes the go-ahead; end closes cordon's end of the pipe.
		give, end bool
	}{{"given", true, true}, {"withheld", false, false}, {"launcher gone", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := dir + "/ran"
			argv := []string{bw, "--ro-bind", "/", "/", "--bind", dir, dir, "--unshare-pid", "--die-with-parent",
				"--seccomp", "3", "--", "/bin/sh", "-c", "echo > " + marker}
			fds, err := newLaunchFiles(&launch{argv: argv, sep: len(argv) - 4, seccomp: prog}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer fds.close()
			cmd := exec.Command(bw, argv[1:]...)
			cmd.ExtraFiles = []*os.File{fds.seccomp}
			// Its own process group, which its sandbox child shares until
			// the go-ahead, so that the test can end it all.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			fds.closeChildEnds()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if tc.give {
				if err := fds.giveGoAhead(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.end {
				fds.close()
			}
			select {
			case err := <-exited:
				_, ran := os.Stat(marker)
				switch {
				case !tc.end:
					t.Fatalf("bwrap ended while cordon withheld the go-ahead: %v", err)
				case tc.give && (err != nil || ran != nil):
					t.Fatalf("the go-ahead did not run the command: bwrap %v, the command's file %v", err, ran)
				case !tc.give && ran == nil:
					t.Fatal("the command ran without the go-ahead")
				case !tc.give && err == nil:
					t.Fatal("bwrap exited 0 without the go-ahead")
				}
				// Nothing of the box is left in its group, once the
				// last of it has been reaped (a bound on a busy machine:
				// one left waiting stays for good).
				for end := time.Now().Add(10 * time.Second); syscall.Kill(-cmd.Process.Pid, 0) != syscall.ESRCH; {
					if time.Now().After(end) {
						t.Fatal("a process of the box outlived bwrap by 10s")
					}
					time.Sleep(10 * time.Millisecond)
				}
			case <-time.After(2 * time.Second):
				if tc.end {
					t.Fatal("bwrap kept waiting after cordon's end of the go-ahead was gone")
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the command ran without the go-ahead")
				}
			}
		})
	}
}

// TestLauncherKilledBeforeGoAhead: a cordon killed outright (SIGKILL)
// after bwrap has started but before the go-ahead leaves nothing behind:
// the box's processes end, and the command never runs. The launcher is
// this test's binary, run again as a child whose launch line never gets
// written (its Commit blocks).
func TestLauncherKilledBeforeGoAhead(t *testing.T) {
	if ws := os.Getenv("CORDON_TEST_LAUNCHER_WORKSPACE"); ws != "" {
		launchUntilCommit(t, ws, os.Getenv("CORDON_TEST_LAUNCHER_AUDIT"))
		return
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap is needed: ", err)
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		// A root run's command runs as nobody (run_as), which must reach
		// the workspace and write there.
		nobody, err := user.Lookup(policy.DefaultRunAs)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(nobody.Uid)
		if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(ws, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLauncherKilledBeforeGoAhead$", "-test.count=1")
	// The launcher is killed, so what it makes must be this process's to
	// remove: its audit log goes in a directory of this test's.
	cmd.Env = append(os.Environ(), "CORDON_TEST_LAUNCHER_WORKSPACE="+ws,
		"CORDON_TEST_LAUNCHER_AUDIT="+filepath.Join(t.TempDir(), "audit.jsonl"))
	defer killBox(ws)
	if line := firstLine(t, cmd, "the launcher did not reach its launch line"); line != "committing\n" {
		t.Fatalf("the launcher said %q, want committing", line)
	}
	// The launch line is written while the box is built: the box waits
	// for the go-ahead once one of its processes waits on a pipe. (bwrap
	// itself has an earlier window, of about a millisecond after it
	// forks, in which a launcher killed leaves its sandbox child waiting
	// for its parent, which no launcher can close; see the README.)
	for end := time.Now().Add(30 * time.Second); !slices.ContainsFunc(boxProcesses(ws), waitsOnPipe); {
		if time.Now().After(end) {
			t.Fatal("the box did not reach the go-ahead within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for len(boxProcesses(ws)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("5s after the launcher was killed, the box's processes %v are still there", boxProcesses(ws))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("the command ran though its launch line was never written")
	}
}

// launchUntilCommit is TestLauncherKilledBeforeGoAhead's launcher: it
// runs a network-off box in ws, auditing to auditPath, whose Commit says
// "committing" on stdout and then never returns. The command names ws on
// its command line, and so on bwrap's.
func launchUntilCommit(t *testing.T, ws, auditPath string) {
	p := policy.Defaults()
	p.Network = policy.NetOff
	s := &sandbox.Spec{Policy: p, Argv: []string{"/bin/sh", "-c", "echo > " + filepath.Join(ws, "ran")}, Workspace: ws, Workdir: ws,
		Stderr: os.Stderr, Stdout: os.Stderr}
	s.Commit = func() error {
		os.Stdout.WriteString("committing\n")
		select {}
	}
	_, err := New(Options{AuditPath: auditPath}).Run(context.Background(), s)
	t.Fatalf("the launch ended: %v", err)
}

// boxProcesses are the pids whose command line names ws: the box's
// bwrap processes, and its command.
func boxProcesses(ws string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(ws)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitsOnPipe says whether process pid sleeps reading a pipe.
func waitsOnPipe(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	return err == nil && strings.HasSuffix(string(b), "pipe_read") // anon_pipe_read on newer kernels
}

// killBox ends whatever of the box a failed test left.
func killBox(ws string) {
	for _, pid := range boxProcesses(ws) {
		syscall.Kill(pid, syscall.SIGKILL)
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

// firstLine starts cmd, a helper process (this test binary, rerun), with
// this test's stderr, and returns the first line it writes to its stdout;
// the test fails, saying what did not happen, when none comes within 30
// seconds. The helper is killed when the test ends.
func firstLine(t *testing.T, cmd *exec.Cmd, what string) string {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(out).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s within 30s", what)
	}
	return ""
}
