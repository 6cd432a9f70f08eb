//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDoctorRestrictedProbesEndToEnd: restricted mode is READY only after a
// real probe, and a broken path (a bwrap that puts the box in a network
// namespace of its own, away from the proxy and the resolver) makes doctor
// and run both refuse with the same reason.
func TestDoctorRestrictedProbesEndToEnd(t *testing.T) {
	ws := userDir(t, "cordon-it-ws-")
	r := runResult(t, 60*time.Second, cordonIn(t, ws, nil, "doctor", "--net", "restricted"))
	if r.code != 0 || !strings.Contains(r.stdout, "READY     network restricted: probed end to end") {
		t.Fatalf("doctor --net restricted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A broken bwrap the operator installed: root's, as cordon takes no
	// other (TestRunIgnoresAPlantedBwrap).
	bin, err := os.MkdirTemp("", "cordon-it-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "bwrap"), []byte("#!/bin/sh\nexec /usr/bin/bwrap --unshare-net \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin"}
	r = runResult(t, 90*time.Second, cordonIn(t, ws, env, "doctor", "--net", "restricted"))
	if r.code == 0 || !strings.Contains(r.stdout, "BLOCKED   network restricted: the end-to-end probe failed") {
		t.Fatalf("doctor with a broken path: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	audit := filepath.Join(userDir(t, "cordon-it-audit-"), "a.jsonl")
	run := runResult(t, 90*time.Second, cordonIn(t, ws, env, "run", "--net", "restricted", "--audit", audit, "--", "sh", "-c", "echo STARTED"))
	if run.code != 125 || strings.Contains(run.stdout, "STARTED") || !strings.Contains(run.stderr, "end-to-end probe failed") {
		t.Fatalf("run with a broken path: exit %d\n%s%s", run.code, run.stdout, run.stderr)
	}
}
