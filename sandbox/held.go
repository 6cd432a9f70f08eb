package sandbox

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StaleAfter is how long a directory must have gone unmodified before
// SweepStale looks at whether anyone still holds it: longer than the
// moment between its making and its hold, and than the life of an
// unheld one an older cordon made. A run's cgroup (Linux) is held and
// swept alike.
const StaleAfter = time.Minute

// The directories cordon makes for a run's or a session's life, held
// (HoldDir), in the temporary directory: a run's scratch files (Linux) or
// its TMPDIR and HOME (macOS), the sandbox self-test's and the network
// self-test's workspaces, and the empty workspace cordon doctor reads the
// global policy from. No cordon made these names before it held them: a
// run or session of an older one, still going, holds nothing, and a
// sweep must not take its directory for a stale one.
const (
	ScratchPrefix  = "cordon-scratch-"
	ProbePrefix    = "cordon-selftest-"
	NetProbePrefix = "cordon-netselftest-"
	DoctorPrefix   = "cordon-doctor-ws-"
)

// HoldDir holds dir, a directory this process has just made for its own
// use, for as long as the process lives or until release: an exclusive
// flock on it, which the kernel drops however the process ends, a
// SIGKILL included. SweepStale leaves held directories alone. Release
// may be called more than once. The
// descriptor is close-on-exec, so no child keeps the hold. A directory
// that cannot be held (a file system without flock) is not, and no sweep
// takes it either: its flock fails alike.
func HoldDir(dir string) (release func()) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		syscall.Close(fd)
		return func() {}
	}
	return sync.OnceFunc(func() { syscall.Close(fd) })
}

// MkdirHeld makes a fresh directory in parent named prefix and random
// digits (os.MkdirTemp) and holds it (HoldDir).
func MkdirHeld(parent, prefix string) (dir string, release func(), err error) {
	if dir, err = os.MkdirTemp(parent, prefix); err != nil {
		return "", nil, err
	}
	return dir, HoldDir(dir), nil
}

// SweepTemp sweeps (SweepStale) the temporary directory of the
// directories cordon makes there, and ScratchParent of the scratch
// directories made there.
func SweepTemp() {
	SweepStale(os.TempDir(), ScratchPrefix, ProbePrefix, NetProbePrefix, DoctorPrefix)
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) {
		SweepStale(ScratchParent(u.HomeDir), ScratchPrefix)
	}
}

// ScratchParent is where a run of a user whose home (as the user
// database gives it) is home makes its scratch directory (Linux: the
// files bwrap mounts by name, links followed, after cordon writes them):
// in cordon's cache at its default place, which every run's guard keeps
// from its box whatever that run's workspace, allow_paths or environment
// ($HOME included: one run's may lie in another's workspace). Made in the temporary directory,
// the scratch lay in any box that could write there ($TMPDIR in a
// workspace, or in a read-write allow_paths directory): such a box, the
// same user as the next run's cordon, swapped that run's empty file or
// masked credential file for a link to a secret, and that run's box read
// the secret where the mask should have been.
func ScratchParent(home string) string {
	return filepath.Join(DefaultCacheDir(home), "scratch")
}

// SweepStale removes the directories in parent whose names begin with
// one of prefixes that a cordon ended before it could remove them
// (SIGKILL, or a signal in the moment before it handles them) left
// behind. It takes only this user's own directories, never a link, and
// only those unmodified for StaleAfter that no process holds (HoldDir):
// another session's, live, keeps its hold. It reports nothing: what it
// cannot remove a later sweep tries again.
func SweepStale(parent string, prefixes ...string) {
	d, err := os.Open(parent)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				removeStale(filepath.Join(parent, n))
				break
			}
		}
	}
}

// removeStale removes dir if it is stale, as SweepStale says, holding it
// meanwhile so that no other sweep takes it too.
func removeStale(dir string) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || time.Since(fi.ModTime()) < StaleAfter {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return
	}
	// The name must still be the directory held (only this user, or
	// root, can have renamed it since): RemoveAll goes by name.
	if now, err := os.Lstat(dir); err != nil || !os.SameFile(fi, now) {
		return
	}
	os.RemoveAll(dir)
}
