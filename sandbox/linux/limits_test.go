//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/policy"
)

func TestCgroup2Mount(t *testing.T) {
	mi := `24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
40 35 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
41 35 0:38 /nested /elsewhere rw - cgroup2 cgroup2 rw
`
	if got, err := cgroup2Mount([]byte(mi)); err != nil || got != "/sys/fs/cgroup/unified" {
		t.Fatalf("cgroup2Mount = %q, %v", got, err)
	}
	if _, err := cgroup2Mount([]byte("24 30 0:22 / /sys rw - sysfs sysfs rw\n")); err == nil {
		t.Fatal("found a cgroup2 mount where there is none")
	}
}

func TestUnifiedPath(t *testing.T) {
	if got, err := unifiedPath([]byte("9:name=systemd:/\n4:memory:/x\n0::/user.slice/u.service/app.slice/a.scope\n")); err != nil || got != "/user.slice/u.service/app.slice/a.scope" {
		t.Fatalf("unifiedPath = %q, %v", got, err)
	}
	if _, err := unifiedPath([]byte("4:memory:/x\n")); err == nil {
		t.Fatal("found a v2 entry in a v1-only file")
	}
}

func TestCheckDelegated(t *testing.T) {
	root := t.TempDir()
	parent := filepath.Join(root, "app.slice")
	own := filepath.Join(parent, "term.scope")
	mkdirs(t, own)
	writeFile(t, filepath.Join(parent, "cgroup.procs"), "", 0o644)
	writeFile(t, filepath.Join(parent, "cgroup.subtree_control"), "cpu memory pids\n", 0o644)
	if got, err := checkDelegated(own, []string{"memory", "pids"}); err != nil || got != parent {
		t.Fatalf("checkDelegated = %q, %v", got, err)
	}
	writeFile(t, filepath.Join(parent, "cgroup.subtree_control"), "cpu\n", 0o644)
	if _, err := checkDelegated(own, []string{"memory"}); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("a missing controller was accepted: %v", err)
	}
	if _, err := checkDelegated("/", nil); err == nil {
		t.Fatal("the root cgroup was accepted")
	}
}

func TestPlanLimitsOnThisMachine(t *testing.T) {
	if p := planLimits(policy.Limits{}); p != (limitPlan{}) {
		t.Fatalf("no limits planned %+v", p)
	}
	p := planLimits(policy.Limits{Memory: 1 << 30, Pids: 100})
	switch {
	case p.cgroupParent != "":
		if p.memory != 1<<30 || p.pids != 100 || p.data != 0 {
			t.Fatalf("cgroup plan %+v", p)
		}
	default:
		if p.data != 1<<30 || p.nproc != 100 {
			t.Fatalf("rlimit plan %+v", p)
		}
		if _, err := os.Stat("/proc/self/cgroup"); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(p.describe(), "100") {
		t.Fatalf("describe: %q", p.describe())
	}
}

// TestRlimits: core dumps always off (soft and hard 1, with which the
// kernel runs no core collector either), the plan's data and process
// limits as hard limits, and room for the init's one fork.
func TestRlimits(t *testing.T) {
	core := rlimit{resource: unix.RLIMIT_CORE, cur: 1, max: 1}
	tests := []struct {
		plan limitPlan
		want []rlimit
	}{
		{limitPlan{}, []rlimit{core}},
		{limitPlan{data: 1 << 20, nproc: 50}, []rlimit{core,
			{resource: unix.RLIMIT_DATA, cur: 1 << 20, max: 1 << 20},
			{resource: unix.RLIMIT_NPROC, cur: 50, max: 50}}},
		{limitPlan{nproc: 1}, []rlimit{core, {resource: unix.RLIMIT_NPROC, cur: 2, max: 2}}},
		{limitPlan{cgroupParent: "/sys/fs/cgroup/x", memory: 1 << 30, pids: 10}, []rlimit{core}},
	}
	for _, tt := range tests {
		if got := tt.plan.rlimits(); !slices.Equal(got, tt.want) {
			t.Errorf("%+v: rlimits %+v, want %+v", tt.plan, got, tt.want)
		}
	}
}

// TestSetRlimits puts limits on a real process and reads them back: a
// hard limit it cannot raise is lowered to the one it has.
func TestSetRlimits(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	var nofileHard unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &nofileHard); err != nil {
		t.Fatal(err)
	}
	big := nofileHard.Max + 1000
	if err := setRlimits(pid, []rlimit{
		{resource: unix.RLIMIT_CORE, cur: 1, max: 1},
		{resource: unix.RLIMIT_DATA, cur: 1 << 30, max: 1 << 30},
		{resource: unix.RLIMIT_NOFILE, cur: big, max: big},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		resource int
		want     unix.Rlimit
	}{
		{unix.RLIMIT_CORE, unix.Rlimit{Cur: 1, Max: 1}},
		{unix.RLIMIT_DATA, unix.Rlimit{Cur: 1 << 30, Max: 1 << 30}},
		{unix.RLIMIT_NOFILE, unix.Rlimit{Cur: nofileHard.Max, Max: nofileHard.Max}},
	} {
		var got unix.Rlimit
		if err := unix.Prlimit(pid, c.resource, nil, &got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("resource %d: %+v, want %+v", c.resource, got, c.want)
		}
	}
	if err := setRlimits(1<<22+12345, []rlimit{{resource: unix.RLIMIT_CORE, cur: 1, max: 1}}); err == nil {
		t.Error("limits on a process that does not exist: no error")
	}
}

// TestGoAheadText: --dry-run names every limit the command starts with.
func TestGoAheadText(t *testing.T) {
	got := goAheadText(&launch{rlimits: limitPlan{data: 1 << 30, nproc: 50}.rlimits()})
	for _, want := range []string{"the seccomp pipe, which is the go-ahead", "fsyncs the launch line", "RLIMIT_CORE soft 1 hard 1",
		"RLIMIT_DATA soft 1073741824 hard 1073741824", "RLIMIT_NPROC soft 50 hard 50"} {
		if !strings.Contains(got, want) {
			t.Errorf("the go-ahead's description lacks %q:\n%s", want, got)
		}
	}
}
