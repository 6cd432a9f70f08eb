//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// TestRestrictedListensOnNothingOfTheHost: a restricted run's proxy and
// resolver serve sockets made inside the box's own network namespace.
// cordon holds them, yet not one of its sockets is bound in the host's
// network namespace, and the box has no interface but its loopback.
func TestRestrictedListensOnNothingOfTheHost(t *testing.T) {
	ws := userDir(t, "cordon-it-ws-")
	auditPath := filepath.Join(userDir(t, "cordon-it-audit-"), "a.jsonl")
	cmd := cordonIn(t, ws, nil, "run", "--net", "restricted", "--audit", auditPath, "--ephemeral-ca", "--",
		"sh", "-c", "cat /proc/net/dev > links.tmp && mv links.tmp links; while [ ! -e stop ]; do sleep 0.1; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
		}
	}()
	links := filepath.Join(ws, "links")
	if !eventually(30*time.Second, func() bool { _, err := os.Stat(links); return err == nil }) {
		t.Fatal("the command never ran")
	}

	held := socketInodes(t, cmd.Process.Pid)
	// The proxy's, the transparent listener's and the resolver's two.
	if len(held) < 4 {
		t.Fatalf("cordon holds %d sockets, want at least the box's four listeners", len(held))
	}
	bound := hostSockets(t)
	for inode := range held {
		if line, ok := bound[inode]; ok {
			t.Errorf("cordon's socket %s is bound in the host's network namespace: %s", inode, line)
		}
	}

	b, err := os.ReadFile(links)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			names = append(names, name)
		}
	}
	if len(names) != 1 || names[0] != "lo" {
		t.Errorf("the box's interfaces are %v, want only lo:\n%s", names, b)
	}
}

// socketInodes are the inodes of the sockets pid holds.
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			out[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return out
}

// hostSockets maps the inode of every TCP and UDP socket of the host's
// network namespace (this test's) to its /proc/net line.
func hostSockets(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile("/proc/net/" + table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 {
				out[f[9]] = table + ": " + strings.TrimSpace(line)
			}
		}
	}
	return out
}

// TestRestrictedWithoutHolderBinary: a cordon installed without
// cordon-holder beside it runs itself as the holder, and the restricted
// network works the same: an allowed request through the proxy variables
// and one that ignores them both get through, and both are logged.
func TestRestrictedWithoutHolderBinary(t *testing.T) {
	o := testOrigin(t)
	alone := filepath.Join(userDir(t, "cordon-it-alone-"), "cordon")
	data, err := os.ReadFile(cordonBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := userDir(t, "cordon-it-ws-")
	auditPath := filepath.Join(userDir(t, "cordon-it-audit-"), "a.jsonl")
	cmd := asUser(t, nil, alone, "run", "--net", "restricted", "--audit", auditPath, "--ephemeral-ca",
		"--allow", originName+":8443", resolveOrigin, "--extra-ca", o.caFile, "--",
		"sh", "-c", "curl -sS -m 10 "+httpsOrigin+"/via-proxy && curl -sS -m 10 --noproxy '*' "+httpsOrigin+"/transparent")
	cmd.Dir = ws
	r := runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	recs := readAudit(t, auditPath)
	for _, want := range []audit.Record{
		{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: originName, Decision: audit.Allow},
		{Type: audit.TypeDecision, Kind: audit.KindTransparent, Host: originName, Decision: audit.Allow},
	} {
		if _, ok := findRecord(recs, want); !ok {
			t.Errorf("no audit line like %+v:\n%s", want, r.stderr)
		}
	}
}
