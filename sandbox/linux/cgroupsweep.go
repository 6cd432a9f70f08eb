//go:build linux

package linux

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// A run's cgroup is removed by the run once its box is gone. A cordon
// killed first (SIGKILL, the out-of-memory killer, the machine's power)
// leaves it, empty (its box dies with it: see Run), and nothing else
// removes it; over weeks the user's delegated cgroup filled with them.
// So each run, and cordon doctor, sweeps the delegated parent of what
// runs whose cordon is gone left there.

// runCgroupPrefix begins the name of each run's cgroup, followed by
// sandbox.RandomName's digits. A run holds its cgroup from its making to
// its removal (runCgroup), so one of these names that no process holds
// is a dead run's.
const runCgroupPrefix = "cordon-run-"

// legacyCgroupPrefix began the name of a run's cgroup when runs held
// nothing: one of these a run of an older cordon still uses looks alike
// dead, so it is removed only once empty (rmdir removes nothing else),
// and the processes in it are never killed.
const legacyCgroupPrefix = "cordon-"

// leftCgroup is what a sweep knows of one directory in the delegated
// parent.
type leftCgroup struct {
	name string
	// own: the directory is this user's (a run makes its cgroup as the
	// user cordon runs as).
	own bool
	// age is the time since the directory was last modified, which is
	// when it was made: nothing a run does later changes it.
	age time.Duration
	// held: a process holds it (a live run), or it could not be held.
	held bool
	// populated: processes are in it, or in a cgroup below it.
	populated bool
}

// cgroupAction is what a sweep does with one directory of the delegated
// parent.
type cgroupAction int

const (
	keepCgroup   cgroupAction = iota
	removeCgroup              // rmdir an empty cgroup
	killCgroup                // kill what is in it (cgroup.kill), then rmdir
)

// named reports whether the name is one cordon gives a run's cgroup.
func (c leftCgroup) named() bool {
	return sandbox.IsRandomName(c.name, runCgroupPrefix) || sandbox.IsRandomName(c.name, legacyCgroupPrefix)
}

// action decides what to do with c. Only cordon's own names, this user's
// and older than sandbox.StaleAfter (a run holds its cgroup a moment
// after making it), that no process holds, are taken; an empty one is
// removed. One that still has processes is a box that outlived its
// cordon: no deadline, no proxy, no audit, and nobody to end it. A kill
// -9 of cordon ends the whole tree, so these are killed; but only in a
// held kind of cgroup (runCgroupPrefix), as a legacy one may be an older
// cordon's live run.
func (c leftCgroup) action() cgroupAction {
	switch {
	case !c.named(), !c.own, c.age < sandbox.StaleAfter, c.held:
		return keepCgroup
	case !c.populated:
		return removeCgroup
	case sandbox.IsRandomName(c.name, runCgroupPrefix):
		return killCgroup
	}
	return keepCgroup
}

// cgroupParent is the delegated cgroup a run's cgroup is made in, when
// there is one: its leftovers are swept whatever this run's limits.
func cgroupParent() (string, error) { return delegatedCgroup(nil) }

// sweepCgroups sees to the cgroups in parent that runs whose cordon was
// killed left there (leftCgroup.action), and reports each.
func sweepCgroups(parent string) []sandbox.LeftCgroup {
	d, err := os.Open(parent)
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var seen []sandbox.LeftCgroup
	for _, n := range names {
		if (leftCgroup{name: n}).named() {
			if l, ok := sweepCgroup(filepath.Join(parent, n)); ok {
				seen = append(seen, l)
			}
		}
	}
	return seen
}

// sweepCgroup sees to dir if it is a dead run's; ok says it was. A
// cgroup is held only once it is known stale and this user's: a younger
// one may be a live run's, between its making and its hold, which the
// sweep's hold would take from it. The hold keeps other sweeps off while
// this one removes it.
func sweepCgroup(dir string) (l sandbox.LeftCgroup, ok bool) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return l, false
	}
	cg := &runCgroup{dir: dir, fd: f}
	c := leftCgroup{name: filepath.Base(dir), held: true}
	if fi, err := f.Stat(); err == nil {
		st, isUnix := fi.Sys().(*syscall.Stat_t)
		c.own, c.age = isUnix && int(st.Uid) == os.Geteuid(), time.Since(fi.ModTime())
	}
	if c.own && c.age >= sandbox.StaleAfter {
		c.held = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
		c.populated = populated(dir)
	}
	l.Path = dir
	switch c.action() {
	case removeCgroup:
		// Not cg.remove, which kills what a failed rmdir finds there.
		removeBelow(dir)
		l.Removed = os.Remove(dir) == nil
		f.Close()
		return l, l.Removed
	case killCgroup:
		l.Procs = procsIn(dir)
		if l.Err = cg.kill(); l.Err == nil {
			l.Removed = cg.remove()
		} else {
			f.Close()
		}
		return l, true
	}
	f.Close()
	return l, false
}

// populated reads cgroup.events: whether processes are in the cgroup or
// below it. Unread, it is taken not to be: nothing is killed on a guess,
// and rmdir removes no cgroup that has processes.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return err == nil && bytes.Contains(b, []byte("populated 1"))
}

// maxBelow bounds the cgroups below a leftover that a sweep looks at. A
// run's box cannot make any (it sees no cgroupfs); the user can.
const maxBelow = 1000

// below lists dir's cgroups below it, each after the one above it, at
// most maxBelow of them, and whether that is all of them.
func below(dir string) ([]string, bool) {
	var dirs []string
	for i, up := -1, dir; i < len(dirs); i++ {
		if i >= 0 {
			up = dirs[i]
		}
		ents, _ := os.ReadDir(up)
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if len(dirs) == maxBelow {
				return dirs, false
			}
			dirs = append(dirs, filepath.Join(up, e.Name()))
		}
	}
	return dirs, true
}

// removeBelow removes the cgroups below dir, the deepest first; rmdir
// removes only a cgroup with no processes in it.
func removeBelow(dir string) {
	dirs, _ := below(dir)
	for _, d := range slices.Backward(dirs) {
		os.Remove(d)
	}
}

// procsIn counts the processes in the cgroup and in those below it.
func procsIn(dir string) int {
	dirs, _ := below(dir)
	n := 0
	for _, d := range append(dirs, dir) {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		n += len(bytes.Fields(b))
	}
	return n
}
