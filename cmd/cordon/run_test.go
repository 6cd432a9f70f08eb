package main

import (
	"slices"
	"testing"
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
