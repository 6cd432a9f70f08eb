package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestConfigErrorsNameKeyAndFile(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "alow: [a.example.com]", []string{`unknown key "alow"`, "valid here: network, allow"}},
		{"unknown null key", "deny_reads:", []string{`unknown key "deny_reads"`}},
		{"unknown limit", "limits: {memroy: 1GiB}", []string{`unknown key "limits.memroy"`, "timeout, memory, pids, tmp_size"}},
		{"unknown credential key", "credentials: [{nmae: x}]", []string{`unknown key "credentials[0].nmae"`, "name, source, hosts"}},
		{"unknown source key", "credentials: [{name: x, source: {evn: X}, hosts: [a.example]}]", []string{`unknown key "credentials[0].source.evn"`}},
		{"dotted key", "a.b: 1", []string{`unknown key "a"`}},
		{"dotted known key", "limits.pids: 10", []string{`key "limits.pids"`, "limits: {pids: 100}"}},
		{"dotted key below a string", "network.allow: [a.example]", []string{`key "network.allow"`, "write nested keys as mappings"}},
		{"bracketed key", "allow[0]: a.example", []string{`key "allow[0]"`, "write nested keys as mappings"}},
		{"null value", "deny:", []string{`key "deny" has no value`, "[]"}},
		{"null limits", "limits:", []string{`key "limits" has no value`}},
		{"string for list", "allow: example.com", []string{`key "allow"`, "expected a list of strings", `got the string "example.com"`}},
		{"list for string", "network: [off]", []string{`key "network"`, "expected a string", "got a list"}},
		{"string for bool", "deny_private: yes", []string{`key "deny_private"`, "expected true or false"}},
		{"number in list", "env: [1]", []string{`key "env[0]"`, "expected a string", "the number 1"}},
		{"word for number", "limits: {pids: many}", []string{`key "limits.pids"`, "expected a whole number"}},
		{"fraction for number", "limits: {pids: 1.5}", []string{`key "limits.pids"`, "expected a whole number", "1.5"}},
		{"bad size", "limits: {memory: 2XB}", []string{`key "limits.memory"`, `size "2XB"`, "512MiB"}},
		{"number for duration", "limits: {timeout: 600}", []string{`key "limits.timeout"`, "expected a duration such as 10m"}},
		{"bad duration", "limits: {timeout: soon}", []string{`key "limits.timeout"`, `"soon" is not a duration`}},
		{"scalar for mapping", "limits: 5", []string{`key "limits"`, "expected a mapping"}},
		{"two documents", "network: off\n---\ndeny: [x.example.com]\n", []string{"more than one YAML document"}},
		{"not a mapping", "- a\n", []string{"holds a list where a mapping of keys to values belongs"}},
		{"scalar document", "restricted\n", []string{`holds the string "restricted" where a mapping`}},
		{"keys differing in case", "network: off\nNetwork: open\n", []string{`key "network" is given twice`}},
		{"nested keys differing in case", "limits: {pids: 1}\nLIMITS: {memory: 1GiB}\n", []string{`key "limits" is given twice`}},
		{"number as key", "limits: {7: x}\n", []string{"key 7 (under limits) is not a name"}},
		{"duplicate key", "deny: [a.example]\ndeny: [b.example]\n", []string{`"deny" already defined`}},
		// The decoder's errors one a line are put on one line.
		{"duplicate keys", "deny: [a.example]\ndeny: [b.example]\nenv: []\nenv: []\n", []string{`yaml: line 2: mapping key "deny" already defined at line 1; line 4: mapping key "env" already defined at line 3`}},
		{"tab on the first line", "\tnetwork: off\n", []string{"yaml: line 1: found character that cannot start any token, such as a tab", "indent with spaces, not tabs"}},
		{"tab in the indentation", "network: off\nallow:\n\t- a.example\n", []string{"yaml: line 3: found character", "indent with spaces"}},
		{"value starting with @", "network: off\nallow: [@a.example]\n", []string{"yaml: line 2: found character", "quote a value that starts with @"}},
		{"bad network", "network: wide", []string{`network: "wide" is not one of off, restricted, open`}},
		{"bad pattern", "deny: [ok.example, 'bad host']", []string{"deny", `"bad host"`}},
		{"bad terminate", "terminate: some", []string{"terminate", "all or none"}},
		{"relative path", "expose: [tools]", []string{"expose", `"tools" is relative`}},
		{"other user's home", "deny_read: [~root/x]", []string{"deny_read", "only ~ and ~/"}},
		{"a variable", "deny_read: [$HOME/.env]", []string{"deny_read", `path "$HOME/.env": cordon expands no variables; write ~/ for your home`}},
		{"bad path suffix", "allow_paths: [/x:rx]", []string{"allow_paths", `":rx"`, ":rw or :ro"}},
		{"negative limit", "limits: {pids: -1}", []string{"limits.pids", "negative"}},
		{"empty run_as", "run_as: ''", []string{"run_as", "empty"}},
		{"bad env name", "env: [A-B]", []string{"env", `"A-B"`}},
		{"credential without source", "credentials: [{name: x, hosts: [a.example]}]", []string{`credentials "x"`, "exactly one of env, file, command"}},
		{"credential with two sources", "credentials: [{name: x, source: {env: A, file: /k}, hosts: [a.example]}]", []string{"exactly one", "sets 2"}},
		{"credential twice", "credentials: [{name: x, source: {env: A}, hosts: [a.example]}, {name: x, source: {env: B}, hosts: [a.example]}]", []string{`"x" is used twice`}},
		{"credential without hosts", "credentials: [{name: x, source: {env: A}}]", []string{`credentials "x"`, "hosts is empty"}},
		{"credential bad host", "credentials: [{name: x, source: {env: A}, hosts: ['*']}]", []string{`credentials "x": hosts`}},
		{"credential without name", "credentials: [{source: {env: A}, hosts: [a.example]}]", []string{"credentials[0]", "name is empty"}},
		{"credential relative file", "credentials: [{name: x, source: {file: key.txt}, hosts: [a.example]}]", []string{"source.file", "relative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, file := range []string{"global.yaml", "/w/.cordon.yaml"} {
				var err error
				if file == "global.yaml" {
					_, err = layered(tt.yaml, "", Overrides{})
				} else {
					_, err = layered("", tt.yaml, Overrides{})
				}
				if err == nil {
					t.Fatalf("%s: accepted %q", file, tt.yaml)
				}
				for _, want := range append(tt.want, file) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %q does not say %q", file, err, want)
					}
				}
			}
		})
	}
}

func TestConfigValues(t *testing.T) {
	p, err := layered(`
Network: OPEN_IS_NOT_LOWERCASED_BUT_KEYS_ARE
`, "", Overrides{})
	if err == nil || !strings.Contains(err.Error(), "OPEN_IS_NOT_LOWERCASED") {
		t.Fatalf("mode value was altered or accepted: %v %+v", err, p)
	}
	p, err = layered(`
limits: {timeout: 90s, memory: 1.5GiB, pids: 10, tmp_size: 1048576}
allow_paths: [~/a:ro, ~/b:rw, /c]
credentials: [{name: x, source: {file: ~/keys/x}, hosts: [a.example]}]
`, "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Limits.Timeout.String() != "1m30s" || p.Limits.Memory != 3<<29 || p.Limits.TmpSize != 1<<20 {
		t.Errorf("limits: %+v", p.Limits)
	}
	if want := []string{testHome + "/a", testHome + "/b:rw", "/c"}; !slices.Equal(p.AllowPaths, want) {
		t.Errorf("allow_paths %q, want %q", p.AllowPaths, want)
	}
	if p.Credentials[0].Source.File != testHome+"/keys/x" {
		t.Errorf("source.file %q not expanded", p.Credentials[0].Source.File)
	}
}

// fakeHome points $HOME at a fresh directory and clears the variables that
// move the global config.
func fakeHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(resolvePath(t.TempDir()), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CORDON_CONFIG", "")
	return home
}

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	mkdirs(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFindWorkspace(t *testing.T) {
	home := fakeHome(t)
	outside := filepath.Join(filepath.Dir(home), "srv")
	mkdirs(t,
		filepath.Join(home, "proj", ".git"),
		filepath.Join(home, "proj", "a", "b"),
		filepath.Join(home, "proj", "sub", "deep"),
		filepath.Join(home, "loose", "dir"),
		filepath.Join(home, ".git"),
		filepath.Join(outside, "repo", ".git"),
		filepath.Join(outside, "repo", "x"),
	)
	writeFile(t, filepath.Join(home, "proj", "sub", ProjectFile), "")
	if err := os.Symlink(filepath.Join(home, "proj", "a"), filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ cwd, want string }{
		{filepath.Join(home, "proj"), filepath.Join(home, "proj")},
		{filepath.Join(home, "proj", "a", "b"), filepath.Join(home, "proj")},
		{filepath.Join(home, "proj", "sub", "deep"), filepath.Join(home, "proj", "sub")},
		{filepath.Join(home, "loose", "dir"), filepath.Join(home, "loose", "dir")},
		{filepath.Join(outside, "repo", "x"), filepath.Join(outside, "repo")},
		{filepath.Join(home, "link"), filepath.Join(home, "proj")},
	}
	for _, tt := range tests {
		got, err := findWorkspace(tt.cwd, home)
		if err != nil || got != tt.want {
			t.Errorf("findWorkspace(%s) = %q, %v; want %q", tt.cwd, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ cwd, want string }{
		{home, "home directory"},
		{home + "/", "home directory"},
		{"/", "refusing /"},
		{filepath.Dir(home), "contains your home directory"},
		{"relative/dir", "not absolute"},
	} {
		if got, err := findWorkspace(tt.cwd, home); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("findWorkspace(%s) = %q, %v; want an error saying %q", tt.cwd, got, err, tt.want)
		}
	}
}

// A marker another user could make above the working directory does not
// choose the workspace, which the box may write: another user's .git in
// a shared temporary directory (/tmp, above /tmp/proj) would have made
// all of it the workspace. Nor does a marker neither the user nor root
// owns elsewhere. And a shared temporary directory is no workspace: the
// user's sockets there (tmux's) would take the command out of the box.
func TestFindWorkspaceOthersMarkers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives files to another user, which needs root: run the tests as root, as make test does")
	}
	home := fakeHome(t)
	shared := filepath.Join(filepath.Dir(home), "tmp")
	proj := filepath.Join(shared, "proj")
	mkdirs(t, proj)
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		marker string
		uid    int
		mode   os.FileMode
		want   string
	}{
		{"another's .git in a shared temporary directory", ".git", 12345, os.ModeSticky | 0o777, proj},
		{"another's .cordon.yaml in a shared temporary directory", ProjectFile, 12345, os.ModeSticky | 0o777, proj},
		{"root's .git in a shared temporary directory", ".git", 0, os.ModeSticky | 0o777, proj},
		{"another's .git in a directory of root's", ".git", 12345, 0o755, proj},
		{"root's .git in a directory of root's", ".git", 0, 0o755, shared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := filepath.Join(shared, tc.marker)
			mkdirs(t, m)
			defer os.RemoveAll(m)
			if err := os.Chown(m, tc.uid, tc.uid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(shared, tc.mode); err != nil {
				t.Fatal(err)
			}
			if got, err := findWorkspace(proj, home); err != nil || got != tc.want {
				t.Errorf("findWorkspace(%s) = %q, %v; want %q", proj, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		mode   os.FileMode
		refuse bool
	}{{os.ModeSticky | 0o777, true}, {0o777, false}, {os.ModeSticky | 0o755, false}} {
		if err := os.Chmod(shared, tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := findWorkspace(shared, home)
		if refused := err != nil && strings.Contains(err.Error(), "every user may make files in it"); refused != tc.refuse {
			t.Errorf("findWorkspace(%s), mode %v = %q, %v; want refused: %v", shared, tc.mode, got, err, tc.refuse)
		}
	}
}

func TestGlobalConfigPath(t *testing.T) {
	home := fakeHome(t)
	tests := []struct{ xdg, env, want string }{
		{"", "", filepath.Join(home, ".config", "cordon", "config.yaml")},
		{"/xdg", "", "/xdg/cordon/config.yaml"},
		{"relative-xdg", "", filepath.Join(home, ".config", "cordon", "config.yaml")},
		{"/xdg", "/etc/cordon.yaml", "/etc/cordon.yaml"},
	}
	for _, tt := range tests {
		t.Setenv("XDG_CONFIG_HOME", tt.xdg)
		t.Setenv("CORDON_CONFIG", tt.env)
		if got, err := GlobalConfigPath(); err != nil || got != tt.want {
			t.Errorf("XDG_CONFIG_HOME=%q CORDON_CONFIG=%q: %q, %v; want %q", tt.xdg, tt.env, got, err, tt.want)
		}
	}
}

// TestRelativeCordonConfigRefused: a relative $CORDON_CONFIG named a
// file in the directory cordon started in, which a hostile repository
// could hold: its network: open and allowlist were taken as the global
// config's (cordon proxy ran with them). It is refused, saying how to
// set it; a relative --config, typed for one invocation, is taken from
// the working directory.
func TestRelativeCordonConfigRefused(t *testing.T) {
	home := fakeHome(t)
	proj := filepath.Join(home, "proj")
	mkdirs(t, filepath.Join(proj, ".git"))
	writeFile(t, filepath.Join(proj, "cordon.yaml"), "network: open\nallow: [\"*.evil.example\"]\n")
	t.Chdir(proj)
	t.Setenv("CORDON_CONFIG", "cordon.yaml")
	p, _, err := Load(LoadOptions{Workdir: proj, OptionalWorkspace: true})
	if err == nil || !strings.Contains(err.Error(), `$CORDON_CONFIG="cordon.yaml" is not an absolute path`) || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("relative CORDON_CONFIG: %+v, %v; want a refusal", p, err)
	}
	t.Setenv("CORDON_CONFIG", "")
	if p, src, err := Load(LoadOptions{ConfigPath: "cordon.yaml", Workdir: proj}); err != nil || p.Network != NetOpen || src.Global != filepath.Join(proj, "cordon.yaml") {
		t.Fatalf("relative --config: %+v %+v %v", p, src, err)
	}
}

func TestLoad(t *testing.T) {
	home := fakeHome(t)
	proj := filepath.Join(home, "proj")
	mkdirs(t, filepath.Join(proj, ".git"), filepath.Join(proj, "src"))
	globalPath := filepath.Join(home, ".config", "cordon", "config.yaml")

	// Nothing on disk: the defaults.
	p, src, err := Load(LoadOptions{Workdir: filepath.Join(proj, "src")})
	if err != nil {
		t.Fatal(err)
	}
	if src.Global != globalPath || src.GlobalRead || src.Workspace != proj || src.Project != "" || src.Flags != nil {
		t.Fatalf("sources %+v", src)
	}
	if p.Network != NetRestricted || len(p.Allow) != 0 {
		t.Fatalf("defaults: %+v", p)
	}

	// Global, project and flags.
	writeFile(t, globalPath, string(readTestdata(t, "global.yaml")))
	writeFile(t, filepath.Join(proj, ProjectFile), "allow: [docs.example.com]\n")
	open := NetOpen
	p, src, err = Load(LoadOptions{Workdir: filepath.Join(proj, "src"), Overrides: Overrides{Network: &open, Allow: []string{"x.example.net"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := Sources{Global: globalPath, GlobalRead: true, Workspace: proj, Project: filepath.Join(proj, ProjectFile), Flags: []string{"allow", "network"}}
	if src.Global != want.Global || !src.GlobalRead || src.Workspace != want.Workspace || src.Project != want.Project || !slices.Equal(src.Flags, want.Flags) {
		t.Fatalf("sources %+v, want %+v", src, want)
	}
	if p.Network != NetOpen || !slices.Equal(p.Allow, []string{"docs.example.com", "x.example.net"}) || !slices.Contains(p.AllowPaths, home+"/cache:rw") {
		t.Fatalf("layered: %+v", p)
	}

	// A widening project file stops the load.
	writeFile(t, filepath.Join(proj, ProjectFile), string(readTestdata(t, "project-widen.yaml")))
	if _, _, err := Load(LoadOptions{Workdir: proj}); err == nil || !strings.Contains(err.Error(), "evil.example.net") {
		t.Fatalf("widening project file: %v", err)
	}

	// --config and CORDON_CONFIG replace the location and must exist.
	other := filepath.Join(home, "other.yaml")
	for _, o := range []struct{ flag, env string }{{other, ""}, {"", other}} {
		t.Setenv("CORDON_CONFIG", o.env)
		if _, _, err := Load(LoadOptions{ConfigPath: o.flag, Workdir: filepath.Join(home, "proj")}); err == nil || !strings.Contains(err.Error(), other) {
			t.Fatalf("missing explicit config %+v: %v", o, err)
		}
		writeFile(t, other, "network: off\n")
		p, src, err := Load(LoadOptions{ConfigPath: o.flag, Workdir: filepath.Join(home, "loose")})
		if err != nil || p.Network != NetOff || src.Global != other || !src.GlobalRead {
			t.Fatalf("explicit config %+v: %+v %+v %v", o, p, src, err)
		}
		os.Remove(other)
	}
	t.Setenv("CORDON_CONFIG", "")

	// A workspace at $HOME is refused before anything is read.
	if _, _, err := Load(LoadOptions{Workdir: home}); err == nil || !strings.Contains(err.Error(), "home directory") {
		t.Fatalf("Load in $HOME: %v", err)
	}

	// An oversized file is refused.
	writeFile(t, globalPath, "# "+strings.Repeat("x", maxConfigSize)+"\n")
	if _, _, err := Load(LoadOptions{Workdir: proj}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized config: %v", err)
	}
}

// TestLoadGrantedOutlivesTheProject: Sources.Granted keeps the global
// config's read-write allow_paths that a project file narrows away (an
// earlier run's box wrote there), and only those: not the flags'.
func TestLoadGrantedOutlivesTheProject(t *testing.T) {
	home := fakeHome(t)
	proj := filepath.Join(home, "proj")
	mkdirs(t, filepath.Join(proj, ".git"))
	writeFile(t, filepath.Join(home, ".config", "cordon", "config.yaml"), "allow_paths: [~/tools:rw, ~/docs]\n")
	writeFile(t, filepath.Join(proj, ProjectFile), "allow_paths: [~/tools]\n")
	p, src, err := Load(LoadOptions{Workdir: proj, Overrides: Overrides{AllowPaths: []string{"/opt/x:rw"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.WritePaths(), []string{"/opt/x"}) || !slices.Equal(src.Granted, []string{home + "/tools"}) {
		t.Fatalf("write paths %q, granted %q; want [/opt/x] and [%s/tools]", p.WritePaths(), src.Granted, home)
	}
}

func TestProjectPathSymlinks(t *testing.T) {
	dir := resolvePath(t.TempDir())
	mkdirs(t, filepath.Join(dir, "cache", "real"), filepath.Join(dir, "secret"))
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(dir, "cache", "link")); err != nil {
		t.Fatal(err)
	}
	global := "allow_paths: [" + dir + "/cache:rw]\nexpose: [" + dir + "/cache]\n"
	for _, project := range []string{
		"allow_paths: [" + dir + "/cache/real:rw, " + dir + "/cache/new/dir]",
		"expose: [" + dir + "/cache/real]",
	} {
		if _, err := layered(global, project, Overrides{}); err != nil {
			t.Errorf("%s: %v", project, err)
		}
	}
	for _, project := range []string{
		"allow_paths: [" + dir + "/cache/link:rw]",
		"allow_paths: [" + dir + "/cache/link/sub]",
		"expose: [" + dir + "/cache/link]",
	} {
		var we *WidenError
		if _, err := layered(global, project, Overrides{}); !errors.As(err, &we) || !strings.Contains(we.Value, "/cache/link") {
			t.Errorf("%s: a symlink out of the allowed directory was accepted: %v", project, err)
		}
	}
}

// A project file is the sandboxed side's to write: only a regular file
// that lies in the workspace is read. A link out of it (say, to a private
// key) is refused without a byte of its target in the error, and a FIFO
// cannot hold cordon up. The refusal says to mend the project file, not
// (as it did) to name another global config with --config.
func TestProjectFileMustBeARegularFileInTheWorkspace(t *testing.T) {
	home := fakeHome(t)
	proj := filepath.Join(home, "proj")
	mkdirs(t, filepath.Join(proj, ".git"), filepath.Join(proj, "conf"), filepath.Join(home, ".ssh"))
	const keyText = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), keyText)
	writeFile(t, filepath.Join(proj, "conf", "cordon.yaml"), "network: off\n")
	pf := filepath.Join(proj, ProjectFile)
	for _, tc := range []struct {
		name  string
		plant func() error
		want  string // "" means read
	}{
		{"a link within the workspace", func() error { return os.Symlink("conf/cordon.yaml", pf) }, ""},
		{"a link out of it", func() error { return os.Symlink(filepath.Join(home, ".ssh", "id_ed25519"), pf) }, "leads outside the workspace"},
		{"a link to a device", func() error { return os.Symlink("/dev/zero", pf) }, "is a device, not a regular file"},
		{"a FIFO", func() error { return mkfifo(pf) }, "is a named pipe (FIFO), not a regular file"},
		{"a directory", func() error { return os.Mkdir(pf, 0o755) }, "is a directory, not a regular file; a project file is a short YAML file: replace it with one, or remove it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(pf)
			if err := tc.plant(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				p, _, err := Load(LoadOptions{Workdir: proj})
				if err == nil && p.Network != NetOff {
					err = errors.New("the linked file's network: off was not read")
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Load did not return within 10s")
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load: %v, want an error saying %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), "b3Bl")):
				t.Fatalf("the error quotes the link's target: %v", err)
			case err != nil && strings.Contains(err.Error(), "CORDON_CONFIG"):
				// Naming another global config mends no project file.
				t.Fatalf("the error's fix is for the global config: %v", err)
			}
		})
	}
	os.RemoveAll(pf)
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }

// Every project file from the top down to the workspace is read, each
// narrowing what the ones above it left: a .cordon.yaml (or a .git) the
// box plants in a subdirectory makes that the workspace of a run started
// there, and must not drop the project's own narrowing.
func TestProjectFilesFromTheTop(t *testing.T) {
	root := `network: off
deny_read: [{proj}/pkg/.env]
deny: [tracker.example.com]
read_only: [pkg/Makefile, docs]
`
	tests := []struct {
		name  string
		files map[string]string // relative to home: content ("/dir" makes a directory)
		cwd   string
		want  string   // an error saying this; "" means loaded
		read  []string // the project files read, relative to home
		ro    []string // read_only, as the policy holds it
	}{
		{"the project's own root", map[string]string{"proj/.cordon.yaml": root}, "proj/pkg",
			"", []string{"proj/.cordon.yaml"}, []string{"pkg/Makefile", "docs"}},
		{"an empty file planted below", map[string]string{"proj/.cordon.yaml": root, "proj/pkg/.cordon.yaml": ""}, "proj/pkg",
			"", []string{"proj/.cordon.yaml", "proj/pkg/.cordon.yaml"}, []string{"Makefile"}},
		{"a .git planted below", map[string]string{"proj/.cordon.yaml": root, "proj/pkg/.git": "/dir"}, "proj/pkg/sub",
			"", []string{"proj/.cordon.yaml"}, []string{"Makefile"}},
		{"a narrower file below", map[string]string{"proj/.cordon.yaml": root, "proj/pkg/.cordon.yaml": "read_only: [go.mod]\ndeny_read: [{proj}/pkg/more]\n"}, "proj/pkg",
			"", []string{"proj/.cordon.yaml", "proj/pkg/.cordon.yaml"}, []string{"Makefile", "go.mod"}},
		{"a sibling directory's file", map[string]string{"src/.cordon.yaml": root, "proj/.git": "/dir"}, "proj",
			"", nil, nil},
		{"a directory's file above the project", map[string]string{"work/.cordon.yaml": strings.ReplaceAll(root, "{proj}", "{home}/work/proj"), "work/proj/.git": "/dir"}, "work/proj/pkg",
			"", []string{"work/.cordon.yaml"}, nil},
		{"a widening file below", map[string]string{"proj/.cordon.yaml": root, "proj/pkg/.cordon.yaml": "network: restricted\n"}, "proj/pkg",
			"pkg/.cordon.yaml: network restricted", nil, nil},
		{"a widening file below names the files above", map[string]string{"proj/.cordon.yaml": root, "proj/pkg/.cordon.yaml": "deny: []\nallow: [x.example.com]\n"}, "proj/pkg",
			"as narrowed by the project file(s) above it (", nil, nil},
		{"a file above that holds the workspace read-only", map[string]string{"proj/.cordon.yaml": "read_only: [pkg]\n", "proj/pkg/.cordon.yaml": ""}, "proj/pkg",
			`read_only: "pkg" holds the whole workspace`, nil, nil},
		{"a link out of its directory above", map[string]string{"proj/.cordon.yaml": "->../outside.yaml", "outside.yaml": "network: off\n", "proj/pkg/.cordon.yaml": ""}, "proj/pkg",
			"leads outside", nil, nil},
		{"the home directory's own file", map[string]string{".cordon.yaml": "network: off\n", "proj/.git": "/dir"}, "proj",
			"", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := fakeHome(t)
			x := strings.NewReplacer("{proj}", filepath.Join(home, "proj"), "{home}", home)
			for rel, data := range tt.files {
				path := filepath.Join(home, rel)
				switch {
				case data == "/dir":
					mkdirs(t, path)
				case strings.HasPrefix(data, "->"):
					mkdirs(t, filepath.Dir(path))
					if err := os.Symlink(data[2:], path); err != nil {
						t.Fatal(err)
					}
				default:
					writeFile(t, path, x.Replace(data))
				}
			}
			mkdirs(t, filepath.Join(home, tt.cwd))
			p, src, err := Load(LoadOptions{Workdir: filepath.Join(home, tt.cwd)})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Load: %v, want an error saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var read []string
			for _, f := range src.Projects {
				rel, _ := filepath.Rel(home, f)
				read = append(read, rel)
			}
			if !slices.Equal(read, tt.read) {
				t.Fatalf("read %q, want %q", read, tt.read)
			}
			if len(tt.read) == 0 {
				if p.Network != NetRestricted || len(p.Deny) != 0 {
					t.Fatalf("a file that is not the project's narrowed the policy: %+v", p)
				}
				return
			}
			if p.Network != NetOff || !slices.Contains(p.Deny, "tracker.example.com") || !slices.Contains(p.DenyRead, x.Replace("{proj}/pkg/.env")) && !slices.Contains(p.DenyRead, x.Replace("{home}/work/proj/pkg/.env")) {
				t.Fatalf("the top project file's narrowing was dropped: network %s, deny %q, deny_read %q", p.Network, p.Deny, p.DenyRead)
			}
			if !slices.Equal(p.ReadOnly, tt.ro) {
				t.Errorf("read_only %q, want %q", p.ReadOnly, tt.ro)
			}
		})
	}
}

// A project file above the workspace that neither the user nor root owns
// (another user's /tmp/.cordon.yaml, say) is passed over.
func TestProjectFileAboveOwnedByAnother(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives a file to another user, which needs root: run the tests as root, as make test does")
	}
	home := fakeHome(t)
	writeFile(t, filepath.Join(home, "proj", ProjectFile), "network: off\n")
	mkdirs(t, filepath.Join(home, "proj", "pkg", ".git"))
	for _, tc := range []struct {
		uid  int
		read bool
	}{{0, true}, {os.Geteuid(), true}, {12345, false}} {
		if err := os.Chown(filepath.Join(home, "proj", ProjectFile), tc.uid, 0); err != nil {
			t.Fatal(err)
		}
		p, src, err := Load(LoadOptions{Workdir: filepath.Join(home, "proj", "pkg")})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(src.Projects) == 1 && p.Network == NetOff; got != tc.read {
			t.Errorf("owner %d: read %v (%q, network %s), want %v", tc.uid, got, src.Projects, p.Network, tc.read)
		}
	}
}

// A config that cannot be opened is told the fix for its reason: one that
// exists but cannot be read was told to be created with cordon init.
func TestConfigOpenError(t *testing.T) {
	const path = "/home/u/.config/cordon/config.yaml"
	const project = "/home/u/proj/.cordon.yaml"
	for _, tc := range []struct {
		path string
		err  error
		want string
	}{
		{path, &os.PathError{Op: "open", Path: path, Err: syscall.ENOENT}, "read config " + path + ": open " + path + ": no such file or directory (create it with cordon init, or point --config or CORDON_CONFIG at an existing file)"},
		{path, &os.PathError{Op: "open", Path: path, Err: syscall.EACCES}, "read config " + path + ": open " + path + ": permission denied (let your user read it, and search the directories above it, or point --config or CORDON_CONFIG at another file)"},
		{path, &os.PathError{Op: "open", Path: path, Err: syscall.ELOOP}, "read config " + path + ": open " + path + ": too many levels of symbolic links"},
		// Another global config mends no project file.
		{project, &os.PathError{Op: "open", Path: project, Err: syscall.EACCES}, "read project config " + project + ": open " + project + ": permission denied (let your user read it, and search the directories above it, or remove it)"},
	} {
		if got := configOpenError(tc.path, tc.path == project, tc.err).Error(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
	// Through Load: a link that leads to itself (root, which runs the
	// tests, reads past any mode) exists, and cordon init cannot make it.
	loop := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.Symlink(filepath.Base(loop), loop); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(LoadOptions{ConfigPath: loop, Workdir: t.TempDir()})
	if err == nil || strings.Contains(err.Error(), "cordon init") || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("a config that is a link loop: %v, want the reason and no cordon init", err)
	}
}

// A global config another user could have written, as its owner, through
// its mode, or by replacing it in its directory, is refused with the fix:
// it may widen the sandbox. Root's own files, and a sticky shared
// directory, are trusted.
func TestGlobalConfigOthersCannotWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives files to another user, which needs root: run the tests as root, as make test does")
	}
	for _, tc := range []struct {
		name              string
		fileUID, dirUID   int
		fileMode, dirMode fs.FileMode
		want              string // "" when read
	}{
		{"the user's, private", 0, 0, 0o600, 0o755, ""},
		{"readable by all", 0, 0, 0o644, 0o700, ""},
		{"another user's file", 12345, 0, 0o644, 0o755, "belongs to another user (uid 12345)"},
		{"group-writable", 0, 0, 0o664, 0o755, "run chmod go-w"},
		{"world-writable", 0, 0, 0o646, 0o755, "writable by other users (mode 0646)"},
		{"another user's directory", 0, 12345, 0o600, 0o755, "which belongs to another user (uid 12345)"},
		{"a directory others write in", 0, 0, 0o600, 0o777, "which other users may write in (mode 0777)"},
		{"a group-writable directory", 0, 0, 0o600, 0o775, "which other users may write in"},
		{"a sticky shared directory", 0, 0, 0o600, 0o777 | fs.ModeSticky, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := fakeHome(t)
			dir := filepath.Join(home, "conf")
			path := filepath.Join(dir, "config.yaml")
			writeFile(t, path, "network: open\nallow: [\"*.widened.example\"]\n")
			mkdirs(t, filepath.Join(home, "proj", ".git"))
			for _, c := range []struct {
				p    string
				uid  int
				mode fs.FileMode
			}{{path, tc.fileUID, tc.fileMode}, {dir, tc.dirUID, tc.dirMode}} {
				if err := os.Chown(c.p, c.uid, 0); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(c.p, c.mode); err != nil {
					t.Fatal(err)
				}
			}
			// Named through a link too: what counts is the file and the
			// directory it really lies in.
			link := filepath.Join(home, "link.yaml")
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			for _, named := range []string{path, link} {
				p, _, err := Load(LoadOptions{ConfigPath: named, Workdir: filepath.Join(home, "proj")})
				switch {
				case tc.want == "" && (err != nil || p.Network != NetOpen):
					t.Errorf("%s: %v, network %v; want it read", named, err, p)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path)):
					t.Errorf("%s: %v; want a refusal naming %s and saying %q", named, err, path, tc.want)
				}
			}
		})
	}
}
