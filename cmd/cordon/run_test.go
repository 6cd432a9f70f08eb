package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/audit"
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
// chose (a host it asked for), and reaches the user's terminal: a C1
// control or a bidi override in one is escaped, and decodes the same.
func TestRunJSONEscapesUnprintable(t *testing.T) {
	host := "a\u009b2Jb\u202ec.example"
	var out bytes.Buffer
	r := &runState{f: &runFlags{json: true}, stdout: &out}
	r.out.Network.Decisions = []audit.Record{{Type: audit.TypeDecision, Host: host, Decision: audit.Deny}}
	r.print()
	if strings.ContainsAny(out.String(), "\u009b\u202e") || !strings.Contains(out.String(), `\u009b`) {
		t.Fatalf("--json printed the box's characters raw: %q", out.String())
	}
	var got outcome
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Network.Decisions) != 1 || got.Network.Decisions[0].Host != host {
		t.Fatalf("decoded %+v (%v), want the host %q back", got.Network.Decisions, err, host)
	}
}
