//go:build linux

package linux

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

// TestBuildPinsAboveMasks: every directory between a read-write bind's
// root and a path mounted over in it (a deny_read mask, a protected path
// hidden, a credential's file shown masked) is bound onto itself, before
// the mount over the path, so the box cannot rename it, and the mount
// with it, away: the next run would hide only the old name. Nothing is
// pinned where the box cannot rename anything.
func TestBuildPinsAboveMasks(t *testing.T) {
	tests := []struct {
		name  string
		files []string // made before the build
		setup func(f fixture, p *policy.Policy, s map[string][]byte)
		pins  []string // {ws}, {root}, {home}
		none  []string // must not be pinned
	}{
		{"deny_read two levels into the workspace", []string{"{ws}/secrets/prod.key"},
			func(f fixture, p *policy.Policy, s map[string][]byte) {
				p.DenyRead = []string{f.ws + "/secrets/prod.key"}
			},
			[]string{"{ws}/secrets"}, nil},
		{"deny_read deep in the workspace", []string{"{ws}/a/b/c.key"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { p.DenyRead = []string{f.ws + "/a/b/c.key"} },
			[]string{"{ws}/a", "{ws}/a/b"}, nil},
		{"a denied directory", []string{"{ws}/a/secrets/x"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { p.DenyRead = []string{f.ws + "/a/secrets"} },
			[]string{"{ws}/a"}, []string{"{ws}/a/secrets"}},
		{"deny_read at the workspace's root", []string{"{ws}/top.key"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { p.DenyRead = []string{f.ws + "/top.key"} },
			nil, nil},
		{"deny_read in a read-write allow_path", []string{"{root}/rw/x/y.key"},
			func(f fixture, p *policy.Policy, s map[string][]byte) {
				p.AllowPaths = []string{f.root + "/rw:rw"}
				p.DenyRead = []string{f.root + "/rw/x/y.key"}
			},
			[]string{"{root}/rw/x"}, nil},
		{"deny_read in a read-only allow_path", []string{"{root}/ro/x/y.key"},
			func(f fixture, p *policy.Policy, s map[string][]byte) {
				p.AllowPaths = []string{f.root + "/ro"}
				p.DenyRead = []string{f.root + "/ro/x/y.key"}
			},
			nil, []string{"{root}/ro/x"}},
		{"a credential store at a read-write allow_path's root", []string{"{home}/.local/share/keyrings/login.keyring"},
			func(f fixture, p *policy.Policy, s map[string][]byte) {
				p.AllowPaths = []string{f.home + "/.local/share:rw"}
			},
			nil, []string{"{home}/.local/share/keyrings"}},
		{"a credential store two levels into a read-write allow_path", []string{"{root}/rw/share/keyrings/login.keyring"},
			func(f fixture, p *policy.Policy, s map[string][]byte) {
				p.AllowPaths = []string{f.root + "/rw:rw"}
				p.DenyRead = []string{f.root + "/rw/share/keyrings"}
			},
			[]string{"{root}/rw/share"}, nil},
		{"a credential's file shown masked", []string{"{ws}/conf/.npmrc"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { s[f.ws+"/conf/.npmrc"] = []byte("masked") },
			[]string{"{ws}/conf"}, nil},
		// A read-only bind is a mount over a path too: renamed away with a
		// directory above it, the box put a writable tree of its own at
		// its path (observed with the real binary).
		{"a read-only allow_path two levels into the workspace", []string{"{ws}/a/b/f"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { p.AllowPaths = []string{f.ws + "/a/b"} },
			[]string{"{ws}/a"}, nil},
		{"a read-write allow_path in the workspace", []string{"{ws}/a/b/f"},
			func(f fixture, p *policy.Policy, s map[string][]byte) { p.AllowPaths = []string{f.ws + "/a/b:rw"} },
			nil, []string{"{ws}/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			x := strings.NewReplacer("{ws}", f.ws, "{root}", f.root, "{home}", f.home)
			for _, p := range tt.files {
				writeFile(t, x.Replace(p), "secret", 0o600)
			}
			p := &policy.Policy{Network: policy.NetOff}
			spec := f.spec(p, "true")
			spec.Files = map[string][]byte{}
			tt.setup(f, p, spec.Files)
			l, err := build(spec, f.host(), f.scratch, nil)
			if err != nil {
				t.Fatal(err)
			}
			firstMask := slices.IndexFunc(l.argv, func(a string) bool { return strings.HasPrefix(a, f.scratch) })
			for _, d := range tt.pins {
				d = x.Replace(d)
				i := slices.Index(l.argv, d)
				if i < 1 || l.argv[i-1] != "--bind" || l.argv[i+1] != d {
					t.Errorf("%s is not pinned: %q", d, l.argv)
				} else if firstMask >= 0 && i > firstMask {
					t.Errorf("%s is pinned after the masks, which it would cover: %q", d, l.argv)
				}
			}
			for _, d := range tt.none {
				if hasSeq(l.argv, "--bind", x.Replace(d), x.Replace(d)) {
					t.Errorf("%s is pinned: %q", x.Replace(d), l.argv)
				}
			}
		})
	}
}

// TestPinsAbove: which directories a path mounted over needs pinned.
func TestPinsAbove(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{f.ws + "/a/b/c", f.root + "/rw/ro/x/y", f.root + "/rw/x/y"} {
		writeFile(t, p, "", 0o600)
	}
	binds := []bind{{path: f.ws, write: true}, {path: f.root + "/rw", write: true}, {path: f.root + "/rw/ro"}}
	tests := []struct {
		path string
		want []string
	}{
		{f.ws + "/a/b/c", []string{f.ws + "/a/b", f.ws + "/a"}},
		{f.ws + "/a", nil},
		{f.root + "/rw/x/y", []string{f.root + "/rw/x"}},
		{f.root + "/rw/ro/x/y", nil}, // inside a read-only bind nested in a read-write one
		{f.root + "/elsewhere/x/y", nil},
		{f.ws + "/missing/dir/file", nil},
	}
	for _, tt := range tests {
		if got := pinsAbove(nil, []string{tt.path}, binds); !slices.Equal(got, tt.want) {
			t.Errorf("pinsAbove(%s) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if got := pinsAbove([]string{f.ws + "/a"}, []string{f.ws + "/a/b/c"}, binds); !slices.Equal(got, []string{f.ws + "/a", f.ws + "/a/b"}) {
		t.Errorf("a pin listed already is repeated, or lost: %q", got)
	}
}

// TestBuildMakesTheCacheDirToHideIt: cordon's cache directory, missing
// where the box may write (a read-write ~/.cache on a new account), is
// made before the box is built, and hidden: otherwise the box could make
// it, with probe results, kept bundles or owed aftercare of its own. So
// are its directories at their default places when this run's are
// elsewhere ($XDG_CACHE_HOME, $XDG_CONFIG_HOME, $XDG_STATE_HOME set):
// before, the box made ~/.cache/cordon with a record of aftercare owed
// that the next run, from a shell without the variable, paid (removing a
// directory of the user's), ~/.config/cordon with a config that run
// took for the user's, and ~/.local/state/cordon with the lines its log
// began with.
//
// One reached through a link is made, and hidden, where the link leads
// (~/.config a link into a dotfiles tree exposed read-write: before, the
// box wrote the default global config there, and the next run took its
// network: open). A link on the way that the box could replace is
// refused, with nothing made where it points.
func TestBuildMakesTheCacheDirToHideIt(t *testing.T) {
	for _, tc := range []struct {
		name, allow, cache, dir string
		made                    bool
		// link makes ~/.config a link to {root}/dotfiles/config, or
		// ~/.local/state one to {root}/victim (a link the box planted in
		// an exposed ~/.local).
		link    string
		refused string
	}{
		{name: "read-write", allow: "{home}/.cache:rw", cache: "{home}/.cache/cordon", dir: "{home}/.cache/cordon", made: true},
		{name: "read-only", allow: "{home}/.cache", cache: "{home}/.cache/cordon", dir: "{home}/.cache/cordon"},
		{name: "the default cache, this run's elsewhere", allow: "{home}/.cache:rw", cache: "{root}/xdg-cache/cordon", dir: "{home}/.cache/cordon", made: true},
		{name: "the default config", allow: "{home}/.config:rw", dir: "{home}/.config/cordon", made: true},
		{name: "the default state", allow: "{home}/.local:rw", dir: "{home}/.local/state/cordon", made: true},
		{name: "the default config, read-only", allow: "{home}/.config", dir: "{home}/.config/cordon"},
		{name: "the default config through a link", allow: "{root}/dotfiles:rw", dir: "{root}/dotfiles/config/cordon", made: true, link: "config"},
		{name: "the default config through a link, read-only", allow: "{root}/dotfiles", dir: "{root}/dotfiles/config/cordon", link: "config"},
		{name: "a link the box could replace", allow: "{home}/.local:rw", dir: "{root}/victim/cordon", link: "state",
			refused: "/.local/state is a symbolic link the command could replace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			at := strings.NewReplacer("{home}", f.home, "{root}", f.root).Replace
			for _, d := range []string{".cache", ".local"} {
				mkdirs(t, f.home+"/"+d)
			}
			switch tc.link {
			case "config":
				mkdirs(t, f.root+"/dotfiles/config")
				if err := os.Symlink(f.root+"/dotfiles/config", f.home+"/.config"); err != nil {
					t.Fatal(err)
				}
			default:
				mkdirs(t, f.home+"/.config")
			}
			// This run logs elsewhere: the fixture's log directory is
			// the default one, not made yet.
			if err := os.RemoveAll(f.home + "/.local/state"); err != nil {
				t.Fatal(err)
			}
			if tc.link == "state" {
				mkdirs(t, f.root+"/victim")
				if err := os.Symlink(f.root+"/victim", f.home+"/.local/state"); err != nil {
					t.Fatal(err)
				}
			}
			h := f.host()
			h.guard = newGuard([]string{f.home}, f.root+"/logs/audit.jsonl", at(tc.cache))
			p := &policy.Policy{Network: policy.NetOff, AllowPaths: []string{at(tc.allow)}}
			l, err := build(f.spec(p, "true"), h, f.scratch, nil)
			dir := at(tc.dir)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("build = %v, want refused: %s", err, tc.refused)
				}
				if _, err := os.Lstat(dir); err == nil {
					t.Fatalf("%s was made, where the link points", dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(dir)
			if made := statErr == nil; made != tc.made {
				t.Fatalf("%s made: %v, want %v", dir, made, tc.made)
			}
			if tc.made && !hasSeq(l.argv, "--ro-bind", f.scratch+"/empty.d", dir) {
				t.Fatalf("%s is not hidden: %q", dir, l.argv)
			}
		})
	}
}

// TestBuildGuardsTheDefaultAuditLog: a run that logs elsewhere, with a
// read-write directory above the default log (~/.local:rw), hides the
// default log's directory and pins the directories above it, so that the
// box can neither read the lines of the runs that log there nor move it
// away to plant a link for the next of them.
func TestBuildGuardsTheDefaultAuditLog(t *testing.T) {
	f := newFixture(t) // the default log is at ~/.local/state/cordon/audit.jsonl
	writeFile(t, f.audit, "", 0o600)
	other := f.root + "/logs/audit.jsonl"
	mkdirs(t, f.root+"/logs")
	h := f.host()
	h.guard = newGuard([]string{f.home}, other, "").withDefaultAudit(f.audit)
	p := &policy.Policy{Network: policy.NetOff, AllowPaths: []string{f.home + "/.local:rw"}}
	l, err := build(f.spec(p, "true"), h, f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := f.home + "/.local/state"
	if !hasSeq(l.argv, "--bind", state, state) || !hasSeq(l.argv, "--ro-bind", f.scratch+"/empty.d", state+"/cordon") {
		t.Fatalf("the default log's directory is not hidden, or the one above it not pinned: %q", l.argv)
	}
	p.AllowPaths = []string{state + "/cordon"}
	if _, err := build(f.spec(p, "true"), h, f.scratch, nil); err == nil || !strings.Contains(err.Error(), "the default audit log directory") {
		t.Fatalf("the default log's directory was exposed: %v", err)
	}
}

// TestBuildDenyReadThroughALink: a deny_read entry, or a credential's file
// shown masked, with a symbolic link on the way that the box could replace
// is refused (the mask lands on the
// link's target; replaced, the link would have the next run hide another
// file, and the one it names now would be readable); one the box cannot
// replace is followed, as before.
func TestBuildDenyReadThroughALink(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f fixture) string // the entry
		want  string                               // "" means built
	}{
		{"a real path", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/secrets/prod.key", "x", 0o600)
			return f.ws + "/secrets/prod.key"
		}, ""},
		{"a link to a file in the workspace", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/.env.local", "x", 0o600)
			symlink(t, ".env.local", f.ws+"/.env")
			return f.ws + "/.env"
		}, "is a symbolic link the command could replace"},
		{"a link to a directory on the way", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/real/prod.key", "x", 0o600)
			symlink(t, "real", f.ws+"/secrets")
			return f.ws + "/secrets/prod.key"
		}, "is a symbolic link the command could replace"},
		{"a link outside what the box writes", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/secrets/prod.key", "x", 0o600)
			symlink(t, f.ws+"/secrets", f.root+"/keys")
			return f.root + "/keys/prod.key"
		}, ""},
		{"a missing path", func(t *testing.T, f fixture) string { return f.ws + "/not/yet" }, ""},
		{"a credential's file through a link", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/real/.npmrc", "x", 0o600)
			symlink(t, "real", f.ws+"/conf")
			return "files:" + f.ws + "/conf/.npmrc"
		}, "is a symbolic link the command could replace"},
		{"a credential's file by its real path", func(t *testing.T, f fixture) string {
			writeFile(t, f.ws+"/conf/.npmrc", "x", 0o600)
			return "files:" + f.ws + "/conf/.npmrc"
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := &policy.Policy{Network: policy.NetOff}
			spec := f.spec(p, "true")
			if e := tt.setup(t, f); strings.HasPrefix(e, "files:") {
				spec.Files = map[string][]byte{strings.TrimPrefix(e, "files:"): []byte("masked")}
			} else {
				p.DenyRead = []string{e}
			}
			_, err := build(spec, f.host(), f.scratch, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "name the file by its real path")):
				t.Fatalf("build: %v, want a refusal saying %q and how to fix it", err, tt.want)
			}
		})
	}
}
