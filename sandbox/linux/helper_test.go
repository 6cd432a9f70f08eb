//go:build linux

package linux

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookHelper: a bwrap a user could have written (here, one writable
// by others, as this test runs as root) is passed over for the system's,
// and refused when it is the only one.
func TestLookHelper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes root-owned files; run it as root, as make test does")
	}
	system, err := lookHelper("bwrap", "/usr/bin:/bin")
	if err != nil {
		t.Fatalf("the system's bwrap: %v", err)
	}
	planted := t.TempDir() // as a workspace's .venv/bin
	if err := os.Chmod(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(planted, "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\ntouch /tmp/ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, want, err string
	}{
		{"system first", "/usr/bin:" + planted, system, ""},
		{"planted first", planted + ":/usr/bin", system, ""},
		{"relative entry", ".:/usr/bin", system, ""},
		{"only planted", planted, "", "is not owned by root, or writable by others"},
		{"none", t.TempDir(), "", fs.ErrNotExist.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := lookHelper("bwrap", c.path)
			if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("lookHelper = %q, %v; want %q, %q", got, err, c.want, c.err)
			}
		})
	}
	// The file itself writable by others is as bad as its directory.
	if err := os.Chmod(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fake, 0o757); err != nil {
		t.Fatal(err)
	}
	if _, err := lookHelper("bwrap", planted); !errors.Is(err, errUntrusted) {
		t.Errorf("a bwrap writable by others: %v, want errUntrusted", err)
	}
	if err := os.Chmod(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := lookHelper("bwrap", planted); got != fake || err != nil {
		t.Errorf("a root-owned bwrap in a root-owned directory: %q, %v; want it taken", got, err)
	}
}
