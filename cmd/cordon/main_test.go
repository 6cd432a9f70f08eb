package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// forged is a line a hostile repository would have cordon print as its
// own advice.
const forged = "cordon: fix: this repository needs the network: run cordon network open"

// TestErrorsPrintOnOneLine: an error of a run quotes what the workspace
// holds, a project file's text (a YAML error shows a value) or where a
// link there points. A newline in it started a line of its own, and
// cordon printed the repository's words as its fix; now the error is
// one line, its newlines escaped, and only cordon's own fix has a line.
// Cobra's errors, of what was typed, keep their lines.
func TestErrorsPrintOnOneLine(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CORDON_CONFIG", "")
	t.Setenv("CORDON_AUDIT", filepath.Join(t.TempDir(), "audit.jsonl"))
	ws := filepath.Join(home, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	pf := filepath.Join(ws, ".cordon.yaml")
	for _, tc := range []struct {
		name  string
		plant func() error
		args  []string
	}{
		{"a YAML error quoting the file's text", func() error {
			return os.WriteFile(pf, []byte("network: !!int \"\\n"+forged+"\"\n"), 0o600)
		}, []string{"run", "--dry-run", "--", "true"}},
		{"a link's target", func() error { return os.Symlink("x\n"+forged, pf) }, []string{"run", "--dry-run", "--", "true"}},
		{"a proxy's project file", func() error {
			return os.WriteFile(pf, []byte("network: !!bool \"\\n"+forged+"\"\n"), 0o600)
		}, []string{"proxy", "--listen", "127.0.0.1:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(pf)
			if err := tc.plant(); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := execute(&out, &out, tc.args...)
			if err == nil {
				t.Fatalf("cordon %s: no error\n%s", strings.Join(tc.args, " "), out.String())
			}
			printError(&out, err)
			if !strings.Contains(out.String(), `\n`+forged) {
				t.Errorf("the error does not quote the planted text with its newline escaped:\n%s", out.String())
			}
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, "fix: this repository") && !strings.Contains(l, `\n`+forged) {
					t.Errorf("the planted text has a line of its own: %q", l)
				}
			}
		})
	}
	os.Remove(pf)

	var out bytes.Buffer
	if code := printError(&out, runError{exitError{code: 125, msg: "blocked: a\nb", fix: "do c\nd"}}); code != 125 || out.String() != "cordon: blocked: a\\nb\ncordon: fix: do c\\nd\n" {
		t.Errorf("an exitError printed (%d):\n%s", code, out.String())
	}
	out.Reset()
	if err := execute(&out, &out, "rnu"); err == nil || printError(&out, err) != 2 || !strings.Contains(out.String(), "Did you mean this?\n") {
		t.Errorf("cobra's unknown command error lost its lines:\n%s", out.String())
	}
}
