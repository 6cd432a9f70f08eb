package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/regular"
)

// A guarded git config file (the workspace repository's config, its
// config.worktree, what they include from the workspace, the user's
// global config where the box may write it) is a read-only mount over
// that file in the box. Git on the host replaces the file whenever it
// writes it (git config, git remote add, git push -u, git branch -u
// write config.lock and rename it over config), and the kernel then
// detaches every mount on the replaced file, in every mount namespace:
// the guard is gone for the rest of the run, and the box can write the
// config through its read-write workspace. So what each guarded config
// file was when its guard was taken is recorded (ConfigSeen), and
// Aftercare looks again: one that is no longer the same file may hold
// what the box wrote, and is set aside where it names something for git
// to run that it did not name before (configCommands).

// ConfigSeen is what a guarded git config file was when its guard was
// taken: the file (by device and inode; Absent for none) and the entries
// of it that name something for git to run (configCommands).
type ConfigSeen struct {
	Dev, Ino uint64
	Absent   bool
	Commands []string
}

// seeConfig records what the git config file p is now (ConfigSeen); nil
// for one cordon cannot read (its guard refuses a link, and git reads
// no other kind of file either).
func seeConfig(p string) *ConfigSeen {
	data, fi, err := readRegularFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &ConfigSeen{Absent: true}
	case err != nil:
		return nil
	}
	dev, ino, ok := fileID(fi)
	if !ok {
		return nil
	}
	return &ConfigSeen{Dev: dev, Ino: ino, Commands: configCommands(data)}
}

// fileID is the device and inode of the file fi describes.
func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}

// configCommands are the entries of the git config config that name
// something for git to run on the host, as "section.sub.key=value",
// sorted: a command key's (commandOf: core.fsmonitor, core.sshCommand,
// a filter or diff driver's command, an alias with "!", an ext:: URL,
// ...), a hooks or template directory (core.hooksPath, init.templateDir),
// an include (include.path, includeIf.*.path: a file of more config),
// and extensions.worktreeConfig turned on (git then reads
// config.worktree too).
func configCommands(config []byte) []string {
	var out []string
	for _, e := range configEntries(config) {
		_, command := commandOf(e)
		switch {
		case command, e.is("core", "hookspath"), e.is("init", "templatedir"),
			e.is("include", "path"), e.is("includeif", "path"),
			e.is("extensions", "worktreeconfig") && e.truth():
		default:
			continue
		}
		name := e.section + "." + e.key
		if e.sub != "" {
			name = e.section + "." + e.sub + "." + e.key
		}
		out = append(out, name+"="+e.value)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// configGained says what the guarded git config file p (seen, when its
// guard was taken) names for git to run now that it did not then, where
// it is no longer the file it was: the run may have written it after
// the host replaced it and the guard with it (see above). A missing
// file names nothing; one that is not a regular file, or is too long to
// read, is taken to name something (git follows a link, and waits on a
// pipe).
func configGained(p string, seen *ConfigSeen) ([]string, error) {
	data, fi, err := readRegularFile(p)
	var odd *regular.NotRegular
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.As(err, &odd), errors.Is(err, syscall.ELOOP), errors.Is(err, errGitFileTooLarge):
		return []string{fmt.Sprintf("(%v)", err)}, nil
	case err != nil:
		return nil, err
	}
	if dev, ino, ok := fileID(fi); ok && !seen.Absent && dev == seen.Dev && ino == seen.Ino {
		return nil, nil // the guarded file itself: the box could not write it
	}
	var gained []string
	for _, c := range configCommands(data) {
		if !slices.Contains(seen.Commands, c) {
			gained = append(gained, c)
		}
	}
	return gained, nil
}

// configCare sets aside the guarded git config file of g where it gained
// something for git to run (configGained), through no link made since
// began.
func configCare(g GuardedPath, began time.Time) Care {
	var c Care
	gained, err := configGained(g.Path, g.Config)
	switch {
	case err != nil:
		c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: fmt.Errorf("a guarded git config file, no longer the file it was (git on the host replaces it, and its read-only guard with it), which the sandboxed command may have written: %w", err)})
	case len(gained) > 0:
		c.putAsideReplaced(g.Path, began)
	}
	return c
}

// seeConfigIn records, in the guard of the git config file p among
// guards (its own, ReadOnly), what it is now (seeConfig).
func seeConfigIn(guards []GuardedPath, p string) []GuardedPath {
	for i, g := range guards {
		if g.Path == p && g.Guard == ReadOnly {
			guards[i].Config = seeConfig(p)
		}
	}
	return guards
}

// A guarded file that is no git config (a script a config's command
// names, a hook, the project file, a read_only file, cordon's own
// binary) loses its guard the same way, when a tool on the host writes
// it anew and renames it over the old (an editor, sed -i, a build): the
// box may then write it. One git runs (a program or script a config
// names, a hook in a hooks directory that is the workspace root) is set
// aside after the run, as a shell prompt that shows the branch would run
// it before the user read a warning; any other is reported
// (replacedCare).

// FileID is a guarded file, by device and inode, when its guard was
// taken; Run says git runs it.
type FileID struct {
	Dev, Ino uint64
	Run      bool
}

// seeRun records, in each guard among guards of an existing file git
// runs (ReadOnly, not a directory), which file it is.
func seeRun(guards []GuardedPath) {
	for i, g := range guards {
		if g.Guard == ReadOnly && !g.Dir {
			guards[i].ID = seeFile(g.Path, true)
		}
	}
}

// seeFiles records, in each guard of an existing file kept read-only
// (ReadOnly, not a directory) that is no git config's (Config) and not
// yet seen, which file it is.
func seeFiles(guards []GuardedPath) []GuardedPath {
	for i, g := range guards {
		if g.Guard == ReadOnly && !g.Dir && g.Config == nil && g.ID == nil {
			guards[i].ID = seeFile(g.Path, false)
		}
	}
	return guards
}

// seeFile is which file p is (nil for none), and whether git runs it.
func seeFile(p string, run bool) *FileID {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	dev, ino, ok := fileID(fi)
	if !ok {
		return nil
	}
	return &FileID{Dev: dev, Ino: ino, Run: run}
}

// replacedCare sees to the file of g (a guard with an ID) where it is no
// longer the file it was when the guard was taken (the box may have
// written it since): one git runs is set aside, through no link made
// since began, and any other reported.
func replacedCare(g GuardedPath, began time.Time) Care {
	var c Care
	fi, err := os.Lstat(g.Path)
	if err != nil {
		return c // gone: nothing of it to run
	}
	if dev, ino, ok := fileID(fi); ok && dev == g.ID.Dev && ino == g.ID.Ino {
		return c
	}
	if g.ID.Run {
		c.putAsideReplaced(g.Path, began)
		return c
	}
	c.Unchecked = append(c.Unchecked, Unchecked{Path: g.Path, Reason: errors.New("it was replaced on the host during the run (by a tool that writes a new file and renames it over the old: an editor, sed -i, a build), which took its read-only guard in the box away, so the sandboxed command may have written it since; read it before you run it, or run git there")})
	return c
}

// putAsideReplaced sets aside p, a guarded file replaced on the host
// during the run (putAside), and lists it in Replaced too.
func (c *Care) putAsideReplaced(p string, began time.Time) {
	n := len(c.SetAside)
	c.putAside(p, began)
	c.Replaced = append(c.Replaced, c.SetAside[n:]...)
}
