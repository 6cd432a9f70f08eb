//go:build unix

package darwin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// Stand-ins for /usr/bin/sandbox-exec, so that Check and Run are exercised
// on any Unix: they take "-p PROFILE --" like the real one.
const (
	// fakeExec drops the profile and runs the command.
	fakeExec = `#!/bin/sh
[ "$1" = "-p" ] && [ "$3" = "--" ] || { echo "usage: sandbox-exec -p profile -- command" >&2; exit 64; }
shift 3
exec "$@"
`
	// fakeNested fails the way sandbox-exec does inside another sandbox.
	fakeNested = `#!/bin/sh
echo "sandbox-exec: sandbox_apply: Operation not permitted" >&2
exit 71
`
	// fakeRefuses applies the one-line probe but rejects every real profile.
	fakeRefuses = `#!/bin/sh
[ "$2" = "(version 1)(allow default)" ] && exit 0
echo "sandbox-exec: unbound variable: remote" >&2
exit 65
`
)

// fakeBackend returns a backend that believes it runs on macOS as an
// ordinary user, with script standing in for sandbox-exec.
func fakeBackend(t *testing.T, script string) *backend {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "sandbox-exec")
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &backend{exe: exe, goos: "darwin", euid: func() int { return 501 }}
}

// session returns a Spec for argv in a fresh workspace with its own TMPDIR.
func session(t *testing.T, p *policy.Policy, argv ...string) *sandbox.Spec {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return &sandbox.Spec{
		Policy:    p,
		Argv:      argv,
		Workspace: ws,
		Workdir:   ws,
		Env:       []string{"PATH=/usr/bin:/bin", "TMPDIR=" + filepath.Join(root, "tmp")},
	}
}

func TestCheck(t *testing.T) {
	off := &policy.Policy{Network: policy.NetOff}
	cases := []struct {
		name    string
		b       *backend
		p       *policy.Policy
		blocked string // the BLOCKED capability, "" for none
		reason  string
	}{
		{"not macOS", &backend{exe: sandboxExec, goos: "linux", euid: func() int { return 501 }}, off, "seatbelt", "this is linux"},
		{"no policy", fakeBackend(t, fakeExec), nil, "policy", "no policy"},
		{"missing sandbox-exec", &backend{exe: "/nonexistent/sandbox-exec", goos: "darwin", euid: func() int { return 501 }}, off, "sandbox-exec", "missing"},
		{"root", func() *backend { b := fakeBackend(t, fakeExec); b.euid = func() int { return 0 }; return b }(), off, "user", "running as root"},
		{"nested", fakeBackend(t, fakeNested), off, "nesting", "already inside a Seatbelt sandbox"},
		{"profile refused by macOS", fakeBackend(t, fakeRefuses), off, "profile", "refused the profile"},
		{"policy exposes ~/.ssh", fakeBackend(t, fakeExec), &policy.Policy{Expose: []string{"~/.ssh"}}, "profile", "which cordon protects"},
		{"ready", fakeBackend(t, fakeExec), off, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.b.Check(context.Background(), tc.p)
			if rep.Backend != "seatbelt" {
				t.Errorf("backend %q, want seatbelt", rep.Backend)
			}
			c, blocked := rep.Blocked()
			switch {
			case tc.blocked == "" && blocked:
				t.Fatalf("blocked by %s: %s", c.Name, c.Reason)
			case tc.blocked != "" && !blocked:
				t.Fatalf("not blocked, want %s blocked: %+v", tc.blocked, rep.Capabilities)
			case blocked && (c.Name != tc.blocked || !strings.Contains(c.Reason, tc.reason) || c.Fix == ""):
				t.Fatalf("blocked by %s (%q, fix %q), want %s with a reason containing %q and a fix", c.Name, c.Reason, c.Fix, tc.blocked, tc.reason)
			}
		})
	}
}

func TestCheckPolicyCapabilities(t *testing.T) {
	b := fakeBackend(t, fakeExec)
	status := func(p *policy.Policy) map[string]sandbox.Status {
		out := map[string]sandbox.Status{}
		for _, c := range b.Check(context.Background(), p).Capabilities {
			out[c.Name] = c.Status
		}
		return out
	}
	cases := []struct {
		name string
		p    *policy.Policy
		want map[string]sandbox.Status
	}{
		{"off", &policy.Policy{Network: policy.NetOff}, map[string]sandbox.Status{"network": sandbox.Ready, "profile": sandbox.Ready}},
		{"open", &policy.Policy{Network: policy.NetOpen}, map[string]sandbox.Status{"network": sandbox.Degraded}},
		{"restricted", &policy.Policy{Network: policy.NetRestricted}, map[string]sandbox.Status{"network": sandbox.Ready, "network.transparent": sandbox.Degraded}},
		{"defaults", policy.Defaults(), map[string]sandbox.Status{"limits": sandbox.Degraded}},
		{"timeout", &policy.Policy{Limits: policy.Limits{Timeout: time.Minute}}, map[string]sandbox.Status{"limits.timeout": sandbox.Ready}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := status(tc.p)
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s = %q, want %q (all: %v)", name, got[name], want, got)
				}
			}
		})
	}
}

func TestPlan(t *testing.T) {
	s := session(t, &policy.Policy{Network: policy.NetOff}, "sh", "-c", "echo hi")
	tmp, _ := lookupEnv(s.Env, "TMPDIR")
	s.Files = map[string][]byte{filepath.Join(tmp, "ca.pem"): []byte("PEM")}

	onLinux := &backend{exe: sandboxExec, goos: "linux", euid: os.Geteuid}
	plan, err := onLinux.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Argv; len(got) != 7 || got[0] != sandboxExec || got[1] != "-p" || got[3] != "--" || got[4] != "sh" {
		t.Fatalf("argv = %q, want sandbox-exec -p PROFILE -- sh -c ...", append(got[:2:2], got[3:]...))
	}
	if _, err := checkProfile(plan.Argv[2]); err != nil {
		t.Fatalf("planned profile: %v", err)
	}
	if plan.Files[filepath.Join(tmp, "ca.pem")] != "PEM" {
		t.Fatalf("files = %v", plan.Files)
	}

	// On macOS the command is looked up first, as execvp would.
	plan, err = fakeBackend(t, fakeExec).Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(plan.Argv[4]) || filepath.Base(plan.Argv[4]) != "sh" {
		t.Fatalf("command %q was not resolved on PATH", plan.Argv[4])
	}

	s.Files = map[string][]byte{filepath.Join(s.Workspace, "ca.pem"): []byte("PEM")}
	if _, err := onLinux.Plan(s); err == nil || !strings.Contains(err.Error(), "under the session's TMPDIR") {
		t.Fatalf("a file outside TMPDIR: err = %v", err)
	}
	if _, err := onLinux.Plan(&sandbox.Spec{Policy: &policy.Policy{}}); err == nil {
		t.Fatal("a Spec without a command planned")
	}
}

// The audit log the run writes is denied to the command, wherever --audit
// puts it: in the workspace, or symlinked into it.
func TestPlanProtectsTheAuditLog(t *testing.T) {
	s := session(t, &policy.Policy{Network: policy.NetOff}, "sh")
	logs := filepath.Join(s.Workspace, "logs")
	elsewhere := t.TempDir()
	for _, d := range []string{logs, filepath.Join(elsewhere, "logs")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.Symlink(filepath.Join(elsewhere, "logs", "audit.jsonl"), link); err != nil {
		t.Fatal(err)
	}
	intoWorkspace := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.Symlink(filepath.Join(logs, "audit.jsonl"), intoWorkspace); err != nil {
		t.Fatal(err)
	}
	plan := func(auditPath string) (string, error) {
		t.Helper()
		b := &backend{exe: sandboxExec, goos: "linux", euid: os.Geteuid, audit: auditPath}
		plan, err := b.Plan(s)
		if err != nil {
			return "", err
		}
		return plan.Argv[2][strings.LastIndex(plan.Argv[2], "Protected whatever the policy says"):], nil
	}
	protects := func(auditPath, dir string) bool {
		t.Helper()
		last, err := plan(auditPath)
		if err != nil {
			t.Fatal(err)
		}
		c, err := canonical(dir) // as macOS names it: /tmp is /private/tmp
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(last, `(subpath "`+c+`")`)
	}
	if protects("", filepath.Join(elsewhere, "logs")) {
		t.Fatalf("%s is denied with the default audit log: the test proves nothing", elsewhere)
	}
	if !protects(filepath.Join(elsewhere, "logs", "audit.jsonl"), filepath.Join(elsewhere, "logs")) {
		t.Errorf("--audit %s/logs/audit.jsonl: the profile does not deny its directory", elsewhere)
	}
	if !protects(link, filepath.Join(elsewhere, "logs")) {
		t.Errorf("--audit %s, a symlink into %s/logs: the profile does not deny it", link, elsewhere)
	}
	if !protects(link, filepath.Dir(link)) {
		t.Errorf("--audit %s: the profile does not deny the directory it is named in", link)
	}
	// A log the command could reach by renaming a directory above it is
	// refused, named directly or through a link.
	for _, a := range []string{filepath.Join(logs, "audit.jsonl"), intoWorkspace} {
		if _, err := plan(a); err == nil || !strings.Contains(err.Error(), "refusing the audit log directory") {
			t.Errorf("--audit %s, in the workspace: %v, want the run refused", a, err)
		}
	}
}

func TestRun(t *testing.T) {
	b := fakeBackend(t, fakeExec)
	t.Setenv("CORDON_TEST_SECRET", "leaked")
	cases := []struct {
		name   string
		argv   []string
		files  bool
		code   int
		out    string
		errSub string
	}{
		{"exit code", []string{"sh", "-c", "exit 3"}, false, 3, "", ""},
		{"only the Spec's environment", []string{"sh", "-c", `echo "${CORDON_TEST_SECRET-unset} $PATH"`}, false, 0, "unset /usr/bin:/bin\n", ""},
		{"no workdir: the workspace", []string{"sh", "-c", `[ "$(pwd -P)" = "$(cd "$1" && pwd -P)" ] && echo here`, "sh", "WS"}, false, 0, "here\n", ""},
		{"files in TMPDIR", []string{"sh", "-c", `cat "$TMPDIR/ca.pem"; stat -c %a "$TMPDIR/ca.pem"`}, true, 0, "PEM600\n", ""},
		{"signal", []string{"sh", "-c", "kill -TERM $$"}, false, 128 + int(syscall.SIGTERM), "", ""},
		{"not found", []string{"no-such-command-cordon"}, false, exitNotFound, "", "not found on the PATH"},
		{"not executable", []string{"./script.sh"}, false, exitNotExecutable, "", "not executable"},
		{"outside what the sandbox reads", []string{"OUTSIDE"}, false, exitNotExecutable, "", "add its directory to expose"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := session(t, &policy.Policy{Network: policy.NetOff}, tc.argv...)
			tmp, _ := lookupEnv(s.Env, "TMPDIR")
			for i, a := range s.Argv {
				if a == "WS" {
					s.Argv[i], s.Workdir = s.Workspace, ""
				}
			}
			if err := os.WriteFile(filepath.Join(s.Workspace, "script.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if s.Argv[0] == "OUTSIDE" {
				outside := filepath.Join(filepath.Dir(s.Workspace), "tool")
				if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				s.Argv[0] = outside
			}
			if tc.files {
				s.Files = map[string][]byte{filepath.Join(tmp, "ca.pem"): []byte("PEM")}
			}
			var out bytes.Buffer
			s.Stdout, s.Stderr = &out, &out
			res, err := b.Run(context.Background(), s)
			if tc.errSub == "" && err != nil {
				t.Fatalf("Run: %v (output %q)", err, out.String())
			}
			if tc.errSub != "" && (err == nil || !strings.Contains(err.Error(), tc.errSub)) {
				t.Fatalf("Run error %v, want one containing %q", err, tc.errSub)
			}
			if res.ExitCode != tc.code {
				t.Errorf("exit code %d, want %d (output %q)", res.ExitCode, tc.code, out.String())
			}
			if tc.out != "" && out.String() != tc.out {
				t.Errorf("output %q, want %q", out.String(), tc.out)
			}
		})
	}
}

// TestRunDeadlineEndsTheGroup starts a command that leaves a child behind;
// at the deadline both are gone.
func TestRunDeadlineEndsTheGroup(t *testing.T) {
	b := fakeBackend(t, fakeExec)
	s := session(t, &policy.Policy{Network: policy.NetOff}, "sh", "-c", `sleep 60 & echo $! > "$TMPDIR/child"; wait`)
	s.Timeout = 300 * time.Millisecond
	res, err := b.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("result %+v, want timed out by SIGKILL", res)
	}
	tmp, _ := lookupEnv(s.Env, "TMPDIR")
	data, err := os.ReadFile(filepath.Join(tmp, "child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestRunCancelled: a context that ends while the command runs kills it;
// one that ends while the policy is checked (a busy machine's probe of
// the profile outlasted 200 ms) starts nothing and says so, rather than
// that the profile was refused.
func TestRunCancelled(t *testing.T) {
	b := fakeBackend(t, fakeExec)
	s := session(t, &policy.Policy{Network: policy.NetOff}, "sleep", "60")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := b.Run(ctx, s)
	if !errors.Is(err, context.DeadlineExceeded) || res.Signal != "SIGKILL" {
		t.Fatalf("Run = %+v, %v; want killed and the context's error", res, err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	res, err = b.Run(ctx, session(t, &policy.Policy{Network: policy.NetOff}, "sleep", "60"))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "before anything started") || res.ExitCode != exitLaunch {
		t.Fatalf("Run with an ended context = %+v, %v; want the context's error before anything started", res, err)
	}
}

// TestRunRefusesWhatCheckBlocks: Run decides with Check, so a blocked
// check starts nothing.
func TestRunRefusesWhatCheckBlocks(t *testing.T) {
	for name, b := range map[string]*backend{
		"nested": fakeBackend(t, fakeNested),
		"linux":  {exe: sandboxExec, goos: "linux", euid: func() int { return 501 }},
	} {
		t.Run(name, func(t *testing.T) {
			s := session(t, &policy.Policy{Network: policy.NetOff}, "sh", "-c", `touch "$TMPDIR/ran"`)
			res, err := b.Run(context.Background(), s)
			if err == nil || res.ExitCode != exitLaunch {
				t.Fatalf("Run = %+v, %v; want exit %d and an error", res, err, exitLaunch)
			}
			tmp, _ := lookupEnv(s.Env, "TMPDIR")
			if _, err := os.Stat(filepath.Join(tmp, "ran")); err == nil {
				t.Fatal("the command ran although Check blocked it")
			}
		})
	}
}

// waitGone waits, at most five seconds, for pid to be dead or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process %d outlived the run", pid)
}
