package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A run owes its Aftercare from before its command starts until it has
// ended. A cordon killed in between (SIGKILL, a crash of the machine)
// still owes it, and the next run would take what the box left behind
// for the user's own: a checkout or a repository that is there when the
// run is built is guarded, not set aside. So a run writes its debt down
// first, in cordon's cache directory (no box can reach it: it is a
// protected path), and the next run in the workspace pays a debt whose
// cordon is gone.

// owedHeader starts an owed-aftercare record.
const owedHeader = "cordon aftercare owed v1\n"

// Owe records that this process's run in workspace, guarded by guards,
// owes their Aftercare; paid removes the record, once Aftercare is done.
// Where nothing could be recorded, the run goes on: it pays its own debt
// when it ends, and only a cordon killed before then leaves it unpaid.
//
// First, the git directories in the walked guards' roots are remembered
// for the walk after the run, where no earlier walk did (rememberGitDirs);
// where they cannot be, that walk goes by times alone.
func Owe(workspace string, guards []GuardedPath) (paid func(), err error) {
	_ = rememberGitDirs(guards)
	dir := owedDir()
	if dir == "" {
		return func() {}, errors.New("no cache directory to record the run's aftercare in")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}, fmt.Errorf("record the run's aftercare: %w", err)
	}
	b := []byte(owedHeader)
	b = fmt.Appendf(b, "workspace %q\npid %d %q\n", workspace, os.Getpid(), processStart(os.Getpid()))
	for _, g := range guards {
		since := int64(0)
		if !g.Since.IsZero() {
			since = g.Since.UnixNano()
		}
		b = fmt.Appendf(b, "guard %d %d %t %q\n", g.Guard, since, g.Dir, g.Path)
		if s := g.Config; s != nil {
			b = fmt.Appendf(b, "config %d %d %t", s.Dev, s.Ino, s.Absent)
			for _, c := range s.Commands {
				b = fmt.Appendf(b, " %q", c)
			}
			b = append(b, '\n')
		}
		if id := g.ID; id != nil {
			b = fmt.Appendf(b, "id %d %d %t\n", id.Dev, id.Ino, id.Run)
		}
		if h := g.Hidden; h != nil {
			b = fmt.Appendf(b, "hidden %d %q", h.Count, h.Digest)
			for _, p := range h.Paths {
				b = fmt.Appendf(b, " %q", p)
			}
			b = append(b, '\n')
			if h.Untracked != "" {
				b = fmt.Appendf(b, "untracked %q\n", h.Untracked)
			}
		}
	}
	p := filepath.Join(dir, owedName(workspace, os.Getpid()))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		// What was written (nothing, on a full disk, or the lines that
		// fitted) is no record of this run's debt: left, it would have
		// the next run report an unreadable record, or pay a debt this
		// run pays itself, on repositories the user made since.
		os.Remove(p)
		return func() {}, fmt.Errorf("record the run's aftercare: %w", err)
	}
	return func() { os.Remove(p) }, nil
}

// Collect pays the Aftercare that earlier runs in workspace owe and whose
// cordon is gone, and returns what it did, as Aftercare does. before, if
// not nil, is called once, before the first debt is paid, and what it
// did is returned too: the backend ends there what such a run left
// running, which would go on writing the workspace as it is looked at.
func Collect(workspace string, before func() Care) Care {
	var c Care
	dir := owedDir()
	if dir == "" {
		return c
	}
	prefix := strings.TrimSuffix(owedName(workspace, 0), "0.owed")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		pidText, ok := strings.CutPrefix(name, prefix)
		if !ok || !strings.HasSuffix(pidText, ".owed") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSuffix(pidText, ".owed"))
		p := filepath.Join(dir, name)
		if err != nil || (pid != os.Getpid() && alive(pid) && !reused(p, pid)) {
			continue // a run still going pays its own
		}
		if before != nil {
			c, before = c.Add(before()), nil
		}
		release, ok := claimOwed(p)
		if !ok {
			continue // paid by another run meanwhile
		}
		guards, ok := readOwed(p, workspace)
		if !ok {
			c.Unchecked = append(c.Unchecked, Unchecked{Path: workspace,
				Reason: fmt.Errorf("an earlier run's aftercare record %s cannot be read; that run's cordon ended before its aftercare", p)})
		} else {
			c = c.Add(Aftercare(guards))
		}
		os.Remove(p)
		release()
	}
	return c
}

// claimOwed takes the record at p for this run to pay: an exclusive flock
// on it, waiting for another run that pays it to end. Two runs that began
// at once both paid it, the second setting aside again what the first
// had, and reporting what the first had moved, or the record it had
// removed, as what it could not see to; a run that passed a record
// another pays would build on what that one has not yet set aside. It
// is false where the record is gone, paid, by then. A record that cannot
// be opened is left to readOwed to report.
func claimOwed(p string) (release func(), ok bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return func() {}, !errors.Is(err, fs.ErrNotExist)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}, true
	}
	// The name must still be the record locked: the run that paid it
	// removed it before it let go.
	fi, err := f.Stat()
	now, err2 := os.Lstat(p)
	if err != nil || err2 != nil || !os.SameFile(fi, now) {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// owedDir is where records of owed aftercare are kept; "" for nowhere.
func owedDir() string {
	if c := CacheDir(); c != "" {
		return filepath.Join(c, "aftercare")
	}
	return ""
}

// owedName names the record of the run of process pid in workspace.
func owedName(workspace string, pid int) string {
	return workspaceKey(workspace) + "-" + strconv.Itoa(pid) + ".owed"
}

// workspaceKey names a workspace in the names of cordon's records of it.
func workspaceKey(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return hex.EncodeToString(sum[:12])
}

// alive says whether process pid may still be running (one of another
// user's counts, as does a pid taken over by another process: the record
// waits for it to end).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// reused says whether the live process pid is not the run whose owed
// record is at p: the record names when its process started, and pid's
// started at another time. A cordon killed long ago left its record, and
// while another process held its pid, every later run in the workspace
// took the debt for a running run's and built without paying it. A
// record that names no start (an older cordon's), or a start that
// cannot be read, leaves the pid taken for the run's.
func reused(p string, pid int) bool {
	data, ok := ReadPrivate(p)
	if !ok {
		return false
	}
	for line := range strings.Lines(string(data)) {
		kind, f, ok := LineFields(strings.TrimSuffix(line, "\n"))
		if ok && kind == "pid" && len(f) == 2 && f[1] != "" {
			now := processStart(pid)
			return now != "" && now != f[1]
		}
	}
	return false
}

// readOwed reads a record Owe wrote for workspace; false if it is not one,
// or is not private (ReadPrivate).
func readOwed(p, workspace string) ([]GuardedPath, bool) {
	data, ok := ReadPrivate(p)
	if !ok {
		return nil, false
	}
	rest, ok := bytes.CutPrefix(data, []byte(owedHeader))
	if !ok {
		return nil, false
	}
	var guards []GuardedPath
	for _, line := range strings.SplitAfter(string(rest), "\n") {
		if line == "" {
			break
		}
		line, ok = strings.CutSuffix(line, "\n")
		if !ok {
			return nil, false
		}
		kind, f, ok := LineFields(line)
		if !ok {
			return nil, false
		}
		switch {
		case kind == "workspace" && len(f) == 1:
			if f[0] != workspace {
				return nil, false
			}
		case kind == "pid" && (len(f) == 1 || len(f) == 2):
		case kind == "guard" && len(f) == 4:
			g, err1 := strconv.Atoi(f[0])
			since, err2 := strconv.ParseInt(f[1], 10, 64)
			d, err3 := strconv.ParseBool(f[2])
			if err1 != nil || err2 != nil || err3 != nil || g < 0 || g > int(Watched) {
				return nil, false
			}
			guards = append(guards, GuardedPath{Path: f[3], Guard: Guard(g), Dir: d, Since: time.Unix(0, since)})
		case kind == "hidden" && len(f) >= 2 && len(guards) > 0 && guards[len(guards)-1].Guard == Checkouts:
			n, err := strconv.Atoi(f[0])
			if err != nil || n < len(f)-2 {
				return nil, false
			}
			guards[len(guards)-1].Hidden = &Hidden{Count: n, Digest: f[1], Paths: f[2:]}
		case kind == "config" && len(f) >= 3 && len(guards) > 0 && guards[len(guards)-1].Config == nil:
			dev, err1 := strconv.ParseUint(f[0], 10, 64)
			ino, err2 := strconv.ParseUint(f[1], 10, 64)
			absent, err3 := strconv.ParseBool(f[2])
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, false
			}
			guards[len(guards)-1].Config = &ConfigSeen{Dev: dev, Ino: ino, Absent: absent, Commands: f[3:]}
		case kind == "id" && len(f) == 3 && len(guards) > 0 && guards[len(guards)-1].ID == nil:
			dev, err1 := strconv.ParseUint(f[0], 10, 64)
			ino, err2 := strconv.ParseUint(f[1], 10, 64)
			run, err3 := strconv.ParseBool(f[2])
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, false
			}
			guards[len(guards)-1].ID = &FileID{Dev: dev, Ino: ino, Run: run}
		case kind == "untracked" && len(f) == 1 && len(guards) > 0 && guards[len(guards)-1].Hidden != nil:
			guards[len(guards)-1].Hidden.Untracked = f[0]
		default:
			return nil, false
		}
	}
	return guards, true
}

// replacePrivate replaces the file at p, a record cordon keeps for the
// user in its cache directory, with data, whole (a file written beside it
// and renamed over it), mode 0600; durable, it is synced before the
// rename.
func replacePrivate(p string, data []byte, durable bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	next := fmt.Sprintf("%s.next.%d", p, os.Getpid())
	f, err := os.OpenFile(next, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if durable && err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(next)
		return err
	}
	return os.Rename(next, p)
}

// ReadPrivate reads the file at p, a record cordon keeps for the user (the
// probe memo, the aftercare owed), trusting only a regular file of the
// user's own that no one else can write.
func ReadPrivate(p string) ([]byte, bool) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return nil, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return nil, false
	}
	data, err := os.ReadFile(p)
	return data, err == nil
}
