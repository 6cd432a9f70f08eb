package policy

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// testHome is the home directory the layering tests expand "~" against.
const testHome = "/home/tester"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "layers", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// withKeys returns the YAML mapping base with the top-level keys of over
// replaced or added.
func withKeys(t testing.TB, base, over string) string {
	t.Helper()
	var b, o map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(over), &o); err != nil {
		t.Fatal(err)
	}
	maps.Copy(b, o)
	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// layered builds defaults, then global (if non-empty), then project (if
// non-empty), then o.
func layered(global, project string, o Overrides) (*Policy, error) {
	var g, p *configFile
	if global != "" {
		g = &configFile{path: "global.yaml", data: []byte(global)}
	}
	if project != "" {
		p = &configFile{path: "/w/.cordon.yaml", data: []byte(project)}
	}
	return build(testHome, "/w/src", g, p, o)
}

func TestProjectNarrows(t *testing.T) {
	global := string(readTestdata(t, "global.yaml"))
	unlimited := "limits: {timeout: 0s, memory: 0, pids: 0, tmp_size: 0}\n"
	tests := []struct {
		name, global, project string
		check                 func(*Policy) bool
	}{
		{"network equal", "", "network: restricted", func(p *Policy) bool { return p.Network == NetRestricted }},
		{"network off", "", "network: off", func(p *Policy) bool { return p.Network == NetOff }},
		{"network open to restricted", "network: open", "network: restricted", func(p *Policy) bool { return p.Network == NetRestricted }},
		{"allow one subdomain", "", "allow: [docs.example.com]", func(p *Policy) bool { return slices.Equal(p.Allow, []string{"docs.example.com"}) }},
		{"allow narrower wildcard", "", `allow: ["*.eu.example.com"]`, func(p *Policy) bool { return slices.Equal(p.Allow, []string{"*.eu.example.com"}) }},
		{"allow same port", "", "allow: [api.other.org:443]", func(p *Policy) bool { return len(p.Allow) == 1 }},
		{"allow one address", "", "allow: [192.0.2.7]", func(p *Policy) bool { return len(p.Allow) == 1 }},
		{"allow narrower range", "", "allow: [192.0.2.128/25]", func(p *Policy) bool { return len(p.Allow) == 1 }},
		{"allow nothing", "", "allow: []", func(p *Policy) bool { return len(p.Allow) == 0 }},
		{"deny appended", "", "deny: [uploads.example.com]", func(p *Policy) bool {
			return slices.Equal(p.Deny, []string{"secret.example.com", "uploads.example.com"})
		}},
		{"deny_read appended", "", "deny_read: [~/notes]", func(p *Policy) bool {
			return slices.Contains(p.DenyRead, testHome+"/notes") && slices.Contains(p.DenyRead, testHome+"/private") && slices.Contains(p.DenyRead, testHome+"/.ssh")
		}},
		{"read_only appended", "read_only: [.vscode]", "read_only: [.github/workflows]", func(p *Policy) bool {
			return slices.Equal(p.ReadOnly, []string{".vscode", ".github/workflows"})
		}},
		{"deny_commands appended", "", "deny_commands: [curl]", func(p *Policy) bool { return slices.Equal(p.DenyCommands, []string{"sudo", "curl"}) }},
		{"deny_private on", "deny_private: false", "deny_private: true", func(p *Policy) bool { return p.DenyPrivate }},
		{"deny_private off when off", "deny_private: false", "deny_private: false", func(p *Policy) bool { return !p.DenyPrivate }},
		{"terminate all", "", "terminate: all", func(p *Policy) bool { return p.Terminate == TerminateAll }},
		{"terminate all from none", "terminate: none", "terminate: all", func(p *Policy) bool { return p.Terminate == TerminateAll }},
		{"resolve kept", "", "resolve: [api.internal=10.0.0.7]", func(p *Policy) bool { return slices.Equal(p.Resolve, []string{"api.internal=10.0.0.7"}) }},
		{"resolve dropped", "", "resolve: []", func(p *Policy) bool { return len(p.Resolve) == 0 }},
		{"exclude narrower", "", "exclude: [app.pinned.example.com]", func(p *Policy) bool { return slices.Equal(p.Exclude, []string{"app.pinned.example.com"}) }},
		{"extra_ca kept", "", "extra_ca: [/etc/ssl/extra-ca.pem]", func(p *Policy) bool { return len(p.ExtraCA) == 1 }},
		{"extra_ca dropped", "", "extra_ca: []", func(p *Policy) bool { return len(p.ExtraCA) == 0 }},
		{"expose below", "", "expose: [/opt/tools/go]", func(p *Policy) bool { return slices.Equal(p.Expose, []string{"/opt/tools/go"}) }},
		{"allow_paths rw below rw", "", "allow_paths: [~/cache/go:rw]", func(p *Policy) bool { return slices.Equal(p.AllowPaths, []string{testHome + "/cache/go:rw"}) }},
		{"allow_paths ro of rw", "", "allow_paths: [~/cache:ro]", func(p *Policy) bool { return slices.Equal(p.AllowPaths, []string{testHome + "/cache"}) }},
		{"allow_paths ro below ro", "", "allow_paths: [/data/x]", func(p *Policy) bool { return slices.Equal(p.AllowPaths, []string{"/data/x"}) }},
		{"env subset", "", "env: [PATH, GOPATH]", func(p *Policy) bool { return slices.Equal(p.Env, []string{"PATH", "GOPATH"}) }},
		{"env none", "", "env: []", func(p *Policy) bool { return len(p.Env) == 0 }},
		{"run_as same", "", "run_as: builder", func(p *Policy) bool { return p.RunAs == "builder" }},
		{"limits lower", "", "limits: {timeout: 5m, memory: 1GiB, pids: 50, tmp_size: 1MiB, audit_budget: 1MiB}", func(p *Policy) bool {
			return p.Limits == Limits{Timeout: 5 * time.Minute, Memory: 1 << 30, Pids: 50, TmpSize: 1 << 20, AuditBudget: 1 << 20}
		}},
		{"limits equal", "", "limits: {timeout: 10m, pids: 100}", func(p *Policy) bool { return p.Limits.Timeout == 10*time.Minute && p.Limits.Pids == 100 }},
		{"limits below none", unlimited, "limits: {timeout: 1h, memory: 64GiB, pids: 1000000, tmp_size: 1TiB}", func(p *Policy) bool { return p.Limits.Timeout == time.Hour }},
		{"limits none when none", unlimited, "limits: {timeout: 0s, memory: 0}", func(p *Policy) bool { return p.Limits.Memory == 0 }},
		{"credentials dropped", "", "credentials: []", func(p *Policy) bool { return len(p.Credentials) == 0 }},
		{"credentials kept word for word", "", `credentials:
  - name: provider
    source: {env: PROVIDER_REAL_KEY}
    hosts: [api.provider.example]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`, func(p *Policy) bool { return len(p.Credentials) == 1 }},
		{"empty project", "", "# nothing\n", func(p *Policy) bool { return len(p.Allow) == 3 }},
		{"whole narrowing file", "", string(readTestdata(t, "project-narrow.yaml")), func(p *Policy) bool {
			return p.Network == NetOff && slices.Equal(p.Allow, []string{"docs.example.com"}) && p.DenyPrivate
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := layered(withKeys(t, global, tt.global), tt.project, Overrides{})
			if err != nil {
				t.Fatalf("narrowing refused: %v", err)
			}
			if !tt.check(p) {
				t.Fatalf("unexpected result: %+v", p)
			}
		})
	}
}

func TestProjectCannotWiden(t *testing.T) {
	global := string(readTestdata(t, "global.yaml"))
	tests := []struct {
		name, global, project string
		key, value            string
	}{
		{"network wider", "", "network: open", "network", "open"},
		{"network wider from off", "network: off", "network: restricted", "network", "restricted"},
		{"allow other host", "", "allow: [evil.example.net]", "allow", "evil.example.net"},
		{"allow apex of wildcard", "", "allow: [example.com]", "allow", "example.com"},
		{"allow every port", "", `allow: ["*.example.com:*"]`, "allow", "*.example.com:*"},
		{"allow other port", "", "allow: [docs.example.com:8443]", "allow", "docs.example.com:8443"},
		{"allow default ports of one-port entry", "", "allow: [api.other.org]", "allow", "api.other.org"},
		{"allow wider range", "", "allow: [192.0.2.0/23]", "allow", "192.0.2.0/23"},
		{"allow one bad among good", "", string(readTestdata(t, "project-widen.yaml")), "allow", "evil.example.net"},
		{"deny_private off", "", "deny_private: false", "deny_private", "false"},
		{"terminate none", "", "terminate: none", "terminate", "none"},
		{"resolve other address", "", "resolve: [api.internal=10.0.0.8]", "resolve", "api.internal=10.0.0.8"},
		{"exclude other", "", "exclude: [bank.example.net]", "exclude", "bank.example.net"},
		{"extra_ca other", "", "extra_ca: [/etc/ssl/mine.pem]", "extra_ca", "/etc/ssl/mine.pem"},
		{"expose parent", "", "expose: [/opt]", "expose", "/opt"},
		{"expose sibling prefix", "", "expose: [/opt/toolsmith]", "expose", "/opt/toolsmith"},
		{"allow_paths write on read-only", "", "allow_paths: [/data:rw]", "allow_paths", "/data:rw"},
		{"allow_paths outside", "", "allow_paths: [~/other]", "allow_paths", testHome + "/other"},
		{"allow_paths home", "", "allow_paths: ['~']", "allow_paths", testHome},
		{"env other", "", "env: [AWS_SECRET_ACCESS_KEY]", "env", "AWS_SECRET_ACCESS_KEY"},
		{"run_as other", "", "run_as: root", "run_as", "root"},
		{"timeout higher", "", "limits: {timeout: 20m}", "limits.timeout", "20m0s"},
		{"timeout none", "", "limits: {timeout: 0s}", "limits.timeout", "0s"},
		{"memory higher", "", "limits: {memory: 4GiB}", "limits.memory", "4GiB"},
		{"pids none", "", "limits: {pids: 0}", "limits.pids", "0"},
		{"tmp_size higher", "", "limits: {tmp_size: 1GiB}", "limits.tmp_size", "1GiB"},
		{"credentials new", "", "credentials: [{name: mine, source: {env: K}, hosts: [api.provider.example]}]", "credentials", "mine"},
		{"credentials host added", "", `credentials:
  - name: provider
    source: {env: PROVIDER_REAL_KEY}
    hosts: [api.provider.example, evil.example.net]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`, "credentials", "provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := layered(withKeys(t, global, tt.global), tt.project, Overrides{})
			var we *WidenError
			if !errors.As(err, &we) {
				t.Fatalf("widening accepted or refused for another reason: %v", err)
			}
			if we.Key != tt.key || !strings.Contains(we.Value, tt.value) || we.File != "/w/.cordon.yaml" {
				t.Fatalf("error names %s %s in %s, want %s %s", we.Key, we.Value, we.File, tt.key, tt.value)
			}
			// The fix is the project file's: the repository asks, only the
			// operator widens, for an entry they trust.
			for _, want := range []string{tt.key, tt.value, "can only narrow", "remove the entry from /w/.cordon.yaml (only if you trust it", "global config", "flag"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestLayeringOrder(t *testing.T) {
	global := "network: open\nallow: [a.example.com, b.example.com]\nlimits: {memory: 1GiB}\n"
	project := "network: restricted\nallow: [a.example.com]\nlimits: {memory: 512MiB}\n"
	open, mem := NetOpen, int64(4<<30)
	p, err := layered(global, project, Overrides{
		Network: &open,
		Allow:   []string{"c.example.com"},
		Deny:    []string{"x.example.com"},
		Env:     []string{"EXTRA"},
		Memory:  &mem,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Network != NetOpen || !slices.Equal(p.Allow, []string{"a.example.com", "c.example.com"}) ||
		p.Limits.Memory != mem || !slices.Equal(p.Deny, []string{"x.example.com"}) || !slices.Contains(p.Env, "EXTRA") {
		t.Fatalf("flags did not apply after the project file: %+v", p)
	}

	// Without flags the project's narrowing stands.
	p, err = layered(global, project, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Network != NetRestricted || !slices.Equal(p.Allow, []string{"a.example.com"}) || p.Limits.Memory != 512<<20 {
		t.Fatalf("project did not narrow the global file: %+v", p)
	}

	// The global file replaces default scalars and adds to default lists.
	p, err = layered("run_as: builder\nenv: [GOPATH]\ndeny_read: [/srv/keys]\n", "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if p.RunAs != "builder" || !slices.Contains(p.Env, "PATH") || !slices.Contains(p.Env, "GOPATH") ||
		!slices.Contains(p.DenyRead, "/srv/keys") || !slices.Contains(p.DenyRead, testHome+"/.ssh") {
		t.Fatalf("global file did not layer on the defaults: %+v", p)
	}
}

func TestDefaultsAlone(t *testing.T) {
	p, err := layered("", "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Network != NetRestricted || len(p.Allow) != 0 || p.Terminate != TerminateAll || p.RunAs != DefaultRunAs ||
		p.Limits != (Limits{Memory: DefaultMemory, Pids: DefaultPids, TmpSize: DefaultTmpSize, AuditBudget: DefaultAuditBudget}) {
		t.Fatalf("defaults: %+v", p)
	}
	for _, s := range p.DenyRead {
		if !filepath.IsAbs(s) {
			t.Errorf("default deny_read %q was not expanded", s)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("unexpanded defaults do not validate: %v", err)
	}
}

func TestOverridesRefuseBadEntries(t *testing.T) {
	bad := NetMode("wide")
	tests := []struct {
		name string
		o    Overrides
		want string
	}{
		{"network", Overrides{Network: &bad}, `network: "wide"`},
		{"allow", Overrides{Allow: []string{"a b"}}, "allow"},
		{"deny", Overrides{Deny: []string{"*"}}, "deny"},
		{"allow_paths other home", Overrides{AllowPaths: []string{"~root/x"}}, "only ~ and ~/"},
		{"allow_paths variable", Overrides{AllowPaths: []string{"$HOME/x:rw"}}, `allow_paths: path "$HOME/x": cordon expands no variables; write ~/ for your home, or the path out in full`},
		{"extra_ca variable", Overrides{ExtraCA: []string{"${CA_DIR}/ca.pem"}}, `path "${CA_DIR}/ca.pem": cordon expands no variables`},
		{"resolve", Overrides{Resolve: []string{"a.example"}}, "NAME=ADDRESS"},
		{"terminate", Overrides{Terminate: "some"}, "all or none"},
		{"allow_paths suffix", Overrides{AllowPaths: []string{"/src:wr"}}, ":rw or :ro"},
		{"env", Overrides{Env: []string{"A=B"}}, "env"},
		{"credential twice", Overrides{Credentials: []Credential{
			{Name: "x", Source: Source{Env: "X"}, Hosts: []string{"x.example"}},
			{Name: "x", Source: Source{Env: "Y"}, Hosts: []string{"x.example"}},
		}}, "used twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := layered("", "", tt.o)
			if err == nil || !strings.Contains(err.Error(), "flags") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error from flags mentioning %q", err, tt.want)
			}
		})
	}
}

func TestOverridesDoNotAlias(t *testing.T) {
	o := Overrides{AllowPaths: []string{"~/x:rw"}}
	if _, err := layered("", "", o); err != nil {
		t.Fatal(err)
	}
	if o.AllowPaths[0] != "~/x:rw" {
		t.Fatalf("Load rewrote the caller's slice: %q", o.AllowPaths[0])
	}
}

func TestOverridesPaths(t *testing.T) {
	p, err := layered("", "", Overrides{
		AllowPaths: []string{"build:rw", "../shared", "~/notes"},
		ExtraCA:    []string{"ca.pem"},
		Resolve:    []string{"api.internal=10.0.0.7"},
		Terminate:  TerminateNone,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/w/src/build:rw", "/w/shared", testHome + "/notes"}; !slices.Equal(p.AllowPaths, want) {
		t.Errorf("allow_paths %q, want %q", p.AllowPaths, want)
	}
	if !slices.Equal(p.ExtraCA, []string{"/w/src/ca.pem"}) || !slices.Equal(p.Resolve, []string{"api.internal=10.0.0.7"}) || p.Terminate != TerminateNone {
		t.Errorf("flags: %+v", p)
	}
}

// TestEveryKeyLayers fails when a field is added to Policy without being
// layered: a global file setting every key must change every field, and a
// project file must be able to name every key.
func TestEveryKeyLayers(t *testing.T) {
	global := withKeys(t, string(readTestdata(t, "global.yaml")), "{network: open, terminate: none}")
	p, err := layered(global, "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	for _, pair := range [][2]reflect.Value{
		{reflect.ValueOf(p).Elem(), reflect.ValueOf(d).Elem()},
		{reflect.ValueOf(p.Limits), reflect.ValueOf(d.Limits)},
	} {
		got, def := pair[0], pair[1]
		for i := range got.NumField() {
			if reflect.DeepEqual(got.Field(i).Interface(), def.Field(i).Interface()) {
				t.Errorf("testdata/layers/global.yaml leaves %s at its default: set it there and layer it in widenWith", got.Type().Field(i).Name)
			}
		}
	}
	if want := tagNames(reflect.TypeFor[Policy]()); !slices.Equal(projectKeys, want) {
		t.Errorf("projectKeys %q, want every Policy key %q (and a narrowing rule for each)", projectKeys, want)
	}
	if _, err := layered(global, global, Overrides{}); err != nil {
		t.Errorf("a project file equal to the global one must load: %v", err)
	}
}

// TestProjectDroppedCredentialSourcesStayHidden: a project file that drops
// a credential (all of them, or all but one) leaves its source file in
// deny_read: the box hides the sources of the effective policy's
// credentials, and the file still holds a real secret.
func TestProjectDroppedCredentialSourcesStayHidden(t *testing.T) {
	global := `credentials:
  - {name: a, source: {file: ~/keys/a}, hosts: [a.example], header: "Authorization: Bearer {}", env: A_KEY}
  - {name: b, source: {file: /etc/keys/b}, hosts: [b.example], header: "Authorization: Bearer {}", env: B_KEY}
  - {name: c, source: {env: C_REAL}, hosts: [c.example], header: "Authorization: Bearer {}", env: C_KEY}
`
	for _, tt := range []struct {
		name, project string
		hidden, not   []string
	}{
		{"all dropped", "credentials: []", []string{testHome + "/keys/a", "/etc/keys/b"}, nil},
		{"one kept", `credentials:
  - {name: b, source: {file: /etc/keys/b}, hosts: [b.example], header: "Authorization: Bearer {}", env: B_KEY}
`, []string{testHome + "/keys/a"}, []string{"/etc/keys/b"}},
		{"none dropped", "network: off", nil, []string{testHome + "/keys/a", "/etc/keys/b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := layered(global, tt.project, Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.hidden {
				if !slices.Contains(p.DenyRead, f) {
					t.Errorf("deny_read %q lacks the dropped credential's source %s", p.DenyRead, f)
				}
			}
			for _, f := range tt.not {
				if slices.Contains(p.DenyRead, f) {
					t.Errorf("deny_read %q holds %s, the source of a credential the policy still has", p.DenyRead, f)
				}
			}
		})
	}
}

// TestProjectMountsBounded: a project file, which a cloned repository
// chooses, may name at most maxProjectMounts deny_read and read_only
// paths: each is a mount, and 1,400 made every run's box take 25 s to
// build. One more is refused, naming the file, the count and the fix; the
// bound itself is taken, and the global config is not bounded.
func TestProjectMountsBounded(t *testing.T) {
	global := string(readTestdata(t, "global.yaml"))
	list := func(key string, n int) string {
		var b strings.Builder
		b.WriteString(key + ":\n")
		for i := range n {
			if key == "read_only" { // relative to the workspace
				fmt.Fprintf(&b, "  - d%d/kept\n", i)
			} else {
				fmt.Fprintf(&b, "  - /w/d%d/secret\n", i)
			}
		}
		return b.String()
	}
	if _, err := layered(global, list("deny_read", maxProjectMounts-1)+list("read_only", 1), Overrides{}); err != nil {
		t.Fatalf("%d paths refused: %v", maxProjectMounts, err)
	}
	_, err := layered(global, list("deny_read", maxProjectMounts)+list("read_only", 1), Overrides{})
	for _, want := range []string{"/w/.cordon.yaml", fmt.Sprintf("name %d paths, more than the %d", maxProjectMounts+1, maxProjectMounts), "directories that hold them", "global config"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d paths: err = %v, want it to say %q", maxProjectMounts+1, err, want)
		}
	}
	if _, err := layered(withKeys(t, global, list("deny_read", 2*maxProjectMounts)), "", Overrides{}); err != nil {
		t.Errorf("a global config of %d deny_read paths refused: %v", 2*maxProjectMounts, err)
	}
	// Directories below the global config's expose and allow_paths
	// narrow them, and each is a mount too (red team, round 6: 1,400
	// expose entries made every run 13 s).
	below := func(key, dir string, n int) string {
		var b strings.Builder
		b.WriteString(key + ":\n")
		for i := range n {
			fmt.Fprintf(&b, "  - %s/d%d\n", dir, i)
		}
		return b.String()
	}
	if _, err := layered(global, below("expose", "/opt/tools", maxProjectMounts/2)+below("allow_paths", "/data", maxProjectMounts/2), Overrides{}); err != nil {
		t.Fatalf("%d expose and allow_paths entries refused: %v", maxProjectMounts, err)
	}
	_, err = layered(global, below("expose", "/opt/tools", maxProjectMounts/2)+below("allow_paths", "/data", maxProjectMounts/2+1), Overrides{})
	if want := fmt.Sprintf("name %d paths, more than the %d", maxProjectMounts+1, maxProjectMounts); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%d expose and allow_paths entries: err = %v, want it to say %q", maxProjectMounts+1, err, want)
	}
	// The bound is on a workspace's project files together (red team,
	// round 6: six files of 250 deny_read entries each, one per level,
	// made every run 9 s).
	projects := []*configFile{
		{path: "/w/.cordon.yaml", data: []byte(list("deny_read", maxProjectMounts/2))},
		{path: "/w/src/.cordon.yaml", data: []byte(list("deny_read", maxProjectMounts/2))},
	}
	g := &configFile{path: "global.yaml", data: []byte(global)}
	if _, err := buildLayers(testHome, "/w/src", "/w/src", g, projects, Overrides{}); err != nil {
		t.Fatalf("two project files of %d paths together refused: %v", maxProjectMounts, err)
	}
	projects[1].data = []byte(list("deny_read", maxProjectMounts/2+1))
	_, err = buildLayers(testHome, "/w/src", "/w/src", g, projects, Overrides{})
	for _, want := range []string{"/w/src/.cordon.yaml", fmt.Sprintf("name %d paths with the project files above it (/w/.cordon.yaml), more than the %d", maxProjectMounts+1, maxProjectMounts)} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("two project files of %d paths together: err = %v, want it to say %q", maxProjectMounts+1, err, want)
		}
	}
}

// TestProjectListsBounded: a project file's other lists hold at most
// maxProjectEntries entries each (red team, round 6: 100,000
// deny_commands took every run 7 s, each looked up on PATH).
func TestProjectListsBounded(t *testing.T) {
	global := string(readTestdata(t, "global.yaml"))
	list := func(key string, n int) string {
		var b strings.Builder
		b.WriteString(key + ":\n")
		for i := range n {
			fmt.Fprintf(&b, "  - c%d\n", i)
		}
		return b.String()
	}
	if _, err := layered(global, list("deny_commands", maxProjectEntries), Overrides{}); err != nil {
		t.Fatalf("%d deny_commands refused: %v", maxProjectEntries, err)
	}
	_, err := layered(global, list("deny_commands", maxProjectEntries+1), Overrides{})
	for _, want := range []string{"/w/.cordon.yaml", fmt.Sprintf("deny_commands names %d entries, more than the %d", maxProjectEntries+1, maxProjectEntries), "global config"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d deny_commands: err = %v, want it to say %q", maxProjectEntries+1, err, want)
		}
	}
	if _, err := layered(global, list("deny", maxProjectEntries+1), Overrides{}); err == nil || !strings.Contains(err.Error(), "deny names") {
		t.Errorf("%d deny entries: err = %v", maxProjectEntries+1, err)
	}
}

// TestAppendUnique: entries already in the list, or earlier in add, are
// not appended again, and the order is kept. It merges by a set, not by a
// search of the list for each entry, which took every run, proxy and
// doctor 30 to 50 s with a project file's 100,000 deny_commands (red
// team, round 6; BenchmarkAppendUnique).
func TestAppendUnique(t *testing.T) {
	var add []string
	for i := range 100_000 {
		add = append(add, fmt.Sprintf("c%x", i%50_000))
	}
	got := appendUnique([]string{"c0", "kept"}, add...)
	if len(got) != 50_001 || got[0] != "c0" || got[1] != "kept" || got[2] != "c1" {
		t.Fatalf("appendUnique kept %d entries, starting %q; want 50,001, the list's first", len(got), got[:3])
	}
}

// BenchmarkAppendUnique merges a project file's 100,000 entries.
func BenchmarkAppendUnique(b *testing.B) {
	var add []string
	for i := range 100_000 {
		add = append(add, fmt.Sprintf("c%x", i))
	}
	for b.Loop() {
		appendUnique([]string{"kept"}, add...)
	}
}
