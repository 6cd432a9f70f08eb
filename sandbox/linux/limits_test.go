//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
