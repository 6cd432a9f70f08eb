//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// limitPlan is how one run's memory and process limits are enforced:
// by a cgroup of its own when a delegated cgroup v2 allows, else by
// rlimits on the command.
type limitPlan struct {
	// cgroupParent is the delegated cgroup v2 directory the run's cgroup
	// is created under; empty means rlimits.
	cgroupParent string
	// memory and pids are memory.max and pids.max for the whole tree.
	memory int64
	pids   int
	// data and nproc are RLIMIT_DATA and RLIMIT_NPROC for the command;
	// zero means none.
	data  int64
	nproc int
}

// planLimits picks the mechanism for l on this machine.
func planLimits(l policy.Limits) limitPlan {
	if l.Memory <= 0 && l.Pids <= 0 {
		return limitPlan{}
	}
	var need []string
	if l.Memory > 0 {
		need = append(need, "memory")
	}
	if l.Pids > 0 {
		need = append(need, "pids")
	}
	if parent, err := delegatedCgroup(need); err == nil {
		return limitPlan{cgroupParent: parent, memory: l.Memory, pids: l.Pids}
	}
	return rlimitPlan(l)
}

// rlimitPlan enforces l with RLIMIT_DATA and RLIMIT_NPROC on the command.
// RLIMIT_DATA bounds private writable memory (heap and anonymous maps) per
// process and, unlike RLIMIT_AS, not the address-space reservations Go, V8
// and the JVM make up front. RLIMIT_NPROC counts the processes of the
// user, per user namespace on current kernels (on older ones the user's
// processes outside the sandbox count too).
func rlimitPlan(l policy.Limits) limitPlan {
	return limitPlan{data: max(l.Memory, 0), nproc: max(l.Pids, 0)}
}

// rlimit is one resource limit the command starts with.
type rlimit struct {
	resource int
	cur, max uint64
}

// noCoreDump is the RLIMIT_CORE, soft and hard, that keeps a crash in the
// box from dumping anywhere: a file dump needs a page at least, and the
// kernel runs a host's core collector (core_pattern "|…": systemd-coredump,
// apport; as root, outside the box) whatever the limit but 1, which it
// takes for the collector's own crash. Before, the soft limit was 0 and
// the hard one the user's: the collector was handed the box's whole core,
// and the command could raise the limit.
const noCoreDump = 1

// rlimits are the limits the command starts with: core dumps off
// (noCoreDump), then the plan's RLIMIT_DATA and RLIMIT_NPROC as hard
// limits. They go on the sandbox's init, which forks
// the command: the init counts as one of the user's processes, as it did
// when only the command carried the limit, and must fork once, so a
// process limit of 1 is set as 2, which leaves the command as unable to
// fork as 1 did.
func (p limitPlan) rlimits() []rlimit {
	rs := []rlimit{{resource: unix.RLIMIT_CORE, cur: noCoreDump, max: noCoreDump}}
	if p.data > 0 {
		rs = append(rs, rlimit{resource: unix.RLIMIT_DATA, cur: uint64(p.data), max: uint64(p.data)})
	}
	if p.nproc > 0 {
		n := uint64(max(p.nproc, 2))
		rs = append(rs, rlimit{resource: unix.RLIMIT_NPROC, cur: n, max: n})
	}
	return rs
}

// String says the limit for --dry-run: "RLIMIT_DATA soft N hard N".
func (r rlimit) String() string {
	return fmt.Sprintf("%s soft %d hard %d", rlimitNames[r.resource], r.cur, r.max)
}

// rlimitNames name the resources rlimits sets, for errors.
var rlimitNames = map[int]string{unix.RLIMIT_CORE: "RLIMIT_CORE", unix.RLIMIT_DATA: "RLIMIT_DATA", unix.RLIMIT_NPROC: "RLIMIT_NPROC"}

// setRlimits puts rs on process pid. A hard limit above the one pid has
// already is lowered to it: it cannot be raised, and is stricter.
func setRlimits(pid int, rs []rlimit) error {
	for _, r := range rs {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, r.resource, nil, &old); err != nil {
			return fmt.Errorf("read %s of the sandbox's init: %w", rlimitNames[r.resource], err)
		}
		lim := unix.Rlimit{Cur: min(r.cur, old.Max), Max: min(r.max, old.Max)}
		if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
			return fmt.Errorf("set %s on the sandbox's init: %w", rlimitNames[r.resource], err)
		}
	}
	return nil
}

// setRlimitsAs is setRlimits from uid and gid, the user the sandbox runs
// as. The kernel lets a process set another's limits when both are the
// same user, or with CAP_SYS_RESOURCE, which a root cordon may lack (in a
// container, say) when it runs the command as run_as. Then a thread of
// its own takes run_as's ids (the raw system calls change this thread
// only) and, still locked to its goroutine, ends with it.
func setRlimitsAs(pid, uid, gid int, rs []rlimit) error {
	if uid == os.Getuid() && gid == os.Getgid() {
		return setRlimits(pid, rs)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			done <- fmt.Errorf("take gid %d to set the sandbox's limits: %w", gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			done <- fmt.Errorf("take uid %d to set the sandbox's limits: %w", uid, e)
			return
		}
		done <- setRlimits(pid, rs)
	}()
	return <-done
}

// describe says how the plan enforces the limits, for doctor.
func (p limitPlan) describe() string {
	var parts []string
	if p.cgroupParent != "" {
		if p.memory > 0 {
			parts = append(parts, fmt.Sprintf("memory.max %d bytes", p.memory))
		}
		if p.pids > 0 {
			parts = append(parts, fmt.Sprintf("pids.max %d", p.pids))
		}
		return fmt.Sprintf("a cgroup of the run's own under %s: %s, for the whole process tree", p.cgroupParent, strings.Join(parts, ", "))
	}
	if p.data > 0 {
		parts = append(parts, fmt.Sprintf("memory by RLIMIT_DATA (%d bytes of heap and private maps per process)", p.data))
	}
	if p.nproc > 0 {
		parts = append(parts, fmt.Sprintf("processes by RLIMIT_NPROC (%d, counted per user)", p.nproc))
	}
	return strings.Join(parts, "; ")
}

// delegatedCgroup finds the parent of cordon's own cgroup v2 when the
// user may create a cgroup there (it is delegated) with the controllers
// in need enabled for its children.
func delegatedCgroup(need []string) (string, error) {
	base, err := ownCgroup()
	if err != nil {
		return "", err
	}
	return checkDelegated(base, need)
}

// ownCgroup is this process's cgroup v2 directory; it is read once. The
// root cgroup is refused before the mount table is read.
var ownCgroup = sync.OnceValues(func() (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own, err := unifiedPath(self)
	if err != nil {
		return "", err
	}
	if own == "/" {
		return "", errRootCgroup
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mount, err := cgroup2Mount(mi)
	if err != nil {
		return "", err
	}
	return filepath.Join(mount, own), nil
})

// errRootCgroup says cordon runs in the root cgroup, whose parent there is
// none to create a run's cgroup in.
var errRootCgroup = errors.New("cordon runs in the root cgroup")

// cgroup2Mount finds the cgroup v2 mount point in /proc/self/mountinfo.
func cgroup2Mount(mountinfo []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" || fields[3] != "/" {
			continue
		}
		return fields[4], nil
	}
	return "", errors.New("no cgroup v2 mount")
}

// unifiedPath reads the v2 entry ("0::/path") of /proc/self/cgroup.
func unifiedPath(cgroup []byte) (string, error) {
	for _, line := range strings.Split(string(cgroup), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}

// checkDelegated returns own's parent when it is not the root, enables
// need for its children, and the user may create cgroups in it and move
// processes there.
func checkDelegated(own string, need []string) (string, error) {
	parent := filepath.Dir(own)
	if parent == own || filepath.Dir(parent) == parent {
		return "", errRootCgroup
	}
	ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return "", err
	}
	have := strings.Fields(string(ctl))
	for _, c := range need {
		if !slices.Contains(have, c) {
			return "", fmt.Errorf("controller %s is not enabled below %s", c, parent)
		}
	}
	for _, p := range []string{parent, filepath.Join(parent, "cgroup.procs")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return "", fmt.Errorf("%s is not delegated to you: %w", p, err)
		}
	}
	return parent, nil
}

// runCgroup is one run's cgroup, held (an exclusive flock on fd, which
// the kernel drops however cordon ends) until it is removed: a cgroup of
// runCgroupPrefix's that no process holds is a leftover of a cordon that
// was killed, which a later run sweeps (sweepCgroups).
type runCgroup struct {
	dir string
	fd  *os.File
}

// newRunCgroup creates the run's cgroup under the plan's parent, holds it,
// and sets its limits; it is owned by uid (the account bwrap runs as).
func newRunCgroup(p limitPlan, uid, gid int) (*runCgroup, error) {
	dir := filepath.Join(p.cgroupParent, sandbox.RandomName(runCgroupPrefix))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	cg := &runCgroup{dir: dir}
	set := func(file, val string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fmt.Errorf("set %s in %s: %w", file, dir, err)
		}
		return nil
	}
	// Held first: an unheld cgroup is taken for a dead run's once it is
	// older than sandbox.StaleAfter, and its processes killed.
	var err error
	if cg.fd, err = os.Open(dir); err == nil {
		if err = unix.Flock(int(cg.fd.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			err = fmt.Errorf("hold cgroup %s: %w", dir, err)
		}
	}
	if err == nil && p.memory > 0 {
		err = errors.Join(set("memory.max", strconv.FormatInt(p.memory, 10)), set("memory.swap.max", "0"))
	}
	if err == nil && p.pids > 0 {
		err = set("pids.max", strconv.Itoa(p.pids))
	}
	if err == nil && uid != os.Getuid() {
		err = os.Chown(filepath.Join(dir, "cgroup.procs"), uid, gid)
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// kill ends every process in the cgroup.
func (c *runCgroup) kill() error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove deletes the cgroup, killing what is still in it (bounded wait)
// and removing the cgroups below it, which the user may have made in a
// leftover one, and then lets go of its hold; it reports whether the
// cgroup is gone.
func (c *runCgroup) remove() bool {
	if c.fd != nil {
		defer c.fd.Close()
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return true
		}
		c.kill()
		time.Sleep(10 * time.Millisecond)
		removeBelow(c.dir)
	}
	return false
}
