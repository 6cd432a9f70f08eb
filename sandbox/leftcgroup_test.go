package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestLeftCgroupTold(t *testing.T) {
	const dir = "/sys/fs/cgroup/u/cordon-run-0123456789ab"
	for _, tt := range []struct {
		l        LeftCgroup
		what     string
		whyHas   []string
		whyLacks string
	}{
		{LeftCgroup{Path: dir, Removed: true}, "removed ", []string{"left empty"}, "cgroup.kill"},
		{LeftCgroup{Path: dir, Procs: 1, Removed: true}, "killed the processes left in ", []string{"1 process of", "killed (cgroup.kill), and the cgroup removed"}, "not removed"},
		{LeftCgroup{Path: dir}, "killed the processes left in ", []string{"processes of an earlier", "not removed yet"}, "left empty"},
		{LeftCgroup{Path: dir, Procs: 3}, "killed the processes left in ", []string{"3 processes of", "not removed yet"}, "and the cgroup removed"},
		{LeftCgroup{Path: dir, Procs: 2, Err: errors.New("permission denied")}, "could not end the processes left in ", []string{"permission denied", "echo 1 > " + dir + "/cgroup.kill"}, "killed (cgroup.kill)"},
	} {
		what, why := tt.l.Told()
		if what != tt.what {
			t.Errorf("%+v: what %q, want %q", tt.l, what, tt.what)
		}
		for _, w := range tt.whyHas {
			if !strings.Contains(why, w) {
				t.Errorf("%+v: why %q lacks %q", tt.l, why, w)
			}
		}
		if strings.Contains(why, tt.whyLacks) {
			t.Errorf("%+v: why %q says %q", tt.l, why, tt.whyLacks)
		}
	}
}
