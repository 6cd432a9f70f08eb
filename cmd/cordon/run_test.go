package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/spf13/pflag"
)

func TestHidePassedValues(t *testing.T) {
	argv := []string{"bwrap", "--ro-bind", "/usr", "/usr", "--clearenv",
		"--setenv", "PATH", "/usr/bin",
		"--setenv", "TOKEN", "s3cret",
		"--setenv", "ODD", "--setenv",
		"--setenv", "OTHER", "TOKEN",
		"--seccomp", "4", "--", "/usr/bin/env", "TOKEN"}
	want := slices.Clone(argv)
	want[10] = "[value of $TOKEN, 6 bytes, not shown]"
	want[13] = "[value of $ODD, 8 bytes, not shown]"
	hidePassedValues(argv, []string{"TOKEN", "ODD"})
	if !slices.Equal(argv, want) {
		t.Errorf("hidePassedValues =\n%q\nwant\n%q", argv, want)
	}
	// No --clearenv (another launcher): nothing is taken for a value.
	plain := []string{"sandbox-exec", "-p", "TOKEN", "--", "true"}
	hidePassedValues(plain, []string{"TOKEN"})
	if plain[2] != "TOKEN" {
		t.Errorf("an argv without --clearenv was changed: %q", plain)
	}
}

// TestRunJSONEscapesUnprintable: the --json outcome holds names the box
// chose (a host and a path it asked for), and reaches the user's
// terminal: it stays one line of printable ASCII, whatever they hold
// (quotes, newlines, ESC, C1 controls, bidi overrides, bytes that are
// not UTF-8), and decodes the same.
func TestRunJSONEscapesUnprintable(t *testing.T) {
	const host, path = "a\u009b2Jb\u202ec\"d\ne\xff\x1b]52;c;?\a.example", "/\x1b[6n\u009d11;?\u009c\r\n{}"
	var out bytes.Buffer
	r := &runState{f: &runFlags{json: true}, stdout: &out}
	r.decisions.add(audit.Record{Type: audit.TypeDecision, Host: host, Path: path, Decision: audit.Deny})
	r.print()
	line, _ := strings.CutSuffix(out.String(), "\n")
	if strings.ContainsFunc(line, func(c rune) bool { return c < 0x20 || c >= 0x7f }) || !strings.Contains(line, `\u009b`) {
		t.Fatalf("--json printed the box's characters raw: %q", out.String())
	}
	var got outcome
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Network.Decisions) != 1 ||
		got.Network.Decisions[0].Host != strings.ToValidUTF8(host, "\ufffd") || got.Network.Decisions[0].Path != path {
		t.Fatalf("decoded %+v (%v), want the host %q (a byte that is not UTF-8 as U+FFFD) and the path %q back", got.Network.Decisions, err, host, path)
	}
}

// The --json outcome lists the session's first decision lines, and
// counts the rest: it listed none, ever, though the README said it holds
// them. Lines of other types are no decisions.
func TestRunJSONListsDecisions(t *testing.T) {
	var out bytes.Buffer
	r := &runState{f: &runFlags{json: true}, stdout: &out}
	r.print()
	if !strings.Contains(out.String(), `"decisions":[]`) || strings.Contains(out.String(), "decisionsNotListed") {
		t.Fatalf("no decisions: %s, want an empty list and no count", out.String())
	}
	r.decisions.add(audit.Record{Type: audit.TypeLaunch})
	for i := range maxListedDecisions + 3 {
		r.decisions.add(audit.Record{Type: audit.TypeDecision, Host: fmt.Sprintf("h%d.example", i), Decision: audit.Deny})
	}
	out.Reset()
	r.print()
	var got outcome
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if d := got.Network.Decisions; len(d) != maxListedDecisions || d[0].Host != "h0.example" || got.Network.DecisionsNotListed != 3 {
		t.Fatalf("listed %d decisions from %q, %d not listed; want %d from h0.example, 3 not listed", len(d), d[0].Host, got.Network.DecisionsNotListed, maxListedDecisions)
	}
}

// TestDryRunRefusesAsARunDoes: --dry-run refuses what the run would
// refuse from its policy and command line, with nothing run: a command
// on deny_commands, --credential without the restricted network, a
// credential that is not configured, an extra CA that is not there. It
// printed a plan for each before, and the run then refused.
func TestDryRunRefusesAsARunDoes(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("deny_commands: [shred]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORDON_CONFIG", cfg)
	t.Setenv("CORDON_AUDIT", filepath.Join(t.TempDir(), "audit.jsonl"))
	ws := filepath.Join(home, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--net", "off", "--", "shred", "x"}, "deny_commands"},
		{[]string{"--net", "off", "--credential", "api", "--", "true"}, "--credential needs --net restricted"},
		{[]string{"--net", "restricted", "--credential", "api", "--", "true"}, `unknown credential "api"`},
		{[]string{"--net", "restricted", "--extra-ca", "/nonexistent/ca.pem", "--", "true"}, "extra CA /nonexistent/ca.pem: no such file"},
		{[]string{"--net", "restricted", "--", "true"}, ""},
	} {
		var out bytes.Buffer
		err := execute(&out, &out, append([]string{"run", "--dry-run"}, tc.args...)...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("cordon run --dry-run %s: %v", strings.Join(tc.args, " "), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("cordon run --dry-run %s: %v; want a refusal saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// The README's synopsis of cordon run lists every flag the command takes:
// it left out --resolve, --extra-ca, --terminate, --ephemeral-ca and
// --target, which --help lists.
func TestREADMERunSynopsisListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\n## cordon run\n\n```\n")
	synopsis, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("no synopsis block under ## cordon run in the README")
	}
	newRunCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !strings.Contains(synopsis, "[--"+f.Name) {
			t.Errorf("the README's synopsis of cordon run lacks --%s:\n%s", f.Name, synopsis)
		}
	})
}

func TestUnsetEnv(t *testing.T) {
	host := map[string]string{"SET": "1", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := host[n]; return v, ok }
	for _, tt := range []struct {
		names, want []string
	}{
		{nil, nil},
		{[]string{"SET", "EMPTY"}, nil},
		{[]string{"SET", "UNSET", "EMPTY", "OTHER"}, []string{"UNSET", "OTHER"}},
	} {
		if got := unsetEnv(tt.names, lookup); !slices.Equal(got, tt.want) {
			t.Errorf("unsetEnv(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
}

// TestRunFlagWrittenWrongIsAUsageError: a one-shot flag the policy cannot
// take as written (--env A=B, --allow-path PATH:rx) exits 2, as one its
// own parser refuses (--timeout 5) does, and writes nothing to the audit
// log: it exited 125, the launch failure's code, with a block line (red
// team, round 6).
func TestRunFlagWrittenWrongIsAUsageError(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	t.Setenv("CORDON_CONFIG", "")
	ws := filepath.Join(home, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	log := filepath.Join(home, "audit.jsonl")
	for _, flag := range [][]string{{"--env", "A=B"}, {"--env", ""}, {"--allow-path", "/etc:rx"}} {
		var out bytes.Buffer
		err := execute(&out, &out, append(append([]string{"run", "--net", "off", "--audit", log}, flag...), "--", "true")...)
		if code := printError(io.Discard, err); code != 2 {
			t.Errorf("%q: exit %d (%v), want 2", flag, code, err)
		}
		if data, _ := os.ReadFile(log); len(data) > 0 {
			t.Errorf("%q: the audit log holds %q", flag, data)
		}
	}
}
