//go:build linux

package integration

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
)

// TestNetRulesListAsInstalled: the policy --dry-run shows for the
// restricted network (holder.Rules.String) is what nft(8) lists once the
// holder's code has installed it, rule for rule.
func TestNetRulesListAsInstalled(t *testing.T) {
	rules := holder.Network
	// A network namespace of this thread's own, so the host's rules are
	// neither read nor touched.
	runtime.LockOSThread() // never unlocked: the thread ends with the test
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatalf("a network namespace for the test: %v", err)
	}
	if err := rules.Install(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v\n%s", err, out)
	}
	if got, want := normalize(string(out)), normalize(rules.String()); got != want {
		t.Fatalf("nft lists:\n%s\nRules.String says:\n%s", out, rules.String())
	}
}

// normalize drops indentation and blank lines.
func normalize(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
