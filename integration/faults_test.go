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
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
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

// alive reports whether p still runs.
func (p proc) alive() bool {
	q, ok := procStat(p.pid)
	return ok && q.start == p.start
}

// descendants lists every live process below pid.
func descendants(pid int) []proc {
	children := map[int][]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := procStat(n); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// survivors are the processes of ps still running.
func survivors(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
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

// text is what a lockedWriter over a strings.Builder holds so far.
func text(l *lockedWriter) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*strings.Builder).String()
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
		})
	}
}

// TestFaultSlirpKilled kills the slirp4netns of a restricted run while its
// command loops over requests: every later request fails (the sandbox
// never falls back to the host's network), and the run ends when the
// command does, leaving nothing behind.
func TestFaultSlirpKilled(t *testing.T) {
	o := testOrigin(t)
	ws := userDir(t, "cordon-it-ws-")
	auditPath := filepath.Join(userDir(t, "cordon-it-audit-"), "audit.jsonl")
	marker := fmt.Sprintf("cordon-it-slirp-%d", time.Now().UnixNano())
	// Each round tries the proxy, the transparent path to the allowed name,
	// and the origin's address directly (denied by policy; it could only
	// work over an open network). The test creates "killed" once
	// slirp4netns is dead, and "stop" to end the loop.
	script := fmt.Sprintf(`try() { what=$1; shift; if curl -sS --connect-timeout 2 -m 3 -o /dev/null "$@" 2>/tmp/err; then echo "$phase $what ok"; else echo "$phase $what fail: $(head -c 160 /tmp/err)"; fi; }
i=0
while [ $i -lt 200 ] && [ ! -e stop ]; do
  i=$((i+1)); phase=before; [ -e killed ] && phase=after
  try proxy %[1]s/loop-$phase
  try transparent --noproxy '*' %[1]s/loop-$phase-transparent
  try direct -k --noproxy '*' https://%[2]s:%[3]d/direct
  echo "$phase round"
  sleep 0.1
done
: %[4]s`, httpsOrigin, originAddr, originHTTPS, marker)
	cmd := cordonIn(t, ws, nil, "run", "--net", "restricted", "--audit", auditPath, "--ephemeral-ca",
		"--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile, "--timeout", "60s", "--", "sh", "-c", script)
	stdout, stderr := &lockedWriter{w: &strings.Builder{}}, &lockedWriter{w: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
		}
	}()
	if !eventually(30*time.Second, func() bool { return strings.Contains(text(stdout), "before round") }) {
		t.Fatalf("the sandboxed loop never got through; stdout:\n%s\nstderr:\n%s", text(stdout), text(stderr))
	}
	tree := descendants(cmd.Process.Pid)
	var slirp *proc
	for i, p := range tree {
		if p.comm == "slirp4netns" && p.ppid == cmd.Process.Pid {
			slirp = &tree[i]
		}
	}
	if slirp == nil {
		t.Fatalf("no slirp4netns child of cordon (pid %d) among %v", cmd.Process.Pid, tree)
	}
	if err := syscall.Kill(slirp.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { return !slirp.alive() }) {
		t.Fatal("slirp4netns survived SIGKILL")
	}
	killedAt := len(text(stdout))
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(ws, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("killed")
	if !eventually(30*time.Second, func() bool { return strings.Count(text(stdout), "after round") >= 2 }) {
		t.Fatalf("the loop did not go on after slirp4netns died; stdout:\n%s\nstderr:\n%s", text(stdout), text(stderr))
	}
	touch("stop")
	var err error
	select {
	case err = <-waited:
		stopped = true
	case <-time.After(20 * time.Second):
		t.Fatalf("the run did not end with its command; stdout:\n%s\nstderr:\n%s", text(stdout), text(stderr))
	}
	out := text(stdout)
	if err != nil {
		t.Fatalf("cordon run: %v\nstdout:\n%s\nstderr:\n%s", err, out, text(stderr))
	}
	if strings.Contains(out, "direct ok") {
		t.Fatalf("the origin's address was reached directly:\n%s", out)
	}
	for _, line := range strings.Split(out[killedAt:], "\n") {
		if strings.HasPrefix(line, "after ") && strings.Contains(line, " ok") {
			t.Fatalf("a request got out after slirp4netns died: %q\n%s", line, out)
		}
	}
	for _, want := range []string{"before proxy ok", "before transparent ok", "after proxy fail", "after transparent fail"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	recs := readAudit(t, auditPath)
	for _, want := range []audit.Record{
		{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: originName, Decision: audit.Allow},
		{Type: audit.TypeDecision, Kind: audit.KindTransparent, Host: originName, Decision: audit.Allow},
		{Type: audit.TypeDecision, Kind: audit.KindTransparent, Host: originAddr, Port: originHTTPS, Decision: audit.Deny},
	} {
		if _, ok := findRecord(recs, want); !ok {
			t.Errorf("no audit line like %+v from before slirp4netns died", want)
		}
	}
	for _, path := range []string{"/loop-after", "/loop-after-transparent"} {
		for _, r := range recs {
			if r.Path == path {
				t.Fatalf("the proxy saw %s after slirp4netns died: %+v", path, r)
			}
		}
	}
	if !strings.Contains(text(stderr), "slirp4netns exited") {
		t.Errorf("cordon did not say the sandbox lost its network:\n%s", text(stderr))
	}
	if r, ok := findRecord(recs, audit.Record{Type: audit.TypeExit}); !ok || r.ExitCode == nil || *r.ExitCode != 0 || r.Outcome != "completed" ||
		!strings.Contains(r.Detail, "slirp4netns exited while the command ran") {
		t.Errorf("exit line %+v (found %v): want exit 0, completed, and a detail saying slirp4netns died", r, ok)
	}
	if left := survivors(tree); !eventually(5*time.Second, func() bool { left = survivors(tree); return len(left) == 0 }) {
		t.Fatalf("processes outlived the run: %v", left)
	}
	if processWith(marker) {
		t.Fatal("the sandboxed loop outlived the run")
	}
	t.Logf("the loop:\n%s\ncordon's stderr:\n%s", out, text(stderr))
}

// TestFaultRestrictedWithoutBwrap: restricted mode without bubblewrap is
// BLOCKED by doctor and refused by run, even with slirp4netns present.
func TestFaultRestrictedWithoutBwrap(t *testing.T) {
	b := newBox(t)
	bin := userDir(t, "cordon-it-path-")
	if err := os.Symlink("/usr/bin/slirp4netns", filepath.Join(bin, "slirp4netns")); err != nil {
		t.Fatal(err)
	}
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

// TestFaultTunUnreadable: with /dev/net/tun closed to the user, restricted
// mode is BLOCKED by doctor and refused by run, naming the device and the
// fix. The device's mode is restored before anything else runs.
func TestFaultTunUnreadable(t *testing.T) {
	const tun = "/dev/net/tun"
	fi, err := os.Stat(tun)
	if err != nil {
		t.Fatalf("%s: %v", tun, err)
	}
	mode := fi.Mode().Perm()
	restore := func() {
		if err := os.Chmod(tun, mode); err != nil {
			t.Errorf("restore %s to %04o: %v", tun, mode, err)
		}
	}
	t.Cleanup(restore)
	b := newBox(t)
	if err := os.Chmod(tun, 0o600); err != nil {
		t.Fatal(err)
	}
	doc := runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), "doctor", "--net", "restricted", "--json"))
	r := b.run("--net", "restricted", "--ephemeral-ca", "--", "touch", "ran")
	restore()

	expectCode(t, doc, 1)
	rep := doctorJSON(t, doc.stdout)
	var named bool
	for _, c := range rep.Capabilities {
		if c.Status == "BLOCKED" && strings.Contains(c.Reason, tun) && strings.Contains(c.Fix, "chmod 0666 "+tun) {
			named = true
		}
	}
	if rep.Verdict != "BLOCKED" || !named {
		t.Fatalf("doctor does not block on %s with the fix:\n%s", tun, doc.stdout)
	}
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, tun) || !strings.Contains(r.stderr, "chmod 0666 "+tun) {
		t.Fatalf("run's refusal does not name %s and the fix:\n%s", tun, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran")
	}
	expectOnlyBlock(t, b, "capability_blocked")
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
