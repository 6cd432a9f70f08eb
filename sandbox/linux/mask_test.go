//go:build linux

package linux

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestCredentialFiles(t *testing.T) {
	f := newFixture(t)
	tree := filepath.Join(f.root, "tree")
	for _, p := range []string{"a/.npmrc", "a/b/credentials", "c/.netrc", "c/.pypirc", "d/.git-credentials", "e/credentials.toml", "e/not-credentials", "f/readme"} {
		writeFile(t, filepath.Join(tree, p), "x", 0o644)
	}
	w := walker{limit: 100, deadline: time.Now().Add(time.Minute)}
	got, err := w.credentialFiles(tree)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(tree, p)
		rel = append(rel, r)
	}
	slices.Sort(rel)
	want := []string{"a/.npmrc", "a/b/credentials", "c/.netrc", "c/.pypirc", "d/.git-credentials", "e/credentials.toml"}
	if !slices.Equal(rel, want) {
		t.Fatalf("found %q, want %q", rel, want)
	}
}

// A unix socket in an exposed tree is hidden as a credential file is: a
// read-only mount does not stop a connection, and the user's tmux server
// there would run the box's commands on the host. One named itself is
// exposed.
func TestCredentialFilesSockets(t *testing.T) {
	f := newFixture(t)
	tree := filepath.Join(f.root, "runtime")
	writeFile(t, filepath.Join(tree, "readme"), "x", 0o644)
	if err := os.MkdirAll(filepath.Join(tree, "tmux-1000"), 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tree, "tmux-1000", "default")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w := walker{limit: 100, deadline: time.Now().Add(time.Minute)}
	got, err := w.credentialFiles(tree)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{sock}) {
		t.Fatalf("found %q, want the socket %s alone", got, sock)
	}
	// Named itself, a socket is exposed (a database's).
	if got, err := w.credentialFiles(sock); err != nil || len(got) != 0 {
		t.Fatalf("a socket named itself: found %q, %v; want it exposed", got, err)
	}
}

func TestCredentialFilesBound(t *testing.T) {
	f := newFixture(t)
	tree := filepath.Join(f.root, "big")
	for i := range 20 {
		writeFile(t, filepath.Join(tree, fmt.Sprint(i)), "", 0o644)
	}
	w := walker{limit: 10, deadline: time.Now().Add(time.Minute)}
	if _, err := w.credentialFiles(tree); !errors.Is(err, errWalkBound) {
		t.Fatalf("err = %v, want the walk bound", err)
	}
}

// TestBuildCredentialSources: every configured credential's source file
// that the box could see reads as empty there, wherever it is (in /etc,
// an exposed directory, a read-write allow_path, the workspace), named
// directly or through a link the box cannot replace; the directories
// above one in a tree the box may write are pinned before it is masked,
// so no rename takes it to a path the next run does not hide. What does
// not exist, or lies where the box sees nothing, is left out.
func TestBuildCredentialSources(t *testing.T) {
	tests := []struct {
		name string
		// setup creates files under the fixture and returns the
		// credentials' source files.
		setup   func(t *testing.T, f fixture, p *policy.Policy) []string
		want    [][]string // fragments that must appear
		notWant []string   // paths no argument may be
		// before: each pair's first fragment comes before its second.
		before [][2][]string
	}{
		{
			name: "a file in /etc",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				return []string{"/etc/passwd"}
			},
			want: [][]string{{"--ro-bind", "{scratch}/empty", "/etc/passwd"}},
		},
		{
			name: "a file in an exposed directory",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.root, "tools", "keys", "token"), "secret-1", 0o600)
				p.Expose = []string{filepath.Join(f.root, "tools")}
				return []string{filepath.Join(f.root, "tools", "keys", "token")}
			},
			want: [][]string{
				{"--ro-bind", "{root}/tools", "{root}/tools"},
				{"--ro-bind", "{scratch}/empty", "{root}/tools/keys/token"},
			},
			// The box cannot rename what it cannot write: no pin.
			notWant: []string{"{root}/tools/keys"},
		},
		// A bind inside a deny_read directory, as a project file may
		// narrow an expose or allow_paths entry to: hidden itself, where
		// it showed the file whole (red team, round 8).
		{
			name: "a file exposed inside a deny_read directory",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.root, "tools", "vault", "token"), "secret-3", 0o600)
				p.Expose = []string{filepath.Join(f.root, "tools", "vault", "token")}
				p.DenyRead = []string{filepath.Join(f.root, "tools", "vault")}
				return nil
			},
			want: [][]string{{"--ro-bind", "{scratch}/empty", "{root}/tools/vault/token"}},
			before: [][2][]string{
				{{"--ro-bind", "{root}/tools/vault/token", "{root}/tools/vault/token"}, {"--ro-bind", "{scratch}/empty", "{root}/tools/vault/token"}},
			},
		},
		{
			name: "a directory allowed read-write inside a deny_read directory",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.root, "tools", "vault", "sub", "token"), "secret-4", 0o600)
				p.AllowPaths = []string{filepath.Join(f.root, "tools", "vault", "sub") + ":rw"}
				p.DenyRead = []string{filepath.Join(f.root, "tools", "vault")}
				return nil
			},
			want: [][]string{{"--ro-bind", "{scratch}/empty.d", "{root}/tools/vault/sub"}},
			before: [][2][]string{
				{{"--bind", "{root}/tools/vault/sub", "{root}/tools/vault/sub"}, {"--ro-bind", "{scratch}/empty.d", "{root}/tools/vault/sub"}},
			},
		},
		{
			name: "a file deep in the workspace",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.ws, "secrets", "deep", "key"), "secret-2", 0o600)
				return []string{filepath.Join(f.ws, "secrets", "deep", "key")}
			},
			want: [][]string{
				{"--bind", "{ws}/secrets", "{ws}/secrets"},
				{"--bind", "{ws}/secrets/deep", "{ws}/secrets/deep"},
				{"--ro-bind", "{scratch}/empty", "{ws}/secrets/deep/key"},
			},
			before: [][2][]string{
				{{"--bind", "{ws}", "{ws}"}, {"--bind", "{ws}/secrets", "{ws}/secrets"}},
				{{"--bind", "{ws}/secrets", "{ws}/secrets"}, {"--bind", "{ws}/secrets/deep", "{ws}/secrets/deep"}},
				{{"--bind", "{ws}/secrets/deep", "{ws}/secrets/deep"}, {"--ro-bind", "{scratch}/empty", "{ws}/secrets/deep/key"}},
			},
		},
		{
			name: "a file in a read-write allow_path, under an exposed directory nested in it",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.root, "cache", "a", "ro", "b", "key"), "secret-3", 0o600)
				p.AllowPaths = []string{filepath.Join(f.root, "cache") + ":rw"}
				p.Expose = []string{filepath.Join(f.root, "cache", "a", "ro")}
				return []string{filepath.Join(f.root, "cache", "a", "ro", "b", "key")}
			},
			want: [][]string{
				// The directory above the exposed one is pinned, and
				// before it is bound, which would otherwise be covered.
				{"--bind", "{root}/cache/a", "{root}/cache/a"},
				{"--ro-bind", "{scratch}/empty", "{root}/cache/a/ro/b/key"},
			},
			notWant: []string{"{root}/cache/a/ro/b"},
			before: [][2][]string{
				{{"--bind", "{root}/cache", "{root}/cache"}, {"--bind", "{root}/cache/a", "{root}/cache/a"}},
				{{"--bind", "{root}/cache/a", "{root}/cache/a"}, {"--ro-bind", "{root}/cache/a/ro", "{root}/cache/a/ro"}},
			},
		},
		{
			name: "named through links outside what the box may write",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.ws, "real-key"), "secret-4", 0o600)
				symlink(t, filepath.Join(f.ws, "real-key"), filepath.Join(f.home, "key-link"))
				mkdirs(t, filepath.Join(f.root, "tools"))
				symlink(t, "/etc/passwd", filepath.Join(f.root, "tools", "passwd-link"))
				p.Expose = []string{filepath.Join(f.root, "tools")}
				return []string{filepath.Join(f.home, "key-link"), filepath.Join(f.root, "tools", "passwd-link")}
			},
			want: [][]string{
				{"--ro-bind", "{scratch}/empty", "{ws}/real-key"},
				{"--ro-bind", "{scratch}/empty", "/etc/passwd"},
			},
			notWant: []string{"{home}/key-link", "{root}/tools/passwd-link"},
		},
		{
			name: "missing, out of sight, or a directory",
			setup: func(t *testing.T, f fixture, p *policy.Policy) []string {
				writeFile(t, filepath.Join(f.home, ".secret", "key"), "secret-5", 0o600)
				mkdirs(t, filepath.Join(f.ws, "a-dir"))
				return []string{
					filepath.Join(f.ws, "missing", "key"),
					filepath.Join(f.root, "nowhere"),
					filepath.Join(f.home, ".secret", "key"), // the home is an empty tmpfs
					filepath.Join(f.ws, "a-dir"),
				}
			},
			notWant: []string{"{ws}/missing", "{ws}/missing/key", "{root}/nowhere", "{home}/.secret", "{home}/.secret/key", "{ws}/a-dir"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := &policy.Policy{Network: policy.NetOff, Env: []string{"PATH"}}
			for i, src := range tt.setup(t, f, p) {
				// The sandbox hides them all, selected for the run or not:
				// it is not told which are.
				p.Credentials = append(p.Credentials, policy.Credential{Name: fmt.Sprint("c", i), Source: policy.Source{File: src}})
			}
			l, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			for _, frag := range f.expand(tt.want) {
				if !hasSeq(l.argv, frag...) {
					t.Errorf("argv lacks %q\nargv: %q", frag, l.argv)
				}
			}
			for _, s := range f.expand([][]string{tt.notWant})[0] {
				if slices.Contains(l.argv, s) {
					t.Errorf("argv holds %q\nargv: %q", s, l.argv)
				}
			}
			for _, pair := range tt.before {
				e := f.expand(pair[:])
				if i, j := seqIndex(l.argv, e[0]...), seqIndex(l.argv, e[1]...); i < 0 || j < 0 || i > j {
					t.Errorf("%q (at %d) does not come before %q (at %d)\nargv: %q", e[0], i, e[1], j, l.argv)
				}
			}
			checkScratch(t, l, f.scratch)
		})
	}
}

// seqIndex is where frag first appears contiguously in argv, or -1.
func seqIndex(argv []string, frag ...string) int {
	for i := 0; i+len(frag) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(frag)], frag) {
			return i
		}
	}
	return -1
}

// A source file reached through a link the box could replace is refused:
// the next run would hide whatever the link then named, and no longer the
// file.
func TestBuildCredentialSourceLinkRefused(t *testing.T) {
	for _, tc := range []struct{ name, link string }{
		{"the file's own link", "{ws}/key-link"},
		{"a directory's link", "{ws}/dir-link/key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			writeFile(t, filepath.Join(f.root, "tools", "key"), "secret", 0o600)
			symlink(t, filepath.Join(f.root, "tools", "key"), filepath.Join(f.ws, "key-link"))
			symlink(t, filepath.Join(f.root, "tools"), filepath.Join(f.ws, "dir-link"))
			src := f.expand([][]string{{tc.link}})[0][0]
			p := &policy.Policy{Network: policy.NetOff, Expose: []string{filepath.Join(f.root, "tools")},
				Credentials: []policy.Credential{{Name: "provider", Source: policy.Source{File: src}}}}
			_, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
			if err == nil || !strings.Contains(err.Error(), `credential "provider"`) || !strings.Contains(err.Error(), "symbolic link the command could replace") {
				t.Fatalf("err = %v, want the link refused", err)
			}
		})
	}
}

// A credential's source file with a second name the box sees (a hard link
// in the workspace, or in an exposed tree) is refused: the box is shown an
// empty file at the source's path, and would read the secret whole
// through the other name. A second name out of the box's sight is no
// concern.
func TestBuildCredentialSourceHardLinkRefused(t *testing.T) {
	for _, tc := range []struct {
		name, link string
		refused    bool
	}{
		{"in the workspace", "{ws}/notes.txt", true},
		{"in an exposed tree", "{root}/tools/share/k", true},
		{"out of sight", "{root}/elsewhere/k", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			src := filepath.Join(f.root, "keys", "provider.key")
			writeFile(t, src, "secret", 0o600)
			mkdirs(t, filepath.Join(f.root, "tools", "share"), filepath.Join(f.root, "elsewhere"))
			link := strings.NewReplacer("{ws}", f.ws, "{root}", f.root).Replace(tc.link)
			if err := os.Link(src, link); err != nil {
				t.Fatal(err)
			}
			p := &policy.Policy{Network: policy.NetOff, Expose: []string{filepath.Join(f.root, "tools")},
				Credentials: []policy.Credential{{Name: "provider", Source: policy.Source{File: src}}}}
			_, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
			switch {
			case !tc.refused && err != nil:
				t.Fatalf("a second name out of the box's sight: %v", err)
			case tc.refused && (err == nil || !strings.Contains(err.Error(), link+" is a hard link of "+src) || !strings.Contains(err.Error(), "read the secret")):
				t.Fatalf("err = %v, want %s refused as a hard link of %s", err, link, src)
			}
		})
	}
}

// TestRefuseHiddenLinks: a file hidden from the box (a deny_read file, one
// in a deny_read directory, a credential's files: entry, shown masked)
// with a second name, a hard link, in a tree the box sees is refused,
// naming both; one in a tree it does not see, or with no other name,
// is not.
func TestRefuseHiddenLinks(t *testing.T) {
	ws, home, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	binds := []bind{{path: ws, write: true}}
	npmrc := filepath.Join(home, ".npmrc")
	key := filepath.Join(ws, "secrets", "prod.key")
	if err := os.Mkdir(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{npmrc, key} {
		if err := os.WriteFile(f, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		deny   []string
		files  map[string][]byte
		target string
	}{
		{name: "deny_read file", deny: []string{key}, target: key},
		{name: "deny_read directory", deny: []string{filepath.Dir(key)}, target: key},
		{name: "credential files:", files: map[string][]byte{npmrc: nil}, target: npmrc},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &policy.Policy{DenyRead: c.deny}
			if err := refuseHiddenLinks(p, ws, c.files, binds, &sandbox.Resolver{}); err != nil {
				t.Fatalf("with no other name: %v", err)
			}
			unseen := filepath.Join(elsewhere, "hl")
			if err := os.Link(c.target, unseen); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(unseen)
			if err := refuseHiddenLinks(p, ws, c.files, binds, &sandbox.Resolver{}); err != nil {
				t.Fatalf("with another name the box does not see: %v", err)
			}
			link := filepath.Join(ws, "hl")
			if err := os.Link(c.target, link); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(link)
			if err := refuseHiddenLinks(p, ws, c.files, binds, &sandbox.Resolver{}); err == nil || !strings.Contains(err.Error(), link+" is a hard link of "+c.target) {
				t.Errorf("with another name in the workspace: %v; want a refusal naming both", err)
			}
		})
	}
}

// The host's listening sockets below a bind are found in /proc/net/unix's
// table (the workspace is not searched for them), at their real paths
// (one was bound through a link to the workspace): not one that does not
// listen, is bound by a relative or abstract name, is no longer a socket
// at its path, lies outside every bind, or is a bind itself.
func TestListeningSockets(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	listen := func(name string) string {
		p := filepath.Join(ws, name)
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return p
	}
	db, spaced, named := listen("db.sock"), listen("with space.sock"), listen("named.sock")
	idle := filepath.Join(ws, "idle.sock")
	writeFile(t, idle, "", 0o644)
	gone := filepath.Join(ws, "gone.sock")
	writeFile(t, gone, "now a file", 0o644)
	outside := filepath.Join(t.TempDir(), "outside.sock")
	row := func(flags, path string) string {
		return "0000000000000000: 00000002 00000000 " + flags + " 0001 01  1530 " + path + "\n"
	}
	table := filepath.Join(t.TempDir(), "unix")
	writeFile(t, table, "Num       RefCount Protocol Flags    Type St Inode Path\n"+
		row("00010000", filepath.Join(link, "db.sock"))+row("00010000", spaced)+row("00010000", named)+row("00000000", idle)+
		row("00010000", gone)+row("00010000", outside)+row("00010000", "db.sock")+row("00010000", "@abstract")+
		"0000000000000000: 00000003 00000000 00000000 0001 03  1531\n", 0o644)
	got := listeningSockets(table, []bind{{path: ws, write: true}, {path: named}})
	if want := []string{db, spaced}; !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
}

// TestBuildWorkspaceInADenyReadDirectory: a workspace inside a deny_read
// directory is shown, and so is an allow_paths entry inside it: hiding
// every bind inside a hidden path, as one a project file narrowed into a
// deny_read directory now is, hid that entry too (red team, round 8,
// third look).
func TestBuildWorkspaceInADenyReadDirectory(t *testing.T) {
	f := newFixture(t)
	writeFile(t, filepath.Join(f.ws, "docs", "readme"), "hello", 0o644)
	p := &policy.Policy{Network: policy.NetOff, Env: []string{"PATH"},
		DenyRead: []string{filepath.Dir(f.ws)}, AllowPaths: []string{filepath.Join(f.ws, "docs")}}
	l, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	for _, target := range []string{f.ws, filepath.Join(f.ws, "docs")} {
		for _, src := range []string{filepath.Join(f.scratch, "empty"), filepath.Join(f.scratch, "empty.d")} {
			if hasSeq(l.argv, "--ro-bind", src, target) {
				t.Errorf("%s is hidden\nargv: %q", target, l.argv)
			}
		}
	}
}
