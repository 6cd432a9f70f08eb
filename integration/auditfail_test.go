//go:build linux

package integration

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestProxyAuditFailureDenies fills the audit log's filesystem mid-session:
// from then on every connection is refused, because a decision that cannot
// be logged is not made.
func TestProxyAuditFailureDenies(t *testing.T) {
	testOrigin(t)
	uid, gid, _ := testUser(t)
	dir := userDir(t, "cordon-it-full-")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs for the audit log: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	os.Chown(dir, int(uid), int(gid))
	auditPath := filepath.Join(dir, "audit.jsonl")

	p := startProxy(t, "--audit", auditPath, "--allow", originName+":8443", "--allow", fmt.Sprintf("%s:%d", originName, originOtherTCP),
		"--allow", fmt.Sprintf("%s:%d", originName, originHTTP), resolveOrigin, "--terminate=none")
	o := testOrigin(t)
	if _, connect, _ := curl(t, p, "--cacert", o.caFile, fmt.Sprintf("https://%s:%d/", originName, originHTTPS)); connect != 200 {
		t.Fatalf("before the disk fills: connect %d", connect)
	}
	// Fill the filesystem to the last byte.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := filler.Write(buf); err != nil {
			break
		}
	}
	filler.Write(buf[:1])
	filler.Close()
	// The log's last page may still have room for a line or two; once a
	// write fails, every later connection is refused.
	failedAt := -1
	for i := 0; i < 30; i++ {
		body, connect, _ := curl(t, p, "-v", "--cacert", o.caFile, fmt.Sprintf("https://%s:%d/", originName, originHTTPS))
		refused := connect != 200 && strings.Contains(body, "audit_failed")
		switch {
		case refused && failedAt < 0:
			failedAt = i
		case !refused && failedAt >= 0:
			t.Fatalf("request %d was allowed after the audit log failed at request %d:\n%s", i, failedAt, body)
		}
	}
	if failedAt < 0 {
		t.Fatal("30 connections were allowed with the audit log's filesystem full")
	}
	// A plain request's refusal page says why, and no more: the box is
	// kept from the log's directory, so it must not learn the log's path.
	body, _, code := curl(t, p, fmt.Sprintf("http://%s:%d/", originName, originHTTP))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "audit_failed") || strings.Contains(body, dir) {
		t.Fatalf("plain request with the log unwritable: %d %q; want 503 audit_failed, without the log's path %s", code, body, dir)
	}
	refusedNeverDialled(t, p)
}

// refusedNeverDialled: with the proxy's log unwritable, an allowed
// CONNECT is refused before its connection is made, so nothing reaches
// the test host unlogged, not even a handshake.
func refusedNeverDialled(t *testing.T, p *proxyProc) {
	t.Helper()
	before := rawAccepts.Load()
	for range 5 {
		c, status, err := dialConnect(p, fmt.Sprintf("%s:%d", originName, originOtherTCP))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if status != http.StatusServiceUnavailable {
			t.Fatalf("CONNECT with the log unwritable: %d, want 503", status)
		}
	}
	time.Sleep(200 * time.Millisecond) // an accept on its way is counted
	if n := rawAccepts.Load() - before; n != 0 {
		t.Fatalf("%d refused, unlogged CONNECTs still reached the test host", n)
	}
}

// TestProxyRefusesToStartWithoutAudit: no audit log, no proxy.
func TestProxyRefusesToStartWithoutAudit(t *testing.T) {
	dir := userDir(t, "cordon-it-ro-")
	os.Chmod(dir, 0o555)
	cmd := asUser(t, nil, cordonBin(t), "proxy", "--audit", filepath.Join(dir, "sub", "audit.jsonl"))
	out, err := run(t, 20*time.Second, cmd)
	var ee *exec.ExitError
	if err == nil || !strings.Contains(out, "audit") {
		t.Fatalf("cordon proxy started without a writable audit log (%v):\n%s", err, out)
	}
	if !asExit(err, &ee) || strings.Contains(out, "export HTTPS_PROXY") {
		t.Fatalf("cordon proxy printed its exports without an audit log:\n%s", out)
	}
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// TestProxyStopsCleanlyOnSignals: a proxy told to stop, by Ctrl-C, kill,
// or the hangup of the terminal it was started from in the background,
// stops promptly even with a tunnel open to a silent server, writes the
// tunnel's close line before the log is closed, and removes its trust
// bundle.
func TestProxyStopsCleanlyOnSignals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts in the kernel, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startProxy(t, "--allow", fmt.Sprintf("127.0.0.1:%d", port))
			bundleDir := filepath.Dir(p.env["SSL_CERT_FILE"])
			if _, err := os.Stat(bundleDir); err != nil {
				t.Fatalf("no trust bundle while the proxy runs: %v", err)
			}
			if _, status := rawConnect(t, p, fmt.Sprintf("127.0.0.1:%d", port)); status != 200 {
				t.Fatalf("CONNECT: %d", status)
			}
			p.cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- p.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("cordon proxy ended with %v after %s, want a clean stop", err, sig)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("cordon proxy did not stop within 10s of %s", sig)
			}
			waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Host: "127.0.0.1", Port: port})
			if _, err := os.Stat(bundleDir); !os.IsNotExist(err) {
				t.Fatalf("the trust bundle %s is left behind after %s (%v)", bundleDir, sig, err)
			}
		})
	}
}

// TestProxyAuditBudget: a client that floods `cordon proxy` with denied
// CONNECTs cannot grow the audit log past the session's budget; past it,
// an allowed host is refused too (unlogged), and cordon says so once.
func TestProxyAuditBudget(t *testing.T) {
	const budget = 64 << 10
	cfg := filepath.Join(userDir(t, "cordon-it-config-"), "config.yaml")
	writeUserFile(t, cfg, []byte("limits:\n  audit_budget: 64KiB\n"))
	p := startProxy(t, "--config", cfg, "--allow", originName+":8443", "--allow", fmt.Sprintf("%s:%d", originName, originOtherTCP), resolveOrigin, "--terminate=none")
	floodConnects(t, p, 1000)
	if line := proxyConnect(t, p, fmt.Sprintf("%s:%d", originName, originHTTPS)); strings.Contains(line, " 200 ") {
		t.Errorf("past the budget an allowed CONNECT went through, unlogged: %q", line)
	}
	refusedNeverDialled(t, p)
	budgetSpent(t, p.audit, budget, p.stderr.String(), "budget")
}

// proxyConnect sends one CONNECT for host to p, with its token, and
// returns the status line the proxy answered.
func proxyConnect(t *testing.T, p *proxyProc, host string) string {
	t.Helper()
	u, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	auth := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", host, host, auth)
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// floodConnects sends p up to n CONNECTs to hosts off its allowlist,
// within a minute: each a deny line in its audit log.
func floodConnects(t *testing.T, p *proxyProc, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		proxyConnect(t, p, fmt.Sprintf("x%d.flood.example:443", i))
	}
}

// budgetSpent checks a session whose audit budget was spent: its log
// within the budget (and a line or two), ending with the types last, and
// cordon's stderr saying so once.
func budgetSpent(t *testing.T, log string, budget int, stderr string, last ...string) {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > budget+8<<10 {
		t.Errorf("the session wrote %d bytes of audit lines; its budget is %d", len(data), budget)
	}
	var types []string
	for _, r := range readAudit(t, log) {
		types = append(types, string(r.Type))
	}
	if len(types) < len(last) || !slices.Equal(types[len(types)-len(last):], last) {
		t.Errorf("the log ends %v, want %v", types[max(0, len(types)-4):], last)
	}
	if n := strings.Count(stderr, "audit budget is spent"); n != 1 {
		t.Errorf("cordon said the budget was spent %d times, want once:\n%s", n, stderr)
	}
}

// TestTornAuditLineKeepsTheNextRecord: a box that fills the disk its
// workspace shares with the audit log has cordon's next write find room
// for only part of its line, which the log then ends with. The next
// record appended there, by a session that was running all along or by
// the next run, is still read, and a new session starts on a line of its
// own.
func TestTornAuditLineKeepsTheNextRecord(t *testing.T) {
	testOrigin(t)
	uid, gid, _ := testUser(t)
	dir := userDir(t, "cordon-it-torn-")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs for the workspace and the audit log: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	b := &box{t: t, ws: filepath.Join(dir, "ws"), home: userDir(t, "cordon-it-home-"), audit: filepath.Join(dir, "log", "audit.jsonl")}
	for _, d := range []string{dir, b.ws, filepath.Dir(b.audit)} {
		os.MkdirAll(d, 0o755)
		os.Chown(d, int(uid), int(gid))
	}
	// A session that is idle while the disk is full.
	p := startProxy(t, "--audit", b.audit, "--allow", originName+":8080", resolveOrigin)
	tear := func() {
		t.Helper()
		// The box fills the disk, asks until a request is refused for
		// want of its line, and frees the disk.
		fill := fmt.Sprintf(`head -c 8M /dev/zero > fill 2>/dev/null; i=0; while [ $i -lt 40 ]; do i=$((i+1)); c=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 5 http://%s:8080/tear-$i); [ "$c" = 503 ] && break; done; rm -f fill; echo "refused: $c"`, originName)
		r := b.run("--net", "restricted", "--allow", originName+":8080", resolveOrigin, "--", "sh", "-c", fill)
		if !strings.Contains(r.stdout, "refused: 503") || !strings.Contains(r.stderr, "no space left on device") {
			t.Fatalf("the box's requests were not refused once the disk was full:\n%s\n%s", r.stdout, r.stderr)
		}
		data, _ := os.ReadFile(b.audit)
		if len(data) > 0 && data[len(data)-1] == '\n' {
			t.Log("this time the log's last write had no room at all, so no line was cut")
		}
	}
	// wholeLine says the log holds a line, whole, matching want.
	wholeLine := func(want func(audit.Record) bool) bool {
		data, _ := os.ReadFile(b.audit)
		for _, l := range strings.Split(string(data), "\n") {
			var r audit.Record
			if json.Unmarshal([]byte(l), &r) == nil && want(r) {
				return true
			}
		}
		return false
	}
	read := func(want func(audit.Record) bool) bool {
		data, _ := os.ReadFile(b.audit)
		return slices.ContainsFunc(decodeAudit(data, nil), want)
	}

	tear()
	if _, _, code := curl(t, p, fmt.Sprintf("http://%s:8080/after-tear", originName)); code != 200 {
		t.Fatalf("the session that was idle while the disk was full: %d, want 200", code)
	}
	after := func(r audit.Record) bool { return r.Type == audit.TypeDecision && r.Path == "/after-tear" }
	if !read(after) {
		t.Error("the allowed request's line, appended to the line the full disk cut short, cannot be read")
	}

	tear()
	if r := b.run("--net", "off", "--", "true"); r.code != 0 {
		t.Fatalf("the run after the disk was freed: exit %d\n%s", r.code, r.stderr)
	}
	launch := func(r audit.Record) bool {
		return r.Type == audit.TypeLaunch && slices.Equal(r.Command, []string{"true"})
	}
	if !wholeLine(launch) {
		t.Errorf("the next run's launch line is not a line of its own:\n%s", tail(b.audit, 1200))
	}
}

// tail is the end of the file at path, at most n bytes.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	return string(data[max(0, len(data)-n):])
}
