package main

import (
	"slices"
	"strings"
	"testing"
)

// Every command is registered under the name that invokes it, and a
// command line that starts with one builds that command alone, whose
// flags and help work as in the full tree.
func TestRootBuildsTheCommandAsked(t *testing.T) {
	full := newRootCmd(nil)
	var names []string
	for _, c := range full.Commands() {
		names = append(names, c.Name())
	}
	for name, newCmd := range subcommands {
		if got := newCmd().Name(); got != name {
			t.Errorf("%q is registered for the command named %q", name, got)
		}
		if !slices.Contains(names, name) {
			t.Errorf("the full tree %v lacks %q", names, name)
		}
		root := newRootCmd([]string{name, "--help"})
		if cs := root.Commands(); len(cs) != 1 || cs[0].Name() != name {
			t.Errorf("cordon %s builds %d commands, want only %q", name, len(cs), name)
		}
	}
	if out, err := runCordon(t, "completion", "bash"); err != nil || !strings.Contains(out, "bash completion") {
		t.Errorf("cordon completion bash: %v\n%.200s", err, out)
	}
	if out, err := runCordon(t, "help", "run"); err != nil || !strings.Contains(out, "--net") {
		t.Errorf("cordon help run: %v\n%.200s", err, out)
	}
	out, err := runCordon(t, "run", "--help")
	if err != nil || !strings.Contains(out, "--net") {
		t.Errorf("cordon run --help: %v\n%s", err, out)
	}
	if _, err := runCordon(t, "rnu"); err == nil || !strings.Contains(err.Error(), "run") {
		t.Errorf("cordon rnu: %v, want an unknown command suggesting run", err)
	}
}
