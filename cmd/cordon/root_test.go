package main

import (
	"fmt"
	"path/filepath"
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

// A command given the wrong arguments says what it takes and shows it.
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run"}, []string{"no command to run", "cordon run --net off -- make test"}},
		{[]string{"run", "--net", "off"}, []string{"no command to run"}},
		{[]string{"run", "--net", "off", "make", "test"}, []string{"put the command after --, as in: cordon run --net off -- make test"}},
		{[]string{"run", "--net", "--", "make", "test"}, []string{"--net has no value: it took the -- that starts the command; give it one before --"}},
		{[]string{"run", "--net", "off", "--allow", "--", "npm", "ci"}, []string{"--allow has no value"}},
		{[]string{"run", "--allow-path", "--", "true"}, []string{"--allow-path has no value"}},
		{[]string{"run", "--net", "off", "--dry-run", "--", ""}, []string{`the command to run is an empty name (""): name a program after --, as in: cordon run --net off -- make test`}},
		{[]string{"network"}, []string{"network takes one network mode (off, restricted or open), got 0", "cordon network restricted"}},
		{[]string{"network", "off", "open"}, []string{"got 2"}},
		{[]string{"connect", "example.com"}, []string{"connect takes a HOST and a PORT, got 1", "cordon connect github.com 22"}},
		{[]string{"doctor", "now"}, []string{`doctor takes no arguments, got "now"`, "cordon doctor --help"}},
		{[]string{"ca", "path", "x"}, []string{`ca path takes no arguments, got "x"`, "cordon ca path --help"}},
		{[]string{"audit", "today"}, []string{`audit takes no arguments, got "today"`}},
		{[]string{"version", "2"}, []string{`version takes no arguments`}},
		{[]string{"connect", "--proxy", "http://127.0.0.1:9", "https://github.com", "22"}, []string{`HOST "https://github.com" is a URL; give the host alone; for example: cordon connect github.com 22`}},
		{[]string{"connect", "--proxy", "http://127.0.0.1:9", "github.com:22", "22"}, []string{`HOST "github.com:22"`, "a port belongs outside the host"}},
		{[]string{"connect", "--proxy", "http://127.0.0.1:9", "", "22"}, []string{`HOST "": empty host; for example: cordon connect github.com 22`}},
		{[]string{"completion", "tcsh"}, []string{`no completion script for "tcsh": use one of bash, fish, powershell, zsh`, "cordon completion bash"}},
	} {
		_, err := runCordon(t, tc.args...)
		if err == nil {
			t.Errorf("cordon %s: no error", strings.Join(tc.args, " "))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("cordon %s: %q, want it to say %q", strings.Join(tc.args, " "), err, w)
			}
		}
		if strings.HasPrefix(err.Error(), "cordon ") {
			t.Errorf("cordon %s: %q repeats the program's name that every error is printed after", strings.Join(tc.args, " "), err)
		}
	}
}

// A flag value its parser refuses is named with the flag and what to
// write, never with the parser's own error.
func TestFlagValueErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--pids", "abc", "--", "true"}, `--pids "abc": not a whole number; write one such as 256`},
		{[]string{"run", "--pids", "1e3", "--", "true"}, `--pids "1e3": not a whole number`},
		{[]string{"run", "--timeout", "10", "--", "true"}, `--timeout "10": not a duration; write a number with its unit, such as 90s, 10m or 2h`},
		{[]string{"run", "--timeout", "10 m", "--", "true"}, `--timeout "10 m": not a duration`},
		{[]string{"run", "--json=maybe", "--", "true"}, `--json "maybe": not true or false; give --json alone for true, or write --json=false`},
		{[]string{"doctor", "--json=1x"}, `--json "1x": not true or false`},
		{[]string{"audit", "-f=x"}, `--follow "x": not true or false`},
	} {
		_, err := runCordon(t, tc.args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("cordon %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// A single-valued flag given an empty value is refused, not taken for
// the flag left out: --net "$MODE" with MODE unset ran with the
// configured network.
func TestFlagEmptyValueRefused(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		flag, path string
	}{
		{[]string{"run", "--net", ""}, "net", "run"},
		{[]string{"run", "--config="}, "config", "run"},
		{[]string{"run", "--audit", ""}, "audit", "run"},
		{[]string{"proxy", "--terminate", ""}, "terminate", "proxy"},
		{[]string{"proxy", "--listen", ""}, "listen", "proxy"},
		{[]string{"doctor", "--net", ""}, "net", "doctor"},
		{[]string{"audit", "--since", ""}, "since", "audit"},
		{[]string{"audit", "--decision", ""}, "decision", "audit"},
		{[]string{"network", "--config", ""}, "config", "network"},
		{[]string{"init", "--config", ""}, "config", "init"},
		{[]string{"ca", "path", "--dir", ""}, "dir", "ca path"},
		{[]string{"connect", "--proxy", ""}, "proxy", "connect"},
	} {
		// Without the check each would go on with the default; the
		// unknown flag after it ends the command line there instead.
		_, err := runCordon(t, append(tc.args, "--no-such-flag")...)
		want := fmt.Sprintf(`--%s "": an empty value; give one (see cordon %s --help), or leave the flag out`, tc.flag, tc.path)
		if err == nil || err.Error() != want {
			t.Errorf("cordon %q: %v, want %q", tc.args, err, want)
		}
	}
}

// A single-valued flag given again with another value is said to be,
// naming the value used; one given twice alike, or a repeatable one, is
// not.
func TestFlagReplacedWarns(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--since", "1h", "--since", "2h"}, `cordon: warning: --since is given 2 times ("1h", "2h"); the last, "2h", is used`},
		{[]string{"audit", "--json", "--json=false", "--since", "1h"}, `cordon: warning: --json is given 2 times ("true", "false"); the last, "false", is used`},
		{[]string{"audit", "--type", "exit", "--type", "launch", "--type", "exit"}, `cordon: warning: --type is given 3 times ("exit", "launch", "exit"); the last, "exit", is used`},
		{[]string{"audit", "--since", "1h", "--since", "1h"}, ""},
	} {
		out, _ := runCordon(t, append(tc.args, "--file", log)...)
		if tc.want == "" && strings.Contains(out, "warning") || tc.want != "" && !strings.Contains(out, tc.want+"\n") {
			t.Errorf("cordon %q said %q, want %q", tc.args, out, tc.want)
		}
	}
}
