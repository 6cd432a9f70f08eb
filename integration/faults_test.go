//go:build linux

package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// localOrigin is an HTTPS server on 127.0.0.1 whose certificate covers one
// name pattern (a wildcard is fine), chained to a CA of its own.
type localOrigin struct {
	port   int
	caFile string // the CA, readable by the test user, for --extra-ca
}

// newLocalOrigin serves h over TLS (HTTP/1.1 and HTTP/2) on 127.0.0.1 until
// the test ends.
func newLocalOrigin(t testing.TB, name string, h http.Handler) *localOrigin {
	t.Helper()
	ca, key, caPEM, err := newTestCA("cordon integration local origin CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := leafFor(ca, key, name, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(userDir(t, "cordon-it-localca-"), "ca.pem")
	writeUserFile(t, caFile, caPEM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: originLog,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &localOrigin{port: ln.Addr().(*net.TCPAddr).Port, caFile: caFile}
}

// proxyArgs allow name (and the loopback address it stands for) on the
// origin's port, pinned to 127.0.0.1, with the origin's CA trusted.
func (o *localOrigin) proxyArgs(name string) []string {
	return []string{
		"--allow", fmt.Sprintf("%s:%d", name, o.port),
		"--allow", fmt.Sprintf("127.0.0.1:%d", o.port),
		"--resolve=" + name + "=127.0.0.1",
		"--extra-ca", o.caFile,
	}
}

// proc names one process across pid reuse: its pid and start time.
type proc struct {
	pid, ppid int
	start     string
	comm      string
}

// procStat reads a live process's command name, parent and start time; a
// zombie is not live.
func procStat(pid int) (proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	// After the name: state, ppid, pgrp, ... with starttime the 20th.
	f := strings.Fields(s[end+1:])
	if len(f) < 20 || f[0] == "Z" {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, start: f[19], comm: s[open+1 : end]}, true
}

// inGroup lists the live processes of process group pgid.
func inGroup(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(n); err == nil && g == pgid {
			if _, ok := procStat(n); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// slowBody is the size of the slow origin's one response: at slowChunk
// per slowPace it takes about 10 s, far longer than the test waits.
const (
	slowBody  = 64 << 20
	slowChunk = 64 << 10
	slowPace  = 10 * time.Millisecond
)

// TestFaultProxyKilledMidStream kills `cordon proxy` (SIGKILL) while a
// download with a declared length streams through it: the client reports
// an error rather than a short file passed off as complete, the origin's
// connection is torn down, nothing of cordon's is left running, and a new
// request does not go around the dead proxy.
func TestFaultProxyKilledMidStream(t *testing.T) {
	const name = "slow.cordon.test"
	var sent, active atomic.Int64
	o := newLocalOrigin(t, name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		w.Header().Set("Content-Length", strconv.Itoa(slowBody))
		buf := make([]byte, slowChunk)
		rc := http.NewResponseController(w)
		for n := 0; n < slowBody; n += slowChunk {
			if _, err := w.Write(buf); err != nil {
				return
			}
			rc.Flush()
			sent.Add(slowChunk)
			time.Sleep(slowPace)
		}
	}))
	url := fmt.Sprintf("https://%s:%d/slow", name, o.port)
	for _, tc := range []struct {
		name       string
		args       []string
		terminated bool
		cacert     func(p *proxyProc) string
	}{
		{"terminated", nil, true, func(p *proxyProc) string { return p.env["SSL_CERT_FILE"] }},
		{"opaque", []string{"--terminate=none"}, false, func(*proxyProc) string { return o.caFile }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent.Store(0)
			p := startProxy(t, append(append(tc.args, o.proxyArgs(name)...), "--ephemeral-ca")...)
			dl := exec.Command("curl", "-sS", "--max-time", "30", "--cacert", tc.cacert(p), "--proxy", p.URL(),
				"-o", "/dev/null", "-w", "%{size_download}", url)
			var out, errs strings.Builder
			dl.Stdout, dl.Stderr = &out, &errs
			if err := dl.Start(); err != nil {
				t.Fatal(err)
			}
			dlDone := make(chan error, 1)
			go func() { dlDone <- dl.Wait() }()
			if !eventually(10*time.Second, func() bool { return sent.Load() >= 1<<20 }) {
				dl.Process.Kill()
				t.Fatalf("the download never got going; proxy stderr:\n%s", p.stderr)
			}
			proxyPid := p.cmd.Process.Pid
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.cmd.Wait()

			var err error
			select {
			case err = <-dlDone:
			case <-time.After(15 * time.Second):
				dl.Process.Kill()
				t.Fatal("the client hung after the proxy died")
			}
			got, _ := strconv.Atoi(strings.TrimSpace(out.String()))
			if err == nil || got >= slowBody {
				t.Fatalf("the client took the cut stream for a complete one: %v, %d of %d bytes; stderr: %s", err, got, slowBody, errs.String())
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 18 && ee.ExitCode() != 56 && ee.ExitCode() != 92 {
				t.Errorf("curl ended with %v, want 18 (partial file), 56 (receive failure) or 92 (HTTP/2 stream error)", err)
			}
			if strings.TrimSpace(errs.String()) == "" {
				t.Error("curl said nothing about the cut transfer")
			}
			if !eventually(5*time.Second, func() bool { return active.Load() == 0 }) {
				t.Errorf("the origin still streams to a dead proxy (%d handlers)", active.Load())
			}
			if left := inGroup(proxyPid); len(left) > 0 {
				t.Errorf("processes of the killed proxy are left: %v", left)
			}
			// A client still pointed at the dead proxy fails; it is not
			// sent around it.
			_, connect, code := curl(t, p, "--connect-timeout", "3", url)
			if connect != 0 || code != 0 {
				t.Errorf("a request through the dead proxy got CONNECT %d, HTTP %d", connect, code)
			}
			recs := readAudit(t, p.audit)
			if !hasAllow(recs, name) || tc.terminated != hasRequest(recs, audit.KindConnect, "/slow") {
				t.Errorf("the killed proxy's log lacks the download's allow line, or its request line (terminated: %v)", tc.terminated)
			}
		})
	}
}

// hasAllow reports whether recs allow a connection to host.
func hasAllow(recs []audit.Record, host string) bool {
	_, ok := findRecord(recs, audit.Record{Type: audit.TypeDecision, Host: host, Decision: audit.Allow})
	return ok
}

// fullTmpfs mounts a small tmpfs owned by the test user and fills it to the
// last byte; it is unmounted when the test ends.
func fullTmpfs(t *testing.T) string {
	t.Helper()
	uid, gid, _ := testUser(t)
	dir := userDir(t, "cordon-it-full-")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 1024; i++ {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	if _, err := f.Write(buf[:1]); err == nil {
		t.Fatal("the tmpfs did not fill up")
	}
	return dir
}

// TestFaultRunAuditOnFullFilesystem: `cordon run` whose audit log sits on
// a full filesystem starts nothing, in every network mode, and says why.
func TestFaultRunAuditOnFullFilesystem(t *testing.T) {
	o := testOrigin(t)
	for _, tc := range []struct {
		net  string
		args []string
	}{
		{"off", nil},
		{"restricted", []string{"--ephemeral-ca", "--allow", originName + ":8443", resolveOrigin, "--extra-ca", o.caFile}},
	} {
		t.Run(tc.net, func(t *testing.T) {
			b := newBox(t)
			b.audit = filepath.Join(fullTmpfs(t), "audit.jsonl")
			marker := uniqueSleep()
			args := append(append([]string{"--net", tc.net}, tc.args...), "--", "sh", "-c", "touch ran; sleep "+marker)
			r := b.run(args...)
			expectCode(t, r, 125)
			if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
				t.Fatal("the command ran with no way to log it")
			}
			if !strings.Contains(r.stderr, b.audit) || !strings.Contains(r.stderr, "no space left on device") {
				t.Errorf("stderr does not name the audit log and the full disk:\n%s", r.stderr)
			}
			if len(procsRunning("sleep", marker)) > 0 {
				t.Error("the command is running")
			}
			// A restricted run's holder starts while the proxy does; the
			// refusal must end it too.
			if pids := holders(); len(pids) > 0 {
				t.Errorf("the restricted network's holder outlived the refused run: pids %v", pids)
			}
		})
	}
}

// holders lists the running holders: cordon-holder, or `cordon __holder`.
func holders() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 1 && (filepath.Base(args[0]) == "cordon-holder" || args[1] == "__holder") {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestFaultRestrictedWithoutBwrap: restricted mode without bubblewrap is
// BLOCKED by doctor and refused by run.
func TestFaultRestrictedWithoutBwrap(t *testing.T) {
	b := newBox(t)
	bin := userDir(t, "cordon-it-path-")
	env := b.env("PATH=" + bin)
	doc := runResult(t, runTimeout, cordonIn(t, b.ws, env, "doctor", "--net", "restricted", "--json"))
	expectCode(t, doc, 1)
	rep := doctorJSON(t, doc.stdout)
	if rep.Verdict != "BLOCKED" {
		t.Fatalf("doctor --net restricted without bwrap: %s", doc.stdout)
	}
	launcher := rep.capability("bubblewrap")
	if launcher.Status != "BLOCKED" || !strings.Contains(launcher.Fix, "apt-get install bubblewrap") {
		t.Fatalf("doctor's launcher line: %+v", launcher)
	}
	r := runResult(t, runTimeout, cordonIn(t, b.ws, env, "run", "--audit", b.audit, "--net", "restricted", "--ephemeral-ca",
		"--", "/usr/bin/touch", "ran"))
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, launcher.Reason) || !strings.Contains(r.stderr, launcher.Fix) {
		t.Fatalf("run's refusal does not give doctor's reason and fix %+v:\n%s", launcher, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran without bwrap")
	}
	expectOnlyBlock(t, b, "capability_blocked")
}

// expectOnlyBlock checks the audit log holds one block line with reason
// and no launch.
func expectOnlyBlock(t *testing.T, b *box, reason string) {
	t.Helper()
	recs := b.records()
	if len(recs) != 1 || recs[0].Type != audit.TypeBlock || recs[0].Reason != reason {
		t.Fatalf("audit lines %+v, want one block line (%s)", recs, reason)
	}
}

// doctorReport is the part of cordon doctor --json the tests read.
type doctorReport struct {
	Verdict      string
	Capabilities []doctorCap
}

type doctorCap struct{ Name, Status, Reason, Fix string }

func doctorJSON(t *testing.T, out string) doctorReport {
	t.Helper()
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	return rep
}

// capability is the capability named name, or a zero one.
func (r doctorReport) capability(name string) doctorCap {
	for _, c := range r.Capabilities {
		if c.Name == name {
			return c
		}
	}
	return doctorCap{}
}

// TestFaultCAKeyUnreadable: a persistent CA whose key the user cannot read
// stops `cordon proxy` and a restricted `cordon run` before anything is
// served, with the file and the fix named.
func TestFaultCAKeyUnreadable(t *testing.T) {
	uid, gid, _ := testUser(t)
	for _, tc := range []struct {
		name  string
		spoil func(key string) error
	}{
		{"mode 0000", func(key string) error { return os.Chmod(key, 0) }},
		{"owned by root", func(key string) error { return os.Chown(key, 0, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t)
			env := b.env()
			made := runResult(t, runTimeout, cordonIn(t, b.ws, env, "ca", "path"))
			expectCode(t, made, 0)
			key := filepath.Join(filepath.Dir(strings.TrimSpace(made.stdout)), "ca-key.pem")
			if err := tc.spoil(key); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chown(key, int(uid), int(gid)) })

			px := runResult(t, 20*time.Second, cordonIn(t, b.ws, env, "proxy", "--audit", b.audit))
			if px.code == 0 || strings.Contains(px.stdout, "export ") {
				t.Fatalf("cordon proxy served without its CA key (exit %d):\n%s%s", px.code, px.stdout, px.stderr)
			}
			run := b.run("--net", "restricted", "--", "touch", "ran")
			expectCode(t, run, 125)
			if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
				t.Fatal("the command ran")
			}
			for what, stderr := range map[string]string{"cordon proxy": px.stderr, "cordon run": run.stderr} {
				if !strings.Contains(stderr, key) || !strings.Contains(stderr, "cordon ca rotate") {
					t.Errorf("%s does not name %s and the fix:\n%s", what, key, stderr)
				}
			}
		})
	}
}

// TestRunRefusesAConfigOthersCanWrite: a global config another local user
// could edit (here world-writable) would let them widen the box; the run
// is refused with the fix, logged as one block line, and nothing runs.
func TestRunRefusesAConfigOthersCanWrite(t *testing.T) {
	b := newBox(t)
	cfg := b.config("network: open\n")
	if err := os.Chmod(cfg, 0o666); err != nil {
		t.Fatal(err)
	}
	r := b.run("--config", cfg, "--", "/usr/bin/touch", "ran")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "writable by other users") || !strings.Contains(r.stderr, "chmod go-w "+cfg) {
		t.Fatalf("stderr %q: want the refusal and its fix", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran under a config others could write")
	}
	expectOnlyBlock(t, b, "policy")
}
