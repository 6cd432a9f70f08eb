//go:build linux

package integration

import (
	"strings"
	"testing"
	"time"
)

// TestDryRunRendersSeatbeltProfile: the macOS profile is inspectable from
// Linux, rendered from the same policy.
func TestDryRunRendersSeatbeltProfile(t *testing.T) {
	ws := userDir(t, "cordon-it-ws-")
	r := runResult(t, 30*time.Second, cordonIn(t, ws, nil, "run", "--dry-run", "--target", "darwin", "--net", "restricted", "--", "ls"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"/usr/bin/sandbox-exec", "(deny default)", `(remote tcp "localhost:3128")`, ws} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the rendered profile lacks %q:\n%s", want, r.stdout)
		}
	}
	bad := runResult(t, 30*time.Second, cordonIn(t, ws, nil, "run", "--dry-run", "--target", "plan9", "--", "ls"))
	if bad.code == 0 || !strings.Contains(bad.stderr, "linux or darwin") {
		t.Fatalf("an unknown target: exit %d, %s", bad.code, bad.stderr)
	}
}
