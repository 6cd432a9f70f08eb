//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// Options configures the Linux backend.
type Options struct {
	// AuditPath is the audit log; its directory is never exposed.
	AuditPath string
	// Self is cordon's own binary, bound into the sandbox for cordon
	// connect and the self-test; empty means the running executable.
	Self string
	// Holder supplies restricted mode's network; nil leaves that mode BLOCKED.
	Holder *Restricted
}

// Backend is the bubblewrap sandbox.
type Backend struct {
	opts Options

	lookBwrap func() (string, error) // findBwrap, once
	lookSelf  func() (string, error) // findSelf, once

	mu       sync.Mutex
	prepared map[*sandbox.Spec]*held       // holders started by Prepare
	hosts    map[*policy.Policy]hostAnswer // host's answers
}

// Prepare starts a restricted run's holder ahead of Run, so that its
// namespace is set up while the launcher starts the proxy and writes the
// launch line; nothing of the command starts before Run. release ends the
// holder if Run never takes it. A failure here is left for Run to meet
// and report.
func (b *Backend) Prepare(s *sandbox.Spec) (release func()) {
	if s.Policy == nil || s.Policy.Network != policy.NetRestricted || b.opts.Holder == nil {
		return func() {}
	}
	h, err := b.host(s.Policy)
	if err != nil {
		return func() {}
	}
	hd, err := b.opts.Holder.start(h)
	if err != nil {
		return func() {}
	}
	b.mu.Lock()
	if b.prepared == nil {
		b.prepared = map[*sandbox.Spec]*held{}
	}
	b.prepared[s] = hd
	b.mu.Unlock()
	return func() {
		if hd := b.takePrepared(s); hd != nil {
			hd.close()
		}
	}
}

// takePrepared returns the holder Prepare started for s, if any, and
// forgets it.
func (b *Backend) takePrepared(s *sandbox.Spec) *held {
	b.mu.Lock()
	defer b.mu.Unlock()
	hd := b.prepared[s]
	delete(b.prepared, s)
	return hd
}

var (
	_ sandbox.Backend  = (*Backend)(nil)
	_ sandbox.Preparer = (*Backend)(nil)
)

// New returns the Linux backend.
func New(o Options) *Backend {
	b := &Backend{opts: o}
	b.lookBwrap = sync.OnceValues(b.findBwrap)
	b.lookSelf = sync.OnceValues(b.findSelf)
	return b
}

// Name is "bwrap".
func (b *Backend) Name() string { return "bwrap" }

// Plan renders the launch without starting anything. Scratch files are
// listed under the directory Run would create.
func (b *Backend) Plan(s *sandbox.Spec) (*sandbox.Plan, error) {
	h, err := b.host(s.Policy)
	if err != nil {
		return nil, err
	}
	l, err := build(s, h, scratchName(h), nil)
	if err != nil {
		return nil, err
	}
	plan := &sandbox.Plan{Argv: l.argv, Files: map[string]string{}}
	for p, data := range l.files {
		plan.Files[p] = string(data)
	}
	if l.emptyDir != "" {
		plan.Files[l.emptyDir+"/"] = ""
	}
	plan.Files["fd "+strconv.Itoa(fdSeccomp)] = goAheadText(l) + seccompListing(h.goarch, chmodRefused, l.seccomp)
	if s.Policy.Network == policy.NetOpen {
		plan.Files["landlock"] = "bwrap, and the command after it, start in a Landlock domain scoped to its own abstract unix sockets (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, with no_new_privs): the host's, which --net open would otherwise share, answer EPERM\n"
	}
	if s.Policy.Network == policy.NetRestricted && b.opts.Holder != nil {
		plan.Files["network namespace"] = planText()
	}
	return plan, nil
}

// host gathers what the builder needs about this machine for policy p,
// once per policy: a restricted run's Prepare and Run ask for the same.
func (b *Backend) host(p *policy.Policy) (hostInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if got, ok := b.hosts[p]; ok {
		return got.h, got.err
	}
	h, err := b.gatherHost(p)
	if b.hosts == nil {
		b.hosts = map[*policy.Policy]hostAnswer{}
	}
	b.hosts[p] = hostAnswer{h, err}
	return h, err
}

// hostAnswer is one answer of host.
type hostAnswer struct {
	h   hostInfo
	err error
}

func (b *Backend) gatherHost(p *policy.Policy) (hostInfo, error) {
	if p == nil {
		return hostInfo{}, fmt.Errorf("no policy")
	}
	h := hostInfo{env: os.Environ(), goarch: runtime.GOARCH, holderNet: b.opts.Holder != nil}
	var err error
	if h.bwrap, err = b.bwrap(); err != nil {
		return h, err
	}
	if h.self, err = b.self(); err != nil {
		return h, err
	}
	me, err := user.Current()
	if err != nil {
		return h, fmt.Errorf("look up the current user: %w", err)
	}
	if h.home, err = homedir.Dir(); err != nil {
		return h, err
	}
	h.dbHome = me.HomeDir
	h.guard = newGuard([]string{h.home, me.HomeDir}, b.opts.AuditPath, sandbox.CacheDir())
	if def, err := audit.DefaultPath(); err == nil {
		h.guard = h.guard.withDefaultAudit(def)
	}
	h.uid, h.gid, h.user = os.Getuid(), os.Getgid(), me.Username
	if os.Geteuid() == 0 {
		ra, err := runAs(p.RunAs)
		if err != nil {
			return h, err
		}
		h.uid, h.gid, h.user = ra.uid, ra.gid, ra.name
	}
	h.guard.sockets = hostSockets([]string{os.Getenv("XDG_RUNTIME_DIR"),
		fmt.Sprintf("/run/user/%d", os.Getuid()), fmt.Sprintf("/run/user/%d", h.uid)}, os.Getenv("DOCKER_HOST"))
	h.limits = planLimits(p.Limits)
	return h, nil
}

// bwrap is the bubblewrap binary on PATH (findBwrap), looked up once:
// the launch, the capability check and the probes' memo keys all ask.
func (b *Backend) bwrap() (string, error) { return b.lookBwrap() }

// findBwrap finds the bubblewrap binary on PATH: a trusted one (lookHelper).
func (b *Backend) findBwrap() (string, error) {
	p, err := lookHelper("bwrap", os.Getenv("PATH"))
	switch {
	case errors.Is(err, errUntrusted):
		return "", fmt.Errorf("bubblewrap: %w; install it from your distribution: sudo apt-get install bubblewrap", err)
	case err != nil:
		return "", errors.New("bubblewrap (bwrap) is not installed or not on PATH; install it: sudo apt-get install bubblewrap")
	}
	return p, nil
}

// self is cordon's own binary (findSelf), looked up once: the host
// facts and the probes' memo keys both ask.
func (b *Backend) self() (string, error) { return b.lookSelf() }

// findSelf resolves cordon's own binary (Options.Self, or the running
// executable) through its symlinks.
func (b *Backend) findSelf() (string, error) {
	p := b.opts.Self
	if p == "" {
		var err error
		if p, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find cordon's own binary: %w", err)
		}
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("find cordon's own binary: %w", err)
	}
	return r, nil
}

// account is the unprivileged user a root invocation runs the command as.
type account struct {
	name     string
	uid, gid int
}

// runAs resolves run_as (default "nobody") for a root invocation, refusing
// any account with uid 0.
func runAs(name string) (account, error) {
	if name == "" {
		name = policy.DefaultRunAs
	}
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return account{}, fmt.Errorf("cordon runs as root, so it runs the command as run_as %q, which does not exist; create that user or set run_as to an unprivileged account", name)
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return account{}, fmt.Errorf("run_as %q has a non-numeric uid or gid", name)
	}
	if uid == 0 {
		return account{}, fmt.Errorf("run_as %q is root: cordon never gives the sandboxed command root's power; set run_as to an unprivileged account (default nobody) or run cordon as your own user", name)
	}
	return account{name: u.Username, uid: uid, gid: gid}, nil
}

// scratchName is a fresh scratch directory path in a directory no box
// can write in: for a run as oneself, sandbox.ScratchParent of the home
// the user database gives, which every run's guard keeps from its box
// whatever that run's $HOME (one run's $HOME may lie in another's
// workspace, and a box there swapped that run's masks); for root, whose
// home the account it runs the command as cannot reach into, the
// temporary directory, which writeScratch checks (makeScratchParent).
func scratchName(h hostInfo) string {
	parent := os.TempDir()
	if h.uid == os.Getuid() {
		parent = sandbox.ScratchParent(h.dbHome)
	}
	return filepath.Join(parent, sandbox.RandomName(sandbox.ScratchPrefix))
}

// makeScratchParent makes parent, the directory scratch directories are
// made in, when it is cordon's own (asOther false), and checks that no
// other account can make or remove names in it: bwrap mounts the scratch
// files by name, links followed. Run as root, the command runs as run_as,
// which could otherwise rename root's scratch directory away and put one
// of its own, with links to any file, in its place; so the temporary
// directory must be root's, and writable by no one else or sticky, as
// /tmp is.
func makeScratchParent(parent string, asOther bool) error {
	if !filepath.IsAbs(parent) {
		return errors.New("the user database gives you no home directory: cordon writes the files a sandbox is built from in its cache there, which every sandbox is kept from; give your account a home directory")
	}
	if !asOther {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return fmt.Errorf("create %s, where cordon writes the files a sandbox is built from (in its cache under your home directory as the user database gives it, which every sandbox is kept from): %w", parent, err)
		}
	}
	fi, err := os.Stat(parent)
	if err != nil {
		return fmt.Errorf("scratch directories' directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && fi.IsDir() && int(st.Uid) == os.Geteuid() && (fi.Mode().Perm()&0o022 == 0 || fi.Mode()&os.ModeSticky != 0) {
		return nil
	}
	if asOther {
		return fmt.Errorf("the temporary directory %s is not root's own, writable by root alone or sticky as /tmp is: the command, run as another account, could replace the files the sandbox is built from there; set TMPDIR to /tmp", parent)
	}
	return fmt.Errorf("%s, where cordon writes the files a sandbox is built from, is not a directory of yours that only you can write in: remove it, and cordon makes it anew", parent)
}

// writeScratch creates the launch's scratch directory and files, readable
// by uid and gid (the account bwrap runs as). A launch without one needs
// none. Run as root, cordon runs the command as run_as, an account other
// processes may run as too, so the directory is never run_as's own: one
// of them could otherwise put a link in it while root was still writing
// there, and have root write through it to any file on the machine, or
// replace a file in it before bwrap binds it, and have the box read its
// content where a masked file, the hosts file or the trust bundle should
// be. It stays root's, and once complete run_as's group is let read it.
// Each file is made anew (O_EXCL), never opened through a link. The
// directory is held (sandbox.HoldDir) until release, so that a cordon
// killed before it removes it leaves it to a later run's sweep.
func writeScratch(l *launch, uid, gid int) (release func(), err error) {
	if l.scratch == "" {
		return func() {}, nil
	}
	if err := makeScratchParent(filepath.Dir(l.scratch), uid != os.Getuid()); err != nil {
		return nil, err
	}
	if err := os.Mkdir(l.scratch, 0o700); err != nil {
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	release = sandbox.HoldDir(l.scratch)
	if err := fillScratch(l, uid, gid); err != nil {
		// What was written (the disk full part-way) serves no launch,
		// and the launch that fails here removes nothing.
		os.RemoveAll(l.scratch)
		release()
		return nil, err
	}
	return release, nil
}

// fillScratch writes the files of writeScratch in the directory it made.
func fillScratch(l *launch, uid, gid int) error {
	if l.emptyDir != "" {
		if err := os.Mkdir(l.emptyDir, 0o555); err != nil {
			return fmt.Errorf("create scratch directory: %w", err)
		}
	}
	paths := make([]string, 0, len(l.files))
	for p := range l.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := writeNew(p, l.files[p], 0o444); err != nil {
			return fmt.Errorf("write scratch file: %w", err)
		}
	}
	if uid != os.Getuid() {
		if err := os.Chown(l.scratch, -1, gid); err != nil {
			return fmt.Errorf("let gid %d read the scratch directory: %w", gid, err)
		}
		if err := os.Chmod(l.scratch, 0o750); err != nil {
			return fmt.Errorf("let gid %d read the scratch directory: %w", gid, err)
		}
	}
	return nil
}

// writeNew writes data to path, a file it creates (O_EXCL: whatever is
// already there, a link included, is an error, not followed).
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
