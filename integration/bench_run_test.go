//go:build linux

package integration

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// benchLoop runs the command newCmd builds b.N times as the test user and
// reports its wall time per run (ns/op) and the largest peak RSS of the
// process tree (the launcher and everything it waited for).
func benchLoop(b *testing.B, newCmd func() *exec.Cmd) {
	b.Helper()
	var peakKB int64
	b.ResetTimer()
	for range b.N {
		cmd := newCmd()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", cmd.Args, err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peakKB {
			peakKB = ru.Maxrss
		}
	}
	b.ReportMetric(float64(peakKB), "peak-RSS-KB")
}

// BenchmarkRunOff is `cordon run --net off -- true`: the policy load, the
// doctor check (its probe sandbox included), the audit lines and the run.
func BenchmarkRunOff(b *testing.B) {
	ws := userDir(b, "cordon-bench-ws-")
	home := userDir(b, "cordon-bench-home-")
	auditPath := filepath.Join(userDir(b, "cordon-bench-audit-"), "audit.jsonl")
	benchLoop(b, func() *exec.Cmd {
		cmd := cordonIn(b, ws, []string{"HOME=" + home}, "run", "--audit", auditPath, "--net", "off", "--", "true")
		cmd.Stdout, cmd.Stderr = nil, nil
		return cmd
	})
}

// BenchmarkBareBwrap is the floor: bwrap with the same namespaces and a
// minimal read-only system running true, nothing of cordon's.
func BenchmarkBareBwrap(b *testing.B) {
	ws := userDir(b, "cordon-bench-ws-")
	benchLoop(b, func() *exec.Cmd {
		cmd := asUser(b, nil, "bwrap",
			"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup", "--unshare-net",
			"--die-with-parent", "--new-session", "--disable-userns", "--cap-drop", "ALL",
			"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", ws, ws, "--chdir", ws,
			"--", "/usr/bin/true")
		return cmd
	})
}
