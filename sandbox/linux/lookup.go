//go:build linux

package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// maxShebang bounds how much of a script is read to find its interpreter.
const maxShebang = 256

// command is argv[0] as the sandbox will execute it.
type command struct {
	// Exe is the path the init executes; empty leaves argv[0] to the
	// sandbox's own PATH lookup (not found on the host, or relative).
	Exe string
	// Mounts are host directories bound read-only so Exe (and its #!
	// interpreter) can run; none lie inside the workspace.
	Mounts []string
}

// resolver finds commands on the host and decides what must be mounted
// for them; visible says whether a path is already in the sandbox.
type resolver struct {
	path      string // the host PATH
	workdir   string
	workspace string
	guard     guard
	visible   func(string) bool
	// self says the box holds cordon's own binary at selfPath.
	self bool
}

// lookup resolves argv0. A command found inside the workspace adds no
// mount and its #! line is not followed: the workspace's contents are the
// sandboxed side's to choose.
func (r resolver) lookup(argv0 string) (command, error) {
	if argv0 == "" {
		return command{}, fmt.Errorf("empty command name")
	}
	found := ""
	switch {
	case filepath.IsAbs(argv0):
		found = filepath.Clean(argv0)
	case strings.Contains(argv0, "/"):
		return command{}, nil // relative to the working directory, which is in the workspace
	default:
		found = r.search(argv0)
	}
	if found == "" {
		return command{}, nil
	}
	real, err := filepath.EvalSymlinks(found)
	if err != nil {
		return command{}, nil // dangling or unreadable: the sandbox reports 126/127 itself
	}
	var c command
	if sandbox.Within(real, r.workspace) {
		c.Exe = r.exe(found, real, nil)
		return c, nil
	}
	if err := r.mountFor(&c, argv0, real); err != nil {
		return command{}, err
	}
	c.Exe = r.exe(found, real, c.Mounts)
	interp := shebang(real)
	if interp == nil {
		return c, nil
	}
	ireal, err := filepath.EvalSymlinks(interp[0])
	if err != nil {
		return c, nil
	}
	if err := r.mountFor(&c, argv0, ireal); err != nil {
		return command{}, err
	}
	if filepath.Base(ireal) == "env" && len(interp) > 1 {
		if p := r.search(interp[1]); p != "" {
			if preal, err := filepath.EvalSymlinks(p); err == nil {
				if err := r.mountFor(&c, argv0, preal); err != nil {
					return command{}, err
				}
			}
		}
	}
	return c, nil
}

// execFailure is a command that cannot be executed, answered as a shell
// answers: 127 not found, 126 found but not executable.
type execFailure struct {
	code int
	msg  string
}

// unrunnable says why argv0, resolved as c, cannot be executed by uid and
// gid; nil when it can. The host's view is the sandbox's: the command, its
// directory and its #! interpreter sit at the same paths in both, and a
// relative command is in the workspace, bound at its real path. The one
// command only the sandbox has is cordon's own binary, at selfPath, in
// the boxes that hold it.
func (r resolver) unrunnable(argv0 string, c command, uid, gid int) *execFailure {
	path := c.Exe
	switch {
	case argv0 == selfPath && r.self:
		return nil // cordon's own binary, which only the sandbox has there
	case path != "":
	case filepath.IsAbs(argv0):
		path = argv0
	case strings.Contains(argv0, "/"):
		path = filepath.Join(r.workdir, argv0)
	default:
		if path = r.search(argv0); path == "" {
			return &execFailure{127, argv0 + ": command not found"}
		}
	}
	if f := canExec(path, uid, gid); f != nil {
		return &execFailure{f.code, argv0 + ": " + f.msg}
	}
	if interp := shebang(path); interp != nil {
		if f := canExec(interp[0], uid, gid); f != nil {
			return &execFailure{f.code, fmt.Sprintf("%s: bad interpreter %s: %s", argv0, interp[0], f.msg)}
		}
		// A script in the workspace brings no mount for its interpreter.
		if real, err := filepath.EvalSymlinks(interp[0]); err == nil && !r.covered(real, c.Mounts) {
			return &execFailure{127, fmt.Sprintf("%s: bad interpreter %s: not in the sandbox; expose its directory (expose: in the config, or --allow-path)", argv0, interp[0])}
		}
	}
	return nil
}

// canExec says why uid and gid cannot execute path; nil when they can.
func canExec(path string, uid, gid int) *execFailure {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		return &execFailure{127, "no such file"}
	case err != nil:
		return &execFailure{126, "cannot reach it: " + err.Error()}
	case fi.IsDir():
		return &execFailure{126, "is a directory"}
	case !fi.Mode().IsRegular():
		return &execFailure{126, "not a regular file"}
	}
	if uid == os.Geteuid() && gid == os.Getegid() {
		// The kernel's own answer: groups, ACLs and noexec mounts count.
		if err := unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS); err != nil {
			return &execFailure{126, "permission denied (not executable)"}
		}
		return nil
	}
	// A root cordon runs the command as run_as, with no supplementary group.
	st, ok := fi.Sys().(*syscall.Stat_t)
	bit := fs.FileMode(0o001)
	switch {
	case !ok:
	case int(st.Uid) == uid:
		bit = 0o100
	case int(st.Gid) == gid:
		bit = 0o010
	}
	if fi.Mode().Perm()&bit == 0 {
		return &execFailure{126, "permission denied (not executable)"}
	}
	return nil
}

// exe is the path to execute: the one found on PATH when its directory is
// in the sandbox (argv[0]-sensitive tools see their usual path), else the
// real file.
func (r resolver) exe(found, real string, mounts []string) string {
	if r.covered(filepath.Dir(found), mounts) {
		return found
	}
	return real
}

// search looks name up in the absolute entries of the host PATH.
func (r resolver) search(name string) string {
	if strings.Contains(name, "/") {
		if filepath.IsAbs(name) {
			return name
		}
		return ""
	}
	return sandbox.SearchPath(r.path, name)
}

// mountFor adds the directory that makes the real file runnable: its
// directory, or that directory's parent when it is a bin/ directory (so
// lib/ and share/ beside it come along), unless the sandbox already has it.
func (r resolver) mountFor(c *command, argv0, real string) error {
	if sandbox.Within(real, r.workspace) {
		return nil
	}
	dir := filepath.Dir(real)
	m := dir
	if filepath.Base(dir) == "bin" && filepath.Dir(dir) != "/" {
		if p := filepath.Dir(dir); r.guard.check("command", p) == nil {
			m = p
		}
	}
	if r.covered(m, c.Mounts) {
		return nil
	}
	if err := r.guard.check("command "+argv0+" lives in", m); err != nil {
		return err
	}
	c.Mounts = append(c.Mounts, m)
	return nil
}

// covered reports whether p is in the sandbox already or under one of extra.
func (r resolver) covered(p string, extra []string) bool {
	if r.visible(p) {
		return true
	}
	for _, m := range extra {
		if sandbox.Within(p, m) {
			return true
		}
	}
	return false
}

// shebang returns the interpreter and its first argument from a "#!" line,
// or nil when the file is not a script.
func shebang(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, maxShebang)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("#!")) {
		return nil
	}
	line, _, _ := bytes.Cut(buf[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
		return nil
	}
	out := []string{fields[0]}
	for _, f := range fields[1:] {
		if !strings.HasPrefix(f, "-") {
			out = append(out, f)
			break
		}
	}
	return out
}
