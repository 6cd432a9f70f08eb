//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// fixture is a fake user: a home, a workspace, an audit log and a scratch
// directory, all under one temporary directory with symlinks resolved.
type fixture struct {
	root, home, ws, audit, scratch string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{
		root:    root,
		home:    filepath.Join(root, "home"),
		ws:      filepath.Join(root, "work", "proj"),
		audit:   filepath.Join(root, "home", ".local", "state", "cordon", "audit.jsonl"),
		scratch: filepath.Join(root, "scratch"),
	}
	mkdirs(t, f.home, f.ws, filepath.Dir(f.audit))
	return f
}

func (f fixture) host() hostInfo {
	return hostInfo{
		env:    []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SECRET_TOKEN=s3cr3t", "TERM=xterm"},
		home:   f.home,
		user:   "tester",
		uid:    1000,
		gid:    1000,
		guard:  newGuard([]string{f.home}, f.audit, ""),
		self:   "/opt/cordon/bin/cordon",
		bwrap:  "/usr/bin/bwrap",
		goarch: "amd64",
	}
}

func (f fixture) spec(p *policy.Policy, argv ...string) *sandbox.Spec {
	return &sandbox.Spec{Policy: p, Argv: argv, Workspace: f.ws, Workdir: f.ws}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	mkdirs(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	mkdirs(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// hasSeq reports whether frag appears contiguously in argv.
func hasSeq(argv []string, frag ...string) bool {
	for i := 0; i+len(frag) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(frag)], frag) {
			return true
		}
	}
	return false
}

// fragments replaces {home}, {ws}, {root} and {scratch} in each string.
func (f fixture) expand(frags [][]string) [][]string {
	r := strings.NewReplacer("{home}", f.home, "{ws}", f.ws, "{root}", f.root, "{scratch}", f.scratch)
	out := make([][]string, len(frags))
	for i, fr := range frags {
		for _, s := range fr {
			out[i] = append(out[i], r.Replace(s))
		}
	}
	return out
}
