//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestProxyNameNotSearched: the guarded dialer looks an allowed name up
// as it is, never under the host's search domains. With `search
// corp.cordon.test` in resolv.conf and *.cordon.test allowed, a name the
// DNS does not know (wiki.cordon.test) went on to be asked as
// wiki.cordon.test.corp.cordon.test, a name outside the allowlist, and
// the proxy dialled that name's address as the allowed one's.
func TestProxyNameNotSearched(t *testing.T) {
	testOrigin(t)
	const searched = "wiki.cordon.test.corp.cordon.test."
	ns := serveTestDNS(t, map[string]string{searched: originAddr})
	dir := userDir(t, "cordon-it-resolv-")
	resolv := filepath.Join(dir, "resolv.conf")
	writeUserFile(t, resolv, []byte("nameserver "+ns.addr+"\nsearch corp.cordon.test\noptions ndots:1\n"))
	// cordon sees that resolv.conf in a mount namespace of its own.
	wrap := []string{"unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
		`mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolv}
	p := startProxyVia(t, nil, wrap, "--ephemeral-ca", "--allow", fmt.Sprintf("*.cordon.test:%d", originHTTP))

	// The client is the test user, which is cordon's user (root in its
	// namespace); root outside is no user of that namespace's.
	uid, gid, _ := testUser(t)
	body, _, code := curlAs(t, p, &syscall.Credential{Uid: uid, Gid: gid}, fmt.Sprintf("http://wiki.cordon.test:%d/", originHTTP))
	if code != 403 {
		t.Fatalf("a name only its search-domain form resolves: code %d, want 403\n%s\n%s", code, body, p.stderr)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeDecision, Host: "wiki.cordon.test", Port: originHTTP,
		Decision: audit.Deny, Reason: "resolve_failed"})
	if r, ok := findRecord(readAudit(t, p.audit), audit.Record{Decision: audit.Allow, Host: "wiki.cordon.test"}); ok {
		t.Fatalf("allowed: %+v", r)
	}
	if q := ns.questions(); len(q) == 0 || slices.ContainsFunc(q, func(n string) bool { return n != "wiki.cordon.test." }) {
		t.Fatalf("the resolver was asked %q; want only wiki.cordon.test.", q)
	}
}

// testDNS is a DNS server on a loopback address of its own, port 53 (the
// port resolv.conf implies), answering A queries from a table and
// NXDOMAIN to everything else, and keeping the names it was asked.
type testDNS struct {
	addr  string
	mu    sync.Mutex
	asked []string
}

func (d *testDNS) questions() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked)
}

func serveTestDNS(t *testing.T, table map[string]string) *testDNS {
	t.Helper()
	pid := os.Getpid()
	d := &testDNS{addr: fmt.Sprintf("127.53.%d.%d", pid>>8&0xff, pid&0xff|1)}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			q := r.Question[0]
			d.mu.Lock()
			d.asked = append(d.asked, strings.ToLower(q.Name))
			d.mu.Unlock()
			a, ok := table[strings.ToLower(q.Name)]
			switch {
			case !ok:
				m.Rcode = dns.RcodeNameError
			case q.Qtype == dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{A: net.ParseIP(a),
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}})
			}
		}
		w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", d.addr+":53")
	if err != nil {
		t.Fatalf("test DNS: %v", err)
	}
	l, err := net.Listen("tcp", d.addr+":53")
	if err != nil {
		pc.Close()
		t.Fatalf("test DNS: %v", err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
	return d
}

// TestAuditLogInAUserNamespace: in a user namespace that does not map
// root (a container, a sandbox around cordon), root's directories (/tmp
// among them) belong to the overflow user; cordon counts them as root's
// there, as nothing tells them apart, and neither refuses a log in /tmp
// nor warns of it as another user's (cordon run's and proxy's check of a
// log's directory, added this round, did both).
func TestAuditLogInAUserNamespace(t *testing.T) {
	log := filepath.Join(os.TempDir(), fmt.Sprintf("cordon-it-userns-%d.jsonl", os.Getpid()))
	rec := `{"time":"2026-01-02T03:04:05Z","session":"s","type":"decision","kind":"connect","host":"userns.example","port":443,"decision":"deny","reason":"not_allowlisted"}` + "\n"
	writeUserFile(t, log, []byte(rec))
	if err := os.Chmod(log, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(log)
	for _, wrap := range [][]string{nil, {"unshare", "--user", "--map-root-user"}} {
		argv := append(wrap, cordonBin(t), "audit", "--file", log)
		r := runResult(t, runTimeout, asUser(t, nil, argv[0], argv[1:]...))
		if r.code != 0 || !strings.Contains(r.stdout, "userns.example") || strings.Contains(r.stderr, "another user") {
			t.Errorf("cordon audit %v: exit %d\n%s%s", wrap, r.code, r.stdout, r.stderr)
		}
	}
}
