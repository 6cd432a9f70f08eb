package policy

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Policy)
		want   string // empty: valid
	}{
		{"defaults", func(*Policy) {}, ""},
		{"every key set well", func(p *Policy) {
			p.Network = NetOpen
			p.Allow = []string{"*.example.com", "192.0.2.0/24:*", "[2001:db8::1]:8443"}
			p.Deny = []string{"x.example.com"}
			p.Exclude = []string{"pinned.example.com"}
			p.Resolve = []string{"api.internal=10.0.0.7", "v6.internal=2001:db8::7"}
			p.Terminate = TerminateNone
			p.ExtraCA = []string{"/etc/ca.pem"}
			p.Expose = []string{"~", "/opt/x"}
			p.AllowPaths = []string{"~/a:rw", "/b:ro", "/c", "/d:e/f"}
			p.DenyCommands = []string{"sudo"}
			p.Env = []string{"_X1"}
			p.Limits = Limits{Timeout: time.Minute, Memory: 1 << 20, Pids: 1, TmpSize: 1}
			p.Credentials = []Credential{{Name: "a", Source: Source{File: "~/k"}, Hosts: []string{"a.example"}, Env: "A_KEY"}}
		}, ""},
		{"network", func(p *Policy) { p.Network = "" }, `network: ""`},
		{"allow", func(p *Policy) { p.Allow = []string{"ok.example", "*"} }, `allow: pattern "*"`},
		{"deny", func(p *Policy) { p.Deny = []string{""} }, "deny: empty pattern"},
		{"exclude", func(p *Policy) { p.Exclude = []string{"a:b:c:d:zz"} }, "exclude"},
		{"resolve shape", func(p *Policy) { p.Resolve = []string{"a.example"} }, "NAME=ADDRESS"},
		{"resolve no name", func(p *Policy) { p.Resolve = []string{"=10.0.0.7"} }, `pin "=10.0.0.7": no NAME before the '='; write NAME=ADDRESS`},
		{"resolve no wildcard name", func(p *Policy) { p.Resolve = []string{"*.=10.0.0.7"} }, `pin "*.=10.0.0.7": no NAME before the '='`},
		{"resolve address", func(p *Policy) { p.Resolve = []string{"a.example=a.example"} }, "not an IP address"},
		{"resolve zone", func(p *Policy) { p.Resolve = []string{"a.example=fe80::1%eth0"} }, "not an IP address"},
		{"resolve name", func(p *Policy) { p.Resolve = []string{"a b=10.0.0.1"} }, "resolve"},
		{"terminate", func(p *Policy) { p.Terminate = "" }, "terminate"},
		{"extra_ca", func(p *Policy) { p.ExtraCA = []string{"ca.pem"} }, "extra_ca"},
		{"expose", func(p *Policy) { p.Expose = []string{""} }, "expose: empty path"},
		{"allow_paths suffix", func(p *Policy) { p.AllowPaths = []string{"/a:w"} }, "allow_paths"},
		{"allow_paths relative", func(p *Policy) { p.AllowPaths = []string{"a:rw"} }, "relative"},
		{"deny_read", func(p *Policy) { p.DenyRead = []string{"~x"} }, "deny_read"},
		{"read_only", func(p *Policy) { p.ReadOnly = []string{".vscode", ".github/workflows", "a/../b"} }, ""},
		{"read_only empty", func(p *Policy) { p.ReadOnly = []string{""} }, "read_only: empty path"},
		{"read_only absolute", func(p *Policy) { p.ReadOnly = []string{"/etc"} }, "not relative to the workspace"},
		{"read_only home", func(p *Policy) { p.ReadOnly = []string{"~/.vscode"} }, "not relative to the workspace"},
		{"read_only parent", func(p *Policy) { p.ReadOnly = []string{"../x"} }, "not inside the workspace"},
		{"read_only root", func(p *Policy) { p.ReadOnly = []string{"./"} }, "not inside the workspace"},
		{"deny_commands", func(p *Policy) { p.DenyCommands = []string{" "} }, "deny_commands"},
		{"env digit", func(p *Policy) { p.Env = []string{"1A"} }, "env"},
		{"env empty", func(p *Policy) { p.Env = []string{""} }, "env"},
		{"env with a value", func(p *Policy) { p.Env = []string{"FOO=bar"} }, `env: "FOO=bar" is not a variable name: an entry names a variable of cordon's environment, whose value it passes; set FOO there (export FOO=bar) and name it alone, as FOO`},
		{"run_as", func(p *Policy) { p.RunAs = " " }, "run_as"},
		{"timeout", func(p *Policy) { p.Limits.Timeout = -1 }, "limits.timeout"},
		{"memory", func(p *Policy) { p.Limits.Memory = -1 }, "limits.memory"},
		{"memory without a unit", func(p *Policy) { p.Limits.Memory = 512 }, "such as 512MiB"},
		{"memory at the floor", func(p *Policy) { p.Limits.Memory = 1 << 20 }, ""},
		{"tmp_size", func(p *Policy) { p.Limits.TmpSize = -1 }, "limits.tmp_size"},
		{"audit_budget", func(p *Policy) { p.Limits.AuditBudget = -1 }, "limits.audit_budget"},
		{"audit_budget too small", func(p *Policy) { p.Limits.AuditBudget = 4096 }, "64KiB at least"},
		{"audit_budget off", func(p *Policy) { p.Limits.AuditBudget = 0 }, ""},
		{"credential env", func(p *Policy) {
			p.Credentials = []Credential{{Name: "a", Source: Source{Command: "pass a"}, Hosts: []string{"a.example"}, Env: "A-KEY"}}
		}, `env "A-KEY"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Defaults()
			tt.change(p)
			err := p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("valid policy refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestParsePathRule(t *testing.T) {
	tests := []struct {
		in, path string
		write    bool
		str      string
	}{
		{"/a", "/a", false, "/a"},
		{"/a:ro", "/a", false, "/a"},
		{"/a:rw", "/a", true, "/a:rw"},
		{"/a:b/c", "/a:b/c", false, "/a:b/c"},
		{"/a:b/c:rw", "/a:b/c", true, "/a:b/c:rw"},
		{"~/x:rw", "~/x", true, "~/x:rw"},
	}
	for _, tt := range tests {
		r, err := ParsePathRule(tt.in)
		if err != nil || r.Path != tt.path || r.Write != tt.write || r.String() != tt.str {
			t.Errorf("ParsePathRule(%q) = %+v %q, %v", tt.in, r, r.String(), err)
		}
	}
	for _, in := range []string{"/a:", "/a:RW", "/a:rwx", "/a:b"} {
		if _, err := ParsePathRule(in); err == nil || !strings.Contains(err.Error(), ":rw or :ro") {
			t.Errorf("ParsePathRule(%q): %v", in, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"512MiB", 512 << 20},
		{"2GiB", 2 << 30},
		{"2 GiB", 2 << 30},
		{"2gib", 2 << 30},
		{"2G", 2 << 30},
		{"2GB", 2e9},
		{"1.5KiB", 1536},
		{"1TiB", 1 << 40},
		{"10B", 10},
		{"0.0", 0},
		{"0GiB", 0},
	}
	for _, tt := range tests {
		if got, err := ParseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "2XB", "1.2.3", "1e9", "99999999TiB", ".", "0.5", ".9B", "0.001"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	// A size under a byte is not read as 0, which lifts a limit.
	if _, err := ParseSize("0.5"); err == nil || !strings.Contains(err.Error(), `size "0.5" is less than a byte, not 0 (which would lift the limit)`) {
		t.Errorf("ParseSize(0.5): %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 100: "100", 1536: "1536", 2048: "2KiB", 3 << 29: "1536MiB", 8 << 30: "8GiB", 1 << 40: "1TiB"} {
		got := FormatSize(n)
		if got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(got); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

func TestParseNetMode(t *testing.T) {
	for _, m := range []NetMode{NetOff, NetRestricted, NetOpen} {
		if got, err := ParseNetMode(string(m)); err != nil || got != m {
			t.Errorf("ParseNetMode(%q) = %q, %v", m, got, err)
		}
	}
	for _, s := range []string{"", "Off", "closed", "on"} {
		if _, err := ParseNetMode(s); err == nil || !strings.Contains(err.Error(), "off, restricted, open") {
			t.Errorf("ParseNetMode(%q): %v", s, err)
		}
	}
}

func TestParseResolve(t *testing.T) {
	h, a, err := ParseResolve("API.Internal.=::ffff:10.0.0.7")
	if err != nil || h != "api.internal" || a.String() != "10.0.0.7" {
		t.Fatalf("ParseResolve = %q %v %v", h, a, err)
	}
}
