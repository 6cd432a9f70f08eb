//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// startSSHD runs an sshd on the test host (port 22 in its namespace) that
// accepts the returned key for the test user and nothing else.
func startSSHD(t *testing.T) (key string) {
	t.Helper()
	testOrigin(t)
	// sshd reads authorized_keys as the user, so the directory is open.
	dir, err := os.MkdirTemp("", "cordon-it-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, c := range [][]string{
		{"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "hostkey")},
		{"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "userkey")},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	pub := mustRead(t, filepath.Join(dir, "userkey.pub"))
	os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o644)
	cfg := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`Port 22
ListenAddress %s
HostKey %s/hostkey
PidFile %s/sshd.pid
AuthorizedKeysFile %s/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowUsers %s
`, originAddr, dir, dir, dir, TestUser)), 0o644)
	os.MkdirAll("/run/sshd", 0o755)
	// A locked account ("!" in shadow) may not log in even by key; "*"
	// only means no password.
	if out, err := exec.Command("usermod", "-p", "*", TestUser).CombinedOutput(); err != nil {
		t.Fatalf("unlock %s for key logins: %v\n%s", TestUser, err, out)
	}
	cmd := exec.Command("ip", "netns", "exec", originNS, "/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	var log syncbuf.Buffer
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	waitFor(t, func() bool { return strings.Contains(log.String(), "listening on") }, "sshd did not start:\n"+log.String())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshd's log:\n%s", log.String())
		}
	})
	return filepath.Join(dir, "userkey")
}

// TestRestrictedSSHThroughCordonConnect: ssh and git over ssh reach an
// allowed host:22 through `cordon connect`, which GIT_SSH_COMMAND names.
func TestRestrictedSSHThroughCordonConnect(t *testing.T) {
	key := startSSHD(t)
	// git refuses to serve a repository its user does not own.
	if out, err := exec.Command("chown", "-R", TestUser, theOrigin.gitRoot).CombinedOutput(); err != nil {
		t.Fatalf("chown the test repository: %v\n%s", err, out)
	}
	ws := userDir(t, "cordon-it-ws-")
	writeUserFile(t, filepath.Join(ws, "id"), mustRead(t, key))
	os.Chmod(filepath.Join(ws, "id"), 0o600)
	r := runRestrictedIn(t, ws, `
opts="-i ./id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
echo "ssh: $(ssh $opts -o ProxyCommand='/run/cordon/cordon connect %h %p' `+TestUser+`@`+originName+` echo hello-over-ssh)"
GIT_SSH_COMMAND="$GIT_SSH_COMMAND $opts" git clone -q ssh://`+TestUser+`@`+originName+theOrigin.gitRoot+`/repo.git viassh && echo "git-ssh: $(cat viassh/README)"
echo "denied: $(ssh $opts -o ProxyCommand='/run/cordon/cordon connect %h %p' `+TestUser+`@denied.cordon.test true 2>&1 | head -c 300)"
`, "--allow", originName+":22")
	if r.res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.res.code, r.res.stdout, r.res.stderr)
	}
	r.want(t, "ssh: hello-over-ssh", "git-ssh: cloned through cordon", "denied: cordon: CONNECT denied.cordon.test:22 refused: 403")
	recs := readAudit(t, r.audit)
	if _, ok := findRecord(recs, audit.Record{Type: audit.TypeDecision, Kind: audit.KindConnect, Host: originName, Port: 22, Decision: audit.Allow}); !ok {
		t.Error("no allow line for the ssh tunnel")
	}
	if _, ok := findRecord(recs, audit.Record{Type: audit.TypeDecision, Host: "denied.cordon.test", Port: 22, Decision: audit.Deny}); !ok {
		t.Error("no deny line for the denied ssh host")
	}
}
