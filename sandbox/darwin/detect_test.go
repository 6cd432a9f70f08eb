package darwin

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// realTempDir is a fresh temporary directory under its real name, with
// no symbolic link on the way (as cordon resolves a workspace).
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDetectFindsTheRepository: the workspace's repository reaches the
// Machine, so Render (which reads nothing from disk) can guard it, and a
// repository that cannot be guarded refuses the launch.
func TestDetectFindsTheRepository(t *testing.T) {
	ws := realTempDir(t)
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &sandbox.Spec{Workspace: ws}
	m, err := Detect(s, filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Guarded, sandbox.GuardedPath{Path: filepath.Join(ws, ".git"), Guard: sandbox.Pinned, Dir: true}) {
		t.Errorf("Detect found the repository as %+v", m.Guarded)
	}
	if err := os.Symlink("elsewhere", filepath.Join(ws, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(s, ""); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Detect with a linked config: %v; want a refusal", err)
	}
}

// TestDetectGuardsCordonsBinary: where the box may write cordon's own
// binary (here the test binary stands for it, its directory for a
// read-write allow_path, then for the workspace), the profile keeps it
// read-only; elsewhere it names nothing of it.
func TestDetectGuardsCordonsBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		t.Fatal(err)
	}
	ws := realTempDir(t)
	guarded := func(s *sandbox.Spec) bool {
		t.Helper()
		m, err := Detect(s, filepath.Join(t.TempDir(), "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(m.Guarded, func(g sandbox.GuardedPath) bool { return g.Path == self && g.Guard == sandbox.ReadOnly })
	}
	if guarded(&sandbox.Spec{Workspace: ws, Policy: &policy.Policy{}}) {
		t.Error("cordon's binary is guarded where the box cannot write")
	}
	rw := &policy.Policy{AllowPaths: []string{filepath.Dir(self) + ":rw"}}
	if !guarded(&sandbox.Spec{Workspace: ws, Policy: rw}) {
		t.Error("cordon's binary, under a read-write allow_path, is not guarded")
	}
	if !guarded(&sandbox.Spec{Workspace: filepath.Dir(self), Policy: &policy.Policy{}}) {
		t.Error("cordon's binary, in the workspace, is not guarded")
	}
}

// TestDetectGuardsTheConfiguration: cordon's configuration is denied to
// the command wherever it is, and refused where the command may write.
func TestDetectGuardsTheConfiguration(t *testing.T) {
	ws := realTempDir(t)
	elsewhere := filepath.Join(t.TempDir(), "cordon", "config.yaml")
	m, err := Detect(&sandbox.Spec{Workspace: ws, Policy: &policy.Policy{}, Config: []string{elsewhere}}, "")
	if err != nil || !slices.Contains(m.Protected, elsewhere) {
		t.Errorf("Detect: protected %q, %v; want %s among them", m.Protected, err, elsewhere)
	}
	inside := filepath.Join(ws, ".xdg", "cordon", "config.yaml")
	if _, err := Detect(&sandbox.Spec{Workspace: ws, Policy: &policy.Policy{}, Config: []string{inside}}, ""); err == nil || !strings.Contains(err.Error(), "rewrite your next run's policy") {
		t.Errorf("Detect with the configuration in the workspace: %v; want a refusal", err)
	}
}

// TestDetectRefusesSourceHardLinks: a credential's source file with a
// second name in the workspace or an exposed tree is refused, as on Linux:
// the profile denies the source by its own name only.
func TestDetectRefusesSourceHardLinks(t *testing.T) {
	ws := realTempDir(t)
	keys := realTempDir(t)
	tools := realTempDir(t)
	source := filepath.Join(keys, "openai")
	if err := os.WriteFile(source, []byte("sk-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &policy.Policy{Expose: []string{tools}, Credentials: []policy.Credential{{Name: "openai", Source: policy.Source{File: source}}}}
	s := &sandbox.Spec{Workspace: ws, Policy: p}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, err := Detect(s, audit); err != nil {
		t.Fatalf("Detect with the source alone: %v", err)
	}
	for _, dir := range []string{ws, tools} {
		link := filepath.Join(dir, "key")
		if err := os.Link(source, link); err != nil {
			t.Fatal(err)
		}
		if _, err := Detect(s, audit); err == nil || !strings.Contains(err.Error(), "hard link") {
			t.Errorf("Detect with the source hard-linked at %s: %v; want a refusal", link, err)
		}
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDetectRefusesDenyReadHardLinks: a file a deny_read entry hides (the
// entry itself, or a file in a directory it names) with a second name in
// the workspace is refused, as on Linux: the profile denies it by its own
// name only, and a box that made the entry, with a hard link, before the
// secret was written into it, read the secret through the link.
func TestDetectRefusesDenyReadHardLinks(t *testing.T) {
	ws := realTempDir(t)
	if err := os.Mkdir(filepath.Join(ws, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(ws, "secrets", "prod.key")
	if err := os.WriteFile(key, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	for _, deny := range []string{key, filepath.Join(ws, "secrets")} {
		s := &sandbox.Spec{Workspace: ws, Policy: &policy.Policy{DenyRead: []string{deny}}}
		if _, err := Detect(s, audit); err != nil {
			t.Fatalf("Detect with the file alone: %v", err)
		}
		link := filepath.Join(ws, "hl")
		if err := os.Link(key, link); err != nil {
			t.Fatal(err)
		}
		if _, err := Detect(s, audit); err == nil || !strings.Contains(err.Error(), link+" is a hard link of "+key) {
			t.Errorf("Detect with deny_read %s hard-linked at %s: %v; want a refusal", deny, link, err)
		}
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTerminalsByDevice: the command's terminals are found by the device
// their descriptors are open on, among the ttysN entries only.
func TestTerminalsByDevice(t *testing.T) {
	dev := t.TempDir()
	for name, target := range map[string]string{"ttys004": "/dev/null", "ttys005": "/dev/zero", "ttysx": "/dev/null", "null": "/dev/null"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			t.Fatal(err)
		}
	}
	tty, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if got := terminals(dev, tty, file, nil); !slices.Equal(got, []string{"/dev/ttys004"}) {
		t.Errorf("terminals = %q, want [/dev/ttys004]", got)
	}
	if got := terminals(dev, file, strings.NewReader("")); got != nil {
		t.Errorf("terminals of no character device = %q, want none", got)
	}
}

// TestDetectGuardsTheDefaultAudit: a run that logs elsewhere (--audit)
// still keeps the default audit log's directory from the command, where
// the other runs log.
func TestDetectGuardsTheDefaultAudit(t *testing.T) {
	state := t.TempDir()
	t.Setenv("CORDON_AUDIT", "")
	t.Setenv("XDG_STATE_HOME", state)
	ws := realTempDir(t)
	m, err := Detect(&sandbox.Spec{Workspace: ws, Policy: &policy.Policy{}}, filepath.Join(t.TempDir(), "elsewhere.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Protected, filepath.Join(state, "cordon")) {
		t.Errorf("Detect protected %q; want the default audit directory %s among them", m.Protected, filepath.Join(state, "cordon"))
	}
}

// TestDetectRefusesReplaceableLinks: a deny_read entry or a credential's
// source reached through a symbolic link the box could replace (one in the
// workspace) is refused: the next run would deny wherever the box pointed
// it, and the file it leads to now would be readable. A link the box
// cannot touch is fine.
func TestDetectRefusesReplaceableLinks(t *testing.T) {
	ws := realTempDir(t)
	outside := realTempDir(t)
	for _, dir := range []string{filepath.Join(ws, "real"), filepath.Join(outside, "real")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("sk-secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real", filepath.Join(filepath.Dir(dir), "link")); err != nil {
			t.Fatal(err)
		}
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cases := []struct {
		name string
		p    *policy.Policy
		want string // "" for none
	}{
		{"deny_read through the workspace's link", &policy.Policy{DenyRead: []string{filepath.Join(ws, "link", "secret")}}, "symbolic link the command could replace"},
		{"relative deny_read through it", &policy.Policy{DenyRead: []string{"link/secret"}}, "symbolic link the command could replace"},
		{"source through it", &policy.Policy{Credentials: []policy.Credential{{Name: "k", Source: policy.Source{File: filepath.Join(ws, "link", "secret")}}}}, "symbolic link the command could replace"},
		{"deny_read by its real path", &policy.Policy{DenyRead: []string{filepath.Join(ws, "real", "secret")}}, ""},
		{"deny_read through a link outside", &policy.Policy{DenyRead: []string{filepath.Join(outside, "link", "secret")}}, ""},
	}
	for _, tc := range cases {
		_, err := Detect(&sandbox.Spec{Workspace: ws, Policy: tc.p}, audit)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Detect: %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestDetectKeepsTheUsersHome: with $HOME elsewhere, the home directory the
// user database names is still refused and its stores protected.
func TestDetectKeepsTheUsersHome(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	ws := realTempDir(t)
	m, err := Detect(&sandbox.Spec{Workspace: ws, Policy: &policy.Policy{}}, filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.OtherHomes, me.HomeDir) {
		t.Errorf("Detect found other homes %q; want %s, the user database's", m.OtherHomes, me.HomeDir)
	}
}

// TestDetectFindsNamedFiles: the files named as credentials in a
// read-write allow_path outside the workspace are found, in any case, for
// the profile to keep the directories above them where they are.
func TestDetectFindsNamedFiles(t *testing.T) {
	ws := realTempDir(t)
	rw := realTempDir(t)
	for _, f := range []string{"a/b/.npmrc", "c/CREDENTIALS", "c/x.npmrc"} {
		if err := os.MkdirAll(filepath.Join(rw, filepath.Dir(f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rw, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".npmrc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &policy.Policy{AllowPaths: []string{rw + ":rw", ws + "/sub:rw"}}
	m, err := Detect(&sandbox.Spec{Workspace: ws, Policy: p}, filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(rw, "a/b/.npmrc"), filepath.Join(rw, "c/CREDENTIALS")}
	if !slices.Equal(m.Named, want) {
		t.Errorf("Detect found %q; want %q", m.Named, want)
	}
}
