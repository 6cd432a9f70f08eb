//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// runTimeout bounds one cordon run in these tests.
const runTimeout = 60 * time.Second

// box is one test's user: a workspace, a HOME and an audit log, all owned
// by the test user.
type box struct {
	t               *testing.T
	ws, home, audit string
}

func newBox(t *testing.T) *box {
	t.Helper()
	return &box{
		t:     t,
		ws:    userDir(t, "cordon-it-ws-"),
		home:  userDir(t, "cordon-it-home-"),
		audit: filepath.Join(userDir(t, "cordon-it-audit-"), "audit.jsonl"),
	}
}

func (b *box) env(extra ...string) []string {
	return append([]string{
		"HOME=" + b.home,
		"XDG_CONFIG_HOME=" + filepath.Join(b.home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(b.home, ".local", "state"),
	}, extra...)
}

// cmd prepares `cordon run --audit LOG ARGS...` in the workspace.
func (b *box) cmd(args ...string) *exec.Cmd {
	b.t.Helper()
	return cordonIn(b.t, b.ws, b.env(), append([]string{"run", "--audit", b.audit}, args...)...)
}

// run runs `cordon run --audit LOG ARGS...` in the workspace.
func (b *box) run(args ...string) result {
	b.t.Helper()
	return runResult(b.t, runTimeout, b.cmd(args...))
}

// file writes a file owned by the test user, creating its directories.
func (b *box) file(path, data string) {
	b.t.Helper()
	uid, gid, _ := testUser(b.t)
	var missing []string // innermost first
	for d := filepath.Dir(path); !strings.HasPrefix(b.ws, d) && !strings.HasPrefix(b.home, d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for _, d := range slices.Backward(missing) {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		os.Chown(d, int(uid), int(gid))
	}
	writeUserFile(b.t, path, []byte(data))
}

// config writes a global config file and returns its path.
func (b *box) config(yaml string) string {
	b.t.Helper()
	p := filepath.Join(userDir(b.t, "cordon-it-config-"), "config.yaml")
	writeUserFile(b.t, p, []byte(yaml))
	return p
}

// records reads the audit log.
func (b *box) records() []audit.Record {
	b.t.Helper()
	return readAudit(b.t, b.audit)
}

func expectCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// expectStdoutHas checks that r's stdout holds each of wants.
func expectStdoutHas(t *testing.T, r result, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestRunWritesOutsideWorkspaceFail(t *testing.T) {
	b := newBox(t)
	outside := userDir(t, "cordon-it-outside-")
	// HOME and /tmp are the sandbox's own tmpfs: writable, and gone after.
	script := fmt.Sprintf(`for d in / /usr /etc /run %s; do
  if echo x > "$d/escaped" 2>/dev/null; then echo "WROTE $d"; fi
done
echo x > "$HOME/escaped"
echo inside > %s/inside`, outside, b.ws)
	r := b.run("--net", "off", "--", "sh", "-c", script)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("a write outside the workspace succeeded:\n%s", r.stdout)
	}
	for _, p := range []string{filepath.Join(outside, "escaped"), filepath.Join(b.home, "escaped"), "/escaped", "/etc/escaped"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if got, err := os.ReadFile(filepath.Join(b.ws, "inside")); err != nil || string(got) != "inside\n" {
		t.Fatalf("the workspace write did not land: %q %v", got, err)
	}
}

func TestRunHomeIsEmptyAndCredentialsUnreadable(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.home, ".ssh", "id_ed25519"), "PRIVATE KEY")
	b.file(filepath.Join(b.home, ".aws", "credentials"), "aws_secret")
	b.file(filepath.Join(b.home, "notes.txt"), "personal")
	r := b.run("--net", "off", "--", "sh", "-c",
		`echo "home=$HOME"; ls -A "$HOME"; echo listed; cat "$HOME/.ssh/id_ed25519" "$HOME/.aws/credentials" "$HOME/notes.txt" 2>&1; ls /home/cordontest 2>&1; true`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "home="+b.home+"\nlisted\n") {
		t.Fatalf("HOME is not empty inside:\n%s", r.stdout)
	}
	for _, secret := range []string{"PRIVATE KEY", "aws_secret", "personal"} {
		if strings.Contains(r.stdout, secret) {
			t.Fatalf("read %q from the host's home:\n%s", secret, r.stdout)
		}
	}
}

func TestRunDenyRead(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, ".env"), "API_KEY=secret-env")
	b.file(filepath.Join(b.ws, "secrets", "db.txt"), "secret-dir")
	b.file(filepath.Join(b.ws, "src", "main.go"), "package main")
	outsideSecret := filepath.Join(userDir(t, "cordon-it-secret-"), "token")
	b.file(outsideSecret, "secret-outside")
	uid, gid, _ := testUser(t)
	for link, target := range map[string]string{"env-link": filepath.Join(b.ws, ".env"), "out-link": outsideSecret} {
		p := filepath.Join(b.ws, link)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		os.Lchown(p, int(uid), int(gid))
	}
	cfg := b.config(fmt.Sprintf("network: off\ndeny_read:\n  - %s\n  - %s\n  - %s\n", filepath.Join(b.ws, ".env"), filepath.Join(b.ws, "secrets"), outsideSecret))
	r := b.run("--config", cfg, "--", "sh", "-c",
		`echo "env=[$(cat .env)]"; echo "dir=[$(ls -A secrets)]"; echo "link=[$(cat env-link)]"; echo "out=[$(cat out-link 2>&1)]"; echo "src=[$(cat src/main.go)]"`)
	expectCode(t, r, 0)
	expectStdoutHas(t, r, "env=[]", "dir=[]", "link=[]", "src=[package main]")
	if strings.Contains(r.stdout, "secret-") {
		t.Fatalf("a denied file was read:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "No such file") {
		t.Errorf("a symlink out of the workspace is not dangling:\n%s", r.stdout)
	}
}

func TestRunExposedCredentialFilesReadEmpty(t *testing.T) {
	b := newBox(t)
	tools := userDir(t, "cordon-it-tools-")
	b.file(filepath.Join(tools, "bin", "hello"), "#!/bin/sh\necho hello from tools\n")
	os.Chmod(filepath.Join(tools, "bin", "hello"), 0o755)
	b.file(filepath.Join(tools, "etc", ".npmrc"), "//registry/:_authToken=npm-secret")
	b.file(filepath.Join(tools, "cargo", "credentials.toml"), "cargo-secret")
	b.file(filepath.Join(tools, "readme"), "public")
	r := b.run("--net", "off", "--allow-path", tools, "--", "sh", "-c",
		fmt.Sprintf(`cd %s; echo "npmrc=[$(cat etc/.npmrc)]"; echo "cargo=[$(cat cargo/credentials.toml)]"; echo "readme=[$(cat readme)]"; echo data > new 2>/dev/null && echo WROTE; bin/hello`, tools))
	expectCode(t, r, 0)
	expectStdoutHas(t, r, "npmrc=[]", "cargo=[]", "readme=[public]", "hello from tools")
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("a read-only allow path was written:\n%s", r.stdout)
	}
}

// TestRunExposedHomeStoresReadEmpty holds the default deny_read entries
// under the home directory through the real binary: with the trees a
// toolchain or an agent is given exposed (~/.m2, ~/.gradle, ~/.config,
// ~/.claude read-write, ~/.codex), the credential stores in them read as
// empty and the rest of each tree as it is; a browser's profile is
// refused outright as an allow path, and the refusal logged.
func TestRunExposedHomeStoresReadEmpty(t *testing.T) {
	t.Run("exposed trees", func(t *testing.T) {
		b := newBox(t)
		files := []struct {
			path   string // below the home directory
			hidden bool
		}{
			{".m2/settings.xml", true},
			{".m2/settings-security.xml", true},
			{".m2/repository/org/example/x.pom", false},
			{".gradle/gradle.properties", true},
			{".gradle/caches/modules-2/x.jar", false},
			{".config/rclone/rclone.conf", true},
			{".config/rclone/filters.txt", false},
			{".config/glab-cli/config.yml", true},
			{".config/containers/auth.json", true},
			{".config/configstore/firebase-tools.json", true},
			{".config/google-chrome/Default/Cookies", true},
			{".config/git/config", false},
			{".claude/.credentials.json", true},
			{".claude/settings.json", false},
			{".codex/auth.json", true},
			{".codex/config.toml", false},
		}
		var script strings.Builder
		for _, f := range files {
			word := "public"
			if f.hidden {
				word = "secret"
			}
			b.file(filepath.Join(b.home, f.path), word+"-"+f.path)
			fmt.Fprintf(&script, "echo \"%s=[$(cat ~/%s)]\"\n", f.path, f.path)
		}
		args := []string{"--net", "off"}
		for _, d := range []string{".m2", ".gradle", ".config", ".claude:rw", ".codex"} {
			args = append(args, "--allow-path", filepath.Join(b.home, d))
		}
		r := b.run(append(args, "--", "sh", "-c", script.String())...)
		expectCode(t, r, 0)
		for _, f := range files {
			want := f.path + "=[public-" + f.path + "]"
			if f.hidden {
				want = f.path + "=[]"
			}
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Contains(r.stdout, "secret-") {
			t.Errorf("a credential store in an exposed tree was read:\n%s", r.stdout)
		}
	})
	t.Run("a browser profile refused", func(t *testing.T) {
		b := newBox(t)
		profile := filepath.Join(b.home, ".mozilla")
		b.file(filepath.Join(profile, "firefox", "abc.default", "logins.json"), "secret-logins")
		r := b.run("--net", "off", "--allow-path", profile, "--", "touch", "ran")
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "refusing "+profile+", which holds credentials") {
			t.Errorf("stderr does not name the profile:\n%s", r.stderr)
		}
		if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
			t.Fatal("the command ran with a browser profile exposed")
		}
		expectOnlyBlock(t, b, "capability_blocked")
	})
}

func TestRunRefusesProtectedPathsAndHome(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.home, ".ssh", "id_rsa"), "k")
	b.file(filepath.Join(b.home, ".aws", "config"), "c")
	b.file(filepath.Join(b.ws, "ran-marker-dir", "x"), "")
	tests := []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"allow-path ~/.ssh", b.cmd("--net", "off", "--allow-path", filepath.Join(b.home, ".ssh"), "--", "touch", "ran"), ".ssh"},
		{"expose ~/.aws", b.cmd("--net", "off", "--config", b.config("expose:\n  - ~/.aws\n"), "--", "touch", "ran"), ".aws"},
		{"allow-path $HOME", b.cmd("--net", "off", "--allow-path", b.home, "--", "touch", "ran"), "home"},
		{"allow-path /", b.cmd("--net", "off", "--allow-path", "/", "--", "touch", "ran"), "home"},
		{"allow-path that is not there", b.cmd("--net", "off", "--allow-path", filepath.Join(b.home, "nothere")+":rw", "--", "touch", "ran"), "cordon: fix: create it, or drop the entry (--allow-path, or allow_paths: in the config)\n"},
		{"allow-path the audit directory", b.cmd("--net", "off", "--allow-path", filepath.Dir(b.audit), "--", "touch", "ran"), "audit"},
		{"cwd is $HOME", cordonIn(t, b.home, b.env(), "run", "--audit", b.audit, "--net", "off", "--", "touch", "ran"), "home directory"},
		{"cwd is /", cordonIn(t, "/", b.env(), "run", "--audit", b.audit, "--net", "off", "--", "touch", "ran"), "refusing /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runResult(t, runTimeout, tt.cmd)
			expectCode(t, r, 125)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr does not name %q:\n%s", tt.want, r.stderr)
			}
			for _, d := range []string{b.ws, b.home, "/"} {
				if _, err := os.Stat(filepath.Join(d, "ran")); err == nil {
					t.Fatalf("the command ran in %s", d)
				}
			}
		})
	}
}

// An audit log named through a symbolic link is refused before anything
// runs, and nothing is written where the link points: a link there may be
// one a box planted (it could, before the audit directory was kept out of
// every writable path), to have cordon append to ~/.bashrc, say.
func TestRunAuditLogSymlinkedIntoWorkspace(t *testing.T) {
	b := newBox(t)
	uid, gid, _ := testUser(t)
	logs := filepath.Join(b.ws, "logs")
	b.file(filepath.Join(logs, "keep"), "")
	linkDir := userDir(t, "cordon-it-auditlink-")
	for _, tc := range []struct{ name, target string }{
		{"into the workspace's root", filepath.Join(b.ws, "audit.jsonl")},
		{"into a directory of the workspace", filepath.Join(logs, "audit.jsonl")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := filepath.Join(linkDir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			if err := os.Symlink(tc.target, link); err != nil {
				t.Fatal(err)
			}
			os.Lchown(link, int(uid), int(gid))
			r := runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), "run", "--audit", link, "--net", "off", "--", "sh", "-c", "echo RAN"))
			expectCode(t, r, 125)
			if !strings.Contains(r.stderr, "is a symbolic link") || !strings.Contains(r.stderr, "point --audit or CORDON_AUDIT at the file itself") {
				t.Fatalf("stderr does not say what was refused and how to fix it:\n%s", r.stderr)
			}
			if strings.Contains(r.stdout, "RAN") {
				t.Fatalf("the command ran")
			}
			if _, err := os.Lstat(tc.target); err == nil {
				t.Fatalf("cordon wrote at %s, where the link points", tc.target)
			}
		})
	}
}

// The audit directory where the box may write it, at any depth, is
// refused, before the command runs, with the refusal logged: with ~/.local
// read-write, a box renamed ~/.local/state away and planted
// state/cordon/audit.jsonl as a link to ~/.bashrc, and every later run's
// cordon appended its lines, with request paths the box chose, to it. A
// link or a second name (hard link) planted there is refused at open,
// and nothing is written through it.
func TestRunAuditDirOutOfTheBoxsReach(t *testing.T) {
	b := newBox(t)
	uid, gid, _ := testUser(t)
	local := filepath.Join(b.home, ".local")
	state := filepath.Join(local, "state")
	log := filepath.Join(state, "cordon", "audit.jsonl")
	bashrc := filepath.Join(b.home, ".bashrc")
	const rc = "# the user's shell start-up file\n"
	b.file(bashrc, rc)
	b.file(filepath.Join(local, "bin", "keep"), "")
	hijack := fmt.Sprintf("mv %s %s.box && mkdir -p %s/cordon && ln -s %s %s && echo HIJACKED", state, state, state, bashrc, log)
	run := func(args ...string) result {
		return runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), append([]string{"run", "--net", "off"}, args...)...))
	}

	t.Run("read-write above the default log", func(t *testing.T) {
		r := run("--allow-path", local+":rw", "--", "sh", "-c", hijack)
		expectCode(t, r, 125)
		if strings.Contains(r.stdout, "HIJACKED") {
			t.Fatalf("the box moved the audit directory away")
		}
		for _, want := range []string{"refusing the audit log directory " + filepath.Dir(log), "lies in " + local, "point --audit or CORDON_AUDIT elsewhere"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
			}
		}
		recs := readAudit(t, log)
		if last := recs[len(recs)-1]; (last.Outcome != "failed_to_start" && last.Outcome != "blocked") || !strings.Contains(last.Detail, "refusing the audit log directory") {
			t.Errorf("the refusal is not the log's last line: %+v", last)
		}
	})
	t.Run("deep in the workspace", func(t *testing.T) {
		inWs := filepath.Join(b.ws, "var", "log", "audit.jsonl")
		r := run("--audit", inWs, "--", "sh", "-c", "mv var var.box && echo MOVED")
		expectCode(t, r, 125)
		if strings.Contains(r.stdout, "MOVED") || !strings.Contains(r.stderr, "refusing the audit log directory") {
			t.Fatalf("a log two levels into the workspace was not refused:\n%s%s", r.stdout, r.stderr)
		}
	})
	// What a box of an earlier cordon could have planted.
	plant := func(t *testing.T, how func(string) error) {
		os.RemoveAll(log)
		if err := how(log); err != nil {
			t.Fatal(err)
		}
		os.Lchown(log, int(uid), int(gid))
	}
	t.Run("a link planted as the log", func(t *testing.T) {
		plant(t, func(p string) error { return os.Symlink(bashrc, p) })
		r := run("--", "true")
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "is a symbolic link (to "+bashrc+")") {
			t.Errorf("stderr does not name the link:\n%s", r.stderr)
		}
		if got, _ := os.ReadFile(bashrc); string(got) != rc {
			t.Fatalf("cordon wrote through the planted link into ~/.bashrc:\n%s", got)
		}
	})
	t.Run("a second name planted as the log", func(t *testing.T) {
		tap := filepath.Join(local, "tap.jsonl")
		b.file(tap, "")
		plant(t, func(p string) error { return os.Link(tap, p) })
		r := run("--", "true")
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "has 2 names (hard links)") {
			t.Errorf("stderr does not name the hard link:\n%s", r.stderr)
		}
		if got, _ := os.ReadFile(tap); len(got) != 0 {
			t.Fatalf("cordon wrote through the planted hard link:\n%s", got)
		}
	})
}

// TestRunAuditDotDotAfterLink: an --audit path with ".." after a link
// to a directory in the workspace (/outside/d/../a.jsonl, d -> ws/sub) is
// judged where the kernel opens it, in the workspace, and refused; cleaned
// as text it named /outside/a.jsonl, and the box read and forged the log.
func TestRunAuditDotDotAfterLink(t *testing.T) {
	b := newBox(t)
	uid, gid, _ := testUser(t)
	outside := userDir(t, "cordon-it-outside-")
	b.file(filepath.Join(b.ws, "sub", "keep"), "")
	d := filepath.Join(outside, "d")
	if err := os.Symlink(filepath.Join(b.ws, "sub"), d); err != nil {
		t.Fatal(err)
	}
	os.Lchown(d, int(uid), int(gid))
	inWs := filepath.Join(b.ws, "a.jsonl")
	script := fmt.Sprintf("cat %s && echo READ; echo forged >> %s && echo FORGED", inWs, inWs)
	r := runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), "run", "--net", "off", "--audit", d+"/../a.jsonl", "--", "sh", "-c", script))
	expectCode(t, r, 125)
	if strings.Contains(r.stdout, "READ") || strings.Contains(r.stdout, "FORGED") {
		t.Fatalf("the box reached the audit log in the workspace:\n%s", r.stdout)
	}
	if want := "refusing the audit log directory " + b.ws; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if data, err := os.ReadFile(inWs); err == nil && slices.Contains(strings.Split(string(data), "\n"), "forged") {
		t.Fatalf("the log holds a forged line:\n%s", data)
	}
	for _, rec := range readAuditIfAny(inWs) {
		if rec.Outcome != "failed_to_start" && rec.Outcome != "blocked" {
			t.Errorf("the log records a run that started: %+v", rec)
		}
	}
}

// seccompProbe asks the kernel for what the filter must deny, through
// python3's ctypes, and prints NAME=ERRNO per call.
const seccompProbe = `
import ctypes, errno, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nrs = {"x86_64": {"keyctl": 250, "io_uring_setup": 425, "bpf": 321, "mount": 165, "fsopen": 430, "perf_event_open": 298, "ioctl": 16},
       "aarch64": {"keyctl": 219, "io_uring_setup": 425, "bpf": 280, "mount": 40, "fsopen": 430, "perf_event_open": 241, "ioctl": 29}}[platform.machine()]
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nrs[name], *args)
    return errno.errorcode.get(ctypes.get_errno(), "OK") if r < 0 else "OK"
print("keyctl=" + call("keyctl", 0, -3, 0))
print("io_uring=" + call("io_uring_setup", 1, 0))
print("bpf=" + call("bpf", 0, 0, 0))
print("mount=" + call("mount", b"none", b"/tmp", b"tmpfs", 0, 0))
print("fsopen=" + call("fsopen", b"tmpfs", 0))
print("perf=" + call("perf_event_open", 0, 0, -1, -1, 0))
fd = os.open("/dev/null", os.O_RDONLY)
c = ctypes.c_char(b"x")
print("tiocsti=" + call("ioctl", fd, ctypes.c_ulong(0x5412), ctypes.byref(c)))
print("tiocsti_high=" + call("ioctl", fd, ctypes.c_ulong(0xffffffff00005412), ctypes.byref(c)))
print("tcgets=" + call("ioctl", fd, ctypes.c_ulong(0x5401), ctypes.byref(c)))
`

func TestRunSeccomp(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, "probe.py"), seccompProbe)
	r := b.run("--net", "off", "--", "python3", "probe.py")
	expectCode(t, r, 0)
	for _, want := range []string{"keyctl=EPERM", "io_uring=EPERM", "bpf=EPERM", "mount=EPERM", "fsopen=EPERM", "perf=EPERM", "tiocsti=EPERM", "tiocsti_high=EPERM", "tcgets=ENOTTY"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("output lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// daemonScript double-forks a session leader that outlives its parent
// shell, then keeps the command itself busy; both carry marker.
func daemonScript(marker string) string {
	return fmt.Sprintf(`(setsid sh -c 'exec sleep %[1]s' &); exec sleep %[1]s`, marker)
}

// uniqueSleep is a sleep duration no other process on the machine uses.
func uniqueSleep() string {
	return fmt.Sprintf("%d.%06d", 3000+os.Getpid()%1000, time.Now().Nanosecond()/1000)
}

func TestRunTimeoutEndsTheTree(t *testing.T) {
	b := newBox(t)
	marker := uniqueSleep()
	start := time.Now()
	r := b.run("--net", "off", "--timeout", "2s", "--json", "--", "sh", "-c", daemonScript(marker))
	expectCode(t, r, 124)
	if time.Since(start) > 30*time.Second {
		t.Errorf("the deadline of 2s took %s", time.Since(start))
	}
	if !eventually(5*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 0 }) {
		t.Fatalf("processes outlived the deadline: %v", procsRunning("sleep", marker))
	}
	var out struct {
		Outcome struct{ Kind string } `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &out); err != nil || out.Outcome.Kind != "timeout" {
		t.Fatalf("outcome %q (%v), want timeout", r.stdout, err)
	}
}

func TestRunKilledCordonEndsTheTree(t *testing.T) {
	b := newBox(t)
	marker := uniqueSleep()
	tmp := userDir(t, "cordon-it-tmp-")
	// A denied file and directory are masked with scratch files, which the
	// run creates under TMPDIR (a run with nothing to mask creates none).
	b.file(filepath.Join(b.ws, ".env"), "API_KEY=secret-env")
	b.file(filepath.Join(b.ws, "secrets", "db.txt"), "secret-dir")
	cfg := b.config(fmt.Sprintf("network: off\ndeny_read:\n  - %s\n  - %s\n", filepath.Join(b.ws, ".env"), filepath.Join(b.ws, "secrets")))
	args := []string{"run", "--audit", b.audit, "--config", cfg, "--", "sh", "-c", daemonScript(marker)}
	_, _, dbHome := testUser(t)
	scratch := sandbox.ScratchParent(dbHome)
	plan, err := cordonIn(t, b.ws, b.env("TMPDIR="+tmp), append([]string{args[0], "--dry-run"}, args[1:]...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(plan), "== "+scratch+"/cordon-scratch-") {
		t.Fatalf("the plan has no scratch files under %s (%v):\n%s", scratch, err, plan)
	}
	cmd := cordonIn(t, b.ws, b.env("TMPDIR="+tmp), args...)
	scratchLeft := func() bool {
		left, _ := filepath.Glob(filepath.Join(tmp, "cordon-*"))
		inCache, _ := filepath.Glob(filepath.Join(scratch, "cordon-*"))
		return len(left)+len(inCache) > 0
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}()
	if !eventually(30*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 2 }) {
		t.Fatalf("the daemon and the command did not start: %v", procsRunning("sleep", marker))
	}
	if !eventually(10*time.Second, func() bool { return !scratchLeft() }) {
		t.Error("the scratch directory outlived the sandbox's start, so a killed cordon leaves it behind")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if !eventually(10*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 0 }) {
		t.Fatalf("processes outlived a killed cordon: %v", procsRunning("sleep", marker))
	}
}

// TestRunScratchOutOfAnotherBoxsReach: the files bwrap mounts over a
// denied path (an empty file) or a masked credential file are written by
// cordon and then mounted by name, links followed. Written in $TMPDIR,
// they were in the reach of any box that could write there (here $TMPDIR
// lies in another run's workspace, as a project's .envrc may put it): a
// box that watched for another run's scratch directory swapped its empty
// file for a link to the denied file, and that run's box read the secret
// where the mask should have been (red team, round 8). They are now made
// in cordon's cache under the home the user database gives, which every
// run's guard keeps from its box: in the cache under $HOME, a run whose
// $HOME lay in another's workspace was open to the same swap (the round's
// second look).
func TestRunScratchOutOfAnotherBoxsReach(t *testing.T) {
	b := newBox(t)
	victim := userDir(t, "cordon-it-ws-")
	secret := filepath.Join(victim, ".env")
	b.file(secret, "API_KEY=secret-env")
	tmp, home := filepath.Join(b.ws, ".tmp"), filepath.Join(b.ws, ".home")
	watched := filepath.Join(home, ".cache", "cordon", "scratch")
	b.file(filepath.Join(tmp, ".keep"), "")
	b.file(filepath.Join(watched, ".keep"), "")
	stop, ready := filepath.Join(b.ws, "stop"), filepath.Join(b.ws, "ready")
	b.file(filepath.Join(b.ws, "swap.py"), `import os, sys, time
target, stop, ready, dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
open(ready, "w").close()
end = time.time() + 60
while time.time() < end and not os.path.exists(stop):
    for d in dirs:
        for n in os.listdir(d):
            p = os.path.join(d, n, "empty")
            if n.startswith("cordon-scratch-") and not os.path.islink(p):
                try:
                    os.symlink(target, p + ".x")
                    os.rename(p + ".x", p)
                    print("swapped", p, flush=True)
                except OSError:
                    pass
    time.sleep(0.0005)
`)
	var out syncbuf.Buffer
	swapper := cordonIn(t, b.ws, b.env(), "run", "--audit", b.audit, "--net", "off", "--", "python3", "swap.py", secret, stop, ready, tmp, watched)
	swapper.Stdout, swapper.Stderr = &out, &out
	if err := swapper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { swapper.Wait(); close(done) }()
	defer func() {
		syscall.Kill(-swapper.Process.Pid, syscall.SIGKILL)
		<-done
	}()
	if !eventually(30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("the swapping box did not start:\n%s", out.String())
	}
	// The other run: its $TMPDIR and $HOME in the swapping box's
	// workspace, its config, state and cache elsewhere.
	cfg := b.config(fmt.Sprintf("network: off\ndeny_read:\n  - %s\n", secret))
	env := append(b.env("TMPDIR="+tmp, "XDG_CACHE_HOME="+filepath.Join(b.home, ".cache")), "HOME="+home)
	for i := range 3 {
		r := runResult(t, runTimeout, cordonIn(t, victim, env, "run", "--audit", b.audit, "--config", cfg, "--", "cat", secret))
		if r.code != 0 || r.stdout != "" {
			t.Errorf("run %d: the denied file read %q (exit %d), want it empty; the other box said:\n%s\nstderr: %s", i, r.stdout, r.code, out.String(), r.stderr)
		}
	}
	b.file(stop, "")
	select {
	case <-done:
	case <-time.After(runTimeout):
		t.Fatal("the swapping box did not end")
	}
	if strings.Contains(out.String(), "swapped") {
		t.Errorf("a run's scratch files lay in another box's reach:\n%s", out.String())
	}
}

// TestRunKilledWhileTheBoxIsBuiltStartsNothing: bwrap gives the box's
// init its parent-death signal only once it has read the go-ahead and
// forked the command, so a cordon killed (SIGKILL) while the box was
// still being built took bwrap with it but not the init, which, the
// go-ahead already written, went on to start the command: it ran with no
// cordon, no deadline, no exit line. Here the build takes seconds (400
// masks, each with its directory pinned, as a project file can ask);
// cordon is killed once the launch line is written, during the build.
// The command must never run, and nothing of the box may stay.
func TestRunKilledWhileTheBoxIsBuiltStartsNothing(t *testing.T) {
	b := newBox(t)
	var cfg strings.Builder
	cfg.WriteString("network: off\ndeny_read:\n")
	for i := range 400 {
		f := filepath.Join(b.ws, fmt.Sprintf("d%d", i), "secret")
		b.file(f, "x")
		fmt.Fprintf(&cfg, "  - %s\n", f)
	}
	token := uniqueSleep()
	marker := filepath.Join(b.ws, "ran")
	cmd := b.cmd("--config", b.config(cfg.String()), "--", "sh", "-c", fmt.Sprintf("touch %s; exec sleep %s", marker, token))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	// Whatever holds the token in its command line: bwrap, its init, the
	// command.
	left := func() []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if c, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(c, []byte(token)) {
				pid, _ := strconv.Atoi(e.Name())
				pids = append(pids, pid)
			}
		}
		return pids
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		for _, pid := range left() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	launched := func() bool {
		log, err := os.ReadFile(b.audit)
		return err == nil && bytes.Contains(log, []byte(`"type":"launch"`))
	}
	if !eventually(60*time.Second, launched) {
		t.Fatal("no launch line within 60 s")
	}
	// And the box has begun its mounts: killed before (bwrap's child
	// still waiting for its uid map, on a busy machine), the child is
	// left waiting for ever, a gap of bubblewrap's own that the sweep
	// of a later run ends (TestRunEndsTheBoxAKilledRunLeft), not this
	// test's case.
	building := func() bool {
		for _, pid := range left() {
			if info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid)); err == nil && bytes.Contains(info, []byte("/secret ")) {
				return true
			}
		}
		return false
	}
	if !eventually(60*time.Second, building) {
		t.Fatal("the box made none of its masks within 60 s")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before cordon was killed: the box was built too soon for this test")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if !eventually(120*time.Second, func() bool { return len(left()) == 0 }) {
		t.Errorf("processes of the box outlived the killed cordon: %v", left())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran after cordon was killed")
	}
}

// TestRunSweepsStaleScratch: a cordon killed (SIGKILL, or SIGTERM in
// the moment before it handles signals) after it wrote its scratch
// files and before bwrap bound them leaves their directory in cordon's
// cache (sandbox.ScratchParent; TMPDIR, for an older cordon). A later
// run with scratch files of its own removes it once it is stale, and
// leaves alone a directory another run still holds (here the test holds
// it, as a live run's cordon does: a flock), and a link of that name.
func TestRunSweepsStaleScratch(t *testing.T) {
	b := newBox(t)
	tmp := userDir(t, "cordon-it-tmp-")
	uid, gid, dbHome := testUser(t)
	// The test user's own cache, shared by every test: these directories'
	// names are this test's alone (the temporary directory's).
	scratch := sandbox.ScratchParent(dbHome)
	tag := filepath.Base(tmp)
	old := time.Now().Add(-2 * time.Minute)
	type dirs struct{ left, held, target, link string }
	var all []dirs
	for _, parent := range []string{tmp, scratch} {
		mk := func(name string) string {
			d := filepath.Join(parent, name)
			b.file(filepath.Join(d, "file-0"), "127.0.0.1 localhost\n")
			for _, p := range []string{d, filepath.Join(d, "file-0")} {
				os.Chown(p, int(uid), int(gid))
			}
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
			return d
		}
		d := dirs{mk("cordon-scratch-left-" + tag), mk("cordon-scratch-held-" + tag), mk("elsewhere-" + tag), filepath.Join(parent, "cordon-scratch-link-"+tag)}
		if err := os.Symlink(d.target, d.link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, p := range []string{d.left, d.held, d.target, d.link} {
				os.RemoveAll(p)
			}
		})
		holdLocked(t, d.held)
		all = append(all, d)
	}

	defer runWithScratch(t, b, tmp)()
	for _, d := range all {
		if !eventually(10*time.Second, func() bool { _, err := os.Lstat(d.left); return os.IsNotExist(err) }) {
			t.Errorf("the stale scratch directory %s outlived a later run's start", d.left)
		}
		for _, p := range []string{d.held, d.link, filepath.Join(d.target, "file-0")} {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("the sweep removed %s, which is no stale scratch directory: %v", p, err)
			}
		}
	}
}

// runWithScratch starts a run in b with TMPDIR tmp that has scratch
// files (a file to mask), and so sweeps TMPDIR once its command runs; it
// lasts until the stop returned is called, which waits for its end.
func runWithScratch(t *testing.T, b *box, tmp string) (stop func()) {
	t.Helper()
	b.file(filepath.Join(b.ws, ".env"), "API_KEY=secret-env")
	cfg := b.config(fmt.Sprintf("network: off\ndeny_read:\n  - %s\n", filepath.Join(b.ws, ".env")))
	cmd := cordonIn(t, b.ws, b.env("TMPDIR="+tmp), "run", "--audit", b.audit, "--config", cfg, "--", "sh", "-c", "read x; exit 0")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() {
		w.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the run failed: %v\n%s", err, out.String())
			}
		case <-time.After(runTimeout):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("the run did not end once its stdin was closed:\n%s", out.String())
		}
	}
}

// TestDoctorWorkspaceSwept: cordon doctor run where no workspace may be
// ($HOME) reads the global policy from an empty directory it makes in
// TMPDIR. A doctor killed meanwhile (its self-test can take seconds)
// left that directory; a later run with scratch files sweeps it.
func TestDoctorWorkspaceSwept(t *testing.T) {
	b := newBox(t)
	tmp := userDir(t, "cordon-it-tmp-")
	// The home is fresh, its cache empty: the self-test runs, and doctor
	// lasts while it does.
	doc := cordonIn(t, b.home, b.env("TMPDIR="+tmp), "doctor")
	if err := doc.Start(); err != nil {
		t.Fatal(err)
	}
	var left []string
	eventually(30*time.Second, func() bool {
		left, _ = filepath.Glob(filepath.Join(tmp, "cordon-doctor-*"))
		return len(left) > 0
	})
	doc.Process.Kill()
	doc.Wait()
	if len(left) != 1 {
		t.Fatalf("cordon doctor in $HOME made no directory of its own in TMPDIR %s: %v", tmp, left)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(left[0], old, old); err != nil {
		t.Fatal(err)
	}
	defer runWithScratch(t, b, tmp)()
	if !eventually(10*time.Second, func() bool { _, err := os.Lstat(left[0]); return os.IsNotExist(err) }) {
		t.Errorf("the killed doctor's directory %s outlived a later run's start", left[0])
	}
}

// TestDoctorEndsOrphanedBoxInits: a bwrap killed between cloning the
// box's init and letting it go on (with its cordon, as a killed run or
// capability check leaves it) leaves the init waiting on an eventfd for
// ever, pid 1 of a namespace nothing enters: bubblewrap gives it no
// parent-death signal before that. cordon doctor, as the same user, ends
// such an init and says so.
func TestDoctorEndsOrphanedBoxInits(t *testing.T) {
	b := newBox(t)
	init := b.orphanedInit()
	doc := runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), "doctor"))
	if !strings.Contains(doc.stdout, fmt.Sprintf("ended box init pid %d: the init of a box that a killed cordon left waiting for ever to be built", init)) {
		t.Errorf("doctor does not say it ended init %d:\n%s", init, doc.stdout)
	}
	if !eventually(5*time.Second, func() bool { return syscall.Kill(init, 0) != nil }) {
		t.Errorf("the orphaned init %d outlived cordon doctor", init)
	}
}

// TestRunEndsTheBoxAKilledRunLeft: a run that finds the debt of an
// earlier run in its workspace, whose cordon was killed, ends the boxes
// such runs left before it pays it (one left running would go on writing
// the workspace as the aftercare looks), says so and logs it.
func TestRunEndsTheBoxAKilledRunLeft(t *testing.T) {
	b := newBox(t)
	token := uniqueSleep()
	cmd := b.cmd("--net", "off", "--", "sh", "-c", "exec sleep "+token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range procsRunning("sleep", token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if !eventually(30*time.Second, func() bool { return len(procsRunning("sleep", token)) == 1 }) {
		t.Fatal("the first run's command did not start")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !eventually(10*time.Second, func() bool { return len(procsRunning("sleep", token)) == 0 }) {
		t.Fatal("the killed run's box did not end with it")
	}
	init := b.orphanedInit()
	r := b.run("--net", "off", "--", "true")
	expectCode(t, r, 0)
	name := fmt.Sprintf("box init pid %d", init)
	if !strings.Contains(r.stderr, "cordon: ended "+name+": the init of a box that a killed cordon left waiting") {
		t.Errorf("the run does not say it ended %s:\n%s", name, r.stderr)
	}
	if !eventually(5*time.Second, func() bool { return syscall.Kill(init, 0) != nil }) {
		t.Errorf("the orphaned init %d outlived the run", init)
	}
	if !slices.ContainsFunc(b.records(), func(rec audit.Record) bool { return rec.Type == audit.TypeRemoved && rec.Path == name }) {
		t.Errorf("no removed line names %s", name)
	}
}

// orphanedInit leaves, as the test user, the init of a box whose bwrap
// is gone, and returns its pid: a real bwrap, launched as cordon launches
// one, held before it wakes its init (--userns-block-fd, which bwrap reads
// before that), then killed. The init is killed when the test ends.
func (b *box) orphanedInit() int {
	t := b.t
	t.Helper()
	args, err := os.CreateTemp("", "cordon-it-bwrap-args-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(args.Name())
	defer args.Close()
	opts := []string{"--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--info-fd", "8", "--userns-block-fd", "9"}
	if _, err := args.WriteString(strings.Join(opts, "\x00") + "\x00"); err != nil {
		t.Fatal(err)
	}
	if _, err := args.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer infoR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer blockW.Close()
	bw := asUser(t, b.env(), "/usr/bin/bwrap", "--args", "6", "--", "/bin/true")
	bw.ExtraFiles = []*os.File{nil, nil, nil, args, nil, infoW, blockR} // fds 6, 8 and 9
	if err := bw.Start(); err != nil {
		t.Fatal(err)
	}
	infoW.Close()
	blockR.Close()
	var init int
	if !eventually(10*time.Second, func() bool {
		kids := childrenOf(bw.Process.Pid)
		if len(kids) != 1 {
			return false
		}
		init = kids[0]
		sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", init))
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", init, strings.Fields(string(sc) + " x x")[1][2:]))
		return err == nil && strings.HasPrefix(string(sc), "0 ") && link == "anon_inode:[eventfd]"
	}) {
		bw.Process.Kill()
		bw.Wait()
		t.Fatalf("bwrap's init did not come to wait on its eventfd (children %v)", childrenOf(bw.Process.Pid))
	}
	t.Cleanup(func() { syscall.Kill(init, syscall.SIGKILL) })
	bw.Process.Kill()
	bw.Wait()
	if !eventually(5*time.Second, func() bool { return !slices.Contains(childrenOf(bw.Process.Pid), init) }) || syscall.Kill(init, 0) != nil {
		t.Fatal("the init did not outlive its bwrap: nothing left to sweep")
	}
	return init
}

func TestRunExitCodes(t *testing.T) {
	b := newBox(t)
	b.file(filepath.Join(b.ws, "not-executable"), "echo hi\n")
	b.file(filepath.Join(b.ws, "orphan-script"), "#!/nonexistent/interpreter\n")
	// A script a box wrote, whose interpreter's name sets the terminal's
	// title and erases the line: cordon names it escaped.
	b.file(filepath.Join(b.ws, "escape-script"), "#!/nonexistent/\x1b]0;pwned\a\x1b[2K\n")
	for _, s := range []string{"orphan-script", "escape-script"} {
		if err := os.Chmod(filepath.Join(b.ws, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(b.ws, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		argv   []string
		code   int
		stderr string
		quiet  bool // stderr must be empty
	}{
		{[]string{"true"}, 0, "", true},
		{[]string{"false"}, 1, "", true},
		{[]string{"sh", "-c", "exit 125"}, 125, "", true},
		{[]string{"./not-executable"}, 126, "./not-executable: permission denied", false},
		{[]string{"./subdir"}, 126, "./subdir: is a directory", false},
		{[]string{"no-such-command-cordon"}, 127, "no-such-command-cordon: command not found", false},
		{[]string{"./orphan-script"}, 127, "bad interpreter /nonexistent/interpreter", false},
		{[]string{"./escape-script"}, 127, `bad interpreter /nonexistent/\x1b]0;pwned\a\x1b[2K: no such file`, false},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15, "cordon: the command was ended by SIGTERM (exit status 143)", false},
		{[]string{"sh", "-c", "kill -SEGV $$"}, 128 + 11, "cordon: the command was ended by SIGSEGV (exit status 139)", false},
		{[]string{"sh", "-c", "kill -INT $$"}, 128 + 2, "", true},
		{[]string{"sh", "-c", "kill -PIPE $$"}, 128 + 13, "", true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			r := b.run(append([]string{"--net", "off", "--"}, tt.argv...)...)
			expectCode(t, r, tt.code)
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("stderr %q does not say %q", r.stderr, tt.stderr)
			}
			if strings.ContainsAny(r.stderr, "\x1b\a") {
				t.Fatalf("stderr %q holds a raw escape sequence", r.stderr)
			}
			if tt.quiet && r.stderr != "" {
				t.Fatalf("stderr %q; want nothing", r.stderr)
			}
		})
	}
}

// TestRunForgedExitStatusRefused: the box can take the sandbox init's
// eventfd (pidfd_getfd) and write an exit status of its own choosing. One
// within 0 to 255 it could have exited with; one outside it no process
// ends with, and it is refused with 125, said on stderr and logged,
// rather than taken: 256 was logged as a failure while cordon, keeping
// the low byte, exited 0.
func TestRunForgedExitStatusRefused(t *testing.T) {
	const forge = `
import ctypes, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
init = libc.syscall(434, 1, 0)  # pidfd_open(1, 0)
n = [int(f) for f in os.listdir("/proc/1/fd") if os.readlink("/proc/1/fd/" + f) == "anon_inode:[eventfd]"][0]
fd = libc.syscall(438, init, n, 0)  # pidfd_getfd
assert fd >= 0, ctypes.get_errno()
os.write(fd, struct.pack("<Q", int(sys.argv[1])))  # the init writes the status plus one
time.sleep(30)
`
	b := newBox(t)
	for _, tc := range []struct {
		write uint64
		code  int
		told  string
	}{
		{257, 125, "bwrap reported exit status 256, which no process ends with"},
		{1 << 63, 125, "which no process ends with"},
		{8, 7, ""}, // one the command could have exited with: taken
	} {
		r := b.run("--net", "off", "--", "python3", "-c", forge, strconv.FormatUint(tc.write, 10))
		expectCode(t, r, tc.code)
		if !strings.Contains(r.stderr, tc.told) {
			t.Errorf("writing %d: stderr does not say %q:\n%s", tc.write, tc.told, r.stderr)
		}
		recs := b.records()
		last := recs[len(recs)-1]
		if last.Type != audit.TypeExit || last.ExitCode == nil || *last.ExitCode != tc.code || !strings.Contains(last.Detail, tc.told) {
			t.Errorf("writing %d: exit line %+v, want code %d and detail %q", tc.write, last, tc.code, tc.told)
		}
	}
}

// TestRunTooLongForBwrap: bwrap refuses a command line of more than 9,000
// words, its options and the command's together. A command one word
// within that runs in the real bwrap; one word more is refused by cordon
// before bwrap sees it, saying why and how to shorten it, and logged.
func TestRunTooLongForBwrap(t *testing.T) {
	b := newBox(t)
	plan := b.run("--dry-run", "--net", "off", "--", "true")
	expectCode(t, plan, 0)
	// The launcher's argv is printed a word a line, each but the last
	// ending " \"; bwrap counts all but its own name, and the "--args N"
	// cordon hands it the options with.
	lines := strings.Split(plan.stdout[strings.Index(plan.stdout, "# launcher argv\n")+len("# launcher argv\n"):], "\n")
	argv := 1 + slices.IndexFunc(lines, func(l string) bool { return !strings.HasSuffix(l, " \\") })
	if argv < 20 {
		t.Fatalf("could not read the launcher's argv from the plan:\n%s", plan.stdout)
	}
	fit := 9000 - (argv - 1 + 2)
	words := func(n int) []string {
		args := []string{"--net", "off", "--", "sh", "-c", `echo "$#"`, "sh"}
		for i := range n {
			args = append(args, strconv.Itoa(i))
		}
		return args
	}
	// sh -c SCRIPT sh is three words more than true.
	r := b.run(words(fit - 3)...)
	expectCode(t, r, 0)
	if strings.TrimSpace(r.stdout) != strconv.Itoa(fit-3) {
		t.Fatalf("the command saw %q arguments, want %d; stderr:\n%s", r.stdout, fit-3, r.stderr)
	}
	r = b.run(words(fit - 2)...)
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "9001 words on bwrap's command line, more than the 9000 bubblewrap accepts") || !strings.Contains(r.stderr, "xargs") ||
		strings.Contains(r.stderr, "bwrap: ") {
		t.Fatalf("stderr does not say the command line is too long and how to shorten it, or bwrap ran:\n%s", r.stderr)
	}
	recs := b.records()
	if last := recs[len(recs)-1]; last.Outcome != "failed_to_start" {
		t.Fatalf("the refused run's last audit line is %+v, want outcome failed_to_start", last)
	}
}

func TestRunAuditLines(t *testing.T) {
	b := newBox(t)
	expectCode(t, b.run("--net", "off", "--", "sh", "-c", "exit 3"), 3)
	expectCode(t, b.run("--config", b.config("network: off\ndeny_commands:\n  - curl\n"), "--", "curl", "x"), 125)
	var types []string
	for _, r := range b.records() {
		types = append(types, string(r.Type))
		switch r.Type {
		case audit.TypeLaunch:
			if strings.Join(r.Command, " ") != "sh -c exit 3" || r.Network != "off" {
				t.Errorf("launch line %+v", r)
			}
		case audit.TypeExit:
			if r.ExitCode == nil || *r.ExitCode != 3 || r.Outcome != "completed" {
				t.Errorf("exit line %+v", r)
			}
		case audit.TypeBlock:
			if r.Reason != "deny_command" || !strings.Contains(r.Detail, "curl") {
				t.Errorf("block line %+v", r)
			}
		}
	}
	if strings.Join(types, ",") != "launch,exit,block" {
		t.Fatalf("audit lines %v, want launch, exit, block", types)
	}
}

func TestRunUnwritableAuditStartsNothing(t *testing.T) {
	b := newBox(t)
	writeUserFile(t, b.audit, nil)
	if err := os.Chmod(b.audit, 0o400); err != nil {
		t.Fatal(err)
	}
	r := b.run("--net", "off", "--", "touch", "ran")
	expectCode(t, r, 125)
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran without an audit log")
	}
	if !strings.Contains(r.stderr, b.audit) {
		t.Errorf("stderr does not name the audit log:\n%s", r.stderr)
	}
}

func TestRunWithoutBwrapIsBlocked(t *testing.T) {
	b := newBox(t)
	empty := userDir(t, "cordon-it-path-")
	env := b.env("PATH=" + empty)
	doc := runResult(t, runTimeout, cordonIn(t, b.ws, env, "doctor", "--net", "off", "--json"))
	expectCode(t, doc, 1)
	rep := doctorJSON(t, doc.stdout)
	var reason string
	for _, c := range rep.Capabilities {
		if c.Status == "BLOCKED" {
			reason = c.Reason
			if !strings.Contains(c.Fix, "apt-get install bubblewrap") {
				t.Errorf("the fix does not name the package: %+v", c)
			}
			break
		}
	}
	if rep.Verdict != "BLOCKED" || reason == "" {
		t.Fatalf("doctor did not say BLOCKED: %s", doc.stdout)
	}
	r := runResult(t, runTimeout, cordonIn(t, b.ws, env, "run", "--audit", b.audit, "--net", "off", "--", "/usr/bin/touch", "ran"))
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, reason) {
		t.Fatalf("run's refusal does not give doctor's reason %q:\n%s", reason, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran without bwrap")
	}
}

// The capability check runs while the box is being built: a BLOCKED
// verdict that arrives then still starts nothing. Here the verdict comes
// from the probe memo, made by a first run and then marked BLOCKED (the
// memo is the user's own file, which cordon trusts).
func TestRunBlockedVerdictStartsNothing(t *testing.T) {
	b := newBox(t)
	expectCode(t, b.run("--net", "off", "--", "true"), 0)
	memos, _ := filepath.Glob(filepath.Join(b.home, ".cache", "cordon", "probes", "*.memo"))
	const forged = "forged by the test: the box is not safe here"
	boxLine := "cap " + strconv.Quote("filesystem box") + " "
	marked := 0
	for _, path := range memos {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if strings.HasPrefix(line, boxLine) {
				lines[i] = "cap " + strings.Join([]string{strconv.Quote("filesystem box"), strconv.Quote("BLOCKED"), strconv.Quote(forged), strconv.Quote("none")}, " ")
				marked++
			}
		}
		writeUserFile(t, path, []byte(strings.Join(lines, "\n")))
	}
	if marked != 1 {
		t.Fatalf("%d memos of the box probe among %v, want 1", marked, memos)
	}
	marker := "ran-" + uniqueSleep()
	r := b.run("--net", "off", "--", "/usr/bin/touch", marker)
	expectCode(t, r, 125)
	// The box may have been built while the verdict came: nothing of it
	// is left (a sandbox child still waiting for the go-ahead would be).
	if !eventually(5*time.Second, func() bool { return len(procsRunning("bwrap", "--args", "6", "--", "/usr/bin/touch", marker)) == 0 }) {
		t.Errorf("the refused launch left bwrap processes: %v", procsRunning("bwrap", "--args", "6", "--", "/usr/bin/touch", marker))
	}
	if !strings.Contains(r.stderr, forged) {
		t.Errorf("the refusal does not give the verdict:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, marker)); err == nil {
		t.Fatal("the command ran although a capability was BLOCKED")
	}
	recs := b.records()
	last := recs[len(recs)-1]
	if last.Type != audit.TypeBlock || last.Reason != "capability_blocked" || !strings.Contains(last.Detail, forged) {
		t.Errorf("the last audit line is %+v, want the capability_blocked refusal", last)
	}
	for _, rec := range recs {
		if rec.Type == audit.TypeLaunch && slices.Contains(rec.Command, "/usr/bin/touch") {
			t.Errorf("the refused command has a launch line: %+v", rec)
		}
	}
}

func TestRunWideningProjectFileRefused(t *testing.T) {
	b := newBox(t)
	cfg := b.config("network: off\n")
	b.file(filepath.Join(b.ws, ".cordon.yaml"), "network: open\n")
	r := b.run("--config", cfg, "--", "touch", "ran")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "narrow") {
		t.Errorf("stderr does not explain the refusal:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("the command ran")
	}
}

// TestRunPrintsWorkspaceNamesEscaped: what cordon prints of a hostile
// repository's names reaches the terminal with their escape sequences
// escaped: the target of a .cordon.yaml link in the refusal, a read_only
// directory in the --dry-run argv (as $'...', which bash reads back).
// Raw, they cleared the screen, set the window's title, or the clipboard
// (OSC 52) where the terminal allows it, for the user to paste.
func TestRunPrintsWorkspaceNamesEscaped(t *testing.T) {
	const esc = "\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\a"
	b := newBox(t)
	uid, gid, _ := testUser(t)
	link := filepath.Join(b.ws, ".cordon.yaml")
	if err := os.Symlink("/x"+esc, link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, int(uid), int(gid))
	r := b.run("--net", "off", "--", "true")
	expectCode(t, r, 125)
	if strings.ContainsAny(r.stderr, "\x1b\a") || !strings.Contains(r.stderr, `(to /x\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\a)`) {
		t.Errorf("the refusal does not name the link's target escaped:\n%q", r.stderr)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.ws, "v"+esc)
	b.file(filepath.Join(dir, "f"), "x\n")
	b.file(link, "read_only: [\"v\\e[2J\\e]52;c;ZWNobyBwd25lZA==\\a\"]\n")
	r = b.run("--dry-run", "--net", "off", "--", "true")
	expectCode(t, r, 0)
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\a") || !strings.Contains(r.stdout, `$'`+dir[:len(dir)-len(esc)]+`\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07'`) {
		t.Errorf("the plan does not name the read_only directory escaped:\n%q", r.stdout)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	b.file(link, "deny_read: [\""+b.ws+"/gone\\e[2J\"]\n")
	r = b.run("--net", "off", "--", "true")
	expectCode(t, r, 0)
	if strings.Contains(r.stderr, "\x1b") || !strings.Contains(r.stderr, "deny_read "+b.ws+`/gone\x1b[2J does not exist`) {
		t.Errorf("the warning does not name the missing deny_read entry escaped:\n%q", r.stderr)
	}
}

// TestRunRefusalsStayOnTheirLines: a refusal quotes what the workspace
// holds, a project file's text (a YAML error shows a value) or where a
// .cordon.yaml link points. A newline there started a line of its own,
// and cordon printed the hostile repository's words as its own fix
// ("cordon: fix: ... run cordon network open"). Now the refusal's text is
// one line, its newlines escaped; the refusal is logged with the text as
// it is (a block line, or the exit line of a launch the sandbox refused).
func TestRunRefusalsStayOnTheirLines(t *testing.T) {
	const forged = "cordon: fix: this repository needs the network: run cordon network open"
	uid, gid, _ := testUser(t)
	for _, tc := range []struct {
		name  string
		plant func(b *box, pf string) error
	}{
		{"a YAML error quoting the file's text", func(b *box, pf string) error {
			b.file(pf, "network: !!int \"\\n"+forged+"\"\n")
			return nil
		}},
		{"a link's target", func(b *box, pf string) error {
			if err := os.Symlink("x\n"+forged, pf); err != nil {
				return err
			}
			return os.Lchown(pf, int(uid), int(gid))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t)
			if err := tc.plant(b, filepath.Join(b.ws, ".cordon.yaml")); err != nil {
				t.Fatal(err)
			}
			r := b.run("--net", "off", "--", "true")
			expectCode(t, r, 125)
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(l, forged) {
					t.Errorf("the repository's text has a line of its own:\n%s", r.stderr)
				}
			}
			if !strings.Contains(r.stderr, `\n`+forged) {
				t.Errorf("the refusal does not quote the text with its newline escaped:\n%s", r.stderr)
			}
			// Refused by the policy (block) or by the sandbox as it
			// was built (an exit line, failed_to_start).
			if !slices.ContainsFunc(b.records(), func(r audit.Record) bool {
				return r.Outcome != "completed" && strings.Contains(r.Detail, "\n"+forged)
			}) {
				t.Errorf("no refusal audit line with the text as it is: %+v", b.records())
			}
		})
	}
}

// TestRunLinkedProjectFileRefused: a .cordon.yaml that is a link to a
// file inside the workspace (conf/cordon.yaml) is refused: no guard holds
// a link, and the box rewrote its target, so the next run dropped the
// project's deny_read.
func TestRunLinkedProjectFileRefused(t *testing.T) {
	b := newBox(t)
	uid, gid, _ := testUser(t)
	secret := filepath.Join(b.ws, "secret.txt")
	b.file(secret, "s3cr3t-linked\n")
	conf := filepath.Join(b.ws, "conf", "cordon.yaml")
	policy := "deny_read: [" + secret + "]\n"
	b.file(conf, policy)
	link := filepath.Join(b.ws, ".cordon.yaml")
	if err := os.Symlink("conf/cordon.yaml", link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, int(uid), int(gid))
	r := b.run("--net", "off", "--", "sh", "-c", `echo "read: [$(cat secret.txt)]"; echo '{}' > conf/cordon.yaml && echo REWROTE`)
	expectCode(t, r, 125)
	if strings.Contains(r.stdout, "REWROTE") || strings.Contains(r.stdout, "s3cr3t") {
		t.Fatalf("the run started:\n%s", r.stdout)
	}
	for _, want := range []string{link + " is a symbolic link (to conf/cordon.yaml)", "make .cordon.yaml the file itself"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if got, _ := os.ReadFile(conf); string(got) != policy {
		t.Fatalf("the project file's target was changed: %q", got)
	}
	// Made the file itself, as the refusal says, it is read-only in the
	// box and the deny_read holds.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(conf, link); err != nil {
		t.Fatal(err)
	}
	r = b.run("--net", "off", "--", "sh", "-c", `echo "read: [$(cat secret.txt)]"; echo '{}' > .cordon.yaml && echo REWROTE; true`)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "REWROTE") || strings.Contains(r.stdout, "s3cr3t") || !strings.Contains(r.stdout, "read: []") {
		t.Fatalf("the project file, made the file itself, is not guarded:\n%s%s", r.stdout, r.stderr)
	}
}

// TestRunProjectFileAboveLinkedIntoWorkspaceRefused: a project file
// above the workspace that is a link into it (../.cordon.yaml ->
// pkg/policy.yaml, run in pkg), or a hard link of a file in it, is
// refused as the workspace's own link is: the box rewrote the file it
// reaches, and the next run dropped the narrowing (network off) of the
// project file above.
func TestRunProjectFileAboveLinkedIntoWorkspaceRefused(t *testing.T) {
	b := newBox(t)
	uid, gid, _ := testUser(t)
	pkg := filepath.Join(b.ws, "pkg")
	target := filepath.Join(pkg, "policy.yaml")
	b.file(filepath.Join(pkg, ".git", "HEAD"), "ref: refs/heads/main\n")
	b.file(target, "network: off\n")
	link := filepath.Join(b.ws, ".cordon.yaml")
	if err := os.Symlink("pkg/policy.yaml", link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, int(uid), int(gid))
	r := runResult(t, runTimeout, cordonIn(t, pkg, b.env(), "run", "--audit", b.audit, "--",
		"sh", "-c", `echo '{}' > policy.yaml && echo REWROTE`))
	expectCode(t, r, 125)
	if strings.Contains(r.stdout, "REWROTE") {
		t.Fatalf("the run started:\n%s", r.stdout)
	}
	if want := link + " is a symbolic link (to pkg/policy.yaml)"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if got, _ := os.ReadFile(target); string(got) != "network: off\n" {
		t.Fatalf("the box rewrote the file the project file above leads to: %q", got)
	}
	// A hard link is refused too: the box wrote the file through its
	// name in the workspace.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, link); err != nil {
		t.Fatal(err)
	}
	r = runResult(t, runTimeout, cordonIn(t, pkg, b.env(), "run", "--audit", b.audit, "--",
		"sh", "-c", `echo '{}' > policy.yaml && echo REWROTE`))
	expectHardLinkRefused(t, r, target, link)
}

// TestRunConfigHardLinkedRefused: a global config with a second name (a
// hard link) in the workspace, as a dotfiles repository hard-linked into
// place has, is refused: the box rewrote it through that name (network:
// open), and the next run took the box's policy for the operator's.
func TestRunConfigHardLinkedRefused(t *testing.T) {
	b := newBox(t)
	cfg := b.config("network: off\n")
	dots := filepath.Join(b.ws, "cordon.yaml")
	if err := os.Link(cfg, dots); err != nil {
		t.Fatal(err)
	}
	r := b.run("--config", cfg, "--", "sh", "-c", `echo 'network: open' > cordon.yaml && echo REWROTE`)
	expectHardLinkRefused(t, r, dots, cfg)
}

// expectHardLinkRefused: r, a run whose box was to rewrite kept (which
// holds "network: off") through its other name, was refused before it
// started, naming both, and kept is as it was.
func expectHardLinkRefused(t *testing.T, r result, name, kept string) {
	t.Helper()
	expectCode(t, r, 125)
	if want := name + " is a hard link of " + kept; strings.Contains(r.stdout, "REWROTE") || !strings.Contains(r.stderr, want) {
		t.Fatalf("the run started, or its refusal does not say %q:\n%s%s", want, r.stdout, r.stderr)
	}
	if got, _ := os.ReadFile(kept); string(got) != "network: off\n" {
		t.Fatalf("the box rewrote %s through its other name: %q", kept, got)
	}
}

// A .cordon.yaml the box plants in a subdirectory makes it the workspace
// of a run started there; the project's own file, at the top, is read all
// the same, so the planted one cannot drop its narrowing (here network
// off and a deny_read), only narrow it further.
func TestRunProjectFilePlantedBelow(t *testing.T) {
	b := newBox(t)
	pkg := filepath.Join(b.ws, "pkg")
	env := filepath.Join(pkg, ".env")
	b.file(env, "DB_PASSWORD=hunter2\n")
	b.file(filepath.Join(b.ws, ".cordon.yaml"), "network: off\ndeny_read: ["+env+"]\n")
	check := `echo "env: [$(cat .env)]"; echo "proxy: [${HTTPS_PROXY:+set}]"`
	run := func(script string) result {
		return runResult(t, runTimeout, cordonIn(t, pkg, b.env(), "run", "--audit", b.audit, "--", "sh", "-c", script))
	}
	r := run(check + "; : > .cordon.yaml && echo PLANTED")
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "env: []") || !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the first run read the denied file, or could not plant:\n%s%s", r.stdout, r.stderr)
	}
	r = run(check)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "hunter2") || !strings.Contains(r.stdout, "env: []") || !strings.Contains(r.stdout, "proxy: []") {
		t.Fatalf("a project file planted below dropped the project's narrowing:\n%s%s", r.stdout, r.stderr)
	}
	// With the project's root read-write (an --allow-path above the
	// workspace), its file is read-only in the box all the same.
	r = runResult(t, runTimeout, cordonIn(t, pkg, b.env(), "run", "--audit", b.audit, "--allow-path", b.ws+":rw", "--",
		"sh", "-c", `rm -f ../.cordon.yaml && echo REMOVED; echo 'network: off' > ../.cordon.yaml && echo WRITTEN; touch ../beside && echo BESIDE`))
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "REMOVED") || strings.Contains(r.stdout, "WRITTEN") || !strings.Contains(r.stdout, "BESIDE") {
		t.Fatalf("the project file above the workspace, in a read-write path, could be changed (or the path was not writable):\n%s%s", r.stdout, r.stderr)
	}
	// One that tries to widen what the files above it left is refused,
	// naming both.
	b.file(filepath.Join(pkg, ".cordon.yaml"), "network: restricted\n")
	r = run("touch ran")
	expectCode(t, r, 125)
	for _, want := range []string{filepath.Join(pkg, ".cordon.yaml") + ": network restricted", "as narrowed by the project file(s) above it (" + filepath.Join(b.ws, ".cordon.yaml")} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(pkg, "ran")); err == nil {
		t.Fatal("the command ran")
	}
}

// A deny_read file two levels into the workspace: the box renamed its
// directory (the mask moved with it), and the next run, which hides only
// the old name, read it under the new one. Now every directory between
// the workspace root and it is pinned, so the rename fails; and a
// deny_read entry in the workspace that does not exist when a run starts
// (one moved by a box of an earlier cordon) is named in a warning.
func TestRunDenyReadCannotBeMovedAway(t *testing.T) {
	b := newBox(t)
	key := filepath.Join(b.ws, "secrets", "prod.key")
	const secret = "TOP-SECRET-DB-PASSWORD"
	b.file(key, secret+"\n")
	b.file(filepath.Join(b.ws, ".cordon.yaml"), "deny_read: ["+key+"]\n")
	r := b.run("--net", "off", "--", "sh", "-c", `echo "run1 reads: [$(cat secrets/prod.key)]"
mv secrets .cache-x && mkdir secrets && echo MOVED; true`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "run1 reads: []") || strings.Contains(r.stdout, "MOVED") || !strings.Contains(r.stderr+r.stdout, "Device or resource busy") {
		t.Fatalf("the denied file's directory could be renamed:\n%s%s", r.stdout, r.stderr)
	}
	r = b.run("--net", "off", "--", "sh", "-c", `echo "run2 reads: [$(cat .cache-x/prod.key secrets/prod.key 2>/dev/null)]"`)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, secret) || !strings.Contains(r.stdout, "run2 reads: []") {
		t.Fatalf("the second run read the denied file:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "warning: deny_read") {
		t.Fatalf("a warning about a deny_read path that is there:\n%s", r.stderr)
	}
	// As a box of an earlier cordon could: moved away on the host.
	if err := os.Rename(filepath.Join(b.ws, "secrets"), filepath.Join(b.ws, ".cache-x")); err != nil {
		t.Fatal(err)
	}
	r = b.run("--net", "off", "--", "true")
	expectCode(t, r, 0)
	if !strings.Contains(r.stderr, "cordon: warning: deny_read "+key+" does not exist") || !strings.Contains(r.stderr, "look for it and put it back") {
		t.Fatalf("the missing deny_read path is not told:\n%s", r.stderr)
	}
}

// TestRunDenyReadHardLinkRefused: a deny_read entry not made yet is
// common (a .env a later step writes), and the box may make it, with a
// second name, a hard link, elsewhere in the workspace. The secret the
// user then writes into the file (in place, as a shell's > does) was
// read whole through that name by the next run's box, which sees only
// the deny_read path as empty. The next run is refused, naming both,
// and the refusal is logged; so is one for a file in a deny_read
// directory.
func TestRunDenyReadHardLinkRefused(t *testing.T) {
	for _, c := range []struct{ name, deny string }{{"file", "secrets/prod.key"}, {"directory", "secrets"}} {
		t.Run(c.name, func(t *testing.T) {
			b := newBox(t)
			key := filepath.Join(b.ws, "secrets", "prod.key")
			b.file(filepath.Join(b.ws, "x", "keep"), "")
			b.file(filepath.Join(b.ws, ".cordon.yaml"), "deny_read: ["+filepath.Join(b.ws, c.deny)+"]\n")
			r := b.run("--net", "off", "--", "sh", "-c", `mkdir -p secrets && touch secrets/prod.key && ln secrets/prod.key x/hl && echo LINKED`)
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "LINKED") {
				t.Fatalf("the box could not plant its link:\n%s%s", r.stdout, r.stderr)
			}
			const secret = "TOP-SECRET-DB-PASSWORD"
			if err := os.WriteFile(key, []byte(secret+"\n"), 0o644); err != nil { // in place: the link still shares it
				t.Fatal(err)
			}
			r = b.run("--net", "off", "--", "sh", "-c", `echo "reads: [$(cat x/hl)]"`)
			link := filepath.Join(b.ws, "x", "hl")
			want := link + " is a hard link of " + key
			if strings.Contains(r.stdout, secret) || r.code != 125 || !strings.Contains(r.stderr, want) {
				t.Fatalf("the run started, or its refusal does not say %q (exit %d):\n%s%s", want, r.code, r.stdout, r.stderr)
			}
			if !slices.ContainsFunc(b.records(), func(r audit.Record) bool { return strings.Contains(r.Detail, want) }) {
				t.Error("no audit record of the refusal")
			}
		})
	}
}

func TestRunJSONOutcome(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--json", "--", "sh", "-c", "echo from-command; exit 3")
	expectCode(t, r, 3)
	var out struct {
		Outcome struct {
			Kind     string
			ExitCode *int
		}
		Sandbox struct{ Launcher, Version string }
		Network struct {
			Mode           string
			AllowedDomains []string
			Decisions      []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &out); err != nil {
		t.Fatalf("outcome: %v\n%s", err, r.stdout)
	}
	if out.Outcome.Kind != "completed" || out.Outcome.ExitCode == nil || *out.Outcome.ExitCode != 3 ||
		out.Sandbox.Launcher != "bwrap" || !strings.HasPrefix(out.Sandbox.Version, "bubblewrap ") ||
		out.Network.Mode != "off" || out.Network.AllowedDomains == nil || out.Network.Decisions == nil {
		t.Fatalf("outcome %+v from %s", out, r.stdout)
	}
	if !strings.HasPrefix(r.stdout, "from-command\n") {
		t.Errorf("the command's stdout did not pass through: %q", r.stdout)
	}
	// Output that ends without a newline, and a line that looks like an
	// outcome, leave the last line the outcome alone: glued to the
	// command's last words, it did not parse.
	r = b.run("--net", "off", "--json", "--", "sh", "-c", `printf '{"outcome":{"kind":"completed","exitCode":0}}\nunfinished'; exit 3`)
	expectCode(t, r, 3)
	out.Outcome.ExitCode = nil
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &out); err != nil || out.Outcome.ExitCode == nil || *out.Outcome.ExitCode != 3 {
		t.Fatalf("outcome after unfinished output: %v\n%s", err, r.stdout)
	}
	blocked := b.run("--net", "off", "--allow-path", filepath.Join(b.home, ".ssh"), "--json", "--", "true")
	expectCode(t, blocked, 125)
	var bo struct {
		Outcome struct{ Kind, Reason string }
	}
	if err := json.Unmarshal([]byte(lastLine(blocked.stdout)), &bo); err != nil || bo.Outcome.Kind != "blocked" || bo.Outcome.Reason == "" {
		t.Fatalf("blocked outcome %q (%v)", blocked.stdout, err)
	}
}

func TestRunDryRunRunsNothing(t *testing.T) {
	b := newBox(t)
	cmd := cordonIn(t, b.ws, b.env("CORDON_IT_TOKEN=dry-run-secret-5c1e"), "run", "--audit", b.audit, "--net", "off", "--env", "CORDON_IT_TOKEN", "--dry-run", "--", "touch", "ran")
	r := runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "dry-run-secret-5c1e") || !strings.Contains(r.stdout, "[value of $CORDON_IT_TOKEN, 19 bytes, not shown]") {
		t.Errorf("the plan shows the value of a variable passed with --env, or does not say it is hidden:\n%s", r.stdout)
	}
	for _, want := range []string{"bwrap", "'--unshare-net'", "'--seccomp'", "'" + b.ws + "'", "/touch'", "seccomp filter for"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %s:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(b.ws, "ran")); err == nil {
		t.Fatal("--dry-run ran the command")
	}
	if _, err := os.Stat(b.audit); err == nil {
		t.Error("--dry-run wrote the audit log")
	}
}

func TestRunNetworkModes(t *testing.T) {
	b := newBox(t)
	const script = `python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'`
	off := b.run("--net", "off", "--", "sh", "-c", script)
	expectCode(t, off, 0)
	if strings.TrimSpace(off.stdout) != "['lo']" {
		t.Errorf("--net off sees interfaces %s", off.stdout)
	}
	open := b.run("--net", "open", "--", "sh", "-c", script)
	expectCode(t, open, 0)
	if strings.TrimSpace(open.stdout) == "['lo']" {
		t.Errorf("--net open sees only loopback")
	}
}

func TestRunEnvironment(t *testing.T) {
	b := newBox(t)
	cmd := cordonIn(t, b.ws, b.env("CORDON_IT_PASSED=yes", "CORDON_IT_SECRET=hidden"), "run", "--audit", b.audit, "--net", "off", "--env", "CORDON_IT_PASSED", "--", "env")
	r := runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "CORDON_IT_PASSED=yes\n") || !strings.Contains(r.stdout, "HOME="+b.home+"\n") {
		t.Errorf("the environment lacks a passed variable or HOME:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "hidden") {
		t.Errorf("an unnamed host variable reached the sandbox:\n%s", r.stdout)
	}
}

// TestRunStdioAndDescriptors: stdin and stdout pass through, and the
// command holds nothing but them: not a descriptor cordon inherited, not
// one of bwrap's, and in restricted mode none of the holder's (which may
// sit under a number the launcher left closed).
func TestRunStdioAndDescriptors(t *testing.T) {
	for _, mode := range []string{"off", "restricted"} {
		t.Run(mode, func(t *testing.T) {
			b := newBox(t)
			cmd := b.cmd("--net", mode, "--", "sh", "-c", "cat; ls /proc/self/fd | tr '\\n' ' '")
			cmd.Stdin = strings.NewReader("through stdin\n")
			// cordon itself inherits open descriptors (as from a shell or
			// a launcher that leaks them): they must not reach the command.
			leaked, err := os.Open(b.ws)
			if err != nil {
				t.Fatal(err)
			}
			defer leaked.Close()
			cmd.ExtraFiles = []*os.File{leaked, leaked, leaked, leaked, leaked, leaked, leaked, leaked}
			r := runResult(t, runTimeout, cmd)
			expectCode(t, r, 0)
			if !strings.HasPrefix(r.stdout, "through stdin\n") {
				t.Errorf("stdin did not pass through: %q", r.stdout)
			}
			// ls holds its own directory descriptor (3); nothing else may leak in.
			if got := strings.TrimSpace(strings.TrimPrefix(r.stdout, "through stdin\n")); got != "0 1 2 3" {
				t.Errorf("the command inherited descriptors: %q", got)
			}
		})
	}
}

// TestRunStdioFilesNotReopened: a file or a directory given as the
// command's stdin or stdout reaches it through a pipe cordon copies, so
// the box cannot open it anew through /proc/self/fd, where the kernel
// grants whatever access the user has, beyond the box's mounts: a
// directory given as stdin (< DIR) was the root of every host path, read
// and written; a file given as stdin was rewritten; a log given as
// stdout (>> LOG) was read whole. What passes through still does.
func TestRunStdioFilesNotReopened(t *testing.T) {
	readBack := `python3 -c 'import os, sys
try:
    fd = os.open("/proc/self/fd/1", os.O_RDONLY | os.O_NONBLOCK)
    sys.stderr.write("read back: %r\n" % os.read(fd, 4096))
except OSError as e:
    sys.stderr.write("read back: %s\n" % e.strerror)'`
	cases := []struct {
		name string
		// stdin and stdout name the file or directory given, in outside.
		stdin, stdout string
		script        string
		check         func(t *testing.T, r result, outside string)
	}{
		{"stdin a directory", ".", "", "cat /proc/self/fd/0/secret; echo planted > /proc/self/fd/0/planted; true",
			func(t *testing.T, r result, outside string) {
				if strings.Contains(r.stdout, "SECRET-") {
					t.Errorf("the box read a host file through its stdin directory: %q", r.stdout)
				}
				if _, err := os.Lstat(filepath.Join(outside, "planted")); err == nil {
					t.Error("the box wrote a host file through its stdin directory")
				}
			}},
		{"stdin a file", "secret", "", "cat; echo rewritten > /proc/self/fd/0; true",
			func(t *testing.T, r result, outside string) {
				if !strings.Contains(r.stdout, "SECRET-") {
					t.Errorf("stdin did not pass through: %q", r.stdout)
				}
				if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "SECRET-stdin\n" {
					t.Errorf("the box rewrote the file given as its stdin: %q", got)
				}
			}},
		{"stdout a file", "", "log", readBack + "; echo new",
			func(t *testing.T, r result, outside string) {
				if strings.Contains(r.stderr, "EARLIER-") {
					t.Errorf("the box read the file given as its stdout: %q", r.stderr)
				}
				if got, _ := os.ReadFile(filepath.Join(outside, "log")); string(got) != "EARLIER-line\nnew\n" {
					t.Errorf("the log given as stdout holds %q, want the earlier line and the command's", got)
				}
			}},
	}
	uid, gid, _ := testUser(t)
	for _, mode := range []string{"off", "restricted"} {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				b := newBox(t)
				outside := userDir(t, "cordon-it-outside-")
				for name, data := range map[string]string{"secret": "SECRET-stdin\n", "log": "EARLIER-line\n"} {
					p := filepath.Join(outside, name)
					if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(p, int(uid), int(gid)); err != nil {
						t.Fatal(err)
					}
				}
				cmd := b.cmd("--net", mode, "--", "sh", "-c", tc.script)
				if tc.stdin != "" {
					f, err := os.Open(filepath.Join(outside, tc.stdin))
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					cmd.Stdin = f
				}
				if tc.stdout != "" {
					f, err := os.OpenFile(filepath.Join(outside, tc.stdout), os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					cmd.Stdout = f
				}
				r := runResult(t, runTimeout, cmd)
				expectCode(t, r, 0)
				tc.check(t, r, outside)
			})
		}
	}
}

func TestRunTerminal(t *testing.T) {
	b := newBox(t)
	ptmx, pts := openPty(t)
	cmd := b.cmd("--net", "off", "--", "sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty")
	cmd.Stdin, cmd.Stdout = pts, pts
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	got := make(chan string, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				got <- string(all)
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cordon: %v\n%s", err, stderr.String())
		}
	case <-time.After(runTimeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("cordon on a terminal did not finish")
	}
	ptmx.Close()
	if out := <-got; !strings.Contains(out, "on-a-tty") {
		t.Fatalf("the command's stdio was not the terminal: %q %s", out, stderr.String())
	}
}

// openPty opens a pseudo-terminal pair.
func openPty(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// cordon started by root runs the command as run_as (nobody by default),
// never as root, and refuses a run_as that is root.
func TestRunAsRootDropsToRunAs(t *testing.T) {
	testUser(t)
	dir, err := os.MkdirTemp("", "cordon-it-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{dir, ws} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	cordon := func(args ...string) result {
		cmd := exec.Command(cordonBin(t), append([]string{"run", "--audit", filepath.Join(dir, "audit", "audit.jsonl")}, args...)...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root", "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return runResult(t, runTimeout, cmd)
	}
	// The limits reach the command as run_as too: core dumps are off.
	r := cordon("--net", "off", "--", "sh", "-c", "id -u; grep CapEff /proc/self/status; ulimit -c")
	expectCode(t, r, 0)
	if r.stdout != "65534\nCapEff:\t0000000000000000\n0\n" {
		t.Fatalf("as root, the command ran as:\n%s%s", r.stdout, r.stderr)
	}
	// In restricted mode the holder, cloned as run_as, sets the network up.
	r = cordon("--net", "restricted", "--ephemeral-ca", "--", "sh", "-c", "id -u; grep CapEff /proc/self/status; ulimit -c")
	expectCode(t, r, 0)
	if r.stdout != "65534\nCapEff:\t0000000000000000\n0\n" {
		t.Fatalf("as root, in restricted mode, the command ran as:\n%s%s", r.stdout, r.stderr)
	}
	cfg := filepath.Join(dir, "root.yaml")
	if err := os.WriteFile(cfg, []byte("run_as: root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cordon("--net", "off", "--config", cfg, "--", "true")
	expectCode(t, r, 125)
	if !strings.Contains(r.stderr, "root") {
		t.Fatalf("run_as root was not refused with a reason:\n%s", r.stderr)
	}
}

func TestRunLimits(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--memory", "64MiB", "--", "python3", "-c", "b = bytearray(512 << 20); print('allocated')")
	if r.code == 0 || strings.Contains(r.stdout, "allocated") || !strings.Contains(r.stderr, "MemoryError") {
		t.Errorf("512 MiB under a 64 MiB limit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expectCode(t, b.run("--net", "off", "--memory", "64MiB", "--", "python3", "-c", "b = bytearray(8 << 20)"), 0)

	marker := uniqueSleep()
	r = b.run("--net", "off", "--pids", "16", "--", "sh", "-c",
		fmt.Sprintf(`i=0; while [ $i -lt 64 ]; do sleep %s & i=$((i+1)); done; echo spawned-all`, marker))
	if r.code == 0 || strings.Contains(r.stdout, "spawned-all") || !strings.Contains(r.stderr, "fork") {
		t.Errorf("64 processes under a limit of 16: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !eventually(5*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 0 }) {
		t.Errorf("processes outlived the run: %v", procsRunning("sleep", marker))
	}

	doc := runResult(t, runTimeout, cordonIn(t, b.ws, b.env(), "doctor", "--net", "off", "--json"))
	limits := doctorJSON(t, doc.stdout).capability("resource limits")
	if !strings.Contains(limits.Reason, "RLIMIT_DATA") && !strings.Contains(limits.Reason, "memory.max") {
		t.Errorf("doctor does not say how limits are enforced:\n%s", doc.stdout)
	}
}

func TestRunDenyCommands(t *testing.T) {
	b := newBox(t)
	cfg := b.config("network: off\ndeny_commands:\n  - curl\n  - \"true\"\n")
	uid, gid, _ := testUser(t)
	data, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.ws, "renamed-copy"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(b.ws, "renamed-copy"), int(uid), int(gid))
	if err := os.Symlink("/usr/bin/true", filepath.Join(b.ws, "alias")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		argv []string
		how  string
	}{
		{[]string{"curl", "http://127.0.0.1:1/"}, "name"},
		{[]string{"sh", "-c", "echo hi; curl x"}, "name"},
		{[]string{"env", "A=1", "nice", "./alias"}, "same file"},
		{[]string{"./renamed-copy"}, "same contents"},
		{[]string{"python3", "-c", "import os; os.system('curl x')"}, "name"},
	}
	for _, tt := range tests {
		r := b.run(append([]string{"--config", cfg, "--"}, tt.argv...)...)
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "deny_commands") || !strings.Contains(r.stderr, tt.how) {
			t.Errorf("%q: stderr does not explain the refusal (%s):\n%s", tt.argv, tt.how, r.stderr)
		}
	}
	expectCode(t, b.run("--config", cfg, "--", "sh", "-c", "echo curl"), 0)
	var blocks, launches int
	for _, rec := range b.records() {
		switch rec.Type {
		case audit.TypeBlock:
			blocks++
			if rec.Reason != "deny_command" || len(rec.Command) == 0 {
				t.Errorf("block line %+v", rec)
			}
		case audit.TypeLaunch:
			launches++
		}
	}
	if blocks != len(tests) || launches != 1 {
		t.Fatalf("%d block and %d launch lines, want %d and 1", blocks, launches, len(tests))
	}
}

// ttyProbe runs argv[2:] in directory argv[1] on a new pseudo-terminal
// that is its controlling terminal (as a shell's foreground job), and
// prints whether echo and canonical input are on before and after.
const ttyProbe = `
import fcntl, os, pty, subprocess, sys, termios
master, slave = pty.openpty()
def child():
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
def modes():
    lflag = termios.tcgetattr(slave)[3]
    return "echo=%d icanon=%d" % (bool(lflag & termios.ECHO), bool(lflag & termios.ICANON))
before = modes()
p = subprocess.Popen(sys.argv[2:], stdin=slave, stdout=slave, stderr=slave, cwd=sys.argv[1], preexec_fn=child)
p.wait()
print("before", before, "after", modes(), "exit", p.returncode)
`

// TestRunRestoresTheTerminal: the command can change the terminal's
// settings through the descriptors it is given, and one ended at its
// deadline cannot put them back; cordon does, so the user's shell is not
// left without echo.
func TestRunRestoresTheTerminal(t *testing.T) {
	b := newBox(t)
	for _, c := range []struct {
		args []string
		exit string
	}{
		{[]string{"--", "sh", "-c", "stty -echo -icanon"}, "exit 0"},
		{[]string{"--timeout", "1s", "--", "sh", "-c", "stty raw -echo; sleep 30"}, "exit 124"},
	} {
		argv := append([]string{"-c", ttyProbe, b.ws, cordonBin(t), "run", "--audit", b.audit, "--net", "off"}, c.args...)
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
		if want := "before echo=1 icanon=1 after echo=1 icanon=1 " + c.exit; !strings.Contains(r.stdout, want) {
			t.Errorf("%q: %q; want %q\n%s", c.args, strings.TrimSpace(r.stdout), want, r.stderr)
		}
	}
}

// ttyAfter runs argv[2:] in directory argv[1] as the foreground job of a
// new pseudo-terminal, as ttyProbe does, then does what the user's shell
// and prompts do next: writes to the terminal through the open file it
// shares with the command, and opens the terminal anew. It prints how
// each went, whether that file is still blocking, and what the command
// printed.
const ttyAfter = `
import errno, fcntl, os, pty, signal, subprocess, sys, termios
master, slave = pty.openpty()
name = os.ttyname(slave)
def child():
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
p = subprocess.Popen(sys.argv[2:], stdin=slave, stdout=slave, stderr=slave, cwd=sys.argv[1], preexec_fn=child)
p.wait()
nonblock = int(bool(fcntl.fcntl(slave, fcntl.F_GETFL) & os.O_NONBLOCK))
def alarm(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, alarm)
signal.alarm(5)
try:
    os.write(slave, b"after\n")
    wrote = "ok"
except TimeoutError:
    wrote = "blocked"
except OSError as e:
    wrote = errno.errorcode[e.errno]
signal.alarm(0)
try:
    os.close(os.open(name, os.O_RDWR | os.O_NOCTTY))
    opened = "ok"
except OSError as e:
    opened = errno.errorcode[e.errno]
os.set_blocking(master, False)
out = b""
try:
    while True:
        b = os.read(master, 4096)
        if not b:
            break
        out += b
except OSError:
    pass
print("exit", p.returncode, "write", wrote, "open", opened, "nonblock", nonblock)
print("output", out.decode(errors="replace").replace("\r", "").replace("\n", " "))
`

// ttyMangle is what a command can do to the terminal it is handed that
// outlives it: exclusive mode (no one but root can open the terminal),
// output stopped (the shell's next write waits for ever), the shared open
// file made non-blocking (the shell's next read fails; not with the
// argument "blocking"). First it tries to make the terminal its own,
// which its session of its own prevents.
const ttyMangle = `
import errno, fcntl, os, sys, termios
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("steal", attempt(lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 1)),
      "pgrp", attempt(lambda: os.tcsetpgrp(0, os.getpgrp())), flush=True)
fcntl.ioctl(0, termios.TIOCEXCL)
if sys.argv[1:] != ["blocking"]:
    fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
termios.tcflow(0, termios.TCOOFF)
`

// TestRunRestoresTerminalModes: what the command leaves on the terminal
// beyond its settings, exclusive mode, stopped output, a non-blocking
// open file, is undone when the run ends, whether the command exits or
// is ended at its deadline: the shell can write, and a prompt (sudo, ssh)
// can open the terminal. With --credential the command's output reaches
// the terminal through cordon, which must not wait for ever to write
// what the command printed after it stopped the terminal's output (the
// terminal left blocking there, or cordon's write fails at once).
func TestRunRestoresTerminalModes(t *testing.T) {
	b := newBox(t)
	cfg := b.config(providerCredential("api.provider.example"))
	for _, c := range []struct {
		args    []string
		exit    string
		printed string // what the command printed last, when it must arrive
	}{
		{[]string{"--net", "off", "--", "python3", "-c", ttyMangle}, "exit 0", ""},
		{[]string{"--net", "off", "--timeout", "5s", "--", "python3", "-c", ttyMangle + "import time; time.sleep(30)\n"}, "exit 124", ""}, // room for a slow start (make race) before the deadline
		{[]string{"--net", "restricted", "--config", cfg, "--credential", "provider", "--timeout", "20s", "--",
			"python3", "-c", ttyMangle + "print('printed after', flush=True)\n", "blocking"}, "exit 0", "printed after"},
	} {
		flags := c.args[:slices.Index(c.args, "--")]
		argv := append([]string{"-c", ttyAfter, b.ws, cordonBin(t), "run", "--audit", b.audit}, c.args...)
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm", "PROVIDER_REAL_KEY=sk-terminal-test-0123456789"), "/usr/bin/python3", argv...))
		if want := c.exit + " write ok open ok nonblock 0"; !strings.Contains(r.stdout, want) {
			t.Errorf("%q: %q; want %q\n%s", flags, strings.TrimSpace(r.stdout), want, r.stderr)
		}
		// The command never had the terminal's foreground process group
		// to leave behind.
		if want := "steal EPERM pgrp ENOTTY"; !strings.Contains(r.stdout, want) {
			t.Errorf("%q: %q; want %q\n%s", flags, strings.TrimSpace(r.stdout), want, r.stderr)
		}
		if !strings.Contains(r.stdout, c.printed) {
			t.Errorf("%q: %q; want %q\n%s", flags, strings.TrimSpace(r.stdout), c.printed, r.stderr)
		}
	}
}

// ttyJob plays an interactive shell with job control on a new
// pseudo-terminal (argv[1] is the workspace, argv[2] "fg" or "bg"): it
// runs argv[3:] as a job of its own in the foreground (fg), and presses
// Ctrl-Z once the command is ready, or in the background (cordon run … &,
// bg). Then the shell has the terminal, and the user types a line to it.
// It prints how the job ended, what the shell read, what the command
// read of the terminal, and what reached the terminal.
const ttyJob = `
import fcntl, os, pty, select, signal, subprocess, sys, termios, time
ws, mode, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
master, slave = pty.openpty()
def wait_for(cond, what):
    end = time.time() + 30
    while not cond():
        if time.time() > end:
            sys.exit("timed out waiting for " + what)
        time.sleep(0.05)
def read_line(fd):
    if select.select([fd], [], [], 5)[0]:
        return os.read(fd, 1024).decode(errors="replace").strip()
    return "nothing"
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    def foreground():
        # The job takes the foreground itself, before it execs: taken by
        # the shell after the fork, cordon could look first and find
        # itself in the background.
        os.setpgid(0, 0)
        if mode == "fg":
            os.tcsetpgrp(0, os.getpid())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    job = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ws, preexec_fn=foreground)
    wait_for(lambda: os.path.exists(os.path.join(ws, "ready")), "the command")
    if mode == "fg":
        os.write(master, b"\x1a")
        _, status = os.waitpid(job.pid, os.WUNTRACED)
        print("job", "stopped" if os.WIFSTOPPED(status) else "exit %d" % os.waitstatus_to_exitcode(status), flush=True)
        os.tcsetpgrp(slave, os.getpgrp())
    os.write(master, b"typed-for-the-shell\n")
    stolen = os.path.join(ws, "stolen")
    if mode == "fg" and os.WIFSTOPPED(status):
        wait_for(lambda: os.path.exists(stolen), "the command's read")
        os.killpg(job.pid, signal.SIGKILL)
        os.killpg(job.pid, signal.SIGCONT)
        os.waitpid(job.pid, 0)
    elif mode == "bg":
        print("job exit %d" % job.wait(), flush=True)
    print("shell read", read_line(slave))
    print("command read", open(stolen).read().strip() if os.path.exists(stolen) else "nothing")
    print("command's terminals", open(os.path.join(ws, "ready")).read() or "none", flush=True)
    os._exit(0)
os.close(slave)
out = b""
while True:
    try:
        b = os.read(master, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
os.waitpid(pid, 0)
print("terminal", out.decode(errors="replace").replace("\r", "").replace("\n", " "))
`

// ttyThief reads the terminal it was handed, as its stdin and anew
// through its stdout and stderr (/proc/self/fd) and /dev/console, until
// it has a line or 20 seconds have passed; it leaves the line in the
// workspace, and, once it is ready, the terminals it found.
const ttyThief = `
import os, select, time
fds = {}
for name, path in (("stdin", None), ("console", "/dev/console"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
    try:
        fd = 0 if path is None else os.open(path, os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        continue
    if os.isatty(fd):
        fds[name] = fd
print("printed by the command", flush=True)
open("ready.tmp", "w").write(" ".join(sorted(fds)))
os.rename("ready.tmp", "ready")
got, end = b"", time.time() + 20
while fds and b"\n" not in got and time.time() < end:
    ready = select.select(list(fds.values()), [], [], 0.5)[0]
    if ready:
        got += os.read(ready[0], 1024)  # one: the others now have nothing
if got:
    open("stolen", "wb").write(got)
`

// TestRunTerminalOnlyInTheForeground: the command runs in a session of
// its own, so job control does not stop it when it reads the terminal
// from the background, and it can read through any descriptor of the
// terminal it is handed. Before, Ctrl-Z stopped cordon but not the
// sandbox, and what the user typed next to the shell was the sandbox's
// to read, as it was from a run started with &. A stopped run now ends
// (its exit line says so), and one started in the background gets no
// terminal: its input is /dev/null, its output reaches the terminal
// through cordon.
func TestRunTerminalOnlyInTheForeground(t *testing.T) {
	for _, c := range []struct {
		mode string
		want []string
	}{
		{"fg", []string{"job exit 148", "shell read typed-for-the-shell", "command read nothing", "command's terminals console stderr stdin stdout",
			"the run's job was stopped from the terminal (SIGTSTP"}},
		{"bg", []string{"job exit 0", "shell read typed-for-the-shell", "command read nothing", "command's terminals none",
			"printed by the command"}},
	} {
		b := newBox(t)
		argv := []string{"-c", ttyJob, b.ws, c.mode, cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--", "python3", "-c", ttyThief}
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
		for _, want := range c.want {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: want %q in:\n%s%s", c.mode, want, r.stdout, r.stderr)
			}
		}
		if c.mode != "fg" {
			continue
		}
		var exit *audit.Record
		for _, rec := range b.records() {
			if rec.Type == audit.TypeExit {
				exit = &rec
			}
		}
		if exit == nil || exit.Outcome != "completed" || exit.Signal != "SIGTSTP" || !strings.Contains(exit.Detail, "Ctrl-Z") {
			t.Errorf("the exit line does not say the run's stop ended it: %+v", exit)
		}
	}
}

// ttyOtherPane runs argv[3:] in directory argv[1] as the foreground job
// of a new pseudo-terminal, with its stdout or stderr (argv[2]) opened
// for writing alone on another one, the terminal of another pane whose
// shell waits to read (cordon run … > /dev/pts/N). Once the command is
// ready, the user types a line to that other pane, with echo off as at a
// password prompt, then one to the run's own terminal. It prints what the other pane's shell read, what the
// command read, the terminals it found, and what reached the other pane.
const ttyOtherPane = `
import fcntl, os, pty, select, subprocess, sys, termios, time
ws, which, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
run_m, run_s = pty.openpty()
pane_m, pane_s = pty.openpty()
shell = os.fork()
if shell == 0:
    os.setsid()
    fcntl.ioctl(pane_s, termios.TIOCSCTTY, 0)
    time.sleep(60)
    os._exit(0)
attrs = termios.tcgetattr(pane_s)
attrs[3] &= ~termios.ECHO  # its shell asks for a password
termios.tcsetattr(pane_s, termios.TCSANOW, attrs)
to_pane = os.open(os.ttyname(pane_s), os.O_WRONLY | os.O_NOCTTY)
def own_terminal():
    os.setsid()
    fcntl.ioctl(run_s, termios.TIOCSCTTY, 0)
stdio = {"stdout": run_s, "stderr": run_s}
stdio[which] = to_pane
job = subprocess.Popen(argv, stdin=run_s, cwd=ws, preexec_fn=own_terminal, **stdio)
end = time.time() + 30
while not os.path.exists(os.path.join(ws, "ready")):
    if time.time() > end or job.poll() is not None:
        sys.exit("the command did not get ready")
    time.sleep(0.05)
os.write(pane_m, b"typed-in-the-other-pane\n")
time.sleep(1)  # the command, reading already, would take it first
read = os.read(pane_s, 1024).decode().strip() if select.select([pane_s], [], [], 1)[0] else "nothing"
print("other pane's shell read", read, flush=True)
os.write(run_m, b"typed-for-the-run\n")
print("job exit", job.wait(), flush=True)
os.kill(shell, 9)
stolen = os.path.join(ws, "stolen")
print("command read", open(stolen).read().strip() if os.path.exists(stolen) else "nothing")
print("command's terminals", open(os.path.join(ws, "ready")).read() or "none")
os.set_blocking(pane_m, False)
try:
    out = os.read(pane_m, 4096)
except OSError:
    out = b""
print("other pane", out.decode(errors="replace").replace("\r", "").replace("\n", " "))
`

// TestRunTerminalElsewhereWriteOnly: a terminal cordon does not control
// that the run is given for writing alone, another pane's (cordon run …
// > /dev/pts/N), reaches the command through a pipe cordon copies. Handed
// over, the box opened it anew for reading through /proc/self/fd and took
// the lines typed in that pane to its shell (a sudo password among them).
// The command's output still reaches that terminal, and its own terminal
// is handed over as before.
func TestRunTerminalElsewhereWriteOnly(t *testing.T) {
	for _, c := range []struct {
		which string
		want  []string
	}{
		{"stdout", []string{"command's terminals stderr stdin\n", "other pane printed by the command"}},
		{"stderr", []string{"command's terminals console stdin stdout\n"}},
	} {
		b := newBox(t)
		argv := []string{"-c", ttyOtherPane, b.ws, c.which, cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--", "python3", "-c", ttyThief}
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
		for _, want := range append(c.want, "other pane's shell read typed-in-the-other-pane", "job exit 0", "command read typed-for-the-run") {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: want %q in:\n%s%s", c.which, want, r.stdout, r.stderr)
			}
		}
	}
}

// ttyAnswers runs argv[3:] in directory argv[1] as a job of an
// interactive shell with job control on a new pseudo-terminal, in the
// foreground (argv[2] "fg") or in the background (cordon run … &, "bg"),
// the shell keeping the terminal's foreground. The terminal's emulator
// answers what a terminal is asked (its answerback, primary attributes,
// the cursor's place, colours, the window title, which a terminal with
// title reporting on gives back with whatever a program set it to, a
// setting and a terminfo capability) as soon as it reads the question.
// Once the job is over it reads, as the shell next does, what waits on
// the terminal, and prints it, how many questions were answered and what
// was written to the terminal (ESC as ^[).
const ttyAnswers = `
import fcntl, os, pty, signal, subprocess, sys, termios, threading, time
master, slave = pty.openpty()
answers = {b"\x05": b"ANSWERBACK", b"\x1b[c": b"\x1b[?62;22c", b"\x1b[6n": b"\x1b[12;1R",
           b"\x1b]11;?\x07": b"\x1b]11;rgb:0000/0000/0000\x07", b"\x1b[21t": b"\x1b]lecho INJECTED\n\x1b\\",
           b"\x1bP$qm\x1b\\": b"\x1bP1$r0m\x1b\\", b"\x1bP+q544e\x1b\\": b"\x1bP1+r544e=787465726d\x1b\\"}
answered, everything = [], []
def emulator():
    seen = b""
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:
            return
        if not b:
            return
        seen += b
        everything.append(b)
        for q, a in answers.items():
            while q in seen:
                seen = seen.replace(q, b"", 1)
                os.write(master, a)
                answered.append(q)
threading.Thread(target=emulator, daemon=True).start()
shell = os.fork()
if shell == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    def foreground():
        # As in ttyJob: the job takes the foreground before it execs.
        os.setpgid(0, 0)
        if sys.argv[2] == "fg":
            os.tcsetpgrp(0, os.getpid())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    job = subprocess.Popen(sys.argv[3:], stdin=slave, stdout=slave, stderr=slave, cwd=sys.argv[1], preexec_fn=foreground)
    code = job.wait()
    os.tcsetpgrp(slave, os.getpgrp())
    os._exit(code)
code = os.waitstatus_to_exitcode(os.waitpid(shell, 0)[1])
time.sleep(1)
attrs = termios.tcgetattr(slave)
attrs[3] &= ~termios.ICANON
termios.tcsetattr(slave, termios.TCSANOW, attrs)
os.set_blocking(slave, False)
try:
    waiting = os.read(slave, 4096)
except BlockingIOError:
    waiting = b""
print("exit", code, "answered", len(answered))
print("the shell reads", repr(waiting) if waiting else "nothing")
print("the terminal got", b"".join(everything).decode(errors="replace").replace("\x1b", "^["))
`

// terminalQuestions are what a command can ask the terminal: its
// answerback (ENQ), primary attributes, the cursor's place, the
// background colour, the window title, a setting (DECRQSS) and a terminfo
// capability (XTGETTCAP), each of which ttyAnswers answers.
const terminalQuestions = `\005\033[c\033[6n\033]11;?\007\033[21t\033P$qm\033\\\033P+q544e\033\\`

// TestRunTerminalAnswersDoNotReachTheShell: a terminal answers some of
// what is written to it with input, and a command that asks just before
// it exits has the answers reach the user's shell as if typed, with a
// terminal that reports its title (which the command sets) a line of the
// command's choosing that the shell runs. Once the box is gone, cordon
// waits a moment for such answers and discards the terminal's input. A
// run in the background (cordon run … &) cannot do that: the shell reads
// the terminal all along. Its output, which reaches the terminal through
// cordon, whether masked (--credential) or not, reaches it without the
// questions, so nothing is answered, and with its colours and cursor
// movement.
func TestRunTerminalAnswersDoNotReachTheShell(t *testing.T) {
	const shown = `\033[31mred\033[0m\033[2A\033[K`
	for _, c := range []struct {
		mode string
		args []string
		want string
	}{
		// In the foreground, the title report is dropped: its answer is
		// the command's text.
		{"fg", []string{"--net", "off"}, "exit 0 answered 6\nthe shell reads nothing\n"},
		{"bg", []string{"--net", "off"}, "exit 0 answered 0\nthe shell reads nothing\nthe terminal got ^[[31mred^[[0m^[[2A^[[K\n"},
		{"bg", []string{"--net", "restricted", "--credential", "provider"}, "exit 0 answered 0\nthe shell reads nothing\nthe terminal got ^[[31mred^[[0m^[[2A^[[K\n"},
	} {
		b := newBox(t)
		args := append([]string{"-c", ttyAnswers, b.ws, c.mode, cordonBin(t), "run", "--audit", b.audit, "--config", b.config(providerCredential("api.provider.example"))}, c.args...)
		argv := append(args, "--", "printf", terminalQuestions+shown)
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm", "PROVIDER_REAL_KEY=sk-terminal-test-0123456789"), "/usr/bin/python3", argv...))
		if !strings.Contains(r.stdout, c.want) {
			t.Errorf("%s %q: want %q in:\n%s%s", c.mode, c.args, c.want, r.stdout, r.stderr)
		}
	}
}

// TestRunTerminalInputModesPutBack: the modes that decide what a terminal
// sends as input, which a TUI killed at its deadline leaves on (mouse and
// focus reports reaching the shell as input, the kitty keyboard protocol
// after which the shell cannot read Enter or Ctrl-C) or a command sets on
// purpose (local echo, which shows a password typed at a prompt; the
// keyboard locked, KAM, after which the terminal ignores every key;
// Enter sending CR LF; the cursor hidden), are put
// back once the box is gone, after whatever the command wrote, also when
// a script runs cordon (a shell without job control runs its commands in
// its own process group, which cordon then shares with the script).
func TestRunTerminalInputModesPutBack(t *testing.T) {
	const last = "^[[>1u"
	for _, under := range [][]string{nil, {"sh", "-c", `"$@"; :`, "sh"}} { // run by a script: one process group with it
		b := newBox(t)
		argv := append(append([]string{"-c", ttyAnswers, b.ws, "fg"}, under...), cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--",
			"printf", `\033[?1000h\033[?1006h\033[?1004h\033[?2048h\033[?2031h\033[12l\033[2h\033[20h\033[?25l\033[?1h\033=\033[>4;2m\033[>1u`)
		r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
		_, got, _ := strings.Cut(r.stdout, "the terminal got ")
		i := strings.LastIndex(got, last)
		if i < 0 {
			t.Fatalf("%q: the command's modes did not reach the terminal:\n%s%s", under, r.stdout, r.stderr)
		}
		for _, reset := range []string{"^[<", "^[ F", "^[[?1000l", "^[[?1006l", "^[[?1004l", "^[[?2048l", "^[[?2031l", "^[[12h", "^[[2l", "^[[20l", "^[[?25h", "^[[?1l", "^[>", "^[[>4m", "^[[<99u"} {
			if !strings.Contains(got[i+len(last):], reset) {
				t.Errorf("%q: %q not written after the command's modes: %q", under, reset, got)
			}
		}
	}
}

// ttyPipeline runs argv[2:] in directory argv[1] piped to a pager, as a
// shell runs cordon run … | less: one job, in the foreground of a new
// pseudo-terminal. The pager puts the terminal in raw mode and turns
// mouse reports on, reads its input to the end, and once cordon is gone
// says whether its terminal settings are still its own. It prints what
// reached the terminal (ESC as ^[).
const ttyPipeline = `
import fcntl, os, pty, select, shlex, sys, termios, time
master, slave = pty.openpty()
pager = """
import os, sys, termios, time, tty
fd = os.open("/dev/tty", os.O_RDWR)
tty.setraw(fd)
os.write(fd, b"\\x1b[?1000h")
sys.stdin.read()
time.sleep(1.5)
a = termios.tcgetattr(fd)
os.write(fd, b"pager sees icanon=%d echo=%d\\r\\n" % (bool(a[3] & termios.ICANON), bool(a[3] & termios.ECHO)))
"""
pid = os.fork()
if pid == 0:
    os.chdir(sys.argv[1])
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.execvp("sh", ["sh", "-c", shlex.join(sys.argv[2:]) + " | python3 -c " + shlex.quote(pager)])
os.close(slave)
out, end = b"", time.time() + 60
while time.time() < end:
    if select.select([master], [], [], 0.3)[0]:
        try:
            b = os.read(master, 4096)
        except OSError:
            break
        if not b:
            break
        out += b
    elif os.waitpid(pid, os.WNOHANG)[0]:
        break
print("terminal", out.decode(errors="replace").replace("\x1b", "^["))
`

// TestRunTerminalLeftToAPipedPager: cordon run … | less is one job, and
// the pager uses the terminal, in modes of its own, as cordon ends; so
// cordon, when it shares its job with another program, does not put back
// the terminal's settings (the pager's raw mode was undone under it,
// its keys echoed and read by lines) nor its input modes, and does not
// discard its input.
func TestRunTerminalLeftToAPipedPager(t *testing.T) {
	b := newBox(t)
	argv := []string{"-c", ttyPipeline, b.ws, cordonBin(t), "run", "--audit", b.audit, "--net", "off", "--", "sh", "-c", "sleep 0.5; echo hi"}
	r := runResult(t, runTimeout, asUser(t, b.env("TERM=xterm"), "/usr/bin/python3", argv...))
	if want := "pager sees icanon=0 echo=0"; !strings.Contains(r.stdout, want) {
		t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "^[[?1000l") {
		t.Errorf("cordon turned the pager's mouse reports off:\n%s", r.stdout)
	}
}

// TestRunEveryTmpfsSized: tmp_size bounds every tmpfs the command can
// write, not /tmp alone: HOME and /dev/shm answer ENOSPC past it too,
// and /dev itself, a tmpfs bubblewrap cannot size, is read-only.
// (Without a memory cgroup nothing else bounds the RAM a box fills there.)
func TestRunEveryTmpfsSized(t *testing.T) {
	b := newBox(t)
	cfg := b.config("limits:\n  tmp_size: 1MiB\n")
	const fill = `
import errno, os
for d in ["/tmp", os.environ["HOME"], "/dev/shm", "/dev"]:
    n = 0
    try:
        fd = os.open(os.path.join(d, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
        while n < 4 << 20:
            n += os.write(fd, b"x" * 65536)
        got = "unbounded"
    except OSError as e:
        got = errno.errorcode[e.errno]
    print(d, got, n >> 10)
`
	r := b.run("--config", cfg, "--net", "off", "--", "python3", "-c", fill)
	expectCode(t, r, 0)
	for _, want := range []string{"/tmp ENOSPC 1024\n", b.home + " ENOSPC 1024\n", "/dev/shm ENOSPC 1024\n", "/dev EROFS 0\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// TestRunWarnsOfProxyOnlyFlags: --allow (and the proxy's other flags)
// with the network off or open change nothing, as only the restricted
// network's proxy decides hosts: the run goes on, and says so, rather
// than leave the user to wonder why the host they allowed is unreachable.
// So does an --env naming a variable the host has not set, which passes
// nothing.
func TestRunWarnsOfProxyOnlyFlags(t *testing.T) {
	b := newBox(t)
	r := b.run("--net", "off", "--allow", "example.com", "--terminate", "none", "--env", "CORDON_TEST_NEVER_SET", "--", "true")
	expectCode(t, r, 0)
	for _, want := range []string{"--allow has no effect with the network off", "--terminate has no effect", "add --net restricted",
		"--env CORDON_TEST_NEVER_SET: CORDON_TEST_NEVER_SET is not set here"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	r = b.run("--net", "restricted", "--allow", "example.com", "--ephemeral-ca", "--", "true")
	expectCode(t, r, 0)
	if strings.Contains(r.stderr, "has no effect") {
		t.Errorf("a restricted run was told its proxy flags do nothing:\n%s", r.stderr)
	}
}
