package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// TestPrintDoctorEscapes: a project file's path is in the workspace,
// whose directories a sandboxed command may have made and named with an
// escape sequence; doctor prints it, and the reasons, escaped; and the
// note, which quotes a project file's error, on one line.
func TestPrintDoctorEscapes(t *testing.T) {
	dir := "/ws/sub\x1b]0;pwned\a\x1b[2K"
	var out bytes.Buffer
	printDoctor(&out, doctorReport{
		Report: sandbox.Report{Backend: "bwrap", Capabilities: []sandbox.Capability{
			{Name: "x", Status: sandbox.Degraded, Reason: "found " + dir, Fix: "look in " + dir},
		}},
		Verdict: sandbox.Degraded, Network: policy.NetOff,
		Sources: policy.Sources{Global: dir + "/config.yaml", Projects: []string{dir + "/.cordon.yaml"}},
		Note:    "no project file was read: " + dir + "/.cordon.yaml: yaml: cannot decode !!str `\n" + forged + "`",
	})
	if strings.ContainsAny(out.String(), "\x1b\a") {
		t.Fatalf("doctor printed an escape sequence raw:\n%q", out.String())
	}
	// A newline of the project file's text starts no line of its own.
	if strings.Contains(out.String(), "\n"+forged) || !strings.Contains(out.String(), `\n`+forged) {
		t.Errorf("doctor's note does not quote the project file's newline escaped:\n%s", out.String())
	}
	escaped := `/ws/sub\x1b]0;pwned\a\x1b[2K`
	for _, w := range []string{"config:    " + escaped, "project:   " + escaped, "note:      no project file was read: " + escaped, "x: found " + escaped, "fix: look in " + escaped} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("doctor's output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestDoctorShowsCanonicalAllowlist: doctor showed a project file's
// allow entries as written, and one may end in a carriage return (the
// blanks around an entry are trimmed when it is parsed): on the terminal
// the entries after it were written over those before it, and the
// allowlist looked narrower than it was. It shows each entry in its
// canonical form, as cordon run --json and cordon proxy do.
func TestDoctorShowsCanonicalAllowlist(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CORDON_CONFIG", "")
	ws := filepath.Join(home, "ws")
	for path, data := range map[string]string{
		filepath.Join(home, ".config", "cordon", "config.yaml"): "allow: [\"*.github.com\"]\n",
		filepath.Join(ws, ".git", "HEAD"):                       "ref: refs/heads/main\n",
		filepath.Join(ws, policy.ProjectFile):                   "allow: [\"exfil.github.com\\r\", \"API.github.com" + strings.Repeat(" ", 40) + "\"]\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(ws)
	var out bytes.Buffer
	execute(&out, &out, "doctor", "--net", "restricted", "--audit", filepath.Join(t.TempDir(), "audit.jsonl"))
	if !strings.Contains(out.String(), "\nallowed:   exfil.github.com api.github.com\n") {
		t.Errorf("doctor does not show the allowlist in its canonical form:\n%q", out.String())
	}
}
