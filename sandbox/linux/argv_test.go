//go:build linux

package linux

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

func TestBuildArgv(t *testing.T) {
	tests := []struct {
		name string
		// setup creates files under the fixture and edits the policy.
		setup func(t *testing.T, f fixture, p *policy.Policy)
		// host edits the machine description; nil leaves it.
		host    func(h *hostInfo)
		argv    []string
		want    [][]string // fragments that must appear
		notWant [][]string // fragments that must not
	}{
		{
			name: "network off",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				p.Network = policy.NetOff
			},
			argv: []string{"true"},
			want: [][]string{
				{"/usr/bin/bwrap", "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup", "--unshare-net"},
				{"--die-with-parent", "--new-session", "--disable-userns", "--cap-drop", "ALL"},
				{"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"},
				{"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm"},
				{"--perms", "1777", "--tmpfs", "/tmp", "--perms", "0700", "--tmpfs", "{home}"},
				{"--bind", "{ws}", "{ws}"},
				{"--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "{ws}", "--clearenv"},
				{"--setenv", "HOME", "{home}"},
				{"--setenv", "TMPDIR", "/tmp"},
				{"--seccomp", "4", "--block-fd", "7", "--json-status-fd", "3", "--", "/usr/bin/true"},
			},
			// bwrap's own init is pid 1, not the command, and cordon's
			// binary is not mounted: nothing in this box has a use for it.
			// No tmp_size (0) sizes no tmpfs.
			notWant: [][]string{{"--share-net"}, {"--as-pid-1"}, {selfPath}, {"--size"}},
		},
		{
			name: "network restricted holds cordon, for git's ssh",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				p.Network = policy.NetRestricted
			},
			host: func(h *hostInfo) { h.holderNet = true },
			argv: []string{"true"},
			want: [][]string{{"--ro-bind", "/opt/cordon/bin/cordon", selfPath}},
		},
		{
			name: "network open shares the network",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				p.Network = policy.NetOpen
			},
			argv:    []string{"true"},
			want:    [][]string{{"--unshare-cgroup", "--hostname", "cordon"}},
			notWant: [][]string{{"--unshare-net"}},
		},
		{
			// tmp_size caps every tmpfs the box can write, not /tmp alone;
			// /dev, a tmpfs bwrap cannot size, is read-only.
			name: "tmp size caps /tmp, HOME and /dev/shm",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				p.Limits.TmpSize = 1 << 20
			},
			argv: []string{"true"},
			want: [][]string{
				{"--dev", "/dev", "--size", "1048576", "--perms", "1777", "--tmpfs", "/dev/shm"},
				{"--size", "1048576", "--perms", "1777", "--tmpfs", "/tmp"},
				{"--size", "1048576", "--perms", "0700", "--tmpfs", "{home}"},
				{"--remount-ro", "/dev"},
			},
		},
		{
			name: "expose is read-only and its credential files are masked",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				writeFile(t, filepath.Join(f.root, "tools", "lib", ".npmrc"), "//registry/:_authToken=x", 0o644)
				writeFile(t, filepath.Join(f.root, "tools", "cargo", "credentials.toml"), "token", 0o644)
				writeFile(t, filepath.Join(f.root, "tools", "readme"), "hi", 0o644)
				p.Expose = []string{filepath.Join(f.root, "tools")}
			},
			argv: []string{"true"},
			want: [][]string{
				{"--ro-bind", "{root}/tools", "{root}/tools"},
				{"--ro-bind", "{scratch}/empty", "{root}/tools/lib/.npmrc"},
				{"--ro-bind", "{scratch}/empty", "{root}/tools/cargo/credentials.toml"},
			},
			notWant: [][]string{{"{root}/tools/readme"}},
		},
		{
			name: "allow path rw and ro",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				mkdirs(t, filepath.Join(f.root, "cache"), filepath.Join(f.root, "data"))
				p.AllowPaths = []string{filepath.Join(f.root, "cache") + ":rw", filepath.Join(f.root, "data")}
			},
			argv: []string{"true"},
			want: [][]string{
				{"--bind", "{root}/cache", "{root}/cache"},
				{"--ro-bind", "{root}/data", "{root}/data"},
			},
		},
		{
			name: "deny read file, directory and a file a symlink names",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				writeFile(t, filepath.Join(f.ws, ".env"), "KEY=1", 0o644)
				writeFile(t, filepath.Join(f.ws, "secrets", "a"), "x", 0o644)
				writeFile(t, filepath.Join(f.ws, "real-key"), "x", 0o644)
				symlink(t, filepath.Join(f.ws, "real-key"), filepath.Join(f.ws, "key-link"))
				p.DenyRead = []string{filepath.Join(f.ws, ".env"), "secrets", filepath.Join(f.ws, "real-key"), "/nonexistent/x"}
			},
			argv: []string{"true"},
			want: [][]string{
				{"--ro-bind", "{scratch}/empty", "{ws}/.env"},
				{"--ro-bind", "{scratch}/empty.d", "{ws}/secrets"},
				{"--ro-bind", "{scratch}/empty", "{ws}/real-key"},
			},
			notWant: [][]string{{"/nonexistent/x"}},
		},
		{
			name: "protected directories under a wider expose are masked",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				writeFile(t, filepath.Join(f.home, ".config", "gh", "hosts.yml"), "t", 0o644)
				writeFile(t, filepath.Join(f.home, ".config", "nvim", "init.lua"), "", 0o644)
				p.Expose = []string{filepath.Join(f.home, ".config")}
			},
			argv: []string{"true"},
			want: [][]string{
				{"--ro-bind", "{home}/.config", "{home}/.config"},
				{"--ro-bind", "{scratch}/empty.d", "{home}/.config/gh"},
			},
		},
		{
			name: "environment: named host variables, HOME, extras",
			setup: func(t *testing.T, f fixture, p *policy.Policy) {
				p.Env = []string{"PATH", "LANG", "SECRET_TOKEN", "UNSET_VAR"}
			},
			argv: []string{"true"},
			want: [][]string{
				{"--setenv", "PATH", "/usr/bin:/bin"},
				{"--setenv", "LANG", "C.UTF-8"},
				{"--setenv", "SECRET_TOKEN", "s3cr3t"},
			},
			notWant: [][]string{{"TERM"}, {"UNSET_VAR"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := &policy.Policy{Network: policy.NetOff, Env: []string{"PATH", "LANG"}}
			tt.setup(t, f, p)
			h := f.host()
			if tt.host != nil {
				tt.host(&h)
			}
			l, err := build(f.spec(p, tt.argv...), h, f.scratch, nil)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			for _, frag := range f.expand(tt.want) {
				if !hasSeq(l.argv, frag...) {
					t.Errorf("argv lacks %q\nargv: %q", frag, l.argv)
				}
			}
			for _, frag := range f.expand(tt.notWant) {
				for _, s := range l.argv {
					if strings.Contains(s, frag[0]) {
						t.Errorf("argv holds %q (in %q)", frag[0], s)
					}
				}
			}
			checkScratch(t, l, f.scratch)
		})
	}
}

// TestBuildEveryTmpfsSized: with tmp_size set, every tmpfs in the argv
// is either sized or made read-only (the guards' placeholders, the .git
// hooks directory here), whatever else the policy mounts.
func TestBuildEveryTmpfsSized(t *testing.T) {
	f := newFixture(t)
	mkdirs(t, filepath.Join(f.ws, ".git"), filepath.Join(f.root, "cache"))
	p := &policy.Policy{Network: policy.NetOff, Limits: policy.Limits{TmpSize: 4096},
		AllowPaths: []string{filepath.Join(f.root, "cache") + ":rw"}}
	l, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, arg := range l.argv {
		if arg != "--tmpfs" || i+1 >= len(l.argv) {
			continue
		}
		n++
		dst := l.argv[i+1]
		sized := i >= 4 && l.argv[i-4] == "--size" && l.argv[i-3] == "4096"
		readOnly := hasSeq(l.argv[i:], "--tmpfs", dst, "--remount-ro", dst)
		if !sized && !readOnly {
			t.Errorf("tmpfs %s is neither sized nor read-only\nargv: %q", dst, l.argv)
		}
	}
	if n < 4 {
		t.Errorf("%d tmpfs mounts, want /dev/shm, /tmp, HOME and a guard's\nargv: %q", n, l.argv)
	}
	// bwrap's /dev is a tmpfs too, one it cannot size.
	if !hasSeq(l.argv, "--remount-ro", "/dev") {
		t.Errorf("/dev stays writable\nargv: %q", l.argv)
	}
}

// checkScratch fails t unless every mount from scratch has its source
// among the launch's scratch files (or is its empty directory), and the
// launch has a scratch directory exactly when a mount needs one.
func checkScratch(t *testing.T, l *launch, scratch string) {
	t.Helper()
	used := false
	for i := 0; i+1 < len(l.argv); i++ {
		src := l.argv[i+1]
		if l.argv[i] != "--ro-bind" || !strings.HasPrefix(src, scratch+"/") {
			continue
		}
		used = true
		if _, ok := l.files[src]; !ok && src != l.emptyDir {
			t.Errorf("%s is mounted but not among the scratch files %v or the empty directory %q", src, l.files, l.emptyDir)
		}
	}
	want := ""
	if used {
		want = scratch
	}
	if l.scratch != want {
		t.Errorf("scratch directory %q, want %q (mounts from it: %v)", l.scratch, want, used)
	}
}

// The command is the last thing in the argv, after "--", with argv[0]
// resolved on the host.
func TestBuildCommandTail(t *testing.T) {
	f := newFixture(t)
	p := &policy.Policy{Network: policy.NetOff}
	l, err := build(f.spec(p, "sh", "-c", "echo hi"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	tail := l.argv[len(l.argv)-4:]
	if tail[0] != "--" || !slices.Equal(tail[2:], []string{"-c", "echo hi"}) {
		t.Fatalf("argv ends %q", tail)
	}
	if exe := tail[1]; !filepath.IsAbs(exe) || !strings.HasSuffix(exe, "/sh") && !strings.HasSuffix(exe, "dash") && !strings.HasSuffix(exe, "bash") {
		t.Fatalf("the command is not the host's sh: %q", l.argv)
	}
}

// TestBuildAuditDir: the audit log's directory is hidden where the box
// may only read it, and a run in which the box may write it, at any depth
// (the workspace, a read-write allow_path), is refused: a box that moved
// a directory above it away could plant a link there that has cordon, on
// the host, write into a file of the box's choosing.
func TestBuildAuditDir(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture, p *policy.Policy) // sets f.audit
		want  string                                           // the refusal; "" means masked
	}{
		{"in the workspace", func(t *testing.T, f *fixture, p *policy.Policy) {
			f.audit = filepath.Join(f.ws, "logs", "audit.jsonl")
		}, "refusing the audit log directory"},
		{"deep in the workspace", func(t *testing.T, f *fixture, p *policy.Policy) {
			f.audit = filepath.Join(f.ws, "var", "log", "audit.jsonl")
		}, "refusing the audit log directory"},
		{"relative, in the workspace", func(t *testing.T, f *fixture, p *policy.Policy) {
			t.Chdir(f.ws)
			f.audit = "var/log/audit.jsonl"
		}, "refusing the audit log directory"},
		{"under a read-write allow_path", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.AllowPaths = []string{filepath.Join(f.home, ".local") + ":rw"}
		}, "which the command may write"},
		{"named through a link into a read-write allow_path", func(t *testing.T, f *fixture, p *policy.Policy) {
			rw := filepath.Join(f.root, "rw")
			mkdirs(t, filepath.Join(rw, "state"))
			symlink(t, filepath.Join(rw, "state"), filepath.Join(f.root, "state-link"))
			f.audit = filepath.Join(f.root, "state-link", "cordon", "audit.jsonl")
			p.AllowPaths = []string{rw + ":rw"}
		}, "refusing the audit log directory"},
		{"under a read-only expose", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Expose = []string{filepath.Join(f.home, ".local")}
		}, ""},
		{"under a read-only allow_path", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.AllowPaths = []string{filepath.Join(f.home, ".local") + ":ro"}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := &policy.Policy{Network: policy.NetOff}
			tt.setup(t, &f, p)
			abs, _ := filepath.Abs(f.audit)
			mkdirs(t, filepath.Dir(abs))
			h := f.host()
			h.guard = newGuard([]string{f.home}, f.audit, "")
			l, err := build(f.spec(p, "true"), h, f.scratch, nil)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "point --audit or CORDON_AUDIT elsewhere") {
					t.Fatalf("build: %v, want a refusal saying %q and how to fix it", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !hasSeq(l.argv, "--ro-bind", f.scratch+"/empty.d", filepath.Dir(abs)) {
				t.Fatalf("the audit directory is not masked: %q", l.argv)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture, p *policy.Policy)
		want  string
	}{
		{"restricted without a holder", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Network = policy.NetRestricted
		}, "restricted is not available"},
		{"unknown network mode", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Network = "wide"
		}, `network mode "wide"`},
		{"expose ~/.ssh", func(t *testing.T, f *fixture, p *policy.Policy) {
			mkdirs(t, filepath.Join(f.home, ".ssh"))
			p.Expose = []string{filepath.Join(f.home, ".ssh")}
		}, "holds credentials"},
		{"expose a file inside ~/.aws", func(t *testing.T, f *fixture, p *policy.Policy) {
			writeFile(t, filepath.Join(f.home, ".aws", "config"), "", 0o644)
			p.Expose = []string{filepath.Join(f.home, ".aws", "config")}
		}, "holds credentials"},
		{"expose home", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Expose = []string{f.home}
		}, "refusing your home directory"},
		{"expose /", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Expose = []string{"/"}
		}, "contains your home directory"},
		{"allow path above home", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.AllowPaths = []string{f.root + ":rw"}
		}, "contains your home directory"},
		{"allow path is the audit directory", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.AllowPaths = []string{filepath.Dir(f.audit)}
		}, "audit log directory"},
		{"symlink to a protected directory", func(t *testing.T, f *fixture, p *policy.Policy) {
			mkdirs(t, filepath.Join(f.home, ".gnupg"))
			symlink(t, filepath.Join(f.home, ".gnupg"), filepath.Join(f.root, "innocent"))
			p.Expose = []string{filepath.Join(f.root, "innocent")}
		}, "holds credentials"},
		{"expose that does not exist", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.Expose = []string{filepath.Join(f.root, "nope")}
		}, "does not exist; create it, or drop the entry (expose: in the config)"},
		{"allow path that does not exist", func(t *testing.T, f *fixture, p *policy.Policy) {
			p.AllowPaths = []string{filepath.Join(f.root, "nope") + ":rw"}
		}, "nope does not exist; create it, or drop the entry (--allow-path, or allow_paths: in the config)"},
		{"workspace is home", func(t *testing.T, f *fixture, p *policy.Policy) {
			f.ws = f.home
		}, "refusing your home directory"},
		{"workspace is /", func(t *testing.T, f *fixture, p *policy.Policy) {
			f.ws = "/"
		}, "contains your home directory"},
		{"no command", func(t *testing.T, f *fixture, p *policy.Policy) {
		}, "no command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := &policy.Policy{Network: policy.NetOff}
			tt.setup(t, &f, p)
			argv := []string{"true"}
			if tt.name == "no command" {
				argv = nil
			}
			_, err := build(f.spec(p, argv...), f.host(), f.scratch, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			// The capability check's fix line is the error's own, where
			// it has one (a missing path's names where it is written).
			var fe interface{ Fix() string }
			if errors.As(err, &fe) && !strings.Contains(tt.want, fe.Fix()) {
				t.Errorf("fix %q, want the one the error gives", fe.Fix())
			}
		})
	}
}

func TestBuildProbe(t *testing.T) {
	f := newFixture(t)
	l, err := build(f.spec(&policy.Policy{Network: policy.NetOff}), f.host(), f.scratch, &probeMode{outside: "/x/outside"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.argv[l.sep:], []string{"--", selfPath, ProbeCommand, "5", "/x/outside"}) {
		t.Fatalf("probe argv: %q", l.argv)
	}
}

func TestBuildSystemEntries(t *testing.T) {
	f := newFixture(t)
	l, err := build(f.spec(&policy.Policy{Network: policy.NetOff}, "true"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range systemEntries {
		target, lerr := filepath.EvalSymlinks(e)
		switch {
		case lerr != nil:
			if slices.Contains(l.argv, e) {
				t.Errorf("%s does not exist on the host but is in the argv", e)
			}
		case target != e:
			if !slices.Contains(l.argv, e) || !hasSeq(l.argv, "--symlink") {
				t.Errorf("symlink %s is not recreated: %q", e, l.argv)
			}
		default:
			if !hasSeq(l.argv, "--ro-bind", e, e) {
				t.Errorf("directory %s is not bound read-only", e)
			}
		}
	}
}

// Files with the same contents share one scratch file; each is bound at
// its own path.
func TestBuildFilesShareScratch(t *testing.T) {
	f := newFixture(t)
	s := f.spec(&policy.Policy{Network: policy.NetOff}, "true")
	bundle := []byte("-----BEGIN CERTIFICATE-----\n")
	s.Files = map[string][]byte{
		"/run/cordon/ca-bundle.pem":          bundle,
		"/etc/ssl/certs/ca-certificates.crt": append([]byte{}, bundle...), // equal content
		"/etc/ssl/cert.pem":                  bundle,                      // the same slice
		"/etc/ssl/short.pem":                 bundle[:5],                  // the same first byte, other content
		"/etc/hosts":                         []byte("127.0.0.1 localhost\n"),
	}
	l, err := build(s, f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkScratch(t, l, f.scratch)
	srcs := map[string]string{}
	for i := 0; i+2 < len(l.argv); i++ {
		if l.argv[i] == "--ro-bind" && strings.HasPrefix(l.argv[i+1], f.scratch+"/file-") {
			srcs[l.argv[i+2]] = l.argv[i+1]
		}
	}
	if len(srcs) != 5 {
		t.Fatalf("binds of scratch files: %v", srcs)
	}
	b := srcs["/run/cordon/ca-bundle.pem"]
	if srcs["/etc/ssl/certs/ca-certificates.crt"] != b || srcs["/etc/ssl/cert.pem"] != b || srcs["/etc/hosts"] == b || srcs["/etc/ssl/short.pem"] == b {
		t.Fatalf("scratch files by destination: %v", srcs)
	}
	distinct := map[string]bool{}
	for _, src := range srcs {
		distinct[src] = true
	}
	if len(distinct) != 3 {
		t.Errorf("%d scratch files for %d destinations, want 3 (the bundle, its first five bytes, hosts)", len(distinct), len(srcs))
	}
	for dst, src := range srcs {
		if string(l.files[src]) != string(s.Files[dst]) {
			t.Errorf("%s would read %q, want %q", dst, l.files[src], s.Files[dst])
		}
	}
}

// A file shown in the box at its path (a credential's files: entry, its
// secrets as placeholders) is what the box reads there even inside an
// exposed tree that hides it (a default deny_read store, a file with a
// credential's name): before, the empty mask went over it, so the box
// read the store as empty in an exposed ~/.m2 and masked where ~/.m2 was
// not exposed. A directory that reads as empty, and a credential's source
// file, stay hidden.
func TestBuildShowsFilesOverMasks(t *testing.T) {
	f := newFixture(t)
	m2 := filepath.Join(f.home, ".m2")
	for _, name := range []string{"settings.xml", ".npmrc", "source.txt", "vault/settings.xml"} {
		writeFile(t, filepath.Join(m2, name), "real", 0o644)
	}
	p := &policy.Policy{Network: policy.NetOff, Expose: []string{m2},
		DenyRead:    []string{filepath.Join(m2, "settings.xml"), filepath.Join(m2, "vault")},
		Credentials: []policy.Credential{{Name: "c", Source: policy.Source{File: filepath.Join(m2, "source.txt")}}}}
	s := f.spec(p, "true")
	s.Files = map[string][]byte{}
	for _, name := range []string{"settings.xml", ".npmrc", "source.txt", "vault/settings.xml"} {
		s.Files[filepath.Join(m2, name)] = []byte("masked " + name)
	}
	l, err := build(s, f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	masked := func(dst string) bool {
		for i := 0; i+2 < len(l.argv); i++ {
			if l.argv[i] == "--ro-bind" && l.argv[i+2] == dst && (l.argv[i+1] == filepath.Join(f.scratch, "empty") || l.argv[i+1] == filepath.Join(f.scratch, "empty.d")) {
				return true
			}
		}
		return false
	}
	tests := []struct {
		path   string
		hidden bool
	}{
		{"settings.xml", false},
		{".npmrc", false},
		{"source.txt", true},
		{"vault", true},
	}
	for _, tt := range tests {
		if got := masked(filepath.Join(m2, tt.path)); got != tt.hidden {
			t.Errorf("%s masked: %v, want %v\n%q", tt.path, got, tt.hidden, l.argv)
		}
	}
}

// TestBuildShowsFilesWhereTheyLand: bwrap follows the links on the way
// to a file shown in the box (a credential's files:), so the file is
// mounted where they lead when the box sees them, and the watch of the
// box's mounts and the masks must know it there. Before, a link in an
// exposed tree to a file beside it had the mount land on that file while
// the watch looked at the link: the host's tool refreshing the file by
// rename took the mount away, and the box read the real key (observed
// with the real binary); and a link in the home (which the box has
// empty) to a file masked in an exposed tree dropped that mask, so the
// box read the real file there.
func TestBuildShowsFilesWhereTheyLand(t *testing.T) {
	tests := []struct {
		name   string
		links  map[string]string // in the home: link -> target
		files  []string          // shown, in the home
		bound  []string          // where a shown file is mounted
		masked []string
	}{
		{"a link in an exposed tree to a file beside it", map[string]string{"cfg/app.yml": "real/app.yml"},
			[]string{"cfg/app.yml"}, []string{"cfg/real/app.yml"}, nil},
		{"a link and the file it leads to, both listed", map[string]string{"cfg/app.yml": "real/app.yml"},
			[]string{"cfg/app.yml", "cfg/real/app.yml"}, []string{"cfg/real/app.yml"}, nil},
		{"a link in the home, which the box has empty, to a file masked in an exposed tree", map[string]string{".npmrc": "cfg/real/.npmrc"},
			[]string{".npmrc"}, []string{".npmrc"}, []string{"cfg/real/.npmrc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := filepath.Join(f.home, "cfg")
			for _, name := range []string{"real/app.yml", "real/.npmrc"} {
				writeFile(t, filepath.Join(cfg, name), "real key", 0o644)
			}
			for link, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(f.home, link)); err != nil {
					t.Fatal(err)
				}
			}
			s := f.spec(&policy.Policy{Network: policy.NetOff, Expose: []string{cfg}}, "true")
			s.Files = map[string][]byte{}
			for _, name := range tt.files {
				s.Files[filepath.Join(f.home, name)] = []byte("masked")
			}
			l, err := build(s, f.host(), f.scratch, nil)
			if err != nil {
				t.Fatal(err)
			}
			var bound, masked []string
			for i := 0; i+2 < len(l.argv); i++ {
				switch src := l.argv[i+1]; {
				case l.argv[i] != "--ro-bind":
				case strings.HasPrefix(src, filepath.Join(f.scratch, "file-")):
					bound = append(bound, strings.TrimPrefix(l.argv[i+2], f.home+"/"))
				case src == filepath.Join(f.scratch, "empty"):
					masked = append(masked, strings.TrimPrefix(l.argv[i+2], f.home+"/"))
				}
			}
			if !slices.Equal(bound, tt.bound) {
				t.Errorf("shown files mounted at %q, want %q", bound, tt.bound)
			}
			for _, m := range tt.masked {
				if !slices.Contains(masked, m) {
					t.Errorf("%s is not masked: %q", m, masked)
				}
			}
			over, err := overmounts(l.argv[1:l.sep])
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tt.bound {
				if in := filepath.Join(f.home, b); strings.HasPrefix(b, "cfg/") && !slices.ContainsFunc(over, func(o overmount) bool { return o.host == in }) {
					t.Errorf("%s, a mount over a file of the host's, is not watched: %v", in, over)
				}
			}
		})
	}
}

// TestBuildTooLongForBwrap: a launch bwrap would refuse for its length is
// refused by build, naming the part that made it long and how to shorten
// it; one word shorter builds. (integration's TestRunTooLongForBwrap
// checks the bound against the real bwrap.)
func TestBuildTooLongForBwrap(t *testing.T) {
	f := newFixture(t)
	p := &policy.Policy{Network: policy.NetOff}
	l, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	words := func(n int) []string {
		argv := []string{"true"}
		for i := range n {
			argv = append(argv, strconv.Itoa(i))
		}
		return argv
	}
	fit := bwrapMaxWords - bwrapWords(l.argv)
	if _, err := build(f.spec(p, words(fit)...), f.host(), f.scratch, nil); err != nil {
		t.Fatalf("%d words more: %v", fit, err)
	}
	_, err = build(f.spec(p, words(fit+1)...), f.host(), f.scratch, nil)
	var tl *tooLongError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "9001 words") || !strings.Contains(tl.Fix(), "xargs") {
		t.Fatalf("%d words more: err = %v, want a tooLongError for 9001 words whose fix is xargs", fit+1, err)
	}

	// A tree of 3,000 files named as credentials is 9,000 words of masks.
	tree := filepath.Join(f.root, "monorepo")
	for i := range 3000 {
		writeFile(t, filepath.Join(tree, "p"+strconv.Itoa(i), ".npmrc"), "", 0o644)
	}
	p.AllowPaths = []string{tree}
	_, err = build(f.spec(p, "true"), f.host(), f.scratch, nil)
	if !errors.As(err, &tl) || tl.masks != 3000 || tl.tree != tree || tl.treeMasks != 3000 ||
		!strings.Contains(err.Error(), "3000 of them in "+tree) || !strings.Contains(tl.Fix(), "deny_read") {
		t.Fatalf("a tree of 3000 credential files: err = %v, want a tooLongError naming %s and deny_read", err, tree)
	}
}
