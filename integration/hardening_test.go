//go:build linux

package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// TestRunInitHoldsNothing: pid 1 is bwrap's own init, the same user in
// the same namespaces as the command, so the command may attach to it. It
// must gain nothing by that: pid 1 has no capabilities, the same seccomp
// filter and no_new_privs, an empty environment, and no trace in its
// memory of cordon's environment (which holds a secret here). In
// restricted mode bwrap is exec'd by the holder, so both paths are tried.
func TestRunInitHoldsNothing(t *testing.T) {
	for _, mode := range [][]string{{"--net", "off"}, {"--net", "restricted", "--ephemeral-ca"}} {
		t.Run(mode[1], func(t *testing.T) { initHoldsNothing(t, mode) })
	}
}

func initHoldsNothing(t *testing.T, mode []string) {
	b := newBox(t)
	// The script names the secret in two halves: its own text is pid 1's
	// argv, so the whole string must not appear in it.
	const half1, half2 = "cordon-host-", "secret-4f1d9a"
	cmd := b.cmd(append(mode, "--", "python3", "-c", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
status = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines() if ":" in l)
for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"):
    print(k, status[k].strip())
print("environ bytes", len(open("/proc/1/environ", "rb").read()))
secret = ("`+half1+`" + "`+half2+`").encode()
if libc.ptrace(16, 1, None, None) != 0:
    print("attach failed", os.strerror(ctypes.get_errno()))
else:
    os.waitpid(1, 0x40000000)
    found = False
    with open("/proc/1/mem", "rb") as mem:
        for line in open("/proc/1/maps"):
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if "r" not in f[1]:
                continue
            try:
                mem.seek(lo)
                found = found or secret in mem.read(min(hi - lo, 64 << 20))
            except OSError:
                pass
    libc.ptrace(17, 1, None, None)
    print("secret in init memory", found)
`)...)
	cmd.Env = append(cmd.Env, "CORDON_HOST_SECRET="+half1+half2)
	r := runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	for _, want := range []string{"CapEff 0000000000000000", "CapPrm 0000000000000000", "CapBnd 0000000000000000",
		"NoNewPrivs 1", "Seccomp 2", "environ bytes 0", "secret in init memory False"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestRunStopsAfterGrace: a command that ignores SIGTERM is killed, with its
// whole tree, a grace period after cordon is told to stop, and the run
// says so: exit status 137, and an exit line that gives the reason. It
// used to say the sandbox had not started (125, failed_to_start).
func TestRunStopsAfterGrace(t *testing.T) {
	b := newBox(t)
	marker := uniqueSleep()
	r := stopRunning(t, b, marker, func(cordon *exec.Cmd) { cordon.Process.Signal(syscall.SIGTERM) })
	expectEndedUnreported(t, b, r, "was still running 10s after cordon passed it the signal to stop")
}

// TestRunLauncherKilledFromOutside: bwrap killed by someone else while the
// command runs ends the box, and the run reports that, not a sandbox
// that never started.
func TestRunLauncherKilledFromOutside(t *testing.T) {
	b := newBox(t)
	marker := uniqueSleep()
	r := stopRunning(t, b, marker, func(cordon *exec.Cmd) {
		for _, pid := range childrenOf(cordon.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	expectEndedUnreported(t, b, r, "launcher (bwrap) was ended by SIGKILL from outside cordon")
}

// stopRunning starts a run whose command and a daemon it starts ignore
// SIGTERM, waits until both run, calls stop, and returns the run's result
// once every process of the box is gone.
func stopRunning(t *testing.T, b *box, marker string, stop func(cordon *exec.Cmd)) result {
	t.Helper()
	cmd := b.cmd("--net", "off", "--", "sh", "-c", "trap '' TERM; (setsid sh -c 'trap \"\" TERM; exec sleep "+marker+"' &); sleep "+marker)
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !eventually(30*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 2 }) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the command did not start: %v", procsRunning("sleep", marker))
	}
	stop(cmd)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("cordon run did not end within 40s of the stop")
	}
	if !eventually(5*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 0 }) {
		t.Fatalf("processes outlived the stop: %v", procsRunning("sleep", marker))
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// expectEndedUnreported checks a run whose box was ended while its command
// ran: exit status 137 (SIGKILL), why on stderr, and an exit line of
// outcome completed that says why.
func expectEndedUnreported(t *testing.T, b *box, r result, why string) {
	t.Helper()
	expectCode(t, r, 137)
	if !strings.Contains(r.stderr, why) {
		t.Errorf("stderr does not say %q:\n%s", why, r.stderr)
	}
	var exit *audit.Record
	for _, rec := range b.records() {
		if rec.Type == audit.TypeExit {
			exit = &rec
		}
	}
	if exit == nil || exit.Outcome != "completed" || exit.ExitCode == nil || *exit.ExitCode != 137 ||
		exit.Signal != "SIGKILL" || !strings.Contains(exit.Detail, why) {
		t.Fatalf("exit line %+v, want outcome completed, exit code 137, SIGKILL, and a detail that says %q", exit, why)
	}
}

// abstractProbe connects to the abstract unix socket argv[1] and reports
// how that went, then checks that an abstract socket of its own, made
// where it runs, still works.
const abstractProbe = `
import socket, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0" + name)
    print("host socket: connected")
except OSError as e:
    print("host socket: %s errno %d" % (type(e).__name__, e.errno))
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind("\0" + name + "-own")
l.listen(1)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("\0" + name + "-own")
print("own socket: connected")
`

// countAccepts accepts and closes connections on ln until it is closed,
// counting them.
func countAccepts(ln net.Listener) *atomic.Int32 {
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

// TestRunOpenClosesHostAbstractSockets: --net open shares the host's
// network namespace, and with it the abstract unix sockets no mount can
// hide (X11's, containerd shims'). The box must not reach them (Landlock
// answers EPERM, and the listener never sees a connection), while the
// same user outside the box does, and the box's own abstract sockets work.
func TestRunOpenClosesHostAbstractSockets(t *testing.T) {
	name := fmt.Sprintf("cordon-it-abstract-%d-%d", os.Getpid(), time.Now().UnixNano())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := countAccepts(ln)

	outside := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/python3", "-c", abstractProbe, name))
	if !strings.Contains(outside.stdout, "host socket: connected") {
		t.Fatalf("control: the test user outside the box could not reach the listener, so the test proves nothing:\n%s%s", outside.stdout, outside.stderr)
	}
	if !eventually(5*time.Second, func() bool { return accepted.Load() == 1 }) {
		t.Fatalf("control: the listener accepted %d connections, want 1", accepted.Load())
	}

	b := newBox(t)
	r := b.run("--net", "open", "--", "python3", "-c", abstractProbe, name)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "host socket: PermissionError errno 1") {
		t.Errorf("the box's connect to the host's abstract socket was not refused with EPERM:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "own socket: connected") {
		t.Errorf("the box's own abstract socket did not work:\n%s%s", r.stdout, r.stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 1 {
		t.Errorf("the host's listener accepted %d connections; only the control's should have reached it", n)
	}
}

// TestRunHidesHostControlSockets: the user's session bus (here a
// listener at $XDG_RUNTIME_DIR/bus) reaches the user's systemd, which
// starts whatever it is asked to, outside the box; the container engines'
// sockets are the same. Exposing the runtime directory shows the box the
// rest of it, but the bus is hidden (the listener sees no connection);
// exposing the socket itself is refused, and the refusal logged. The same
// user outside reaches it.
func TestRunHidesHostControlSockets(t *testing.T) {
	rt := userDir(t, "cordon-it-runtime-")
	writeUserFile(t, filepath.Join(rt, "notes.txt"), []byte("visible\n"))
	bus := filepath.Join(rt, "bus")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bus, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(bus, 0o777); err != nil {
		t.Fatal(err)
	}
	accepted := countAccepts(ln)
	const probe = `
import socket, sys
print(open(sys.argv[1] + "/notes.txt").read().strip())
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1] + "/bus")
    print("connected")
except OSError as e:
    print("refused", e.errno)
`
	outside := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/python3", "-c", probe, rt))
	if !strings.Contains(outside.stdout, "connected") || !eventually(5*time.Second, func() bool { return accepted.Load() == 1 }) {
		t.Fatalf("control: the test user outside the box could not reach the bus, so the test proves nothing:\n%s%s", outside.stdout, outside.stderr)
	}

	b := newBox(t)
	run := func(args ...string) result {
		cmd := cordonIn(t, b.ws, b.env("XDG_RUNTIME_DIR="+rt), append([]string{"run", "--audit", b.audit, "--net", "off"}, args...)...)
		return runResult(t, runTimeout, cmd)
	}
	r := run("--allow-path", rt, "--", "python3", "-c", probe, rt)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "visible") || !strings.Contains(r.stdout, "refused") {
		t.Errorf("with the runtime directory exposed, the box should read its files but not reach the bus:\n%s%s", r.stdout, r.stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 1 {
		t.Errorf("the bus accepted %d connections; only the control's should have reached it", n)
	}

	r = run("--allow-path", bus, "--", "true")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "can run commands outside the box") {
		t.Errorf("the refusal does not say why:\n%s", r.stderr)
	}
	recs := b.records()
	if last := recs[len(recs)-1]; last.Type != audit.TypeBlock || !strings.Contains(last.Detail, bus) {
		t.Errorf("the refusal's audit line: %+v", last)
	}
}

// TestRunHidesHostSocketsInTheWorkspace: a host process listening on a
// unix socket in the project (here where devenv puts its postgres, whose
// superuser has it run any program, COPY … TO PROGRAM) would act outside
// the box at its asking. Before, the box connected; the socket, listening
// when the run starts, is now hidden as in an exposed tree. The same user
// outside reaches it.
func TestRunHidesHostSocketsInTheWorkspace(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, ".devenv", "state", "postgres", "PG_VERSION"), "17\n")
	sock := filepath.Join(b.ws, ".devenv", "state", "postgres", ".s.PGSQL.5432")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	accepted := countAccepts(ln)
	const probe = `
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print("refused", e.errno)
`
	outside := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/python3", "-c", probe, sock))
	if !strings.Contains(outside.stdout, "connected") || !eventually(5*time.Second, func() bool { return accepted.Load() == 1 }) {
		t.Fatalf("control: the test user outside the box could not reach the socket, so the test proves nothing:\n%s%s", outside.stdout, outside.stderr)
	}
	r := b.run("--net", "off", "--", "python3", "-c", probe, sock)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "refused") {
		t.Errorf("the box reached the host's socket in its workspace:\n%s%s", r.stdout, r.stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 1 {
		t.Errorf("the socket accepted %d connections; only the control's should have reached it", n)
	}
}

// TestRunRefusesTheHostsProcesses: the host's /proc (with every process's
// environment, open files and, through /proc/PID/root, its whole
// filesystem), its terminals and shared memory are never exposed: naming
// one is refused, and logged; a wider directory shows them empty.
func TestRunRefusesTheHostsProcesses(t *testing.T) {
	b := newBox(t)
	for _, c := range []struct{ path, why string }{
		{"/proc", "refusing the host's /proc"},
		{"/proc/1/root", "refusing the host's /proc"},
		{"/dev/shm", "refusing the host's /dev/shm"},
		{"/dev", "refusing the host's /dev"},
	} {
		r := b.run("--net", "off", "--allow-path", c.path, "--", "true")
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, c.why) {
			t.Errorf("--allow-path %s: the refusal does not say why:\n%s", c.path, r.stderr)
		}
		recs := b.records()
		if last := recs[len(recs)-1]; last.Type != audit.TypeBlock || !strings.Contains(last.Detail, c.why) {
			t.Errorf("--allow-path %s: the refusal's audit line: %+v", c.path, last)
		}
	}
	r := b.run("--net", "off", "--allow-path", "/sys", "--", "sh", "-c", "ls /sys/fs/cgroup | wc -l; test -d /sys/class && echo sysfs")
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "0\nsysfs") {
		t.Errorf("with /sys exposed, its cgroups should be empty and the rest there:\n%s%s", r.stdout, r.stderr)
	}
}

// TestRunGuardsCordonsConfiguration: cordon's configuration (the global
// config, and the CA with its key) follows $XDG_CONFIG_HOME, --config and
// $CORDON_CONFIG wherever they point. Where the command may write (the
// workspace), a run is refused: the box could rewrite the next run's
// policy, or read the CA key; without the guard it did both. Inside a
// read-only exposure it reads as empty, and exposing it is refused.
func TestRunGuardsCordonsConfiguration(t *testing.T) {
	b := newBox(t)
	inWorkspace := filepath.Join(b.ws, ".xdg")
	elsewhere := userDir(t, "cordon-it-xdg-")
	for _, dir := range []string{inWorkspace, elsewhere} {
		if dir == inWorkspace {
			b.file(filepath.Join(dir, "keep"), "")
		}
		for _, args := range [][]string{{"init"}, {"ca", "export"}} { // the config, then the CA
			r := runResult(t, runTimeout, cordonIn(t, b.ws, b.env("XDG_CONFIG_HOME="+dir), args...))
			expectCode(t, r, 0)
		}
	}
	run := func(xdg string, args ...string) result {
		cmd := cordonIn(t, b.ws, b.env("XDG_CONFIG_HOME="+xdg), append([]string{"run", "--audit", b.audit, "--net", "off"}, args...)...)
		return runResult(t, runTimeout, cmd)
	}
	const probe = `cat "$1/cordon/ca/ca-key.pem" 2>/dev/null | grep -q PRIVATE && echo "ESCAPED: read the CA key"
echo "allow: [evil.example]" >> "$1/cordon/config.yaml" 2>/dev/null && echo "ESCAPED: wrote the config"
echo tried`

	r := run(inWorkspace, "--", "sh", "-c", probe, "sh", inWorkspace)
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "could rewrite your next run's policy") || strings.Contains(r.stdout, "ESCAPED") {
		t.Errorf("configuration in the workspace:\n%s%s", r.stdout, r.stderr)
	}
	if recs := b.records(); !strings.Contains(recs[len(recs)-1].Detail, "could rewrite your next run's policy") {
		t.Errorf("the refusal is not in the audit log: %+v", recs[len(recs)-1])
	}
	r = run(elsewhere, "--allow-path", elsewhere, "--", "sh", "-c", probe, "sh", elsewhere)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "ESCAPED") || !strings.Contains(r.stdout, "tried") {
		t.Errorf("configuration in a read-only exposure:\n%s%s", r.stdout, r.stderr)
	}
	r = run(elsewhere, "--allow-path", filepath.Join(elsewhere, "cordon", "ca"), "--", "true")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "refusing cordon's configuration") {
		t.Errorf("exposing the CA directory:\n%s", r.stderr)
	}
	// --config names the global config explicitly: the same holds.
	config := filepath.Join(b.ws, "cordon.yaml")
	cfg, err := os.ReadFile(filepath.Join(elsewhere, "cordon", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeUserFile(t, config, cfg)
	r = run(elsewhere, "--config", config, "--", "true")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "could rewrite your next run's policy") {
		t.Errorf("--config in the workspace:\n%s", r.stderr)
	}
}

// TestRunRefusesACacheTheCommandMayWrite: what cordon keeps in its cache
// directory for later runs is acted on as the user's own: the aftercare a
// killed run owes removes and sets aside the paths its record names, on
// the host. $XDG_CACHE_HOME can put that directory where a command may
// write: a project's .envrc pointing it at the workspace's .cache, and an
// earlier run from a shell without it, whose cache was elsewhere, so that
// nothing hid the workspace's. Before, the box of that earlier run wrote a
// record of aftercare owed in the workspace's .cache/cordon, and the next
// run, with $XDG_CACHE_HOME there, paid it: it removed a directory of the
// user's outside the workspace. A run whose cache directory lies in the
// workspace, or in a read-write --allow-path, is refused now, before it
// reads anything there, and the refusal is in the audit log.
func TestRunRefusesACacheTheCommandMayWrite(t *testing.T) {
	b := newBox(t)
	shared := userDir(t, "cordon-it-cache-")
	sum := sha256.Sum256([]byte(b.ws))
	name := hex.EncodeToString(sum[:12]) + "-2147483646.owed"
	const plant = `mkdir -p "$1/cordon/aftercare" && printf %s "$2" > "$1/cordon/aftercare/$3" && chmod 600 "$1/cordon/aftercare/$3" && echo planted`
	for _, c := range []struct {
		name, cache string
		args        []string // both runs'
	}{
		{"in the workspace", filepath.Join(b.ws, ".cache"), nil},
		{"in a read-write allow_path", shared, []string{"--allow-path", shared + ":rw"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			victim := userDir(t, "cordon-it-victim-")
			b.file(filepath.Join(victim, "keep"), "the user's")
			// The record as a run writes it (sandbox.Owe), of a cordon
			// long gone (a pid above any pid_max), owing the removal of
			// victim (Unmade).
			record := fmt.Sprintf("cordon aftercare owed v1\nworkspace %q\npid 2147483646\nguard 4 0 true %q\n", b.ws, victim)
			// The earlier run, whose cache is $HOME/.cache: its box plants
			// the record where the next run's cache is.
			r := b.run(slices.Concat([]string{"--net", "off"}, c.args, []string{"--", "sh", "-c", plant, "sh", c.cache, record, name})...)
			if r.code != 0 || !strings.Contains(r.stdout, "planted") {
				t.Fatalf("the box could not plant the record (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
			}
			cmd := cordonIn(t, b.ws, b.env("XDG_CACHE_HOME="+c.cache), slices.Concat([]string{"run", "--audit", b.audit, "--net", "off"}, c.args, []string{"--", "true"})...)
			r = runResult(t, runTimeout, cmd)
			if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
				t.Fatalf("the record the box planted had cordon remove %s on the host: %v\n%s", victim, err, r.stderr)
			}
			expectCode(t, r, 125)
			const why = "cordon's cache directory"
			if !strings.Contains(r.stderr, why) {
				t.Errorf("the refusal does not say why:\n%s", r.stderr)
			}
			recs := b.records()
			if last := recs[len(recs)-1]; last.Type != audit.TypeBlock || !strings.Contains(last.Detail, why) {
				t.Errorf("the refusal's audit line: %+v", last)
			}
		})
	}
}

// TestRunRelativeHomeKeepsNothingInTheWorkspace: with a relative $HOME
// (and no $XDG_CONFIG_HOME, $XDG_CACHE_HOME or $XDG_STATE_HOME), cordon
// made its cache (probe results, trust bundles, the records of aftercare
// owed) and its CA, key and all, under that path from the directory it
// started in, the workspace: the box read the key, and no check of where
// cordon's own directories lie saw a relative path. Later, the CA was
// refused and the cache dropped, but the audit log's directory was still
// made there before the run was refused for it. A relative $HOME now
// counts for none, everywhere (internal/homedir): cordon's files go
// under the password database's home, the runs go on, and nothing is
// made in the workspace.
func TestRunRelativeHomeKeepsNothingInTheWorkspace(t *testing.T) {
	b := newBox(t)
	env := b.env("HOME=rel", "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "XDG_STATE_HOME=", "CORDON_AUDIT=")
	for _, net := range []string{"off", "restricted"} {
		r := runResult(t, runTimeout, cordonIn(t, b.ws, env, "run", "--net", net, "--", "true"))
		expectCode(t, r, 0)
		if _, err := os.Lstat(filepath.Join(b.ws, "rel")); !errors.Is(err, os.ErrNotExist) {
			found, _ := filepath.Glob(filepath.Join(b.ws, "rel", "*", "*", "*"))
			t.Fatalf("--net %s: cordon made its own files in the workspace (%v): %q", net, err, found)
		}
	}
}

// TestRunGuardsTheRepository: a box that could write the workspace's git
// config or hooks would run code on the host the next time anyone (or a
// shell prompt) ran git there. The box's attempts fail: appending
// core.fsmonitor, writing a hook, git config, and renaming .git away to
// plant another; the host's repository is unchanged after. Commits and
// branches still work in the box.
func TestRunGuardsTheRepository(t *testing.T) {
	b := newBox(t)
	git := func(args ...string) result {
		cmd := asUser(t, nil, "/usr/bin/git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = b.ws
		r := runResult(t, runTimeout, cmd)
		if r.code != 0 {
			t.Fatalf("git %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	git("init", "-q", ".")
	git("commit", "-q", "--allow-empty", "-m", "first")
	configBefore, err := os.ReadFile(filepath.Join(b.ws, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	const script = `
printf '[core]\n\tfsmonitor = touch %s/pwned\n' "$PWD" >> .git/config 2>/dev/null && echo "ESCAPED: config appended"
printf '#!/bin/sh\ntouch %s/pwned\n' "$PWD" > .git/hooks/post-commit 2>/dev/null && echo "ESCAPED: hook written"
git config core.hooksPath "$PWD" 2>/dev/null && echo "ESCAPED: git config"
mv .git .git-away 2>/dev/null && echo "ESCAPED: .git renamed"
rm -rf .git/hooks 2>/dev/null; test -d .git/hooks || echo "ESCAPED: hooks removed"
echo data > tracked && git add tracked && git -c user.name=t -c user.email=t@example.com commit -qm second && echo "committed"
git checkout -qb feature && echo "branched"
mkdir -p evil && cp -r .git/. evil/ && printf '[core]\n\tfsmonitor = touch %s/pwned\n' "$PWD" >> evil/config && echo ../evil > .git/commondir
`
	b.attempts(script, "committed\nbranched\n")
	// A commondir points git at another directory's config and hooks. No
	// mount can forbid making one, so cordon removes it when the run
	// ends, and logs that.
	if _, err := os.Lstat(filepath.Join(b.ws, ".git", "commondir")); err == nil {
		t.Error("the commondir the box made is still there after the run")
	}
	recs := b.records()
	if !slices.ContainsFunc(recs, func(r audit.Record) bool {
		return r.Type == audit.TypeRemoved && r.Path == filepath.Join(b.ws, ".git", "commondir")
	}) {
		t.Error("no audit line records the removal of the commondir the box made")
	}
	// One left behind (cordon killed before it could remove it) stops the
	// next run, which names it.
	writeUserFile(t, filepath.Join(b.ws, ".git", "commondir"), []byte("../evil\n"))
	r := b.run("--net", "off", "--", "true")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "commondir exists") {
		t.Errorf("a commondir left in the repository:\n%s", r.stderr)
	}
	os.Remove(filepath.Join(b.ws, ".git", "commondir"))
	configAfter, _ := os.ReadFile(filepath.Join(b.ws, ".git", "config"))
	if string(configAfter) != string(configBefore) {
		t.Errorf("the repository's config changed:\n%s", configAfter)
	}
	if _, err := os.Stat(filepath.Join(b.ws, ".git", "hooks", "post-commit")); err == nil {
		t.Error("a hook was planted in the repository")
	}
	if log := git("log", "--format=%s", "feature").stdout; log != "second\nfirst\n" {
		t.Errorf("the box's commit is not on the host's branch feature: %q", log)
	}
	// The host's git runs no hook and no fsmonitor of the box's.
	git("status", "--short")
	git("commit", "-q", "--allow-empty", "-m", "third")
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran a command the box planted")
	}
}

// TestRunSetsAsidePlantedCheckouts: the host's git status runs git in
// every submodule checkout the index registers, with that checkout's own
// config. The index and the workspace are the box's to write, so the box
// could register a repository of its own (with a core.fsmonitor), or fill
// a registered but empty checkout, and the user's next git status would
// run its command. A checkout present when the run is built is guarded
// (its config read-only, it and its .git pinned); one the run filled or
// registered is set aside when the run ends, with a set_aside audit line
// and a warning, and the host's git then runs nothing of the box's.
func TestRunSetsAsidePlantedCheckouts(t *testing.T) {
	b := newBox(t)
	git := func(dir string, args ...string) string {
		cmd := asUser(t, nil, "/usr/bin/git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		r := runResult(t, runTimeout, cmd)
		if r.code != 0 {
			t.Fatalf("git %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	git(b.ws, "init", "-q", ".")
	git(b.ws, "commit", "-q", "--allow-empty", "-m", "first")
	kept := filepath.Join(b.ws, "kept")
	git(b.ws, "init", "-q", kept)
	git(kept, "commit", "-q", "--allow-empty", "-m", "kept")
	head := git(kept, "rev-parse", "HEAD")
	git(b.ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",kept")
	git(b.ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",empty")
	const script = `
plant() { git init -q "$1" && git -C "$1" config core.fsmonitor "touch $PWD/pwned; true"; }
git -C kept config core.fsmonitor "touch $PWD/pwned; true" 2>/dev/null && echo "ESCAPED: the kept checkout's config"
mv kept kept-away 2>/dev/null && echo "ESCAPED: the kept checkout renamed"
mv kept/.git kept/.git-away 2>/dev/null && echo "ESCAPED: the kept checkout's .git renamed"
plant planted && git -c user.name=t -c user.email=t@example.com -C planted commit -q --allow-empty -m p &&
  git update-index --add --cacheinfo "160000,$(git -C planted rev-parse HEAD),planted" && echo registered
plant empty && echo filled
git status >/dev/null && test -e pwned && rm pwned && echo "git in the box runs it"
`
	b.attempts(script, "registered\nfilled\ngit in the box runs it\n")
	git(b.ws, "status", "--short")
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git status ran a command the box planted in a submodule checkout")
	}
	if _, err := os.Stat(filepath.Join(kept, ".git")); err != nil {
		t.Errorf("the guarded checkout is gone: %v", err)
	}
	recs := b.records()
	for _, name := range []string{"planted", "empty"} {
		prefix := filepath.Join(b.ws, name, ".git.cordon-set-aside-")
		if !slices.ContainsFunc(recs, func(r audit.Record) bool {
			return r.Type == audit.TypeSetAside && strings.HasPrefix(r.Path, prefix)
		}) {
			t.Errorf("no set_aside audit line for the %s checkout", name)
		}
		if m, _ := filepath.Glob(prefix + "*"); len(m) != 1 {
			t.Errorf("the %s checkout's .git was not set aside: %v", name, m)
		}
	}
}

// TestRunGuardsIncludedConfig: a repository's config may include files
// (include.path, includeIf), which git reads as its config; one in the
// workspace was the box's to write, so a core.fsmonitor appended there ran
// at the host's next git status. Included files in the workspace are
// read-only in the box, and a missing one cannot be made.
func TestRunGuardsIncludedConfig(t *testing.T) {
	b := newBox(t)
	git := func(args ...string) {
		cmd := asUser(t, nil, "/usr/bin/git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = b.ws
		if r := runResult(t, runTimeout, cmd); r.code != 0 {
			t.Fatalf("git %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	git("init", "-q", ".")
	git("commit", "-q", "--allow-empty", "-m", "first")
	b.file(filepath.Join(b.ws, "team.gitconfig"), "[user]\n\tname = team\n")
	git("config", "--add", "include.path", "../team.gitconfig")
	git("config", "--add", "include.path", "../later.gitconfig")
	b.attempts(`printf '[core]\n\tfsmonitor = touch %s/pwned\n' "$PWD" >> team.gitconfig 2>/dev/null && echo "ESCAPED: included config written"
printf '[core]\n\tfsmonitor = touch %s/pwned\n' "$PWD" > later.gitconfig && echo "made the missing include"
rm -f pwned
echo x > tracked && git add tracked && git -c user.name=t -c user.email=t@example.com commit -qm second && echo committed
rm -f pwned # git in the box followed the include it made: the box's own business`, "made the missing include\ncommitted\n")
	if _, err := os.Stat(filepath.Join(b.ws, "later.gitconfig")); err == nil {
		t.Error("the include the box made is still there after the run")
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool {
		return r.Type == audit.TypeRemoved && r.Path == filepath.Join(b.ws, "later.gitconfig")
	}) {
		t.Error("no removed audit line for the include the box made")
	}
	git("status", "--short")
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran a command the box planted in an included config")
	}
}

// TestRunRepositoryWithoutConfig: a repository with no .git/config gets
// an empty read-only one in the box, which git reads as it reads a
// missing one, and which the box cannot write. The placeholder was
// /dev/null, which the box's nodev mounts refuse to read, and git in the
// box failed ("unable to access").
func TestRunRepositoryWithoutConfig(t *testing.T) {
	b := newBox(t)
	cmd := asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)
	if r := runResult(t, runTimeout, cmd); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	if err := os.Remove(filepath.Join(b.ws, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	b.attempts(`git status --short && echo "git works"
{ printf '[core]\n\tfsmonitor = touch %s/pwned\n' "$PWD" > .git/config; } 2>/dev/null && echo "ESCAPED: config made"
true`, "git works\n")
	// The mount point the placeholder needed stays behind, empty.
	if data, err := os.ReadFile(filepath.Join(b.ws, ".git", "config")); err == nil && len(data) > 0 {
		t.Errorf("the box wrote a config the repository did not have:\n%s", data)
	}
}

// TestRunSetsAsideARepositoryTheBoxMade: in a workspace that is no
// repository, the box may git init one, with a core.fsmonitor of its own;
// a shell prompt that shows the branch would run it at the user's next
// cd. The repository is set aside when the run ends (its .git renamed,
// nothing lost), with a set_aside audit line, and the host's git then
// finds no repository there.
func TestRunSetsAsideARepositoryTheBoxMade(t *testing.T) {
	b := newBox(t)
	b.attempts(`git init -q . && git config core.fsmonitor "touch $PWD/pwned; true" && echo x > f && git add f &&
git -c user.name=t -c user.email=t@example.com commit -qm mine && echo committed
rm -f pwned # git in the box ran it: that is the box's own business`, "committed\n")
	cmd := asUser(t, nil, "/usr/bin/git", "status", "--short")
	cmd.Dir = b.ws
	r := runResult(t, runTimeout, cmd)
	if r.code == 0 {
		t.Errorf("the host's git still finds the box's repository:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran the command the box planted in its repository")
	}
	aside, _ := filepath.Glob(filepath.Join(b.ws, ".git.cordon-set-aside-*"))
	if len(aside) != 1 {
		t.Fatalf("the box's repository was not set aside: %v", aside)
	}
	if _, err := os.Stat(filepath.Join(aside[0], "HEAD")); err != nil {
		t.Errorf("the set-aside repository lost its contents: %v", err)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
		t.Error("no set_aside audit line for the box's repository")
	}
}

// TestRunSetsAsideAConfigTheHostReplaced: the workspace's .git/config is
// a read-only mount in the box, but git on the host replaces the file
// when it writes it (git config renames config.lock over it), and the
// kernel then detaches the mount: the box wrote a core.fsmonitor into the
// new file, and the host's next git status ran it. The config is set
// aside when the run ends, with a set_aside line, as it now names a
// command it did not name when the run began.
func TestRunSetsAsideAConfigTheHostReplaced(t *testing.T) {
	b := newBox(t)
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	hostGit := asUser(t, nil, "/usr/bin/git", "config", "foo.bar", "baz")
	hostGit.Dir = b.ws
	ready := filepath.Join(b.ws, "ready")
	replaced := make(chan error, 1)
	go func() {
		if !eventually(runTimeout/2, func() bool { _, err := os.Stat(ready); return err == nil }) {
			replaced <- errors.New("the box never started")
			return
		}
		out, err := hostGit.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		replaced <- err
	}()
	r := b.run("--net", "off", "--", "sh", "-c", `touch ready
for i in $(seq 400); do
	if { printf '[core]\n\tfsmonitor = "touch %s/pwned; false"\n' "$PWD" >> .git/config; } 2>/dev/null; then echo "wrote at $i"; break; fi
	sleep 0.05
done`)
	if err := <-replaced; err != nil {
		t.Fatalf("the host's git config: %v", err)
	}
	status := asUser(t, nil, "/usr/bin/git", "status", "--short")
	status.Dir = b.ws
	runResult(t, runTimeout, status)
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Errorf("the host's git ran the command the box wrote into the replaced config (box: %s%s)", r.stdout, r.stderr)
	}
	switch {
	case !strings.Contains(r.stdout, "wrote at") && r.code == 0:
		t.Fatalf("the box could not write the replaced config, and was not stopped: the attack did not happen\n%s%s", r.stdout, r.stderr)
	case !strings.Contains(r.stdout, "wrote at"):
		return // stopped before it could write: nothing to set aside
	}
	aside, _ := filepath.Glob(filepath.Join(b.ws, ".git", "config.cordon-set-aside-*"))
	if config, _ := os.ReadFile(filepath.Join(b.ws, ".git", "config")); len(aside) == 0 && !bytes.Contains(config, []byte("pwned")) {
		// The box's append went to the file the host's git replaced, as
		// the host's rename raced it (on a busy machine): the config git
		// reads never held it, and there is nothing to set aside.
		return
	}
	if len(aside) != 1 {
		t.Fatalf("the replaced config was not set aside: %v\n%s", aside, r.stderr)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
		t.Error("no set_aside audit line for the replaced config")
	}
	if !strings.Contains(r.stderr, "set aside as "+aside[0]+": a file kept read-only in the box") {
		t.Errorf("no warning of the set-aside config, told as replaced on the host:\n%s", r.stderr)
	}
}

// TestRunSetsAsideNestedRepositories: a repository the box makes in a
// subdirectory (with a core.fsmonitor of its own) would run at the next
// git status there: a prompt that shows the branch runs one at the cd,
// an editor opens the repositories it finds. It is set aside when the run
// ends, with a set_aside line; so is the user's own nested repository
// whose config the box changed.
func TestRunSetsAsideNestedRepositories(t *testing.T) {
	b := newBox(t)
	mine := filepath.Join(b.ws, "mine")
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", mine)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	time.Sleep(200 * time.Millisecond) // the user's repository is older than the run
	b.attempts(`git init -q deep/down/made && git -C deep/down/made config core.fsmonitor "touch $PWD/pwned; true" && echo made
git -C mine config core.fsmonitor "touch $PWD/pwned; true" && echo changed`, "made\nchanged\n")
	for _, dir := range []string{"deep/down/made", "mine"} {
		cmd := asUser(t, nil, "/usr/bin/git", "status", "--short")
		cmd.Dir = filepath.Join(b.ws, dir)
		runResult(t, runTimeout, cmd)
		aside, _ := filepath.Glob(filepath.Join(b.ws, dir, ".git.cordon-set-aside-*"))
		if len(aside) != 1 {
			t.Errorf("%s was not set aside: %v", dir, aside)
			continue
		}
		if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
			t.Errorf("no set_aside audit line for %s", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran a command the box planted in a nested repository")
	}
}

// TestRunKeepsWhatItSetAside: what a run sets aside stays in the
// workspace for the user to look at. The next run's box renamed a nested
// repository's set-aside .git back into place, older than that run and
// its config unchanged, so the walk after it took it for the user's own,
// and the host's git status ran the core.fsmonitor planted the run
// before. Later runs keep it in place: the rename fails.
func TestRunKeepsWhatItSetAside(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--", "sh", "-c", `git init -q sub && git -C sub config core.fsmonitor "touch $PWD/pwned; false" && echo PLANTED`)
	expectCode(t, r, 0)
	aside, _ := filepath.Glob(filepath.Join(b.ws, "sub", ".git.cordon-set-aside-*"))
	if !strings.Contains(r.stdout, "PLANTED") || len(aside) != 1 {
		t.Fatalf("the first run's repository was not set aside: %v\n%s%s", aside, r.stdout, r.stderr)
	}
	r = b.run("--net", "off", "--", "sh", "-c", `mv sub sub2 && echo MOVED && mv sub2 sub; mv sub/.git.cordon-set-aside-* sub/.git && echo RESTORED; true`)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "RESTORED") || strings.Contains(r.stdout, "MOVED") || !strings.Contains(r.stderr, "Device or resource busy") {
		t.Errorf("the next run's box could move what the first set aside:\n%s%s", r.stdout, r.stderr)
	}
	status := asUser(t, nil, "/usr/bin/git", "status", "--short")
	status.Dir = filepath.Join(b.ws, "sub")
	runResult(t, runTimeout, status)
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran the command the box planted in a repository set aside before")
	}
}

// TestRunSetsAsideARepositoryStagedAcrossRuns: a box stages a repository
// in one run, every piece of it born then under names git does not use (a
// bare git directory named dotgit, its HEAD named HEAD.x, with a
// core.fsmonitor), and the next run only renames them into place: a
// rename keeps every birth time and changes no file inside the directory
// it moves, so the walk after the second run took nest/.git for the
// user's own, and the host's git status in nest ran the command (red
// team, round 6). Now each walk remembers the git directories it left in
// place, and one that became a git directory at its path during a run is
// set aside. The same holds for one the workspace held before cordon ever
// ran there (a repository's own content, as cloned), renamed into place
// by the first run.
func TestRunSetsAsideARepositoryStagedAcrossRuns(t *testing.T) {
	for _, tc := range []struct {
		name, host, stage, place string
	}{
		{name: "staged in one run, placed in the next",
			stage: `mkdir -p nest && git init -q --bare nest/dotgit && mv nest/dotgit/HEAD nest/dotgit/HEAD.x && git config -f nest/dotgit/config core.bare false && git config -f nest/dotgit/config core.fsmonitor "touch $HOME_PWNED; false" && echo STAGED`,
			place: `mv nest/dotgit nest/.git && mv nest/.git/HEAD.x nest/.git/HEAD && echo PLACED`},
		{name: "in the workspace before the first run, placed by it",
			host:  `mkdir -p nest && git init -q --bare nest/dotgit && git config -f nest/dotgit/config core.bare false && git config -f nest/dotgit/config core.fsmonitor "touch $HOME_PWNED; false"`,
			place: `mv nest/dotgit nest/.git && echo PLACED`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t)
			pwned := filepath.Join(b.home, "pwned")
			env := []string{"HOME_PWNED=" + pwned}
			if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)); r.code != 0 {
				t.Fatalf("git init: %s%s", r.stdout, r.stderr)
			}
			if tc.host != "" {
				host := asUser(t, env, "/bin/sh", "-c", tc.host)
				host.Dir = b.ws
				if r := runResult(t, runTimeout, host); r.code != 0 {
					t.Fatalf("the workspace's content: %s%s", r.stdout, r.stderr)
				}
			}
			if tc.stage != "" {
				r := b.run("--net", "off", "--", "sh", "-c", strings.ReplaceAll(tc.stage, "$HOME_PWNED", pwned))
				if expectCode(t, r, 0); !strings.Contains(r.stdout, "STAGED") {
					t.Fatalf("the first run did not stage it:\n%s%s", r.stdout, r.stderr)
				}
				if aside, _ := filepath.Glob(filepath.Join(b.ws, "nest", "*.cordon-set-aside-*")); len(aside) != 0 {
					t.Fatalf("the first run set aside %q: this test stages what no walk tells from the user's", aside)
				}
			}
			// Past the slack the walk allows file times (50 ms): what was
			// born just before a run began may be taken for the run's.
			time.Sleep(200 * time.Millisecond)
			r := b.run("--net", "off", "--", "sh", "-c", tc.place)
			if expectCode(t, r, 0); !strings.Contains(r.stdout, "PLACED") {
				t.Fatalf("the run did not rename it into place:\n%s%s", r.stdout, r.stderr)
			}
			status := asUser(t, nil, "/usr/bin/git", "status", "--short")
			status.Dir = filepath.Join(b.ws, "nest")
			runResult(t, runTimeout, status)
			if _, err := os.Stat(pwned); err == nil {
				t.Error("the host's git status ran the command of a repository renamed into place")
			}
			if aside, _ := filepath.Glob(filepath.Join(b.ws, "nest", ".git.cordon-set-aside-*")); len(aside) != 1 {
				t.Errorf("set aside %q, want nest/.git", aside)
			}
			found := false
			for _, rec := range b.records() {
				found = found || rec.Type == audit.TypeSetAside && strings.HasPrefix(rec.Path, filepath.Join(b.ws, "nest", ".git.cordon-set-aside-"))
			}
			if !found {
				t.Error("no set_aside line for nest/.git")
			}
		})
	}
}

// TestRunKeepsWhatItSetAsideFromASubdirectory: what a run set aside is
// kept by a later run whose workspace, or read-write allow path, is a
// directory above or below the first run's workspace (cd a && cordon
// run, as in a monorepo), each another key in cordon's cache. Before, a
// run read only the records of its own workspace and allow paths, and
// its box could rename a/b/.git back: older than the run and its config
// unchanged, the walk after the run took it for the user's own, and the
// host's git status in a/b ran the core.fsmonitor planted the run
// before. (One renamed back as the later run's own workspace's .git,
// which was not there when it began, was set aside again.)
func TestRunKeepsWhatItSetAsideFromASubdirectory(t *testing.T) {
	for _, tc := range []struct {
		name             string
		first, second    string // the runs' workspaces, below the box's
		allowWorkspaceRW bool   // the second runs in another workspace, with the box's read-write
	}{
		{name: "in ws, then from a", first: ".", second: "a"},
		{name: "in ws, then from a/b", first: ".", second: "a/b"},
		{name: "from a, then in ws", first: "a", second: "."},
		{name: "from a, then allowing ws", first: "a", allowWorkspaceRW: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t)
			repo := filepath.Join(b.ws, "a", "b")
			if r := runResult(t, runTimeout, asUser(t, nil, "/bin/mkdir", "-p", repo)); r.code != 0 {
				t.Fatalf("mkdir: %s", r.stderr)
			}
			r := runResult(t, runTimeout, cordonIn(t, filepath.Join(b.ws, tc.first), b.env(), "run", "--audit", b.audit, "--net", "off", "--", "sh", "-c",
				fmt.Sprintf(`git init -q %s && git -C %s config core.fsmonitor "touch %s/pwned; false" && echo PLANTED`, repo, repo, b.ws)))
			expectCode(t, r, 0)
			aside, _ := filepath.Glob(filepath.Join(repo, ".git.cordon-set-aside-*"))
			if !strings.Contains(r.stdout, "PLANTED") || len(aside) != 1 {
				t.Fatalf("the first run's repository was not set aside: %v\n%s%s", aside, r.stdout, r.stderr)
			}
			time.Sleep(1500 * time.Millisecond) // what it set aside is older than the next run
			dir, args := filepath.Join(b.ws, tc.second), []string{"run", "--audit", b.audit, "--net", "off"}
			if tc.allowWorkspaceRW {
				dir, args = userDir(t, "cordon-it-ws-"), append(args, "--allow-path", b.ws+":rw")
			}
			r = runResult(t, runTimeout, cordonIn(t, dir, b.env(), append(args, "--", "sh", "-c",
				fmt.Sprintf(`mv %s %s/.git && echo RESTORED; true`, aside[0], repo))...))
			expectCode(t, r, 0)
			if strings.Contains(r.stdout, "RESTORED") || !strings.Contains(r.stderr, "Device or resource busy") {
				t.Errorf("the later run could rename back what the first set aside:\n%s%s", r.stdout, r.stderr)
			}
			status := asUser(t, nil, "/usr/bin/git", "status", "--short")
			status.Dir = repo
			runResult(t, runTimeout, status)
			if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
				t.Error("the host's git ran the command the box planted in a repository set aside before")
			}
		})
	}
}

// TestRunKeepsWhatItSetAsideInAnAllowPath: what a run set aside in a
// read-write allow path is kept in place by later runs from any
// workspace, not only the one it ran in: the allow path is often shared
// (a cache, a bare repository pushed to from several projects). Before,
// a run from another workspace renamed a bare repository's HEAD back,
// with the first run's hook in it, and the walk after it took the HEAD,
// born before the run, for the user's. The bare repository lies in the
// allow path (one that is itself a bare repository has its hooks
// read-only for the run).
func TestRunKeepsWhatItSetAsideInAnAllowPath(t *testing.T) {
	b := newBox(t)
	shared := userDir(t, "cordon-it-shared-")
	bare := filepath.Join(shared, "proj.git")
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", "--bare", bare)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	time.Sleep(100 * time.Millisecond)
	r := b.run("--net", "off", "--allow-path", shared+":rw", "--", "sh", "-c",
		fmt.Sprintf(`printf '#!/bin/sh\ntouch %s/pushed\n' > %s/hooks/post-receive && chmod 755 %s/hooks/post-receive && echo PLANTED`, bare, bare, bare))
	expectCode(t, r, 0)
	aside, _ := filepath.Glob(filepath.Join(bare, "HEAD.cordon-set-aside-*"))
	if !strings.Contains(r.stdout, "PLANTED") || len(aside) != 1 {
		t.Fatalf("the first run's HEAD was not set aside: %v\n%s%s", aside, r.stdout, r.stderr)
	}
	// The next run, from another workspace (the same user, so the same
	// cache), well after the first: what it set aside is older than it.
	time.Sleep(1500 * time.Millisecond)
	other := newBox(t)
	other.home, other.audit = b.home, b.audit
	r = other.run("--net", "off", "--allow-path", shared+":rw", "--", "sh", "-c",
		fmt.Sprintf(`mv %s/HEAD.cordon-set-aside-* %s/HEAD && echo RESTORED; true`, bare, bare))
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "RESTORED") || !strings.Contains(r.stderr, "Device or resource busy") {
		t.Errorf("a run from another workspace could rename back what the first set aside:\n%s%s", r.stdout, r.stderr)
	}
	src := userDir(t, "cordon-it-src-")
	for _, args := range [][]string{
		{"init", "-q", src},
		{"-C", src, "-c", "user.name=u", "-c", "user.email=u@example.test", "commit", "-q", "--allow-empty", "-m", "x"},
	} {
		if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", args...)); r.code != 0 {
			t.Fatalf("git %q: %s%s", args, r.stdout, r.stderr)
		}
	}
	runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "-C", src, "push", "-q", bare, "HEAD:refs/heads/main"))
	if _, err := os.Stat(filepath.Join(bare, "pushed")); err == nil {
		t.Error("the host's git push ran the hook the box planted in a run before")
	}
}

// TestRunSetsAsidePipes: git opens a .gitignore without asking whether
// it is a regular file. A named pipe the box left as sub/.gitignore held
// the host's git status in the workspace (and a shell prompt that shows
// the branch, at every cd) for ever, waiting for a writer. It is set
// aside when the run ends, with a set_aside line and a warning.
func TestRunSetsAsidePipes(t *testing.T) {
	b := newBox(t)
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	r := b.run("--net", "off", "--", "sh", "-c", `mkdir sub && mkfifo sub/.gitignore && touch sub/x && echo MADE`)
	expectCode(t, r, 0)
	aside, _ := filepath.Glob(filepath.Join(b.ws, "sub", ".gitignore.cordon-set-aside-*"))
	if !strings.Contains(r.stdout, "MADE") || len(aside) != 1 {
		t.Fatalf("the box's pipe was not set aside: %v\n%s%s", aside, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "set aside as "+aside[0]+": a named pipe") {
		t.Errorf("no warning naming the pipe:\n%s", r.stderr)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
		t.Error("no set_aside audit line for the pipe")
	}
	status := asUser(t, nil, "timeout", "20", "/usr/bin/git", "status", "--short")
	status.Dir = b.ws
	if r := runResult(t, runTimeout, status); r.code != 0 {
		t.Errorf("the host's git status did not finish (exit %d): %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunRemovesGitPipes: a named pipe the box leaves in the workspace's
// own .git, where git reads its files (here the HEAD), is removed after
// the run, with a removed line and a warning: the host's git status there
// (and a shell prompt that shows the branch) waited for ever.
func TestRunRemovesGitPipes(t *testing.T) {
	b := newBox(t)
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	head := filepath.Join(b.ws, ".git", "HEAD")
	r := b.run("--net", "off", "--", "sh", "-c", `rm .git/HEAD && mkfifo .git/HEAD && echo MADE`)
	expectCode(t, r, 0)
	if fi, err := os.Lstat(head); !strings.Contains(r.stdout, "MADE") || err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		t.Fatalf("the box's pipe is still there:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "removed "+head+": a named pipe") {
		t.Errorf("no warning naming the pipe:\n%s", r.stderr)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeRemoved && r.Path == head }) {
		t.Error("no removed audit line for the pipe")
	}
	status := asUser(t, nil, "timeout", "20", "/usr/bin/git", "status", "--short")
	status.Dir = b.ws
	if r := runResult(t, runTimeout, status); r.code == 124 {
		t.Errorf("the host's git status waited on the pipe: %s%s", r.stdout, r.stderr)
	}
}

// TestRunRemovesLooseObjectPipes: a named pipe the box makes in place of
// a loose object of the workspace's repository, and a symbolic link to a
// pipe (one it hid elsewhere in .git) in place of another and of a ref,
// are removed after the run, each with a removed line and a warning: the
// host's git log (and git branch) there waited for ever.
func TestRunRemovesLooseObjectPipes(t *testing.T) {
	b := newBox(t)
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "one"}, {"commit", "-q", "--allow-empty", "-m", "two"}} {
		cmd := asUser(t, nil, "/usr/bin/git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = b.ws
		if r := runResult(t, runTimeout, cmd); r.code != 0 {
			t.Fatalf("git %v: %s%s", args, r.stdout, r.stderr)
		}
	}
	r := b.run("--net", "off", "--", "sh", "-c", `set -e
		o() { c=$(git rev-parse "$1"); echo ".git/objects/$(echo $c | cut -c1-2)/$(echo $c | cut -c3-)"; }
		one=$(o HEAD~1) two=$(o HEAD)
		mkdir .git/hidden && mkfifo .git/hidden/p
		rm -f "$one" "$two" && mkfifo "$one" && ln -s ../../hidden/p "$two"
		ln -s ../../hidden/p .git/refs/heads/trap
		echo "$one $two" && echo MADE`)
	expectCode(t, r, 0)
	fields := strings.Fields(r.stdout)
	if len(fields) != 3 || fields[2] != "MADE" {
		t.Fatalf("the box did not plant its pipes:\n%s%s", r.stdout, r.stderr)
	}
	removed := []string{filepath.Join(b.ws, fields[0]), filepath.Join(b.ws, fields[1]), filepath.Join(b.ws, ".git", "refs", "heads", "trap")}
	records := b.records()
	for _, p := range removed {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
		if !strings.Contains(r.stderr, "removed "+p+": a named pipe") {
			t.Errorf("no warning naming %s:\n%s", p, r.stderr)
		}
		if !slices.ContainsFunc(records, func(r audit.Record) bool { return r.Type == audit.TypeRemoved && r.Path == p }) {
			t.Errorf("no removed audit line for %s", p)
		}
	}
	expectHostGitAnswers(t, b.ws, []string{"log", "--oneline"}, []string{"branch"})
}

// expectHostGitAnswers runs each git command in dir as the user, the way
// the host's git would after the run, and fails the test for each that
// did not end within 20 seconds: one that waited on a pipe the box left.
func expectHostGitAnswers(t *testing.T, dir string, commands ...[]string) {
	t.Helper()
	for _, args := range commands {
		cmd := asUser(t, nil, "timeout", append([]string{"20", "/usr/bin/git"}, args...)...)
		cmd.Dir = dir
		if r := runResult(t, runTimeout, cmd); r.code == 124 {
			t.Errorf("the host's git %v waited on the box's pipe: %s%s", args, r.stdout, r.stderr)
		}
	}
}

// TestRunRemovesGitStatePipes: a named pipe the box makes where git
// writes a ref's log (.git/logs/HEAD), or where git status reads a
// rebase's state (.git/rebase-merge/head-name), is removed after the run,
// with a removed line and a warning each: the host's git commit, and git
// status, there waited for ever.
func TestRunRemovesGitStatePipes(t *testing.T) {
	b := newBox(t)
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "one"}} {
		cmd := asUser(t, nil, "/usr/bin/git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = b.ws
		if r := runResult(t, runTimeout, cmd); r.code != 0 {
			t.Fatalf("git %v: %s%s", args, r.stdout, r.stderr)
		}
	}
	r := b.run("--net", "off", "--", "sh", "-c", `set -e
		rm .git/logs/HEAD && mkfifo .git/logs/HEAD
		mkdir .git/rebase-merge && touch .git/rebase-merge/interactive && mkfifo .git/rebase-merge/head-name
		echo MADE`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "MADE") {
		t.Fatalf("the box did not plant its pipes:\n%s%s", r.stdout, r.stderr)
	}
	records := b.records()
	for _, p := range []string{filepath.Join(b.ws, ".git", "logs", "HEAD"), filepath.Join(b.ws, ".git", "rebase-merge", "head-name")} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			t.Errorf("%s is still a pipe", p)
		}
		if !strings.Contains(r.stderr, "removed "+p+": a named pipe") {
			t.Errorf("no warning naming %s:\n%s", p, r.stderr)
		}
		if !slices.ContainsFunc(records, func(r audit.Record) bool { return r.Type == audit.TypeRemoved && r.Path == p }) {
			t.Errorf("no removed audit line for %s", p)
		}
	}
	expectHostGitAnswers(t, b.ws, []string{"status", "--short"},
		[]string{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two"})
}

// TestRunClosesWhatItOpened: the box may not open the workspace to other
// local users' writes, which let one replace the Makefile the user then
// ran: its chmod 777 . and chmod o+w Makefile are refused, and so is an
// ACL (setxattr of system.posix_acl_access, as setfacl -m o::rwx does);
// the group's write is not refused (chmod +x of a group-writable file).
// What it makes open with a umask of 0 (a directory, a file in it, a file
// in a directory the user had opened) has others' write taken off after
// the run, with a closed line and a warning each; the mode the user gave
// a directory before the run stays.
func TestRunClosesWhatItOpened(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, "Makefile"), "all:\n\techo built\n")
	shared := filepath.Join(b.ws, "shared")
	b.file(filepath.Join(shared, "keep"), "")
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	// A run takes what was born up to 50 ms before it began (the kernel's
	// coarse clock) for its own: the user's directory must be older.
	time.Sleep(100 * time.Millisecond)
	r := b.run("--net", "off", "--", "sh", "-c", `
		chmod 777 . 2>/dev/null || echo ROOT-REFUSED
		chmod o+w Makefile 2>/dev/null || echo CHMOD-REFUSED
		python3 -c 'import os; os.setxattr("Makefile", "system.posix_acl_access", bytes([2,0,0,0, 1,0,6,0,255,255,255,255, 4,0,4,0,255,255,255,255, 32,0,6,0,255,255,255,255]))' 2>/dev/null || echo ACL-REFUSED
		echo z > group && chmod 664 group && chmod +x group && echo GROUP-ALLOWED
		umask 0 && mkdir made && echo x > made/file && echo y > shared/file && echo MADE`)
	expectCode(t, r, 0)
	for _, want := range []string{"ROOT-REFUSED", "CHMOD-REFUSED", "ACL-REFUSED", "GROUP-ALLOWED", "MADE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %s:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	for _, p := range []string{b.ws, filepath.Join(b.ws, "Makefile")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: %v %v; the box opened it", p, fi.Mode(), err)
		}
	}
	records := b.records()
	for _, p := range []string{filepath.Join(b.ws, "made"), filepath.Join(b.ws, "made", "file"), filepath.Join(shared, "file")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s: %v %v; others may still write it", p, fi.Mode(), err)
		}
		if !strings.Contains(r.stderr, "closed "+p+": the sandboxed command made it writable by other local users") {
			t.Errorf("no warning naming %s:\n%s", p, r.stderr)
		}
		if !slices.ContainsFunc(records, func(r audit.Record) bool { return r.Type == audit.TypeClosed && r.Path == p }) {
			t.Errorf("no closed audit line for %s", p)
		}
	}
	if fi, err := os.Stat(shared); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("the user's own %s: %v %v; want 0777, as the user made it", shared, fi.Mode(), err)
	}
}

// TestRunSeesToReadWriteAllowPaths: a read-write allow path outside the
// workspace is walked after the run as the workspace is. Before, what the
// box left there stayed with no word: a directory and a file made with a
// umask of 0 (another local user could replace the wheel or the script
// the user runs from it next), a named pipe (a tool that opens it waits
// for ever), a repository with a core.fsmonitor of the box's (git status
// there ran it), and, in an allow path that is a repository, a pipe among
// its refs (the host's git branch waited for ever). One that is a bare
// repository has its config and hooks read-only for the run: before, the
// box wrote a post-receive hook there, which a host's git push to it
// during the run ran (after the run, its HEAD was set aside).
func TestRunSeesToReadWriteAllowPaths(t *testing.T) {
	b := newBox(t)
	lib := userDir(t, "cordon-it-lib-")
	repo := userDir(t, "cordon-it-repo-")
	bare := userDir(t, "cordon-it-bare-")
	src := userDir(t, "cordon-it-src-")
	for _, args := range [][]string{
		{"init", "-q", repo}, {"init", "-q", "--bare", bare}, {"init", "-q", src},
		{"-C", src, "-c", "user.name=u", "-c", "user.email=u@example.test", "commit", "-q", "--allow-empty", "-m", "x"},
	} {
		if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", args...)); r.code != 0 {
			t.Fatalf("git %q: %s%s", args, r.stdout, r.stderr)
		}
	}
	// What the user made must be older than the run (the kernel's coarse
	// clock).
	time.Sleep(100 * time.Millisecond)
	script := fmt.Sprintf(`
cd %s && umask 0 && mkdir open && echo x > open/wheel && mkfifo pipe &&
mkdir -p nest/.git/objects nest/.git/refs && echo 'ref: refs/heads/main' > nest/.git/HEAD &&
printf '[core]\n\tfsmonitor = "touch %s/pwned"\n' > nest/.git/config &&
mkfifo %s/.git/refs/heads/trap && echo PLANTED
printf '#!/bin/sh\ntouch %s/pushed\n' > %s/hooks/post-receive && chmod 755 %s/hooks/post-receive && echo HOOK-WRITTEN
printf '[core]\n\thooksPath = %s\n' >> %s/config && echo CONFIG-WRITTEN
true`,
		lib, lib, repo, lib, bare, bare, lib, bare)
	r := b.run("--net", "off", "--allow-path", lib+":rw", "--allow-path", repo+":rw", "--allow-path", bare+":rw", "--", "sh", "-c", script)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("not planted:\n%s%s", r.stdout, r.stderr)
	}
	for _, w := range []string{"HOOK-WRITTEN", "CONFIG-WRITTEN"} {
		if strings.Contains(r.stdout, w) {
			t.Errorf("%s: the box wrote the bare repository's hooks or config during the run", w)
		}
	}
	records := b.records()
	logged := func(typ audit.Type, p string) bool {
		return slices.ContainsFunc(records, func(r audit.Record) bool {
			return r.Type == typ && (r.Path == p || strings.HasPrefix(r.Path, p+".cordon-set-aside-"))
		})
	}
	for _, c := range []struct {
		path, warning string
		typ           audit.Type
	}{
		{filepath.Join(lib, "open"), "closed " + filepath.Join(lib, "open") + ": ", audit.TypeClosed},
		{filepath.Join(lib, "open", "wheel"), "closed " + filepath.Join(lib, "open", "wheel") + ": ", audit.TypeClosed},
		{filepath.Join(lib, "pipe"), "set aside as " + filepath.Join(lib, "pipe") + ".cordon-set-aside-", audit.TypeSetAside},
		{filepath.Join(lib, "nest", ".git"), "set aside as " + filepath.Join(lib, "nest", ".git") + ".cordon-set-aside-", audit.TypeSetAside},
		{filepath.Join(repo, ".git", "refs", "heads", "trap"), "removed " + filepath.Join(repo, ".git", "refs", "heads", "trap") + ": ", audit.TypeRemoved},
	} {
		if !strings.Contains(r.stderr, c.warning) {
			t.Errorf("no warning %q:\n%s", c.warning, r.stderr)
		}
		if !logged(c.typ, c.path) {
			t.Errorf("no %s audit line for %s", c.typ, c.path)
		}
	}
	for _, p := range []string{filepath.Join(lib, "open"), filepath.Join(lib, "open", "wheel")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s: %v %v; others may still write it", p, fi.Mode(), err)
		}
	}
	for _, p := range []string{filepath.Join(lib, "pipe"), filepath.Join(repo, ".git", "refs", "heads", "trap")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s: still there", p)
		}
	}
	// The host's git, after the run: git status in the nested repository,
	// git push to the bare one, git branch in the read-write one (a pipe
	// among its refs held it).
	runResult(t, 10*time.Second, asUser(t, nil, "/usr/bin/git", "-C", filepath.Join(lib, "nest"), "status"))
	runResult(t, 10*time.Second, asUser(t, nil, "/usr/bin/git", "-C", src, "push", "-q", bare, "HEAD:refs/heads/main"))
	if _, err := os.Stat(filepath.Join(lib, "pwned")); err == nil {
		t.Error("the host's git status ran the box's core.fsmonitor")
	}
	if _, err := os.Stat(filepath.Join(lib, "pushed")); err == nil {
		t.Error("the host's git push ran the box's post-receive hook")
	}
	runResult(t, 10*time.Second, asUser(t, nil, "/usr/bin/git", "-C", repo, "branch"))
}

// TestRunWarnsInPrintableNames: the warnings after a run name paths the
// box chose. A name holding escape sequences and a newline must reach the
// terminal escaped: raw, it erased cordon's "set aside" warning, wrote a
// line of the box's in its place and hid the rest.
func TestRunWarnsInPrintableNames(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--", "sh", "-c",
		`d=$(printf 'x\033[2K\rcordon: all clean\033[8m\nfake') && mkdir -p "$d" && git init -q "$d" && echo made`)
	expectCode(t, r, 0)
	if strings.ContainsAny(r.stderr, "\x1b\r") {
		t.Errorf("cordon's warnings carry the box's escape sequences to the terminal:\n%q", r.stderr)
	}
	made := filepath.Join(b.ws, "x\x1b[2K\rcordon: all clean\x1b[8m\nfake")
	var aside []string
	entries, _ := os.ReadDir(made)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".git.cordon-set-aside-") {
			aside = append(aside, filepath.Join(made, e.Name()))
		}
	}
	if len(aside) != 1 {
		t.Fatalf("the box's repository was not set aside: %v\n%s", aside, r.stderr)
	}
	if want := `set aside as ` + strings.Trim(strconv.Quote(aside[0]), `"`); !strings.Contains(r.stderr, want) {
		t.Errorf("no escaped warning %q in:\n%q", want, r.stderr)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
		t.Error("no set_aside audit line naming the repository as it is")
	}
}

// TestRunWarningsReadableAfterTheBox: the command shares the terminal, and
// what it left there hid what cordon said after the run: an OSC string
// never ended (the terminal took cordon's warnings into the window's
// title), text concealed or drawn black on black, the line-drawing
// character set, a scrolling region of one line (each warning written
// over the one before), no autowrap, insert mode, a hidden cursor. cordon
// now ends and undoes each before the first thing it says: a repository
// the box planted set aside, or the deadline that ended it.
func TestRunWarningsReadableAfterTheBox(t *testing.T) {
	b := newBox(t)
	cfg := b.config(providerCredential("api.provider.example"))
	const left = `\033[8m\033[30;40m\033(0\016\033[1;2r\033[?7l\033[4h\033[?25l\033]2;`
	undo := []string{"\x18", "\x1b[r", "\x1b[0m", "\x1b(B", "\x0f", "\x1b[?7h", "\x1b[4l", "\x1b[?25h"}
	for _, c := range []struct {
		name, said string
		args       []string
	}{
		{"a warning", "cordon: set aside as", []string{"--net", "off", "--", "sh", "-c", `git init -q sub && printf '` + left + `'`}},
		{"the deadline", "cordon: the deadline of 3s ended", []string{"--net", "off", "--timeout", "3s", "--", "sh", "-c", `printf '` + left + `'; sleep 30`}},
		// The mask of a credential's secret holds the output's last bytes
		// back; they were written when cordon had said its piece.
		{"a masked output's end", "cordon: set aside as", []string{"--net", "restricted", "--config", cfg, "--credential", "provider", "--",
			"sh", "-c", `git init -q masked && printf '` + left + `'`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			argv := append([]string{"-c", ttyAfter, b.ws, cordonBin(t), "run", "--audit", b.audit}, c.args...)
			r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm", "PROVIDER_REAL_KEY=sk-terminal-test-0123456789"), "/usr/bin/python3", argv...))
			out := r.stdout
			boxEnd, said := strings.LastIndex(out, "\x1b]2;"), strings.Index(out, c.said)
			if boxEnd < 0 || said < boxEnd {
				t.Fatalf("want the box's sequences, then %q, on the terminal:\n%q\n%s", c.said, out, r.stderr)
			}
			between := out[boxEnd:said]
			for _, u := range undo {
				if !strings.Contains(between, u) {
					t.Errorf("cordon did not write %q before %q, after the box's sequences: %q", u, c.said, between)
				}
			}
		})
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside }) {
		t.Error("no set_aside line for the repository the box planted")
	}
}

// TestRunPaysAKilledRunsAftercare: a cordon killed during its run (kill
// -9, a crash) never checks what its box left. The run owes that from the
// start, on record in cordon's cache directory; the next run in the
// workspace pays it before it builds on the workspace, which would
// otherwise guard the box's repository as the user's own.
func TestRunPaysAKilledRunsAftercare(t *testing.T) {
	b := newBox(t)
	cmd := b.cmd("--net", "off", "--", "sh", "-c",
		`git init -q . && git config core.fsmonitor "touch $PWD/pwned; true" && echo x > planted && sleep 60`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(filepath.Join(b.ws, "planted")); return err == nil }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the box did not plant its repository")
	}
	cmd.Process.Kill() // cordon itself, with SIGKILL: no aftercare
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(b.ws, ".git")); err != nil {
		t.Fatalf("the killed run's repository is not there, so this test shows nothing: %v", err)
	}
	r := b.run("--net", "off", "--", "true")
	expectCode(t, r, 0)
	aside, _ := filepath.Glob(filepath.Join(b.ws, ".git.cordon-set-aside-*"))
	if len(aside) != 1 {
		t.Fatalf("the killed run's repository was not set aside by the next run: %v\n%s", aside, r.stderr)
	}
	// Paid debts, and the self-test's runs, which owe none, leave no record.
	if left, _ := filepath.Glob(filepath.Join(b.home, ".cache", "cordon", "aftercare", "*")); len(left) != 0 {
		t.Errorf("records of owed aftercare left behind: %v", left)
	}
	if !strings.Contains(r.stderr, "set aside as "+aside[0]) {
		t.Errorf("the next run does not say it set the repository aside:\n%s", r.stderr)
	}
	if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return r.Type == audit.TypeSetAside && r.Path == aside[0] }) {
		t.Error("no set_aside audit line for the killed run's repository")
	}
	status := asUser(t, nil, "/usr/bin/git", "status", "--short")
	status.Dir = b.ws
	runResult(t, runTimeout, status)
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the host's git ran the killed run's planted command")
	}
}

// TestRunGuardsAReadWriteRepository: a read-write allow_path that is a
// repository (a sibling project the command may edit) has its config and
// hooks guarded as the workspace's are: the box can change its files, not
// what the host's git will run there.
func TestRunGuardsAReadWriteRepository(t *testing.T) {
	b := newBox(t)
	lib := userDir(t, "cordon-it-lib-")
	cmd := asUser(t, nil, "/usr/bin/git", "init", "-q", lib)
	if r := runResult(t, runTimeout, cmd); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	before, err := os.ReadFile(filepath.Join(lib, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
cd %s
printf '[core]\n\tfsmonitor = touch pwned\n' >> .git/config 2>/dev/null && echo "ESCAPED: config appended"
printf '#!/bin/sh\ntouch pwned\n' > .git/hooks/pre-commit 2>/dev/null && echo "ESCAPED: hook written"
mv .git .git-away 2>/dev/null && echo "ESCAPED: .git renamed"
echo ok > edited.txt && echo "edited"
`, lib)
	r := b.run("--net", "off", "--allow-path", lib+":rw", "--", "sh", "-c", script)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "ESCAPED") || !strings.Contains(r.stdout, "edited") {
		t.Errorf("in a read-write repository:\n%s%s", r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(lib, ".git", "config")); string(after) != string(before) {
		t.Errorf("the repository's config changed:\n%s", after)
	}
}

// TestRunReadOnlyPaths: read_only paths, here from the project's own
// .cordon.yaml (it narrows, so a project file may add them), cannot be
// written, removed, or renamed away with a directory above them and
// replaced; nor can the project file, or the next run would lose them;
// the rest of the workspace stays writable.
func TestRunReadOnlyPaths(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, ".vscode", "settings.json"), "{}\n")
	b.file(filepath.Join(b.ws, ".github", "workflows", "ci.yml"), "on: push\n")
	b.file(filepath.Join(b.ws, ".vscode", "sub", "deep", "launch.json"), "{}\n")
	// .vscode/sub/deep under .vscode, listed after it: its parent must not
	// be bound writable again after .vscode was bound read-only.
	b.file(filepath.Join(b.ws, ".cordon.yaml"), "read_only:\n  - .vscode\n  - .vscode/sub/deep\n  - .github/workflows\n")
	const script = `
echo '{"python.defaultInterpreterPath": "./evil"}' > .vscode/settings.json 2>/dev/null && echo "ESCAPED: settings written"
rm -rf .vscode 2>/dev/null; test -f .vscode/settings.json || echo "ESCAPED: .vscode removed"
echo x > .vscode/sub/planted 2>/dev/null && echo "ESCAPED: written under .vscode"
echo 'on: push' > .github/workflows/evil.yml 2>/dev/null && echo "ESCAPED: workflow added"
mv .github .github-away 2>/dev/null && echo "ESCAPED: .github renamed"
mv .vscode .vscode-away 2>/dev/null && echo "ESCAPED: .vscode renamed"
(printf "" > .cordon.yaml) 2>/dev/null && echo "ESCAPED: the project file emptied, dropping read_only for the next run"
mv .cordon.yaml .cordon.old 2>/dev/null && echo "ESCAPED: the project file moved"
echo ok > notes.txt && mkdir -p .github/other && echo ok > .github/other/f && echo "writable elsewhere"
`
	b.attempts(script, "writable elsewhere")
	if got, _ := os.ReadFile(filepath.Join(b.ws, ".vscode", "settings.json")); string(got) != "{}\n" {
		t.Errorf(".vscode/settings.json changed: %q", got)
	}
	for _, p := range []string{".github/workflows/evil.yml", ".github-away", ".vscode-away"} {
		if _, err := os.Lstat(filepath.Join(b.ws, p)); err == nil {
			t.Errorf("%s exists after the run", p)
		}
	}
}

// attempts runs script in the box (--net off). Each attempt in it prints
// a line with ESCAPED if it succeeds, and none may; what the box must
// still be able to do prints want.
func (b *box) attempts(script, want string) {
	b.t.Helper()
	r := b.run("--net", "off", "--", "sh", "-c", script)
	expectCode(b.t, r, 0)
	if strings.Contains(r.stdout, "ESCAPED") {
		b.t.Errorf("an attempt got through:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, want) {
		b.t.Errorf("the box could not do what it must (%q):\n%s%s", want, r.stdout, r.stderr)
	}
}

// TestRunGuardsCordonsOwnFiles: cordon run from a copy inside the
// workspace (a project that builds cordon, or keeps it in a tools
// directory). cordon starts cordon-holder from beside its own binary,
// outside any box, at the next restricted run; without the guard the box
// replaced it, and the next run ran the box's program with the user's
// rights, unsandboxed. The box can neither change, remove nor rename away
// cordon's binary or its holder, nor plant a holder where there is none;
// the rest of the directory stays writable, and the next restricted run
// runs no program of the box's.
func TestRunGuardsCordonsOwnFiles(t *testing.T) {
	b := newBox(t)
	tools := filepath.Join(b.ws, "tools")
	for _, name := range []string{"cordon", "cordon-holder"} {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(cordonBin(t)), name))
		if err != nil {
			t.Fatal(err)
		}
		b.file(filepath.Join(tools, name), "")
		writeUserFile(t, filepath.Join(tools, name), data)
		if err := os.Chmod(filepath.Join(tools, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pwned := filepath.Join(b.ws, "pwned")
	run := func(args ...string) result {
		cmd := asUser(t, b.env(), filepath.Join(tools, "cordon"), append([]string{"run", "--audit", b.audit}, args...)...)
		cmd.Dir = b.ws
		return runResult(t, runTimeout, cmd)
	}
	attempts := func(script, want string) {
		t.Helper()
		r := run("--net", "off", "--", "sh", "-c", script)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ESCAPED") {
			t.Errorf("an attempt got through:\n%s%s", r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the box could not do what it must (%q):\n%s%s", want, r.stdout, r.stderr)
		}
	}
	plant := `printf '#!/bin/sh\ntouch %s\n' > tools/cordon-holder 2>/dev/null && chmod +x tools/cordon-holder 2>/dev/null && echo "ESCAPED: holder planted"
`
	plant = fmt.Sprintf(plant, pwned)
	attempts(plant+`
printf 'x' >> tools/cordon 2>/dev/null && echo "ESCAPED: cordon changed"
rm -f tools/cordon-holder 2>/dev/null; test -f tools/cordon-holder || echo "ESCAPED: holder removed"
mv tools tools-away 2>/dev/null && echo "ESCAPED: tools renamed"
mv tools/cordon tools/cordon.old 2>/dev/null && echo "ESCAPED: cordon renamed"
echo ok > tools/notes && echo "writable elsewhere"
`, "writable elsewhere")
	for _, name := range []string{"cordon", "cordon-holder"} {
		got, _ := os.ReadFile(filepath.Join(tools, name))
		want, _ := os.ReadFile(filepath.Join(filepath.Dir(cordonBin(t)), name))
		if !bytes.Equal(got, want) {
			t.Errorf("tools/%s changed in the box", name)
		}
	}

	// With no holder beside it, the box must not plant one either.
	if err := os.Remove(filepath.Join(tools, "cordon-holder")); err != nil {
		t.Fatal(err)
	}
	attempts(plant+"echo tried\n", "tried")
	r := run("--net", "restricted", "--", "true")
	expectCode(t, r, 0)
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the next restricted run ran a holder the box planted, outside the box")
	}
}

// TestRunNoPlaceholderWhereTheUserCannotWrite: a guarded path that is
// missing gets a placeholder (an empty read-only file or directory) only
// where the box could have made it. In a directory the user cannot write
// (root's, say) the box cannot, so no guard is needed, and none is made:
// bwrap could not make its mount point, and the run would fail. Here,
// cordon run from a root-owned tools directory with no holder beside it,
// and a root-owned git directory with no hooks (as some tools make it).
func TestRunNoPlaceholderWhereTheUserCannotWrite(t *testing.T) {
	data, err := os.ReadFile(cordonBin(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, file   string
		data        []byte
		placeholder string
	}{
		{"tools", "cordon", data, "cordon-holder"},
		{".git", "config", []byte("[core]\n"), "hooks"},
	} {
		b := newBox(t)
		dir := filepath.Join(b.ws, c.dir)
		if err := os.Mkdir(dir, 0o755); err != nil { // root's
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), c.data, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := cordonBin(t)
		if c.file == "cordon" {
			bin = filepath.Join(dir, "cordon")
		}
		cmd := asUser(t, b.env(), bin, "run", "--audit", b.audit, "--net", "off", "--", "true")
		cmd.Dir = b.ws
		expectCode(t, runResult(t, runTimeout, cmd), 0)
		if _, err := os.Lstat(filepath.Join(dir, c.placeholder)); err == nil {
			t.Errorf("a placeholder %s was made in %s, where the box could not have made one", c.placeholder, c.dir)
		}
	}
}

// TestRunIgnoresAPlantedBwrap: cordon runs bubblewrap outside the box, so
// a "bwrap" in a workspace directory on PATH (a project's virtualenv, which
// a sandboxed command can write) must never be run: cordon takes the
// system's, and with no other refuses to start, running neither it nor the
// command. Without the check, the planted one ran as the user, unsandboxed.
func TestRunIgnoresAPlantedBwrap(t *testing.T) {
	b := newBox(t)
	venv := filepath.Join(b.ws, ".venv", "bin")
	marker := filepath.Join(b.ws, "planted-bwrap-ran")
	b.file(filepath.Join(venv, "bwrap"), "#!/bin/sh\ntouch "+marker+"\nexec /usr/bin/bwrap \"$@\"\n")
	if err := os.Chmod(filepath.Join(venv, "bwrap"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		code int
	}{
		{venv + ":/usr/local/bin:/usr/bin:/bin", 0},
		{venv, 125},
	} {
		cmd := cordonIn(t, b.ws, b.env("PATH="+c.path), "run", "--audit", b.audit, "--net", "off", "--", "/usr/bin/true")
		r := runResult(t, runTimeout, cmd)
		expectCode(t, r, c.code)
		if c.code != 0 {
			if !strings.Contains(r.stderr, "not owned by root, or writable by others") {
				t.Errorf("the refusal does not say why:\n%s", r.stderr)
			}
			// The refusal is logged, naming the bwrap passed over.
			recs := b.records()
			if last := recs[len(recs)-1]; last.Type != audit.TypeBlock || !strings.Contains(last.Detail, filepath.Join(venv, "bwrap")) {
				t.Errorf("the refusal's audit line: %+v", last)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("with PATH=%s cordon ran the workspace's bwrap, outside the box", c.path)
		}
	}
}

// TestRunAfterRecordsBounded: the lines of what was done after a run are
// written whatever the audit budget (TestRestrictedAuditBudget), so a
// box that plants many repositories (a .git link costs it an inode) has
// the first maxAfterRecords of each kind logged, and then a line saying
// how many more there were, each still named on stderr and set aside. A
// flood of one kind (named pipes) does not keep another (the
// repositories) out of the log, as a bound shared by all kinds did (red
// team, round 6: 64 named pipes pushed a directory that could not be
// checked out of it).
func TestRunAfterRecordsBounded(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--", "sh", "-c", `for i in $(seq 1 70); do mkfifo p$i; done; for i in $(seq 1 20); do mkdir r$i && ln -s elsewhere r$i/.git; done`)
	expectCode(t, r, 0)
	var pipes, repos []audit.Record
	for _, rec := range b.records() {
		switch {
		case rec.Type != audit.TypeSetAside:
		case strings.Contains(rec.Detail, "named pipe"):
			pipes = append(pipes, rec)
		case strings.Contains(rec.Detail, "repository") || strings.Contains(rec.Detail, "paths set aside"):
			repos = append(repos, rec)
		}
	}
	for _, c := range []struct {
		kind string
		recs []audit.Record
		more string
	}{{"named pipes", pipes, "and 54 more named pipes set aside"}, {"repositories", repos, "and 4 more paths set aside"}} {
		if n := len(c.recs); n != 17 || c.recs[15].Path == "" || c.recs[16].Path != "" || !strings.HasPrefix(c.recs[16].Detail, c.more) {
			t.Errorf("%d set_aside lines of %s, want 16 and one saying %q; the last: %+v", n, c.kind, c.more, c.recs[n-1])
		}
	}
	if n := strings.Count(r.stderr, "cordon: set aside as "); n != 90 {
		t.Errorf("stderr names %d of the 90 set aside", n)
	}
	if m, _ := filepath.Glob(filepath.Join(b.ws, "r*", ".git.cordon-set-aside-*")); len(m) != 20 {
		t.Errorf("%d of the 20 planted .git set aside", len(m))
	}
}

// TestRunEndsWhenAGuardIsReplacedOnTheHost: the read-only mount over the
// workspace's .git/config has the host's config as its mount point, and
// git on the host replaces that file (config.lock renamed over it) on
// every git config or git push -u; the kernel then detaches the mount in
// the box's namespace, silently. Before, the box went on with
// .git/config writable through its workspace bind, and wrote a
// core.fsmonitor that the host's next git status ran. Now cordon watches
// the paths its mounts cover and ends the box at once, saying why, in the
// exit line and on stderr.
func TestRunEndsWhenAGuardIsReplacedOnTheHost(t *testing.T) {
	b := newBox(t)
	if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "init", "-q", b.ws)); r.code != 0 {
		t.Fatalf("git init: %s%s", r.stdout, r.stderr)
	}
	pwned := filepath.Join(b.home, "pwned")
	r, _ := b.runWhileHostChanges(`printf '[core]\n\tfsmonitor = "touch `+pwned+`"\n' >> .git/config`, func() {
		if r := runResult(t, runTimeout, asUser(t, nil, "/usr/bin/git", "-C", b.ws, "config", "cordon.test", "x")); r.code != 0 {
			t.Fatalf("git config on the host: %s%s", r.stdout, r.stderr)
		}
	}, "--net", "off")
	expectEndedForLostMount(t, b, r, filepath.Join(b.ws, ".git", "config"))
}

// TestRunEndsWhenADirectoryAboveAMaskMovesOnTheHost: a mask over a
// credential file in a tree exposed read-only moves with a directory
// above it that the host renames (the kernel keeps a mount on its
// dentry), and the box then reads, at the masked path, the file the host
// puts there anew. Before, nothing watched those directories: the box
// read the new file's secret and the run went on, exit 0.
func TestRunEndsWhenADirectoryAboveAMaskMovesOnTheHost(t *testing.T) {
	b := newBox(t)
	tree := filepath.Join(b.home, "tools")
	creds := filepath.Join(tree, "aws", "credentials")
	b.file(creds, "old\n")
	r, out := b.runWhileHostChanges(`grep -q NEWSECRET `+creds, func() {
		dir := filepath.Dir(creds)
		if r := runResult(t, runTimeout, asUser(t, nil, "/bin/sh", "-c", `mv "$1" "$1.old" && mkdir "$1" && echo NEWSECRET > "$1/credentials"`, "sh", dir)); r.code != 0 {
			t.Fatalf("moving the directory on the host: %s%s", r.stdout, r.stderr)
		}
	}, "--net", "off", "--allow-path", tree)
	if strings.Contains(out, "GOT THROUGH") {
		t.Fatalf("the box read the file the host put at the masked path:\n%s", out)
	}
	expectEndedForLostMount(t, b, r, creds)
}

// runWhileHostChanges runs `cordon run ARGS -- sh -c LOOP` in the
// workspace, where LOOP tries attempt every 100 ms (at most 100 times,
// printing GOT THROUGH and exiting 0 once it succeeds), runs change on
// the host once the loop has begun, and returns how the run ended and
// its stdout. cordon ends the box as the host's change happens (an
// inotify event); every 20 ms, the loop got through first now and then
// on a busy machine, before cordon was given a core, and the aftercare
// then set the file aside, as it must, but the test is of the ending.
func (b *box) runWhileHostChanges(attempt string, change func(), args ...string) (result, string) {
	b.t.Helper()
	script := `echo ready; i=0; while [ $i -lt 100 ]; do
  if ` + attempt + ` 2>/dev/null; then echo GOT THROUGH; exit 0; fi
  sleep 0.1; i=$((i+1)); done; exit 3`
	cmd := b.cmd(append(args, "--", "sh", "-c", script)...)
	var out syncbuf.Buffer
	cmd.Stdout = &out
	done := make(chan result, 1)
	go func() { done <- runResult(b.t, runTimeout, cmd) }()
	if !eventually(30*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
		b.t.Fatalf("the command did not start; stdout %q", out.String())
	}
	change()
	r := <-done
	return r, out.String()
}

// expectEndedForLostMount checks that cordon ended the run (SIGKILL)
// because the host took away the box's mount over path, and said so on
// stderr and in the exit line.
func expectEndedForLostMount(t *testing.T, b *box, r result, path string) {
	t.Helper()
	expectCode(t, r, 137)
	why := path + ", or a directory above it, was removed, renamed or replaced on the host"
	if !strings.Contains(r.stderr, why) {
		t.Errorf("stderr does not say why the box was ended:\n%s", r.stderr)
	}
	exit, ok := findRecord(b.records(), audit.Record{Type: audit.TypeExit})
	if !ok || !strings.Contains(exit.Detail, why) {
		t.Errorf("no exit line saying why the box was ended: %+v", exit)
	}
}
