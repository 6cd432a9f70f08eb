//go:build linux

// Package integration runs the real cordon binary, as the unprivileged user
// the way people run it, against real clients and real test hosts. The test
// process itself runs as root (CI does), to create that user's fixtures and
// the test hosts' network namespaces; it never runs cordon as root.
package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// TestMain removes the test host, and the cordon binaries the tests
// built, when the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	removeOrigin()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// TestUser is the unprivileged account cordon runs as in these tests;
// scripts/setup.sh creates it.
const TestUser = "cordontest"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// repoRoot is the module root, two levels up from this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// testUser returns the uid and gid of TestUser, failing loudly if the
// machine was not set up.
func testUser(t testing.TB) (uid, gid uint32, home string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("integration tests run as root (to create fixtures and drop to %s); run them through `make test` as root", TestUser)
	}
	u, err := user.Lookup(TestUser)
	if err != nil {
		t.Fatalf("user %s is missing: run scripts/setup.sh (%v)", TestUser, err)
	}
	a, _ := strconv.Atoi(u.Uid)
	b, _ := strconv.Atoi(u.Gid)
	return uint32(a), uint32(b), u.HomeDir
}

// cordonBin builds cordon (and cordon-holder beside it) once into a
// directory the test user can read.
func cordonBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-it-bin-")
		if err != nil {
			binErr = err
			return
		}
		os.Chmod(dir, 0o755)
		binPath = filepath.Join(dir, "cordon")
		// cordon-holder goes beside it, as `make build` puts it. With
		// CORDON_RACE set (`make race`) both are built with the race
		// detector, which makes a process that raced exit 66.
		args, cgo := []string{"build"}, "CGO_ENABLED=0"
		if os.Getenv("CORDON_RACE") != "" {
			args, cgo = append(args, "-race"), "CGO_ENABLED=1"
		}
		for _, pkg := range []string{"cordon", "cordon-holder"} {
			cmd := exec.Command("go", append(args, "-o", filepath.Join(dir, pkg), "./cmd/"+pkg)...)
			cmd.Dir = repoRoot()
			cmd.Env = append(os.Environ(), cgo)
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// userDir makes a fresh directory owned by the test user.
func userDir(t testing.TB, pattern string) string {
	t.Helper()
	uid, gid, _ := testUser(t)
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chown(d, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return d
}

// writeUserFile writes a file the test user can read.
func writeUserFile(t testing.TB, path string, data []byte) {
	t.Helper()
	uid, gid, _ := testUser(t)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, int(uid), int(gid))
}

// asUser prepares a command that runs as the test user with a clean
// environment (HOME in a fresh directory, unless env sets it).
func asUser(t testing.TB, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	uid, gid, _ := testUser(t)
	home := userDir(t, "cordon-it-home-")
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + home,
		"USER=" + TestUser,
		"LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
	}, env...)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid},
		Setpgid:    true,
	}
	return cmd
}

// proxyProc is a running `cordon proxy` and what it printed.
type proxyProc struct {
	cmd    *exec.Cmd
	env    map[string]string
	stderr *syncbuf.Buffer
	audit  string
}

// URL is the proxy URL with its token.
func (p *proxyProc) URL() string { return p.env["HTTPS_PROXY"] }

// token is the session token the proxy URL carries.
func (p *proxyProc) token() string {
	u, err := url.Parse(p.URL())
	if err != nil {
		return ""
	}
	pass, _ := u.User.Password()
	return pass
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startProxy runs `cordon proxy ARGS...` as the test user, waits for its
// export lines and stops it when the test ends.
func startProxy(t testing.TB, args ...string) *proxyProc {
	t.Helper()
	return startProxyEnv(t, nil, args...)
}

// startProxyEnv is startProxy with extra environment for cordon itself.
func startProxyEnv(t testing.TB, env []string, args ...string) *proxyProc {
	t.Helper()
	return startProxyVia(t, env, nil, args...)
}

// startProxyVia is startProxyEnv with cordon started by the command wrap
// (given cordon's argv after its own), still as the test user.
func startProxyVia(t testing.TB, env, wrap []string, args ...string) *proxyProc {
	t.Helper()
	dir := userDir(t, "cordon-it-audit-")
	auditPath := filepath.Join(dir, "audit.jsonl")
	full := append([]string{cordonBin(t), "proxy", "--audit", auditPath}, args...)
	full = append(slices.Clone(wrap), full...)
	cmd := asUser(t, env, full[0], full[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proxyProc{cmd: cmd, env: map[string]string{}, stderr: &syncbuf.Buffer{}, audit: auditPath}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		// A proxy a test killed (SIGKILL) could not remove its
		// session's trust bundle.
		if b := p.env["SSL_CERT_FILE"]; strings.HasPrefix(filepath.Base(filepath.Dir(b)), "cordon-session-") {
			os.RemoveAll(filepath.Dir(b))
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("cordon proxy exited before it was ready; stderr:\n%s", p.stderr)
			}
			name, val, err := parseExport(l)
			if err != nil {
				t.Fatalf("cordon proxy printed %q: %v", l, err)
			}
			p.env[name] = val
			if name == "no_proxy" {
				go func() {
					for range lines {
					}
				}()
				return p
			}
		case <-deadline:
			t.Fatalf("cordon proxy was not ready within 20s; stderr:\n%s", p.stderr)
		}
	}
}

// parseExport reads "export NAME='value'".
func parseExport(l string) (string, string, error) {
	rest, ok := strings.CutPrefix(l, "export ")
	if !ok {
		return "", "", fmt.Errorf("not an export line")
	}
	name, q, ok := strings.Cut(rest, "=")
	if !ok || len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
		return "", "", fmt.Errorf("not NAME='value'")
	}
	return name, strings.ReplaceAll(q[1:len(q)-1], `'\''`, "'"), nil
}

// run runs a command with a deadline and returns its combined output.
func run(t testing.TB, timeout time.Duration, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-ctx.Done():
		if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		} else {
			cmd.Process.Kill()
		}
		<-done
		return out.String(), fmt.Errorf("%s: timed out after %s", cmd.Path, timeout)
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	waitForWithin(t, 5*time.Second, cond, msg)
}

// waitForWithin polls cond until it holds or within passes.
func waitForWithin(t testing.TB, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}

// holdLocked holds dir as a running cordon holds its session's or its
// scratch directory (sandbox.HoldDir: an exclusive flock on it), until the
// test ends.
func holdLocked(t *testing.T, dir string) {
	t.Helper()
	hold, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	if err := syscall.Flock(int(hold.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}
