//go:build linux

package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/echotest"
)

// The test host: a network namespace joined to this one by a veth pair.
// Its servers listen on sockets opened inside the namespace, so traffic to
// them really crosses a network boundary, yet never leaves this machine.
// Each test process gets a host of its own (its name, link and /30 derive
// from the pid), so two test runs on one machine do not tear down each
// other's host.
var (
	originNS       = hostNS(os.Getpid())
	originLink     = hostLink(os.Getpid())
	originNet      = freeNet(os.Getpid() % 250)
	originAddr     = fmt.Sprintf("10.231.%d.2", originNet)
	originHostSide = fmt.Sprintf("10.231.%d.1", originNet)
)

// freeNet is the first N, from start on, whose 10.231.N.0/30 no route on
// this machine holds yet: a link another test run left behind must not
// capture the test host's address.
func freeNet(start int) int {
	for i := range 250 {
		n := (start + i) % 250
		out, err := exec.Command("ip", "-o", "route", "show", fmt.Sprintf("10.231.%d.0/30", n)).Output()
		if err == nil && len(bytes.TrimSpace(out)) == 0 {
			return n
		}
	}
	return start
}

const (
	// originName is the name tests use for the origin; cordon learns it
	// through --resolve, as an operator pins an internal name.
	originName = "origin.cordon.test"
	// Ports the origin serves.
	originHTTPS    = 8443
	originHTTP     = 8080
	originBadTLS   = 9443
	originOtherTCP = 7000
)

// origin is the test host's servers and the CA its certificate chains to.
type origin struct {
	caPEM  []byte
	caFile string // readable by the test user
	// gitRoot holds repo.git, served over dumb HTTP at /git/ and readable
	// by the test user over ssh.
	gitRoot string
}

var (
	originOnce sync.Once
	theOrigin  *origin
	originErr  error
)

// testOrigin creates the test host once per test binary.
func testOrigin(t testing.TB) *origin {
	t.Helper()
	testUser(t)
	originOnce.Do(func() { theOrigin, originErr = newOrigin() })
	if originErr != nil {
		t.Fatalf("test host: %v", originErr)
	}
	return theOrigin
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func newOrigin() (*origin, error) {
	removeStaleOrigins()
	// A namespace left by a crashed run with the same pid is replaced.
	exec.Command("ip", "netns", "del", originNS).Run()
	exec.Command("ip", "link", "del", originLink+"a").Run()
	for _, c := range [][]string{
		{"ip", "netns", "add", originNS},
		{"ip", "link", "add", originLink + "a", "type", "veth", "peer", "name", originLink + "b"},
		{"ip", "link", "set", originLink + "b", "netns", originNS},
		{"ip", "addr", "add", originHostSide + "/30", "dev", originLink + "a"},
		{"ip", "link", "set", originLink + "a", "up"},
		{"ip", "-n", originNS, "addr", "add", originAddr + "/30", "dev", originLink + "b"},
		{"ip", "-n", originNS, "link", "set", originLink + "b", "up"},
		{"ip", "-n", originNS, "link", "set", "lo", "up"},
	} {
		if err := sh(c...); err != nil {
			return nil, err
		}
	}
	ca, caKey, caPEM, err := newTestCA("cordon integration test CA")
	if err != nil {
		return nil, err
	}
	good, err := leafFor(ca, caKey, originName, originAddr)
	if err != nil {
		return nil, err
	}
	other, otherKey, _, err := newTestCA("an unknown CA")
	if err != nil {
		return nil, err
	}
	bad, err := leafFor(other, otherKey, originName, originAddr)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cordon-it-ca-")
	if err != nil {
		return nil, err
	}
	os.Chmod(dir, 0o755)
	caFile := filepath.Join(dir, "origin-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		return nil, err
	}
	gitRoot, err := makeGitRepo()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/git/", http.StripPrefix("/git/", http.FileServer(http.Dir(gitRoot))))
	mux.HandleFunc("/", echo)
	h := mux
	serve := func(port int, cfg *tls.Config) error {
		ln, err := listenInNS(originNS, fmt.Sprintf("%s:%d", originAddr, port))
		if err != nil {
			return err
		}
		// Longer than cordon's 10 s of sniffing, so an attack that waits
		// that out meets cordon's refusal, not this server's own timeout.
		srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second, ErrorLog: originLog}
		if cfg != nil {
			go srv.ServeTLS(ln, "", "")
		} else {
			go srv.Serve(ln)
		}
		return nil
	}
	if err := serve(originHTTPS, &tls.Config{Certificates: []tls.Certificate{good}}); err != nil {
		return nil, err
	}
	if err := serve(originBadTLS, &tls.Config{Certificates: []tls.Certificate{bad}}); err != nil {
		return nil, err
	}
	if err := serve(originHTTP, nil); err != nil {
		return nil, err
	}
	// A raw TCP service that answers one line, for non-HTTP tunnels.
	raw, err := listenInNS(originNS, fmt.Sprintf("%s:%d", originAddr, originOtherTCP))
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			rawAccepts.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, "hello from the test host\n")
			}()
		}
	}()
	return &origin{caPEM: caPEM, caFile: caFile, gitRoot: gitRoot}, nil
}

// listenInNS opens a listening socket inside a named network namespace.
func listenInNS(ns, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter netns %s: %w", ns, err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		panic("cannot return to the test's own network namespace: " + err.Error())
	}
	return ln, lerr
}

// echoReply is what the origin answers: the request as it arrived.
type echoReply struct {
	Method  string      `json:"method"`
	Host    string      `json:"host"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Proto   string      `json:"proto"`
	Header  http.Header `json:"header"`
	Body    string      `json:"body"`
	TLS     bool        `json:"tls"`
	Sni     string      `json:"sni"`
	Trailer http.Header `json:"trailer,omitempty"`
	// Remote is the client's address as the origin sees it: the proxy's
	// upstream connection.
	Remote string `json:"remote"`
}

// seen records what the origin received, by path, so tests can check
// what really crossed the network (the echo itself is masked on the way
// back when credentials are in play).
var seen sync.Map // path -> http.Header

// rawAccepts counts the connections the raw TCP service (originOtherTCP)
// accepted: what really reached the test host.
var rawAccepts atomic.Int64

// hung records, by path, the requests for /hang/ and /stream/ that the
// origin saw cancelled: /hang/ answers nothing until its request is
// cancelled (20 s at most), /stream/ streams until then.
var hung sync.Map // path -> true

// websocketEcho serves /websocket and /name.
var websocketEcho = echotest.Origin(nil)

func echo(w http.ResponseWriter, r *http.Request) {
	seen.Store(r.URL.Path, r.Header.Clone())
	if strings.HasPrefix(r.URL.Path, "/stream/") {
		// A body that never ends, until the request is cancelled.
		for i := 0; i < 2000 && r.Context().Err() == nil; i++ {
			io.WriteString(w, "data: more\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
		if r.Context().Err() != nil {
			hung.Store(r.URL.Path, true)
		}
		return
	}
	if strings.HasPrefix(r.URL.Path, "/hang/") {
		select {
		case <-r.Context().Done():
			hung.Store(r.URL.Path, true)
		case <-time.After(20 * time.Second):
		}
		return
	}
	if r.URL.Path == "/websocket" || r.URL.Path == "/name" {
		// A WebSocket that sends the request's Authorization back in a
		// message, or a response naming a header and trailers after its
		// token (echotest.Origin).
		websocketEcho.ServeHTTP(w, r)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// A raw upgrade echo: enough to prove the upgrade path carries bytes.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.Copy(c, brw)
		return
	}
	if r.URL.Path == "/bulk" {
		w.Header().Set("Content-Type", "application/octet-stream")
		buf := make([]byte, 64<<10)
		for i := 0; i < 64; i++ { // 4 MiB
			w.Write(buf)
		}
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rep := echoReply{Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery,
		Proto: r.Proto, Header: r.Header, Body: string(body), TLS: r.TLS != nil, Trailer: r.Trailer, Remote: r.RemoteAddr}
	if r.TLS != nil {
		rep.Sni = r.TLS.ServerName
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/bye" {
		w.Header().Set("Connection", "close") // the next request needs a new connection
	}
	json.NewEncoder(w).Encode(rep)
}

func newTestCA(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func leafFor(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name, ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// readAudit parses every record in an audit file; any line that is not a
// record fails the test.
func readAudit(t testing.TB, path string) []audit.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	return decodeAudit(data, func(line int, err error) { t.Fatalf("audit line %d: %v", line, err) })
}

// readAuditIfAny reads an audit log that may not exist yet, or be in the
// middle of a write.
func readAuditIfAny(path string) []audit.Record {
	data, _ := os.ReadFile(path)
	return decodeAudit(data, nil)
}

// decodeAudit reads records with cordon's own reader; warn hears of lines
// that are not records.
func decodeAudit(data []byte, warn func(int, error)) []audit.Record {
	var recs []audit.Record
	r := audit.NewReader(bytes.NewReader(data), warn)
	for r.Next() {
		recs = append(recs, r.Record())
	}
	return recs
}

// findRecord returns the first record matching all of want's non-zero
// type, kind, host, port, decision and reason fields.
func findRecord(recs []audit.Record, want audit.Record) (audit.Record, bool) {
	for _, r := range recs {
		if (want.Type == "" || r.Type == want.Type) &&
			(want.Kind == "" || r.Kind == want.Kind) &&
			(want.Host == "" || r.Host == want.Host) &&
			(want.Port == 0 || r.Port == want.Port) &&
			(want.Decision == "" || r.Decision == want.Decision) &&
			(want.Reason == "" || r.Reason == want.Reason) {
			return r, true
		}
	}
	return audit.Record{}, false
}

// waitRecord polls the audit log until a matching record appears.
func waitRecord(t testing.TB, path string, want audit.Record) audit.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, ok := findRecord(readAudit(t, path), want); ok {
			return r
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("no audit record like %+v; log:\n%s", want, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// makeGitRepo builds a bare repository with one commit, prepared for git's
// dumb HTTP protocol (served as plain files under /git/repo.git).
func makeGitRepo() (string, error) {
	root, err := os.MkdirTemp("", "cordon-it-git-")
	if err != nil {
		return "", err
	}
	os.Chmod(root, 0o755)
	work := filepath.Join(root, "work")
	bare := filepath.Join(root, "repo.git")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "HOME="+root)
	for _, c := range [][]string{
		{"git", "init", "-q", "-b", "main", work},
		{"sh", "-c", "echo 'cloned through cordon' > " + filepath.Join(work, "README")},
		{"git", "-C", work, "add", "README"},
		{"git", "-C", work, "commit", "-q", "-m", "first"},
		{"git", "clone", "-q", "--bare", work, bare},
		{"git", "-C", bare, "update-server-info"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return root, nil
}

// removeStaleOrigins deletes the test hosts of test processes that are
// gone (killed before they could remove theirs): each holds a /30 and a
// veth pair, and the kernel keeps them until someone deletes them.
func removeStaleOrigins() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cordon-it-"))
		if err != nil || e.Name() != hostNS(pid) || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		exec.Command("ip", "netns", "del", hostNS(pid)).Run()
		exec.Command("ip", "link", "del", hostLink(pid)+"a").Run()
	}
}

// hostNS and hostLink name the test host's namespace and veth pair (the
// link's two ends add "a" and "b") of the test process pid.
func hostNS(pid int) string   { return fmt.Sprintf("cordon-it-%d", pid) }
func hostLink(pid int) string { return fmt.Sprintf("cit%d", pid%1000000) }

// removeOrigin deletes this process's test host, if it made one.
func removeOrigin() {
	if theOrigin == nil {
		return
	}
	exec.Command("ip", "netns", "del", originNS).Run()
	exec.Command("ip", "link", "del", originLink+"a").Run()
	os.RemoveAll(filepath.Dir(theOrigin.caFile))
	os.RemoveAll(theOrigin.gitRoot)
}

// originLog is the test origins' error log without its "TLS handshake error"
// lines: the suite's clients hang up mid-handshake by the thousand on purpose
// (denied tunnels, refused names, 10,000 hosts), and those lines buried a
// failing test's report, which CI shows only the tail of.
var originLog = log.New(quietHandshakes{}, "origin: ", log.LstdFlags)

type quietHandshakes struct{}

func (quietHandshakes) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("TLS handshake error")) {
		os.Stderr.Write(p)
	}
	return len(p), nil
}
