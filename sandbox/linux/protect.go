//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// credentialDirs are the stores below a home directory that are never
// exposed; a mount that covers one shows it empty.
var credentialDirs = sandbox.ProtectedHome

// credentialNames are file names that read as empty anywhere inside an
// exposed tree (sandbox.CredentialFiles).
var credentialNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range sandbox.CredentialFiles {
		m[n] = true
	}
	return m
}()

// hostViews are the host's views of its processes that no box may be
// handed (it has its own /proc and /dev): the host's /proc, with every
// process and its command line; its terminals, whose input a reader
// steals; its shared memory and message queues; and its cgroups. Each is
// refused, and hidden inside a wider exposed directory.
var hostViews = []string{"/proc", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys/fs/cgroup"}

// sharedTemps are the host's shared temporary directories, which every
// user may make files in (policy.SharedTemp): they hold the user's
// sockets (a tmux server's, an ssh agent's, the X server's), through
// which whatever connects acts outside the box, read-only mount or not,
// and other users' files. Each is refused, as is any other such
// directory, and hidden inside a wider exposed directory; a directory in
// one is not.
var sharedTemps = []string{"/tmp", "/var/tmp"}

// hostSockets are the sockets through which a process could have the host
// run commands for it, outside the box (the container engines' APIs, the
// message buses: the session bus reaches the user's systemd, which starts
// whatever it is asked to; systemd's own) or use the user's keys (the
// GnuPG agent's and the GNOME keyring's, whose directories are listed).
// runtimeDirs are the users' runtime directories ($XDG_RUNTIME_DIR,
// /run/user/UID), and dockerHost is $DOCKER_HOST. None is ever exposed; a
// mount that covers one hides it.
func hostSockets(runtimeDirs []string, dockerHost string) []string {
	out := []string{
		"/run/docker.sock", "/var/run/docker.sock",
		"/run/containerd/containerd.sock",
		"/run/podman/podman.sock",
		"/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket",
		"/run/systemd/private",
	}
	for _, d := range runtimeDirs {
		if filepath.IsAbs(d) {
			for _, s := range []string{"bus", "systemd/private", "docker.sock", "podman/podman.sock", "gnupg", "keyring"} {
				out = appendNew(out, filepath.Join(d, s))
			}
		}
	}
	if p, ok := strings.CutPrefix(dockerHost, "unix://"); ok && filepath.IsAbs(p) {
		out = appendNew(out, filepath.Clean(p))
	}
	return out
}

// guard knows which host paths may never be handed to the sandbox.
type guard struct {
	// homes are the invoking user's home directory in every spelling found
	// ($HOME, the password database, each with symlinks resolved).
	homes []string
	// own are cordon's own paths, wherever they are: the audit log's and
	// the cache's directories, and the run's configuration (withConfig).
	own []ownDir
	// sockets are the host's control sockets (hostSockets).
	sockets []string
	// audit are the audit log's directories (sandbox.AuditDirs): no box
	// may write where they are (sandbox.GuardSpec.Audit).
	audit []string
	// cache is cordon's cache directory, as written ("" for none).
	cache string
}

// ownDir is one of cordon's own directories, and why the sandbox must not
// reach it.
type ownDir struct {
	path, name, why string
}

// newGuard builds a guard for the given home spellings, audit log path and
// cache directory (either may be empty).
func newGuard(homes []string, auditPath, cacheDir string) guard {
	var g guard
	for _, h := range homes {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		g.homes = appendNew(g.homes, filepath.Clean(h))
		if r, err := filepath.EvalSymlinks(h); err == nil {
			g.homes = appendNew(g.homes, r)
		}
	}
	if auditPath != "" {
		for _, d := range sandbox.AuditDirs(auditPath) {
			g.addOwn(d, "the audit log directory", "the sandbox must not touch its own audit trail")
			g.audit = appendNew(g.audit, d)
		}
	}
	g.addOwn(cacheDir, "cordon's cache directory", "it keeps the trust bundles sandboxes are given")
	if filepath.IsAbs(cacheDir) {
		g.cache = filepath.Clean(cacheDir)
	}
	return g
}

// withConfig returns g guarding cordon's configuration too (Spec.Config):
// the global config file and the CA directory, wherever they are.
func (g guard) withConfig(config []string) guard {
	g.own = slices.Clone(g.own)
	for _, c := range config {
		g.addOwn(c, "cordon's configuration", "it holds your runs' policy and the CA key")
	}
	return g
}

// withDefaultAudit returns g guarding the default audit log's directory
// too (path is audit.DefaultPath's; "" for none), when the run writes
// another: the runs that write there are as much the user's, so it is
// refused as expose or allow_paths and hidden inside a wider directory,
// and, as what is hidden, the directories above it in a read-write bind
// are pinned, so that no box moves it away and plants a link or a second
// name of its own for the next run that logs there (audit.Open refuses
// both, but a box could still read the lines of those runs). A run is
// refused only when its own log is within the box's reach
// (sandbox.GuardSpec.Audit).
func (g guard) withDefaultAudit(path string) guard {
	if path == "" {
		return g
	}
	g.own = slices.Clone(g.own)
	for _, d := range sandbox.AuditDirs(path) {
		g.addOwn(d, "the default audit log directory", "the sandbox must not touch the audit trail of the runs that log there")
	}
	return g
}

// addOwn adds one of cordon's own paths (by its real path, when it
// resolves), unless it is there already.
func (g *guard) addOwn(dir, name, why string) {
	if dir == "" || !filepath.IsAbs(dir) {
		return
	}
	d := filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	for _, o := range g.own {
		if o.path == d {
			return
		}
	}
	g.own = append(g.own, ownDir{d, name, why})
}

// ownDirs lists cordon's own directories that are to exist before a box
// is built: this run's cache, and, in every home, those at their default
// places (sandbox.OwnHome), which the runs with other XDG variables use.
// One missing where the box may write is made, so that it is hidden
// rather than the box's to make, with a config, a CA, audit lines or
// records of its own that a later run would take for cordon's.
func (g guard) ownDirs() []string {
	var out []string
	if g.cache != "" {
		out = append(out, g.cache)
	}
	for _, h := range g.homes {
		for _, d := range sandbox.OwnHome {
			out = appendNew(out, filepath.Join(h, d))
		}
	}
	return out
}

// makeOwnDirs makes each of cordon's own directories (dirs, as ownDirs
// lists them) that is missing where the box may write, so that it is
// hidden (maskPaths) rather than the box's to make: before anything
// reads what it holds, and before the box could make it with contents of
// its own. Each is made where the kernel resolves it, links followed: a
// link on the way (~/.config a link into a dotfiles tree exposed
// read-write) leads the box there as it leads the next run's cordon. A
// link on the way that the box could replace (one in a read-write bind)
// is refused, with nothing made: cordon, outside the box, would make its
// directory wherever the link then pointed.
func makeOwnDirs(dirs []string, binds []bind, visible func(string) bool) error {
	for _, c := range dirs {
		real, _, err := sandbox.Resolve(c, func(link string) error {
			if movable(link, binds) {
				return fmt.Errorf("cordon's directory %s: %s is a symbolic link the command could replace, and cordon would make its directory, outside the box, wherever the link then pointed; replace the link with the directory it points to, or expose a narrower path", c, link)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !visible(real) {
			continue
		}
		if _, err := os.Lstat(real); err != nil && movable(real, binds) {
			if err := os.MkdirAll(real, 0o700); err != nil {
				return fmt.Errorf("make cordon's directory %s, which the command could otherwise make: %w", real, err)
			}
		}
	}
	return nil
}

// protected lists every path the guard refuses to expose and masks when a
// wider mount covers it.
func (g guard) protected() []string {
	var out []string
	for _, h := range g.homes {
		for _, d := range credentialDirs {
			out = append(out, filepath.Join(h, d))
		}
	}
	for _, o := range g.own {
		out = append(out, o.path)
	}
	out = append(out, hostViews...)
	out = append(out, sharedTemps...)
	return append(out, g.sockets...)
}

// check says why path (absolute, cleaned) may not be exposed to the
// sandbox as what (e.g. "expose"), or returns nil. Both the path as written
// and its resolved form are checked.
func (g guard) check(what, path string) error {
	candidates := []string{filepath.Clean(path)}
	if r, err := filepath.EvalSymlinks(path); err == nil && r != candidates[0] {
		candidates = append(candidates, r)
	}
	for _, p := range candidates {
		for _, h := range g.homes {
			switch {
			case p == h:
				return fmt.Errorf("%s %s: refusing your home directory; name the project or tool directory inside it instead", what, path)
			case sandbox.Within(h, p):
				return fmt.Errorf("%s %s: refusing a directory that contains your home directory %s; name a narrower path", what, path, h)
			}
		}
		for _, o := range g.own {
			if sandbox.Within(p, o.path) {
				return fmt.Errorf("%s %s: refusing %s %s: %s", what, path, o.name, o.path, o.why)
			}
		}
		for _, h := range g.homes {
			for _, d := range credentialDirs {
				c := filepath.Join(h, d)
				switch {
				case !sandbox.Within(p, c):
				case slices.Contains(sandbox.OwnHome, d):
					return fmt.Errorf("%s %s: refusing %s, cordon's own directory at its default place (a configuration and CA, an audit log or records that later runs act on); cordon never exposes it", what, path, c)
				default:
					return fmt.Errorf("%s %s: refusing %s, which holds credentials; cordon never exposes it", what, path, c)
				}
			}
		}
		if p == "/dev" {
			return fmt.Errorf("%s %s: refusing the host's /dev: the box has its own; name the device it needs (/dev/kvm, /dev/dri)", what, path)
		}
		for _, v := range hostViews {
			if sandbox.Within(p, v) {
				return fmt.Errorf("%s %s: refusing the host's %s: the box has its own, and the host's would show it the host's processes, terminals or shared memory", what, path, v)
			}
		}
		if slices.Contains(sharedTemps, p) || policy.SharedTemp(p) {
			return fmt.Errorf("%s %s: refusing a directory every user may make files in: it holds your sockets (a tmux server's, an ssh agent's), through which the command could act outside the box, read-only or not; name a directory in it", what, path)
		}
		for _, c := range g.sockets {
			if sandbox.Within(p, c) {
				return fmt.Errorf("%s %s: refusing %s: whatever can connect to it can run commands outside the box, or use your keys", what, path, c)
			}
		}
	}
	return nil
}

// appendNew appends s unless list already holds it.
func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// errNoPath is realPath's error for a path that is not there.
var errNoPath = errors.New("does not exist")

// realPath resolves every symlink in an absolute path; the path must exist.
func realPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute; write it from / or from ~", p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("path %s %w", p, errNoPath)
		}
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	return r, nil
}
