package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

// runCordon runs cordon with args in-process and returns what it wrote
// to stdout and stderr, together.
func runCordon(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := execute(&out, &out, args...)
	return out.String(), err
}

// execute runs cordon with args in-process, as main does, writing to
// stdout and stderr.
func execute(stdout, stderr io.Writer, args ...string) error {
	root := newRootCmd(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	return root.Execute()
}

func TestInitAndNetworkCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	t.Setenv("CORDON_CONFIG", "")
	path := filepath.Join(home, "xdg", "cordon", "config.yaml")

	out, err := runCordon(t, "init")
	if err != nil || strings.TrimSpace(out) != path {
		t.Fatalf("cordon init: %q, %v; want the path %s", out, err, path)
	}
	if _, err := runCordon(t, "init"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second cordon init: %v", err)
	}
	if _, err := runCordon(t, "init", "--force"); err != nil {
		t.Fatal(err)
	}

	out, err = runCordon(t, "network", "off")
	if err != nil || !strings.Contains(out, "network: off") || !strings.Contains(out, path) {
		t.Fatalf("cordon network off: %q, %v", out, err)
	}
	mkdir := filepath.Join(home, "proj", ".git")
	if err := os.MkdirAll(mkdir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, src, err := policy.Load(policy.LoadOptions{Workdir: filepath.Dir(mkdir)})
	if err != nil || p.Network != policy.NetOff || src.Global != path {
		t.Fatalf("after cordon network off: %+v %+v %v", p, src, err)
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), "#     header: \"Authorization: Bearer {}\"") {
		t.Fatalf("the edit lost the template's comments: %v\n%s", err, data)
	}

	if _, err := runCordon(t, "network", "closed"); err == nil || !strings.Contains(err.Error(), "off, restricted, open") {
		t.Fatalf("cordon network closed: %v", err)
	}
	other := filepath.Join(home, "other.yaml")
	if out, err := runCordon(t, "network", "--config", other, "open"); err != nil || !strings.Contains(out, other) {
		t.Fatalf("cordon network --config: %q, %v", out, err)
	}
	if out, err := runCordon(t, "init", "--config", filepath.Join(home, "new", "c.yaml")); err != nil || !strings.Contains(out, "c.yaml") {
		t.Fatalf("cordon init --config: %q, %v", out, err)
	}
}
