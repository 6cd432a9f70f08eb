package darwin

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sb from the renderer")

// alice is the Mac the golden profiles are rendered for.
var alice = Machine{
	Home:      "/Users/alice",
	Xcode:     "/Applications/Xcode.app",
	Protected: []string{"/Users/alice/.local/state/cordon"},
	Terminals: []string{"/dev/ttys003"},
}

// spec is a session in alice's project with a per-session TMPDIR.
func spec(p *policy.Policy) *sandbox.Spec {
	return &sandbox.Spec{
		Policy:    p,
		Argv:      []string{"claude"},
		Workspace: "/Users/alice/src/app",
		Workdir:   "/Users/alice/src/app/web",
		Env:       []string{"PATH=/usr/bin:/bin", "TMPDIR=/var/folders/xy/abc123/T/cordon-5f2e"},
	}
}

func TestGoldenProfiles(t *testing.T) {
	restricted := spec(&policy.Policy{Network: policy.NetRestricted})
	restricted.Network = &sandbox.Network{ProxyURL: "http://cordon:token@127.0.0.1:41234", ProxyPort: 41234}

	odd := spec(&policy.Policy{
		Network: policy.NetOff,
		Expose: []string{
			"/Volumes/Tools Disk/bin",
			`/opt/say "hi"/bin`,
			`/opt/back\slash`,
			"/opt/café/日本語",
		},
		DenyRead: []string{"~/src/app/secret \"keys\""},
	})
	odd.Workspace, odd.Workdir = "/Users/alice/My Projects/app (2)", ""

	aliased := spec(&policy.Policy{Network: policy.NetOff, Expose: []string{"/opt/tools"}})
	aliasedMachine := alice
	aliasedMachine.RealPaths = map[string]string{
		"/Users/alice/src/app": "/Volumes/Work/app",
		"/opt/tools":           "/opt/homebrew/Cellar/tools/1.2",
		"/Users/alice/.aws":    "/Volumes/Keys/aws",
	}

	withRepo := alice
	g := "/Users/alice/src/app/.git"
	withRepo.Guarded = []sandbox.GuardedPath{
		{Path: g, Guard: sandbox.Pinned, Dir: true},
		{Path: g + "/config", Guard: sandbox.ReadOnly},
		{Path: g + "/hooks", Guard: sandbox.ReadOnly, Dir: true},
		{Path: g + "/modules/lib", Guard: sandbox.Pinned, Dir: true},
		{Path: g + "/modules/lib/config", Guard: sandbox.AbsentFile},
		{Path: g + "/modules/lib/hooks", Guard: sandbox.AbsentDir, Dir: true},
		{Path: "/Users/alice/src/app/.vscode", Guard: sandbox.ReadOnly, Dir: true},
		{Path: "/Users/alice/src/app/.github", Guard: sandbox.Pinned, Dir: true},
		{Path: "/Users/alice/src/app/.github/workflows", Guard: sandbox.ReadOnly, Dir: true},
		{Path: "/Users/alice/src/app/Makefile", Guard: sandbox.ReadOnly},
	}

	// Guards with no pinned directory: cordon's binary and a read_only
	// file at the workspace's root, in a workspace that is no repository.
	rootGuards := alice
	rootGuards.Guarded = []sandbox.GuardedPath{
		{Path: "/Users/alice/src/app/Makefile", Guard: sandbox.ReadOnly},
		{Path: "/Users/alice/src/app/cordon", Guard: sandbox.ReadOnly},
	}

	cases := []struct {
		name string
		s    *sandbox.Spec
		m    Machine
	}{
		{"net-off", spec(&policy.Policy{Network: policy.NetOff}), alice},
		{"net-open", spec(&policy.Policy{Network: policy.NetOpen}), alice},
		{"net-restricted", restricted, alice},
		{"deny-read", spec(&policy.Policy{
			Network:     policy.NetOff,
			DenyRead:    []string{"~/.netrc", "/Users/alice/src/app/.env", "/Users/alice/src/app/config/secrets/db.key"},
			Credentials: []policy.Credential{{Name: "openai", Source: policy.Source{File: "~/secrets/openai"}}},
		}), alice},
		{"expose", spec(&policy.Policy{
			Network:    policy.NetOff,
			Expose:     []string{"/opt/homebrew", "~/.rustup", "/usr/local"},
			AllowPaths: []string{"~/.cache/go-build:rw", "/Users/alice/notes:ro"},
		}), alice},
		{"odd-paths", odd, alice},
		{"aliases", aliased, aliasedMachine},
		{"no-xcode", spec(&policy.Policy{Network: policy.NetOff}), Machine{Home: "/Users/alice"}},
		{"repository", spec(&policy.Policy{Network: policy.NetOff}), withRepo},
		{"root-guards", spec(&policy.Policy{Network: policy.NetOff}), rootGuards},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.s, tc.m)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if _, err := checkProfile(got); err != nil {
				t.Fatalf("rendered profile does not read back: %v\n%s", err, got)
			}
			golden := filepath.Join("testdata", tc.name+".sb")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden %s: %v (run go test ./sandbox/darwin -update to create it)", golden, err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s (run go test ./sandbox/darwin -update and review the diff)\n%s", golden, got)
			}
		})
	}
}

// TestRenderIsPure renders twice, with the Machine's paths absent from this
// computer, and gets the same text: nothing is read from disk.
func TestRenderIsPure(t *testing.T) {
	s := spec(&policy.Policy{Network: policy.NetOff, Expose: []string{"/nonexistent/tools"}})
	a, err := Render(s, alice)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(s, alice)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two renders of the same input differ")
	}
}

func TestRenderSemantics(t *testing.T) {
	s := spec(&policy.Policy{
		Network:    policy.NetOff,
		Expose:     []string{"/Users/alice/Library", "/usr/local/go", "~/.cargo"},
		AllowPaths: []string{"/Users/alice/.config:rw"},
		DenyRead:   []string{"/Users/alice/src/app/.env"},
	})
	l, err := newLayout(s, alice, alice.names)
	if err != nil {
		t.Fatal(err)
	}
	checkDecisions(t, l.rules(), []decision{
		{"file-read-data", "/Users/alice/src/app/main.go", true},
		{"file-write-data", "/Users/alice/src/app/main.go", true},
		{"file-write-create", "/private/var/folders/xy/abc123/T/cordon-5f2e/x", true},
		{"file-read-data", "/Users/alice/src/app/.env", false},
		{"file-write-data", "/Users/alice/src/app/.env", false},
		// The directories the command writes stay where they are: renamed
		// (into TMPDIR, and back), the workspace took .env and its git
		// repository to names no rule denies. What is in them does not.
		{"file-write-unlink", "/Users/alice/src/app", false},
		{"file-write-unlink", "/private/var/folders/xy/abc123/T/cordon-5f2e", false},
		{"file-write-unlink", "/Users/alice/.config", false},
		{"file-write-unlink", "/Users/alice/src/app/web", true},
		{"file-write-unlink", "/Users/alice/.config/git", true},
		{"file-read-data", "/usr/bin/git", true},
		{"file-write-data", "/usr/bin/git", false},
		{"file-read-data", "/usr/local/bin/brew", false},
		{"file-read-data", "/usr/local/go/bin/go", true},
		{"file-read-data", "/System/Volumes/Data/Users/alice/src/app/main.go", false},
		{"file-read-data", "/Users/alice/Library/Fonts/a.ttf", true},
		{"file-write-data", "/Users/alice/Library/Fonts/a.ttf", false},
		{"file-read-data", "/Users/alice/Library/Keychains/login.keychain-db", false},
		{"file-read-data", "/Users/alice/.config/git/config", true},
		// Files named as credentials in an exposed tree, as Linux masks
		// them; the workspace's own are the project's.
		{"file-read-data", "/Users/alice/.cargo/credentials.toml", false},
		{"file-read-data", "/Users/alice/.cargo/registry/.npmrc", false},
		{"file-read-data", "/Users/alice/.cargo/CREDENTIALS.Toml", false},
		{"file-read-data", "/Users/alice/.cargo/config.toml", true},
		{"file-read-data", "/Users/alice/.config/pip/.pypirc", false},
		{"file-write-create", "/Users/alice/.config/git/credentials", false},
		{"file-write-data", "/Users/alice/.config/git/credentials-helper", true},
		{"file-read-data", "/usr/local/go/.netrc", false},
		{"file-read-data", "/Users/alice/src/app/.npmrc", true},
		{"file-read-data", "/Users/alice/.config/gh/hosts.yml", false},
		{"file-write-data", "/Users/alice/.config/cordon/config.yaml", false},
		{"file-read-data", "/Users/alice/.ssh/id_ed25519", false},
		{"file-read-data", "/Users/alice/.local/state/cordon/audit.jsonl", false},
		{"file-read-data", "/Users/alice/Documents/taxes.pdf", false},
		{"file-read-metadata", "/Users/alice", true},
		{"file-read-data", "/Users/alice", false},
		{"file-read-metadata", "/var", true},
		{"file-read-data", "/private/tmp/x", false},
		{"file-write-data", "/dev/null", true},
		{"file-read-data", "/dev/tty", false},
		{"file-read-data", "/Applications/Xcode.app/Contents/Developer/usr/bin/xcodebuild", true},
		{"file-read-data", "/Applications/Safari.app/Contents/Info.plist", false},
	})
}

// TestRenderTerminals: the command writes to the terminals it inherits and
// to no other: a rule reaching every /dev/ttysN let it write escape
// sequences (OSC 52 sets the clipboard) and ioctls to the user's other
// terminals.
func TestRenderTerminals(t *testing.T) {
	for _, m := range []Machine{alice, {Home: "/Users/alice"}} {
		text, err := Render(spec(&policy.Policy{Network: policy.NetOff}), m)
		if err != nil {
			t.Fatal(err)
		}
		forms, err := checkProfile(text)
		if err != nil {
			t.Fatal(err)
		}
		var ttys []string
		for _, op := range []string{"file-write-data", "file-ioctl"} {
			for _, p := range pathLiterals(forms, "allow", op) {
				if strings.HasPrefix(p, "/dev/tty") {
					ttys = append(ttys, p)
				}
			}
		}
		want := slices.Concat(m.Terminals, m.Terminals)
		if strings.Contains(text, `#"^/dev/tty`) || !slices.Equal(ttys, want) {
			t.Errorf("terminals %q: the profile lets the command write to %q, and a regex? %v; want %q alone", m.Terminals, ttys, strings.Contains(text, `#"^/dev/tty`), want)
		}
	}
}

// TestNameRegex: the rendered regex, read as Go reads it, matches a
// credential file's name in any case, as APFS opens it, and no other name.
func TestNameRegex(t *testing.T) {
	re := regexp.MustCompile(nameRegex(sandbox.CredentialFiles))
	for p, want := range map[string]bool{
		"/opt/x/.npmrc":             true,
		"/opt/x/.NPMRC":             true,
		"/opt/x/Credentials.TOML":   true,
		"/opt/x/credentials":        true,
		"/opt/x/.Git-Credentials":   true,
		"/opt/x/credentials.toml.d": false,
		"/opt/x/xnpmrc":             false,
		"/opt/x/my.netrc":           false,
		"/opt/.npmrc/x":             false,
	} {
		if got := re.MatchString(p); got != want {
			t.Errorf("%s matches %s: %v, want %v", nameRegex(sandbox.CredentialFiles), p, got, want)
		}
	}
}

// TestNamedStayPut: the directories between a read-write allow_path and a
// file named as credentials in it are not renamed: renamed into the
// workspace, one took its .npmrc where no rule denies it.
func TestNamedStayPut(t *testing.T) {
	m := alice
	m.Named = []string{"/Users/alice/.config/x/y/.npmrc"}
	l, err := newLayout(spec(&policy.Policy{Network: policy.NetOff, AllowPaths: []string{"~/.config:rw"}}), m, m.names)
	if err != nil {
		t.Fatal(err)
	}
	checkDecisions(t, l.rules(), []decision{
		{"file-write-unlink", "/Users/alice/.config/x", false},
		{"file-write-unlink", "/Users/alice/.config/x/y", false},
		{"file-write-unlink", "/Users/alice/.config/x/z", true},
		{"file-read-data", "/Users/alice/.config/x/y/.npmrc", false},
	})
}

// TestProtectedStayPut: the directories between a read-write allow_path
// and a protected path in it (the audit log's, cordon's data) are not
// renamed: renamed, ~/.local/state took the audit log to a name no rule
// denies, to be read and rewritten.
func TestProtectedStayPut(t *testing.T) {
	l, err := newLayout(spec(&policy.Policy{Network: policy.NetOff, AllowPaths: []string{"~/.local:rw"}}), alice, alice.names)
	if err != nil {
		t.Fatal(err)
	}
	checkDecisions(t, l.rules(), []decision{
		{"file-write-unlink", "/Users/alice/.local/state", false},
		{"file-write-unlink", "/Users/alice/.local/share", false},
		{"file-write-unlink", "/Users/alice/.local/state/cordon", false},
		{"file-write-unlink", "/Users/alice/.local/bin", true},
		{"file-write-unlink", "/Users/alice/.local/share/fonts", true},
		{"file-read-data", "/Users/alice/.local/state/cordon/audit.jsonl", false},
	})
}

// TestTrustdNeedsANetwork: trustd fetches what a certificate chain names
// over the network, for whoever shows it one, so a box with the network
// off may not look it up; the other modes verify TLS through it.
func TestTrustdNeedsANetwork(t *testing.T) {
	restricted := spec(&policy.Policy{Network: policy.NetRestricted})
	restricted.Network = &sandbox.Network{ProxyPort: 8877}
	for _, tc := range []struct {
		s    *sandbox.Spec
		want bool
	}{
		{spec(&policy.Policy{Network: policy.NetOff}), false},
		{spec(&policy.Policy{}), false},
		{restricted, true},
		{spec(&policy.Policy{Network: policy.NetOpen}), true},
	} {
		text, err := Render(tc.s, alice)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(text, `(global-name "com.apple.trustd.agent")`); got != tc.want {
			t.Errorf("network %q: trustd looked up: %v, want %v", tc.s.Policy.Network, got, tc.want)
		}
	}
}

// TestHostPortsStayUnset: mach-host* is Seatbelt's name for exactly two
// operations, setting the host's special ports and its exception ports
// (what receives every process's crash, with its task port). The
// profile allowed both, under a comment naming host_processor_info,
// which no Seatbelt operation mediates; Apple's own profiles deny them.
func TestHostPortsStayUnset(t *testing.T) {
	restricted := spec(&policy.Policy{Network: policy.NetRestricted})
	restricted.Network = &sandbox.Network{ProxyPort: 8877}
	for _, s := range []*sandbox.Spec{spec(&policy.Policy{}), restricted, spec(&policy.Policy{Network: policy.NetOpen})} {
		l, err := newLayout(s, alice, alice.names)
		if err != nil {
			t.Fatal(err)
		}
		checkDecisions(t, l.rules(), []decision{
			{"mach-host-special-port-set", "", false},
			{"mach-host-exception-port-set", "", false},
		})
	}
}

func TestRenderNetwork(t *testing.T) {
	open := spec(&policy.Policy{Network: policy.NetOpen})
	restricted := spec(&policy.Policy{Network: policy.NetRestricted})
	restricted.Network = &sandbox.Network{ProxyPort: 8877}
	off := spec(&policy.Policy{})
	cases := []struct {
		name string
		s    *sandbox.Spec
		want []string // network-outbound filters, as written
	}{
		{"off (the empty mode)", off, nil},
		{"open", open, []string{`(remote ip "*:*")`, `(literal "/private/var/run/mDNSResponder")`}},
		// TCP to the proxy only: "remote ip" let a datagram go to whoever
		// bound the proxy's port number in UDP, any local user.
		{"restricted", restricted, []string{`(remote tcp "localhost:8877")`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, err := Render(tc.s, alice)
			if err != nil {
				t.Fatal(err)
			}
			forms, err := checkProfile(text)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range forms[1:] {
				if f.list[1].atom != "network-outbound" {
					continue
				}
				if f.list[0].atom != "allow" {
					t.Errorf("unexpected network rule %s", f)
				}
				for _, c := range f.list[2:] {
					got = append(got, c.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("network-outbound filters = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDenialsComeLast checks the order Seatbelt's precedence depends on:
// every deny of a path after every allow of one.
func TestDenialsComeLast(t *testing.T) {
	s := spec(&policy.Policy{Network: policy.NetOff, Expose: []string{"/opt/x"}, DenyRead: []string{"/opt/x/y"}})
	text, err := Render(s, alice)
	if err != nil {
		t.Fatal(err)
	}
	forms, err := checkProfile(text)
	if err != nil {
		t.Fatal(err)
	}
	lastAllow, firstUserDeny := -1, -1
	for i, f := range forms {
		if i == 0 {
			continue
		}
		switch {
		case f.list[0].atom == "allow" && strings.HasPrefix(f.list[1].atom, "file-"):
			lastAllow = i
		case f.list[0].atom == "deny" && firstUserDeny < 0 && slices.Contains(pathLiterals([]node{forms[0], f}, "deny", "file-write*"), "/opt/x/y"):
			firstUserDeny = i
		}
	}
	if firstUserDeny < 0 || firstUserDeny < lastAllow {
		t.Fatalf("deny_read rule at form %d, last file allow at %d: denials must come last\n%s", firstUserDeny, lastAllow, text)
	}
	last := forms[len(forms)-1]
	if !slices.Contains(pathLiterals([]node{forms[0], last}, "deny", "file-read*"), "/Users/alice/.ssh") {
		t.Fatalf("the last rule is %s, not the protected paths", last)
	}
}

func TestRenderRefuses(t *testing.T) {
	withPolicy := func(p policy.Policy) *sandbox.Spec { return spec(&p) }
	withSpec := func(f func(*sandbox.Spec)) *sandbox.Spec {
		s := spec(&policy.Policy{Network: policy.NetOff})
		f(s)
		return s
	}
	// $HOME set elsewhere (a wrapper's, a tool's): the user's own home
	// stays the user's.
	otherHome := Machine{Home: "/private/tmp/h", OtherHomes: []string{"/Users/alice"}}
	aliasMachine := alice
	aliasMachine.RealPaths = map[string]string{"/opt/keys": "/Users/alice/.ssh"}
	cases := []struct {
		name string
		s    *sandbox.Spec
		m    Machine
		want string
	}{
		{"expose ~/.ssh", withPolicy(policy.Policy{Expose: []string{"~/.ssh"}}), alice,
			"expose /Users/alice/.ssh: refusing /Users/alice/.ssh, which cordon protects"},
		{"expose inside ~/.aws", withPolicy(policy.Policy{Expose: []string{"/Users/alice/.aws/config"}}), alice,
			"refusing /Users/alice/.aws"},
		{"expose ~/.SSH in another case", withPolicy(policy.Policy{Expose: []string{"~/.SSH/config"}}), alice,
			"refusing /Users/alice/.ssh"},
		{"expose the audit trail", withPolicy(policy.Policy{Expose: []string{"~/.local/state/cordon"}}), alice,
			"refusing /Users/alice/.local/state/cordon"},
		{"expose the keychain", withPolicy(policy.Policy{Expose: []string{"~/Library/Keychains"}}), alice,
			"refusing /Users/alice/Library/Keychains"},
		{"expose a link into ~/.ssh", withPolicy(policy.Policy{Expose: []string{"/opt/keys"}}), aliasMachine,
			"refusing /Users/alice/.ssh"},
		{"allow_paths ~/.kube:rw", withPolicy(policy.Policy{AllowPaths: []string{"~/.kube:rw"}}), alice,
			"allow_paths /Users/alice/.kube: refusing"},
		{"allow_paths bad suffix", withPolicy(policy.Policy{AllowPaths: []string{"/opt/x:rx"}}), alice,
			`suffix ":rx" is not :rw or :ro`},
		{"expose home", withPolicy(policy.Policy{Expose: []string{"~"}}), alice,
			"is or contains your home directory"},
		{"expose /", withPolicy(policy.Policy{Expose: []string{"/"}}), alice,
			"is or contains your home directory"},
		{"expose ~bob", withPolicy(policy.Policy{Expose: []string{"~bob/tools"}}), alice,
			`path "~bob/tools" is not absolute`},
		{"expose relative", withPolicy(policy.Policy{Expose: []string{"tools"}}), alice,
			`path "tools" is not absolute`},
		{"control character", withPolicy(policy.Policy{Expose: []string{"/opt/a\nb"}}), alice,
			"control character U+000A"},
		{"invalid UTF-8", withPolicy(policy.Policy{Expose: []string{"/opt/\xff"}}), alice,
			"not valid UTF-8"},
		{"NUL byte", withPolicy(policy.Policy{DenyRead: []string{"/opt/a\x00b"}}), alice,
			"NUL byte"},
		{"too long", withPolicy(policy.Policy{Expose: []string{"/" + strings.Repeat("a", maxPath)}}), alice,
			"longer than macOS's PATH_MAX"},
		{"unknown network mode", withPolicy(policy.Policy{Network: "sometimes"}), alice,
			`network: "sometimes" is not one of off, restricted, open`},
		{"restricted without a proxy", withPolicy(policy.Policy{Network: policy.NetRestricted}), alice,
			"gave no proxy port"},
		{"no policy", withSpec(func(s *sandbox.Spec) { s.Policy = nil }), alice, "no policy given"},
		{"no home", spec(&policy.Policy{}), Machine{}, "home directory \"\" is not an absolute path"},
		{"no TMPDIR", withSpec(func(s *sandbox.Spec) { s.Env = []string{"PATH=/bin"} }), alice,
			"has no TMPDIR"},
		{"allow_paths /tmp:rw", withPolicy(policy.Policy{AllowPaths: []string{"/tmp:rw"}}), alice,
			"allow_paths /tmp: refusing a directory that is or contains /private/tmp"},
		{"expose /private/var", withPolicy(policy.Policy{Expose: []string{"/private/var"}}), alice,
			"expose /private/var: refusing a directory that is or contains /private/var/tmp"},
		{"expose every user's /var/folders", withPolicy(policy.Policy{Expose: []string{"/var/folders"}}), alice,
			"contains /private/var/folders"},
		{"expose /dev", withPolicy(policy.Policy{Expose: []string{"/dev/"}}), alice,
			"expose /dev/: refusing the host's /dev"},
		{"allow_paths another terminal", withPolicy(policy.Policy{AllowPaths: []string{"/dev/ttys001:rw"}}), alice,
			"refusing the host's /dev/ttys001"},
		{"expose the pty multiplexer", withPolicy(policy.Policy{Expose: []string{"/dev/ptmx"}}), alice,
			"refusing the host's /dev/ptmx"},
		{"allow_paths /tmp in another case", withPolicy(policy.Policy{AllowPaths: []string{"/PRIVATE/Tmp:rw"}}), alice,
			"refusing a directory that is or contains /private/tmp"},
		{"expose /dev in another case", withPolicy(policy.Policy{Expose: []string{"/DEV/ttys001"}}), alice,
			"refusing the host's /DEV/ttys001"},
		{"TMPDIR is /tmp", withSpec(func(s *sandbox.Spec) { s.Env = []string{"TMPDIR=/tmp/"} }), alice,
			"TMPDIR /tmp/: refusing a directory that is or contains /private/tmp"},
		{"TMPDIR is every user's /var/folders", withSpec(func(s *sandbox.Spec) { s.Env = []string{"TMPDIR=/var/folders"} }), alice,
			"contains /private/var/folders"},
		{"TMPDIR in ~/.docker", withSpec(func(s *sandbox.Spec) { s.Env = []string{"TMPDIR=/Users/alice/.docker/tmp"} }), alice,
			"TMPDIR /Users/alice/.docker/tmp: refusing /Users/alice/.docker"},
		{"no workspace", withSpec(func(s *sandbox.Spec) { s.Workspace = "" }), alice, "workspace: empty path"},
		{"workspace /", withSpec(func(s *sandbox.Spec) { s.Workspace = "/" }), alice, "is or contains your home directory"},
		{"workspace home", withSpec(func(s *sandbox.Spec) { s.Workspace = "/Users/alice/" }), alice, "is or contains your home directory"},
		{"workdir outside", withSpec(func(s *sandbox.Spec) { s.Workdir = "/Users/alice/src/other" }), alice,
			"workdir /Users/alice/src/other is not inside the workspace /Users/alice/src/app"},
		{"terminal not a ttys", spec(&policy.Policy{}), Machine{Home: "/Users/alice", Terminals: []string{`/dev/ttys1") (subpath "/`}}, "is not a /dev/ttysN"},
		{"expose the user database's home's ~/.ssh under another $HOME", withPolicy(policy.Policy{Expose: []string{"/Users/alice/.ssh"}}), otherHome,
			"expose /Users/alice/.ssh: refusing /Users/alice/.ssh"},
		{"expose the user database's home under another $HOME", withPolicy(policy.Policy{Expose: []string{"/Users/alice"}}), otherHome,
			"refusing a path that is or contains your home directory /Users/alice"},
		{"bad protected entry", spec(&policy.Policy{}), Machine{Home: "/Users/alice", Protected: []string{"relative"}}, "protected path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.s, tc.m)
			if err == nil {
				t.Fatalf("Render succeeded, want an error containing %q\n%s", tc.want, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	cases := map[string]string{
		"/tmp":                 "/private/tmp",
		"/tmp/x/../y/":         "/private/tmp/y",
		"/var/folders/a/T":     "/private/var/folders/a/T",
		"/etc/hosts":           "/private/etc/hosts",
		"/private/etc":         "/private/etc",
		"/tmpfoo":              "/tmpfoo",
		"/Users/alice//src/./": "/Users/alice/src",
		"/":                    "/",
	}
	for in, want := range cases {
		if got, err := canonical(in); err != nil || got != want {
			t.Errorf("canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestXcodeBundle(t *testing.T) {
	cases := map[string]string{
		"/Applications/Xcode.app/Contents/Developer":       "/Applications/Xcode.app",
		"/Applications/Xcode-beta.app/Contents/Developer/": "/Applications/Xcode-beta.app",
		"/Users/alice/Applications/Xcode 16.app":           "/Users/alice/Applications/Xcode 16.app",
		"/opt/Developer":                                   "/opt/Developer",
		"/Library/Developer/CommandLineTools":              "",
		"/Users/alice":                                     "",
		"":                                                 "",
	}
	for in, want := range cases {
		if got := xcodeBundle(in); got != want {
			t.Errorf("xcodeBundle(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	cases := map[string]string{
		`/a b`:    `"/a b"`,
		`/a"b`:    `"/a\"b"`,
		`/a\b`:    `"/a\\b"`,
		`/café`:   `"/café"`,
		`/"\"`:    `"/\"\\\""`,
		``:        `""`,
		`/a;b(c)`: `"/a;b(c)"`,
	}
	for in, want := range cases {
		if got, err := quote(in); err != nil || got != want {
			t.Errorf("quote(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "/a b", `/a"b`, `/a\b`, "/café/日本語", `\"`, "/a\nb", "\xff", ")(\"", "; comment", "#\"x\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := quote(s)
		if err != nil {
			if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
				t.Fatalf("quote(%q) refused a printable UTF-8 string: %v", s, err)
			}
			return
		}
		forms, err := readSBPL("(literal " + q + ")")
		if err != nil {
			t.Fatalf("quote(%q) = %s does not read back: %v", s, q, err)
		}
		if len(forms) != 1 || len(forms[0].list) != 2 || !forms[0].list[1].isStr || forms[0].list[1].str != s {
			t.Fatalf("quote(%q) = %s reads back as %v", s, q, forms)
		}
	})
}

// FuzzRenderPaths puts arbitrary text into every kind of path a profile
// holds: each profile that renders must read back balanced, with the path
// only ever inside string literals.
func FuzzRenderPaths(f *testing.F) {
	for _, s := range []string{"tools", "a b", `q"uote`, `back\slash`, "ünï/cødé", ")(", "; x", "..", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p := "/opt/" + name
		s := spec(&policy.Policy{
			Network:    policy.NetOff,
			Expose:     []string{p},
			AllowPaths: []string{p + "/rw:rw"},
			DenyRead:   []string{p + "/secret"},
		})
		s.Workspace, s.Workdir = "/Users/alice/src/"+name, ""
		text, err := Render(s, alice)
		if err != nil {
			return
		}
		if _, err := checkProfile(text); err != nil {
			t.Fatalf("profile for %q does not read back: %v\n%s", name, err, text)
		}
	})
}

// decision is an operation on a path, and whether the profile is to
// allow it.
type decision struct {
	op, path string
	allow    bool
}

// checkDecisions reports each of want that pr decides otherwise.
func checkDecisions(t *testing.T, pr profile, want []decision) {
	t.Helper()
	for _, d := range want {
		if got := pr.decide(d.op, d.path); got != d.allow {
			t.Errorf("%s %s: allowed = %v, want %v", d.op, d.path, got, d.allow)
		}
	}
}
