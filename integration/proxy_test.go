//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

var resolveOrigin = "--resolve=" + originName + "=" + originAddr

// curl runs curl through the proxy and returns its output and the status
// of the CONNECT (http_connect) and of the request (http_code).
func curl(t *testing.T, p *proxyProc, args ...string) (body string, connect, code int) {
	t.Helper()
	return curlAs(t, p, nil, args...)
}

// curlAs is curl run as the user cred names (nil: this process's, root).
func curlAs(t *testing.T, p *proxyProc, cred *syscall.Credential, args ...string) (body string, connect, code int) {
	t.Helper()
	full := append([]string{"-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_connect} %{http_code}", "--proxy", p.URL()}, args...)
	cmd := exec.Command("curl", full...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, _ := cmd.Output()
	out := string(outb)
	i := strings.LastIndexByte(out, '\n')
	fmt.Sscanf(out[i+1:], "%d %d", &connect, &code)
	return out[:i] + stderr.String(), connect, code
}

func echoOf(t *testing.T, body string) echoReply {
	t.Helper()
	var e echoReply
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("origin reply is not an echo: %v\n%s", err, body)
	}
	return e
}

func TestProxyOpaqueTunnelAllowedAndDenied(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--terminate=none", "--allow", originName+":8443", resolveOrigin)

	body, connect, code := curl(t, p, "--cacert", o.caFile, fmt.Sprintf("https://%s:%d/hello?secret=1", originName, originHTTPS))
	if connect != 200 || code != 200 {
		t.Fatalf("allowed tunnel: connect %d, code %d\n%s\n%s", connect, code, body, p.stderr)
	}
	e := echoOf(t, body)
	if e.Sni != originName || e.Header.Get("Proxy-Authorization") != "" {
		t.Fatalf("origin saw %+v", e)
	}
	r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: originName, Port: originHTTPS})
	if r.Decision != audit.Allow || r.Addr != fmt.Sprintf("%s:%d", originAddr, originHTTPS) || r.Rule != originName+":8443" {
		t.Fatalf("allow record: %+v", r)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Host: originName, Port: originHTTPS})

	// Denied: 403 with the reason in the body and X-Cordon-Reason.
	body, connect, _ = curl(t, p, "-v", "https://denied.cordon.test/")
	if connect != 403 || !strings.Contains(body, "X-Cordon-Reason: not_allowlisted") {
		t.Fatalf("denied host: connect %d\n%s", connect, body)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Host: "denied.cordon.test", Port: 443, Decision: audit.Deny, Reason: "not_allowlisted"})

	// Port rules: the host is allowed on 8443 only.
	_, connect, _ = curl(t, p, fmt.Sprintf("https://%s:%d/", originName, originBadTLS))
	if connect != 403 {
		t.Fatalf("port not allowed: connect %d", connect)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Host: originName, Port: originBadTLS, Decision: audit.Deny, Reason: "port_not_allowed"})

	// Secrets and query strings never reach the log.
	log := string(mustRead(t, p.audit))
	if strings.Contains(log, "secret=1") || strings.Contains(log, p.token()) {
		t.Fatalf("audit log holds a query string or the token:\n%s", log)
	}
}

func TestProxyAuthentication(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", resolveOrigin)
	u, _ := url.Parse(p.URL())
	for _, tc := range []struct {
		name, proxy, reason string
	}{
		{"missing", "http://" + u.Host, "auth_required"},
		{"wrong", "http://cordon:not-the-token@" + u.Host, "auth_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := run(t, 20*time.Second, exec.Command("curl", "-sS", "-v", "--max-time", "10", "--proxy", tc.proxy, "https://"+originName+":8443/"))
			if !strings.Contains(out, "HTTP/1.1 407") || !strings.Contains(out, `Proxy-Authenticate: Basic realm="cordon"`) {
				t.Fatalf("want 407 with a Basic challenge:\n%s", out)
			}
			waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: tc.reason})
		})
	}
}

// TestProxyRefusesOtherUsers: another user on the machine (nobody) is
// refused before a byte of its request is read, token or not, and logged;
// its connections are closed at once, not held to the 30 s header
// timeout. Before, any local user could hold the proxy's 4,096 client
// connections (8,192 idle ones, with the listen queue) and leave the
// session's own client waiting for as long as it liked. The proxy's own
// user, and root, still get through.
func TestProxyRefusesOtherUsers(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originName+":8080", resolveOrigin)
	target := fmt.Sprintf("http://%s:%d/", originName, originHTTP)
	uid, gid, _ := testUser(t)
	for _, who := range []struct {
		name string
		cred *syscall.Credential
	}{{"root", nil}, {"the proxy's own user", &syscall.Credential{Uid: uid, Gid: gid}}} {
		if body, _, code := curlAs(t, p, who.cred, target); code != 200 {
			t.Fatalf("%s, with the token: %d\n%s\n%s", who.name, code, body, p.stderr)
		}
	}
	start := time.Now()
	body, _, code := curlAs(t, p, &syscall.Credential{Uid: 65534, Gid: 65534}, target)
	if code != 0 {
		t.Fatalf("another user (nobody), with the token, got an answer: %d\n%s", code, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("another user's connection was held %s before it was closed: such connections take the proxy's client connections from the session's own client", took)
	}
	r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: "other_user"})
	if !strings.Contains(r.Detail, "uid 65534") {
		t.Fatalf("the refusal does not name the user: %+v", r)
	}
}

// TestProxyEvalReturns: the README's first example, eval "$(cordon proxy
// … &)", returns once the export lines are printed, and the proxy they
// name still serves: cordon proxy lets go of its standard output then.
// Before, it held it for its life, so the shell waited until the proxy
// had ended, and then set variables naming a proxy that was gone.
func TestProxyEvalReturns(t *testing.T) {
	testOrigin(t)
	dir := userDir(t, "cordon-it-audit-")
	script := fmt.Sprintf(`eval "$(%s proxy --audit %s --allow %s:%d %s 2>%s &)" && printf '%%s\n' "$HTTPS_PROXY"`,
		cordonBin(t), filepath.Join(dir, "audit.jsonl"), originName, originHTTP, resolveOrigin, filepath.Join(dir, "stderr"))
	cmd := asUser(t, nil, "bash", "-c", script)
	t.Cleanup(func() {
		// The proxy stays in the shell's process group.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		if !eventually(10*time.Second, func() bool { return syscall.Kill(-cmd.Process.Pid, 0) == syscall.ESRCH }) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	out, err := run(t, 15*time.Second, cmd)
	if err != nil {
		stderr, _ := os.ReadFile(filepath.Join(dir, "stderr"))
		t.Fatalf("eval \"$(cordon proxy &)\" did not return while the proxy ran: %v\n%s\n%s", err, out, stderr)
	}
	proxy := strings.TrimSpace(out)
	if !strings.HasPrefix(proxy, "http://cordon:") {
		t.Fatalf("the shell's HTTPS_PROXY is %q", proxy)
	}
	code, err := run(t, 20*time.Second, exec.Command("curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", proxy,
		fmt.Sprintf("http://%s:%d/", originName, originHTTP)))
	if err != nil || code != "200" {
		t.Fatalf("the proxy the shell was given does not serve: %v %s", err, code)
	}
}

// TestProxyOutlivesItsStderrReader: a proxy whose standard error no one
// reads any more (the program that started it, and read its export
// lines, has gone) serves on, and ends on SIGTERM as it should: the
// session's trust bundle removed. Before, its next line there (the
// banner, or the audit budget spent by its own client's flood) killed it
// with SIGPIPE, past its shutdown: the bundle stayed on disk and the
// open tunnels' close lines were never written.
func TestProxyOutlivesItsStderrReader(t *testing.T) {
	cfg := filepath.Join(userDir(t, "cordon-it-config-"), "config.yaml")
	writeUserFile(t, cfg, []byte("limits:\n  audit_budget: 64KiB\n"))
	// Standard error is a pipe whose reader has exited.
	wrap := []string{"bash", "-c", `exec "$@" 2> >(exit 0)`, "bash"}
	p := startProxyVia(t, nil, wrap, "--config", cfg, "--allow", "allowed.cordon.test")
	floodConnects(t, p, 1000)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("the proxy had already ended: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cordon proxy, its stderr unread, ended %v, want a clean exit on SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cordon proxy did not end within 10s of SIGTERM")
	}
	if _, err := os.Stat(filepath.Dir(p.env["SSL_CERT_FILE"])); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the session's trust bundle is still there (%v): the proxy did not shut down", err)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeBudget})
}

// TestProxyEndsWhenItsExportsCannotBePrinted: a proxy whose export lines
// could not be written (the reader of its stdout gone) is one no client
// has the token of: it ends at once, saying why, and removes its trust
// bundle. Before, SIGPIPE killed it there, past its shutdown, leaving
// the bundle on disk (and, once it outlived its readers, it would have
// served on for no one).
func TestProxyEndsWhenItsExportsCannotBePrinted(t *testing.T) {
	tmp := userDir(t, "cordon-it-tmp-")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := asUser(t, []string{"TMPDIR=" + tmp}, cordonBin(t), "proxy", "--audit", filepath.Join(tmp, "audit.jsonl"), "--allow", "allowed.cordon.test")
	var stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() < 1 || !strings.Contains(stderr.String(), "print the export lines") {
			t.Errorf("cordon proxy ended %v, want an error exit saying why:\n%s", err, &stderr)
		}
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("cordon proxy served on, for no one, after its export lines could not be printed")
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "cordon-session-*")); len(left) > 0 {
		t.Errorf("the session's trust bundle is left behind: %v", left)
	}
}

// TestProxyRefusesAStdoutThatLosesItsExports: a proxy whose standard
// output is /dev/null, or was closed (Go's runtime opens /dev/null in
// its place), wrote its export lines there and served on for no one (red
// team, round 6); it now refuses at once, starting nothing.
func TestProxyRefusesAStdoutThatLosesItsExports(t *testing.T) {
	tmp := userDir(t, "cordon-it-tmp-")
	for _, redirect := range []string{">/dev/null", ">&-"} {
		cmd := asUser(t, []string{"TMPDIR=" + tmp}, "/bin/sh", "-c", cordonBin(t)+" proxy --audit "+filepath.Join(tmp, "audit.jsonl")+" --allow allowed.cordon.test "+redirect)
		r := runResult(t, 30*time.Second, cmd)
		if r.code == 0 || !strings.Contains(r.stderr, "standard output is /dev/null") {
			t.Errorf("cordon proxy %s: exit %d, want a refusal saying why:\n%s", redirect, r.code, r.stderr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "cordon-session-*")); len(left) > 0 {
		t.Errorf("a session's trust bundle was made: %v", left)
	}
	if _, err := os.Stat(filepath.Join(tmp, "audit.jsonl")); err == nil {
		t.Error("the refused proxy opened its audit log")
	}
}

func TestProxyPlainHTTPDropsProxyHeaders(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originName+":8080", resolveOrigin)
	body, _, code := curl(t, p, "-H", "Keep-Alive: timeout=5", "-H", "Connection: X-Hop", "-H", "X-Hop: 1",
		"-H", "X-Forwarded-For: 192.0.2.1", "-H", "Forwarded: for=192.0.2.1",
		fmt.Sprintf("http://%s:%d/plain?q=1", originName, originHTTP))
	if code != 200 {
		t.Fatalf("plain http: %d\n%s\n%s", code, body, p.stderr)
	}
	e := echoOf(t, body)
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "X-Hop", "X-Forwarded-For", "Forwarded"} {
		if e.Header.Get(h) != "" {
			t.Errorf("origin received hop-by-hop or forwarding header %s: %q", h, e.Header.Get(h))
		}
	}
	r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Kind: audit.KindHTTP, Host: originName, Port: originHTTP})
	if r.Decision != audit.Allow || r.Path != "/plain" || r.Addr != fmt.Sprintf("%s:%d", originAddr, originHTTP) {
		t.Fatalf("plain allow record: %+v", r)
	}
	_, _, code = curl(t, p, "http://denied.cordon.test/")
	if code != 403 {
		t.Fatalf("plain denied: %d", code)
	}
	waitRecord(t, p.audit, audit.Record{Kind: audit.KindHTTP, Host: "denied.cordon.test", Decision: audit.Deny})
}

// TestProxyPlainHTTPKeepsUpstreamConnections: plain-HTTP requests reuse a
// kept-alive upstream connection to the address their own check allowed;
// each still has its allow line (naming that address) and its close line.
func TestProxyPlainHTTPKeepsUpstreamConnections(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originName+":8080", resolveOrigin)
	pu, _ := url.Parse(p.URL())
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var remotes []string
	for _, path := range []string{"/reuse-1", "/reuse-2", "/reuse-3"} {
		resp, err := c.Get(fmt.Sprintf("http://%s:%d%s", originName, originHTTP, path))
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, p.stderr)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		remotes = append(remotes, echoOf(t, string(body)).Remote)
	}
	if remotes[0] == "" || remotes[1] != remotes[0] || remotes[2] != remotes[0] {
		t.Errorf("the origin saw the requests come from %v: the upstream connection was not kept", remotes)
	}
	addr := fmt.Sprintf("%s:%d", originAddr, originHTTP)
	for _, path := range []string{"/reuse-1", "/reuse-2", "/reuse-3"} {
		r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Kind: audit.KindHTTP, Path: path})
		if r.Decision != audit.Allow || r.Addr != addr || r.ID == 0 {
			t.Errorf("allow line for %s: %+v", path, r)
		}
		if cl := waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Kind: audit.KindHTTP, ID: r.ID}); cl.Addr != addr || cl.BytesDown == 0 {
			t.Errorf("close line for %s: %+v", path, cl)
		}
	}
}

// rawConnect sends one CONNECT line through the proxy and returns the status.
func rawConnect(t *testing.T, p *proxyProc, target string) (*bufConn, int) {
	t.Helper()
	c, status, err := dialConnect(p, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, status
}

// dialConnect is rawConnect for goroutines other than the test's own: it
// reports errors instead of failing the test.
func dialConnect(p *proxyProc, target string) (*bufConn, int, error) {
	u, _ := url.Parse(p.URL())
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte("cordon:" + p.token()))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("CONNECT %s: %w", target, err)
	}
	return &bufConn{Conn: c, r: br}, resp.StatusCode, nil
}

// bufConn reads through the reader that parsed the CONNECT reply, which
// may already hold the first bytes from the far end.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func TestProxyNumericHostsAreJudgedAsAddresses(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originAddr+":7000")
	a := netip.MustParseAddr(originAddr).As4()
	n := binary.BigEndian.Uint32(a[:])
	for _, tc := range []struct {
		target string
		status int
		host   string
	}{
		{fmt.Sprintf("0x%08x:7000", n), 200, originAddr},                               // hex form of the origin's address
		{fmt.Sprintf("0%o.0%o.0%o.0%o:7000", a[0], a[1], a[2], a[3]), 200, originAddr}, // octal
		{fmt.Sprintf("%d:7000", n), 200, originAddr},                                   // one 32-bit number
		{"2852039166:80", 403, "169.254.169.254"},                                      // metadata, in decimal
		{"127.1:7000", 403, "127.0.0.1"},
		{"[::ffff:" + originAddr + "]:7000", 200, originAddr},
		{"[fe80::1%25eth0]:7000", 400, ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			c, status := rawConnect(t, p, tc.target)
			if status != tc.status {
				t.Fatalf("CONNECT %s = %d, want %d", tc.target, status, tc.status)
			}
			if status == 200 {
				line, _ := c.r.ReadString('\n')
				if !strings.Contains(line, "hello from the test host") {
					t.Fatalf("tunnel to the origin read %q", line)
				}
			}
			if tc.host != "" {
				waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Host: tc.host, Decision: audit.Verdict(tc.status == 200)})
			}
		})
	}
}

func TestProxyLoopbackNeedsAnAddressRule(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "loopback service") }))
	port := ln.Addr().(*net.TCPAddr).Port
	name := fmt.Sprintf("bench.test:%d", port)

	p := startProxy(t, "--allow", name, "--resolve=bench.test=127.0.0.1")
	if _, status := rawConnect(t, p, name); status != 403 {
		t.Fatalf("a name resolving to loopback was let through: %d", status)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Host: "bench.test", Decision: audit.Deny, Reason: "blocked_address"})

	p2 := startProxy(t, "--allow", name, "--allow", fmt.Sprintf("127.0.0.1:%d", port), "--resolve=bench.test=127.0.0.1")
	if _, status := rawConnect(t, p2, name); status != 200 {
		t.Fatalf("loopback allowed by address was refused: %d", status)
	}
	// The proxy itself is never a destination, even with loopback allowed.
	p3 := startProxy(t, "--allow", "127.0.0.1:*")
	u, _ := url.Parse(p3.URL())
	if _, status := rawConnect(t, p3, u.Host); status != 403 {
		t.Fatalf("CONNECT to the proxy itself: %d", status)
	}
	waitRecord(t, p3.audit, audit.Record{Type: audit.TypeDecision, Host: "127.0.0.1", Decision: audit.Deny, Reason: "blocked_address"})
}

// TestProxyGoClient drives the proxy with Go's own client, TLS terminated,
// over HTTP/1.1 and HTTP/2.
func TestProxyGoClient(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile)
	pool := rootsOf(mustRead(t, p.env["SSL_CERT_FILE"]))
	pu, _ := url.Parse(p.URL())
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := c.Get(fmt.Sprintf("https://%s:%d/go", originName, originHTTPS))
		if err != nil {
			t.Fatalf("h2=%v: %v\n%s", h2, err, p.stderr)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := echoOf(t, string(body))
		if resp.StatusCode != 200 || e.Sni != originName || e.Header.Get("Proxy-Authorization") != "" {
			t.Fatalf("h2=%v: %d %+v", h2, resp.StatusCode, e)
		}
		if wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; resp.Proto != wantProto {
			t.Errorf("client leg speaks %s, want %s", resp.Proto, wantProto)
		}
		tr.CloseIdleConnections()
	}
	r := waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Kind: audit.KindConnect, Host: originName})
	if r.Status != 200 || r.Path != "/go" || r.BytesDown == 0 {
		t.Fatalf("request close record: %+v", r)
	}
}

// tlsThrough opens a CONNECT tunnel and a TLS session over it with the
// proxy's bundle, offering protos.
func tlsThrough(t *testing.T, p *proxyProc, target, sni string, protos ...string) (*tls.Conn, error) {
	t.Helper()
	return tlsThroughProxy(p, rootsOf(mustRead(t, p.env["SSL_CERT_FILE"])), target, sni, protos...)
}

// h1Through is tlsThrough for one HTTP/1.1 connection to the origin's
// HTTPS port, with a 10 s deadline, and a reader for its responses.
func h1Through(t *testing.T, p *proxyProc, target string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tc, err := tlsThrough(t, p, target, originName, "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc, bufio.NewReader(tc)
}

// rootsOf is a pool of the certificates in bundle.
func rootsOf(bundle []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	return pool
}

// tlsThroughProxy opens a CONNECT tunnel and a TLS session over it, trusting
// roots; safe to call from any goroutine.
func tlsThroughProxy(p *proxyProc, roots *x509.CertPool, target, sni string, protos ...string) (*tls.Conn, error) {
	c, status, err := dialConnect(p, target)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: %d", target, status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots, NextProtos: protos})
	return tc, tc.Handshake()
}

func TestTLSOneAuthorityPerConnection(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", "--allow", "other.cordon.test", resolveOrigin, "--extra-ca", o.caFile)
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)

	t.Run("domain fronting", func(t *testing.T) {
		body, _, code := curl(t, p, "--cacert", p.env["SSL_CERT_FILE"], "-H", "Host: other.cordon.test", "https://"+target+"/front")
		if code != 421 || !strings.Contains(body, "authority_mismatch") {
			t.Fatalf("fronted request: %d %s", code, body)
		}
		waitRecord(t, p.audit, audit.Record{Kind: audit.KindConnect, Host: originName, Decision: audit.Deny, Reason: "authority_mismatch"})
	})
	t.Run("SNI mismatch", func(t *testing.T) {
		if _, err := tlsThrough(t, p, target, "other.cordon.test"); err == nil {
			t.Fatal("handshake with a foreign SNI succeeded")
		}
		waitRecord(t, p.audit, audit.Record{Host: originName, Decision: audit.Deny, Reason: "sni_mismatch"})
	})
	t.Run("absolute-form and keep-alive switch", func(t *testing.T) {
		tc, err := tlsThrough(t, p, target, originName, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(tc)
		fmt.Fprintf(tc, "GET /first HTTP/1.1\r\nHost: %s\r\n\r\n", target)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("first request: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		fmt.Fprintf(tc, "GET /second HTTP/1.1\r\nHost: other.cordon.test\r\n\r\n")
		resp, err = http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 421 {
			t.Fatalf("Host switch on keep-alive: %v %v", resp, err)
		}
		tc2, err := tlsThrough(t, p, target, originName, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(tc2, "GET https://other.cordon.test/abs HTTP/1.1\r\nHost: %s\r\n\r\n", target)
		resp, err = http.ReadResponse(bufio.NewReader(tc2), nil)
		if err != nil || resp.StatusCode != 421 {
			t.Fatalf("absolute-form to another authority: %v %v", resp, err)
		}
	})
	t.Run("h2 authority", func(t *testing.T) {
		// Both requests go over one HTTP/2 connection through one tunnel.
		var dials atomic.Int32
		roots := rootsOf(mustRead(t, p.env["SSL_CERT_FILE"]))
		tr := &http.Transport{ForceAttemptHTTP2: true, ResponseHeaderTimeout: 10 * time.Second,
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				dials.Add(1)
				return tlsThroughProxy(p, roots, target, originName, "h2")
			}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+target+"/h2", nil)
		req.Host = "other.cordon.test"
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 421 || resp.ProtoMajor != 2 {
			t.Fatalf("h2 :authority mismatch: %v %v", resp, err)
		}
		resp.Body.Close()
		req, _ = http.NewRequest("GET", "https://"+target+"/h2ok", nil)
		resp, err = tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("h2 same authority: %v %v", resp, err)
		}
		resp.Body.Close()
		if n := dials.Load(); n != 1 {
			t.Fatalf("%d connections, want both requests on one", n)
		}
	})
	t.Run("h2c upgrade", func(t *testing.T) {
		_, _, code := curl(t, p, "--cacert", p.env["SSL_CERT_FILE"], "--http1.1", "-H", "Upgrade: h2c", "-H", "Connection: Upgrade, HTTP2-Settings", "-H", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA", "https://"+target+"/h2c")
		if code != 403 {
			t.Fatalf("h2c upgrade: %d", code)
		}
		waitRecord(t, p.audit, audit.Record{Host: originName, Decision: audit.Deny, Reason: "h2c_upgrade"})
	})
}

func TestTLSClients(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile)
	u := fmt.Sprintf("https://%s:%d/client", originName, originHTTPS)
	env := []string{"HTTPS_PROXY=" + p.URL(), "SSL_CERT_FILE=" + p.env["SSL_CERT_FILE"], "NODE_EXTRA_CA_CERTS=" + p.env["NODE_EXTRA_CA_CERTS"]}
	for _, tc := range []struct {
		name string
		cmd  []string
	}{
		{"curl http1.1", []string{"curl", "-sS", "--max-time", "10", "--http1.1", "--proxy", p.URL(), u}},
		{"curl http2", []string{"curl", "-sS", "--max-time", "10", "--http2", "--proxy", p.URL(), u}},
		{"python3", []string{"python3", "-c", "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())", u}},
		{"node", []string{"node", "-e", nodeConnect, p.URL(), originName, fmt.Sprint(originHTTPS)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.cmd[0], tc.cmd[1:]...)
			cmd.Env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
			out, err := run(t, 30*time.Second, cmd)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			e := echoOf(t, out)
			if e.Sni != originName || e.Path != "/client" {
				t.Fatalf("origin saw %+v", e)
			}
		})
	}
}

// nodeConnect is a Node.js client that tunnels through the proxy with
// CONNECT and speaks TLS over it, trusting NODE_EXTRA_CA_CERTS.
const nodeConnect = `
const http = require('http'), tls = require('tls');
const [proxy, host, port] = process.argv.slice(1);
const pu = new URL(proxy);
const auth = Buffer.from(decodeURIComponent(pu.username) + ':' + decodeURIComponent(pu.password)).toString('base64');
const req = http.request({host: pu.hostname, port: pu.port, method: 'CONNECT', path: host + ':' + port,
  headers: {'Proxy-Authorization': 'Basic ' + auth, Host: host + ':' + port}});
req.setTimeout(10000, () => { console.error('timeout'); process.exit(2); });
req.on('connect', (res, socket) => {
  if (res.statusCode !== 200) { console.error('CONNECT', res.statusCode); process.exit(1); }
  const s = tls.connect({socket, servername: host}, () => {
    s.write('GET /client HTTP/1.1\r\nHost: ' + host + ':' + port + '\r\nConnection: close\r\n\r\n');
  });
  let data = '';
  s.on('data', d => data += d);
  s.on('end', () => { process.stdout.write(data.slice(data.indexOf('\r\n\r\n') + 4)); });
  s.on('error', e => { console.error(e.message); process.exit(1); });
});
req.end();
`

func TestTLSUpstreamVerifiedAndExclusions(t *testing.T) {
	o := testOrigin(t)
	cfgDir := userDir(t, "cordon-it-cfg-")
	cfg := cfgDir + "/config.yaml"
	writeUserFile(t, cfg, []byte(fmt.Sprintf("allow: [%q, %q]\nexclude: [%q]\n", originName+":8443", originName+":9443", originName+":8443")))
	p := startProxy(t, "--config", cfg, resolveOrigin, "--extra-ca", o.caFile)

	// An upstream whose certificate chains to no trusted root: 502, logged.
	body, connect, code := curl(t, p, "--cacert", p.env["SSL_CERT_FILE"], fmt.Sprintf("https://%s:%d/", originName, originBadTLS))
	if connect != 200 || code != 502 || !strings.Contains(body, "upstream_tls") {
		t.Fatalf("untrusted upstream: connect %d code %d %s", connect, code, body)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeClose, Host: originName, Port: originBadTLS, Reason: "upstream_tls"})

	// An excluded host is tunnelled opaquely: the client sees the origin's
	// own certificate, not one minted by cordon.
	body, connect, code = curl(t, p, "--cacert", o.caFile, fmt.Sprintf("https://%s:%d/opaque", originName, originHTTPS))
	if connect != 200 || code != 200 {
		t.Fatalf("excluded host: connect %d code %d %s", connect, code, body)
	}
	recs := readAudit(t, p.audit)
	for _, r := range recs {
		if r.Port == originHTTPS && r.Path != "" {
			t.Fatalf("an excluded host's requests were terminated: %+v", r)
		}
	}
}

// upgradeEcho sends an Upgrade: websocket request over conn and checks the
// bytes written after the 101 come back.
func upgradeEcho(t *testing.T, conn io.ReadWriter, authority string) {
	t.Helper()
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", authority)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(conn, "ping over the upgraded stream\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "ping over the upgraded stream\n" {
		t.Fatalf("upgraded stream echoed %q, %v", line, err)
	}
}

func TestWebSocketUpgrades(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", "--allow", originName+":8080", resolveOrigin, "--extra-ca", o.caFile)
	t.Run("terminated TLS", func(t *testing.T) {
		tc, err := tlsThrough(t, p, fmt.Sprintf("%s:%d", originName, originHTTPS), originName, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		upgradeEcho(t, tc, fmt.Sprintf("%s:%d", originName, originHTTPS))
	})
	t.Run("plain HTTP", func(t *testing.T) {
		u, _ := url.Parse(p.URL())
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		auth := base64.StdEncoding.EncodeToString([]byte("cordon:" + p.token()))
		target := fmt.Sprintf("%s:%d", originName, originHTTP)
		fmt.Fprintf(c, "GET http://%s/ws HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", target, target, auth)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("plain upgrade: %v %v\n%s", resp, err, p.stderr)
		}
		io.WriteString(c, "ping\n")
		if line, _ := br.ReadString('\n'); line != "ping\n" {
			t.Fatalf("plain upgraded stream echoed %q", line)
		}
	})
}

func TestTLSSmugglingRefused(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile)
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)
	for _, tc := range []struct{ name, headers string }{
		{"CL and TE", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n"},
		{"TE and CL", "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tlsThrough(t, p, target, originName, "http/1.1")
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "POST /smuggle HTTP/1.1\r\nHost: %s\r\n%s\r\n0\r\n\r\n", target, tc.headers)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 400 || resp.Header.Get("X-Cordon-Reason") != "bad_framing" {
				t.Fatalf("ambiguous framing: %v %v", resp, err)
			}
		})
	}
	waitRecord(t, p.audit, audit.Record{Host: originName, Decision: audit.Deny, Reason: "bad_framing"})
}

// TestProxyPlainHTTPSmugglingRefused: absolute-form requests to the proxy
// itself meet the same framing and h2c refusals as requests in a tunnel.
func TestProxyPlainHTTPSmugglingRefused(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", originName+":8080", resolveOrigin)
	u, _ := url.Parse(p.URL())
	auth := base64.StdEncoding.EncodeToString([]byte("cordon:" + p.token()))
	target := fmt.Sprintf("%s:%d", originName, originHTTP)
	for _, tc := range []struct{ name, headers, reason string }{
		{"CL and TE", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "bad_framing"},
		{"h2c upgrade", "Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n", "h2c_upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			path := "/smuggle-" + strings.ReplaceAll(tc.name, " ", "-")
			fmt.Fprintf(c, "POST http://%s%s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n%s\r\n0\r\n\r\n", target, path, target, auth, tc.headers)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.Header.Get("X-Cordon-Reason") != tc.reason {
				t.Fatalf("got %v %v, want a refusal with %s", resp, err, tc.reason)
			}
			if _, ok := seen.Load(path); ok {
				t.Fatal("the request reached the origin")
			}
			waitRecord(t, p.audit, audit.Record{Kind: audit.KindHTTP, Decision: audit.Deny, Reason: tc.reason})
		})
	}
}

// TestClientGoneCancelsUpstreamRequest: a client that gives up on a
// request (curl's --max-time, python's timeout: an interrupted agent),
// waiting for its response or in the middle of a streamed one, gets the
// request cancelled at the origin, over a terminated HTTP/1.1 or HTTP/2
// connection and over plain HTTP, and the request's close line says
// client_gone. Without it a long, non-streaming API call would run
// on, and be billed, for nobody.
func TestClientGoneCancelsUpstreamRequest(t *testing.T) {
	o := testOrigin(t)
	p := startProxy(t, "--allow", originName+":8443", "--allow", fmt.Sprintf("%s:%d", originName, originHTTP), resolveOrigin, "--extra-ca", o.caFile)
	https := func(path string) string { return fmt.Sprintf("https://%s:%d%s", originName, originHTTPS, path) }
	env := []string{"HTTPS_PROXY=" + p.URL(), "SSL_CERT_FILE=" + p.env["SSL_CERT_FILE"], "PATH=/usr/local/bin:/usr/bin:/bin"}
	for i, tc := range []struct {
		name, path string
		cmd        []string
	}{
		{"curl http1.1", "/hang/curl-h1", []string{"curl", "-sS", "--max-time", "1", "--http1.1", "--proxy", p.URL(), https("/hang/curl-h1")}},
		{"curl http2 POST", "/hang/curl-h2", []string{"curl", "-sS", "--max-time", "1", "--http2", "--proxy", p.URL(), "-d", `{"prompt": "hi"}`, https("/hang/curl-h2")}},
		{"curl plain http", "/hang/curl-plain", []string{"curl", "-sS", "--max-time", "1", "--proxy", p.URL(), fmt.Sprintf("http://%s:%d/hang/curl-plain", originName, originHTTP)}},
		{"curl plain http streaming", "/stream/curl-plain", []string{"curl", "-sS", "--max-time", "1", "--proxy", p.URL(), fmt.Sprintf("http://%s:%d/stream/curl-plain", originName, originHTTP)}},
		{"curl http1.1 streaming", "/stream/curl-h1", []string{"curl", "-sS", "--max-time", "1", "--http1.1", "--proxy", p.URL(), https("/stream/curl-h1")}},
		{"curl http2 streaming", "/stream/curl-h2", []string{"curl", "-sS", "--max-time", "1", "--http2", "--proxy", p.URL(), https("/stream/curl-h2")}},
		{"python3", "/hang/python", []string{"python3", "-c", "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)", https("/hang/python")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.cmd[0], tc.cmd[1:]...)
			cmd.Env = env
			if out, err := run(t, 30*time.Second, cmd); err == nil {
				t.Fatalf("the client did not give up:\n%s", out)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, ok := hung.Load(tc.path); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the origin's request for %s was not cancelled within 5 s of the client leaving", tc.path)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// This client's close line is the i+1th to say client_gone;
			// lines of terminated connections name the path.
			for {
				var gone []audit.Record
				for _, r := range readAudit(t, p.audit) {
					if r.Type == audit.TypeClose && r.Reason == "client_gone" && r.Host == originName {
						gone = append(gone, r)
					}
				}
				if len(gone) == i+1 && (gone[i].Path == tc.path || gone[i].Kind == audit.KindHTTP) {
					break
				}
				if len(gone) > i+1 || time.Now().After(deadline) {
					t.Fatalf("want close line %d for %s to say client_gone, have %+v; log:\n%s", i+1, tc.path, gone, mustRead(t, p.audit))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestProxyLogsEachAddressBeforeDialling: a name with two addresses, the
// first unreachable. Each attempt's allow line, naming its address, comes
// before its dial; the unreachable one gets a close line saying why, and
// the tunnel goes on to the second.
func TestProxyLogsEachAddressBeforeDialling(t *testing.T) {
	testOrigin(t)
	target := fmt.Sprintf("%s:%d", originName, originOtherTCP)
	// The test host's other end of the link: an address of this host,
	// so it needs its own entry, and nothing listens there on the port.
	unreachable := fmt.Sprintf("%s:%d", originHostSide, originOtherTCP)
	p := startProxy(t, "--allow", target, "--allow", unreachable,
		"--resolve="+originName+"="+originHostSide, resolveOrigin, "--terminate=none")
	c, status := rawConnect(t, p, target)
	if status != 200 {
		t.Fatalf("CONNECT %s: %d\n%s", target, status, p.stderr)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "hello from the test host\n" {
		t.Fatalf("through the tunnel: %q %v", line, err)
	}
	c.Close()
	reached := fmt.Sprintf("%s:%d", originAddr, originOtherTCP)
	want := []string{
		"decision allow " + unreachable + " allowlisted",
		"close  " + unreachable + " dial_failed",
		"decision allow " + reached + " allowlisted",
		"close  " + reached + " ",
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []string
		for _, r := range readAudit(t, p.audit) {
			if r.Host == originName && (r.Type == audit.TypeDecision || r.Type == audit.TypeClose) {
				got = append(got, fmt.Sprintf("%s %s %s %s", r.Type, r.Decision, r.Addr, r.Reason))
			}
		}
		if slices.Equal(got, want) {
			return
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTLSRedialsTheLoggedAddress: a terminated tunnel whose upstream
// connection ended (the origin said Connection: close) connects again to
// the address its allow line names, not to whichever of the name's
// addresses answers first now: here the name's first address, unreachable
// when the tunnel was made, has come up since.
func TestTLSRedialsTheLoggedAddress(t *testing.T) {
	o := testOrigin(t)
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)
	first := fmt.Sprintf("%s:%d", originHostSide, originHTTPS)
	p := startProxy(t, "--allow", target, "--allow", first, "--resolve="+originName+"="+originHostSide, resolveOrigin, "--extra-ca", o.caFile)
	tc, br := h1Through(t, p, target)
	get := func(path string) int {
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, target)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/bye"); code != 200 {
		t.Fatalf("GET /bye: %d", code)
	}
	ln, err := net.Listen("tcp", first)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := countAccepts(ln)
	if code := get("/again"); code != 200 || accepted.Load() != 0 {
		t.Fatalf("the second request: %d, with %d connections to %s, an address no allow line of the tunnel names", code, accepted.Load(), first)
	}
	var named []string
	for _, r := range readAudit(t, p.audit) {
		if r.Type == audit.TypeDecision && r.Kind == audit.KindConnect && r.Host == originName && r.Method == "" { // the tunnel's, not its requests'
			named = append(named, r.Addr)
		}
	}
	if want := []string{first, fmt.Sprintf("%s:%d", originAddr, originHTTPS)}; !slices.Equal(named, want) {
		t.Fatalf("the tunnel's allow lines name %v, want %v (the first unreachable then)", named, want)
	}
}

// TestProxySweepsKilledSessionBundle: a proxy killed outright (SIGKILL)
// cannot remove its session's bundle directory. A later proxy of the
// same user removes it once it is stale, and leaves alone a directory
// another session still holds (here the test holds it, as a live
// session's cordon does: a flock).
func TestProxySweepsKilledSessionBundle(t *testing.T) {
	home := userDir(t, "cordon-it-home-")
	env := []string{"HOME=" + home}
	killed := startProxyEnv(t, env, "--allow", "example.test")
	dead := filepath.Dir(killed.env["SSL_CERT_FILE"])
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.cmd.Wait()
	if _, err := os.Stat(filepath.Join(dead, "ca-bundle.pem")); err != nil {
		t.Fatalf("the killed session's bundle is not where it was: %v", err)
	}
	uid, gid, _ := testUser(t)
	live := filepath.Join(filepath.Dir(dead), "cordon-session-live")
	if err := os.Mkdir(live, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(live, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	holdLocked(t, live)
	// Stale: unmodified for longer than the sweep's minute.
	old := time.Now().Add(-2 * time.Minute)
	for _, d := range []string{dead, live} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	next := startProxyEnv(t, env, "--allow", "example.test")
	if !eventually(10*time.Second, func() bool { _, err := os.Lstat(dead); return errors.Is(err, fs.ErrNotExist) }) {
		t.Errorf("the killed session's bundle directory %s outlived the next session's start", dead)
	}
	for _, d := range []string{live, next.env["SSL_CERT_FILE"]} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("the sweep removed %s, which a live session holds: %v", d, err)
		}
	}
}

// TestProxyBundleOutOfOthersReach: the trust bundle's path outlives the
// session in its clients' environment (eval "$(cordon proxy)" sets it in a
// shell). Once the session has ended and removed it, no other user may
// make that path anew: in /tmp one could, with a CA of their own in it,
// and (on the session's port, free again) intercept every TLS connection
// the user's shell then makes.
func TestProxyBundleOutOfOthersReach(t *testing.T) {
	p := startProxy(t, "--allow", "example.test")
	bundle := p.env["SSL_CERT_FILE"]
	if bundle == "" {
		t.Fatal("cordon proxy printed no SSL_CERT_FILE")
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("cordon proxy did not end cleanly on SIGTERM: %v\n%s", err, p.stderr.String())
	}
	if _, err := os.Lstat(bundle); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the session's bundle %s is still there after it ended: %v", bundle, err)
	}
	// Another user (nobody) tries to make the bundle's directory anew.
	dir := filepath.Dir(bundle)
	mk := exec.Command("mkdir", dir)
	mk.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := mk.CombinedOutput()
	if err == nil {
		os.RemoveAll(dir)
		t.Fatalf("another user made the ended session's bundle directory %s anew: the user's clients would trust the CA put there", dir)
	}
	if !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("mkdir %s as another user failed, but not for want of permission: %v\n%s", dir, err, out)
	}
}

// TestCAFirstUseConcurrentAndRotated: commands started at once on first
// use (no CA yet) make one CA between them, its key 0600 in a 0700
// directory, and no temporary file is left beside it; `cordon ca rotate`
// while a session runs leaves that session the CA it began with (a TLS
// handshake through it still verifies against its trust bundle, which is
// not rewritten), says so, and the next session uses the new CA.
func TestCAFirstUseConcurrentAndRotated(t *testing.T) {
	o := testOrigin(t)
	home := userDir(t, "cordon-it-home-")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	caDir := filepath.Join(home, ".config", "cordon", "ca")
	const n = 8
	outs := make([][]byte, n)
	errs := make([]error, n)
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = cordonIn(t, home, env, "ca", "export")
	}
	done := make(chan int, n)
	for i, cmd := range cmds {
		go func() { outs[i], errs[i] = cmd.Output(); done <- i }()
	}
	for range n {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			for _, cmd := range cmds {
				if cmd.Process != nil {
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
			}
			t.Fatal("cordon ca export did not finish within 30s")
		}
	}
	for i := range n {
		if errs[i] != nil || !bytes.Equal(outs[i], outs[0]) || !strings.HasPrefix(string(outs[0]), "-----BEGIN CERTIFICATE-----") {
			t.Fatalf("command %d: %v, printed:\n%s\nwhere the first printed:\n%s", i, errs[i], outs[i], outs[0])
		}
	}
	entries, err := os.ReadDir(caDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".lock", "ca-key.pem", "ca.pem"}; !slices.Equal(names, want) {
		t.Errorf("the CA directory holds %q, want %q", names, want)
	}
	for path, want := range map[string]os.FileMode{caDir: 0o700, filepath.Join(caDir, "ca-key.pem"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}

	args := []string{"--allow", originName + ":8443", resolveOrigin, "--extra-ca", o.caFile}
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)
	p := startProxyEnv(t, env, args...)
	bundle := mustRead(t, p.env["SSL_CERT_FILE"])
	if !bytes.Contains(bundle, outs[0]) {
		t.Fatal("the session's trust bundle lacks the CA the first commands made")
	}
	r := runResult(t, 30*time.Second, cordonIn(t, home, env, "ca", "rotate"))
	if r.code != 0 || !strings.Contains(r.stderr, "running sessions go on with the old one until they end") {
		t.Fatalf("cordon ca rotate: exit %d, stderr %q; want it to say running sessions keep the old CA", r.code, r.stderr)
	}
	tc, err := tlsThroughProxy(p, rootsOf(bundle), target, originName)
	if err != nil {
		t.Fatalf("after the rotation, a handshake through the running session failed: %v", err)
	}
	tc.Close()
	if now := mustRead(t, p.env["SSL_CERT_FILE"]); !bytes.Equal(now, bundle) {
		t.Error("the running session's trust bundle was rewritten by the rotation")
	}
	next := startProxyEnv(t, env, args...)
	nextBundle := mustRead(t, next.env["SSL_CERT_FILE"])
	if bytes.Contains(nextBundle, outs[0]) {
		t.Error("the session started after the rotation still trusts the old CA")
	}
	if tc, err := tlsThroughProxy(next, rootsOf(nextBundle), target, originName); err != nil {
		t.Errorf("a handshake through the session started after the rotation failed: %v", err)
	} else {
		tc.Close()
	}
}
