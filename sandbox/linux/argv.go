//go:build linux

package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// The descriptors a launch hands bwrap, in ExtraFiles order (fd 3 first).
const (
	// fdStatus is bwrap's --json-status-fd: the child's pid, then its exit code.
	fdStatus = 3
	// fdSeccomp carries the BPF program for --seccomp, which bwrap reads
	// once it has built the box: its arrival is cordon's go-ahead for the
	// command (see giveGoAhead).
	fdSeccomp = 4
	// fdProbe carries the self-test's findings (probe launches only).
	fdProbe = 5
	// fdArgs carries bwrap's own arguments (--args), so no value (an
	// --env variable, say) shows in the host's process list.
	fdArgs = 6
	// fdBuilt is bwrap's --block-fd, which it reads once it has built the
	// box, just before the seccomp program: see newBuiltNotice.
	fdBuilt = 7
)

// selfPath is where cordon's own binary sits inside the sandbox, when it
// does (boxHoldsSelf).
const selfPath = "/run/cordon/cordon"

// boxHoldsSelf says whether the box holds cordon's own binary at
// selfPath: the self-test runs from it, and in restricted mode git's ssh
// runs cordon connect. Other boxes do without the mount.
func boxHoldsSelf(p *policy.Policy, probe *probeMode) bool {
	return probe != nil || p.Network == policy.NetRestricted
}

// ProbeCommand is the hidden subcommand that runs the self-test inside a
// sandbox.
const ProbeCommand = "__probe"

// systemEntries are the top-level host entries reproduced as the host has
// them: a symlink as the same symlink, a directory bound read-only.
var systemEntries = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hiddenProc are the files of the box's /proc that read as empty (the
// host's /dev/null is bound over each the host has, which needs no
// scratch file: a run with none makes none): the kernel keys the
// user may view, which the box shares with the user's session (keyctl is
// refused, but /proc/keys listed each by its description, "vault-token:
// prod-db", and payload size), their owners' quotas, and the kernel's
// symbol addresses, which a host whose perf_event_paranoid is 1 or less
// shows anyone, handing a kernel exploit KASLR undone.
var hiddenProc = []string{"/proc/keys", "/proc/key-users", "/proc/kallsyms"}

// hostInfo is what the builder knows about this machine and user.
type hostInfo struct {
	env []string // the host environment
	// home is the invoking user's home: an empty tmpfs in the sandbox.
	home string
	// dbHome is the invoking user's home as the user database gives it,
	// whatever $HOME says.
	dbHome string
	// user names the account the command runs as (USER inside).
	user     string
	uid, gid int
	guard    guard
	self     string // cordon's binary on the host
	bwrap    string // bubblewrap on the host
	// holderNet says a holder supplies the network namespace (restricted mode).
	holderNet bool
	limits    limitPlan
	goarch    string
}

// bind is one host path bound into the sandbox at its real path.
type bind struct {
	path  string
	write bool
	// walk says the tree is searched for credential files to mask.
	walk bool
}

// launch is a Spec rendered for bwrap.
type launch struct {
	// argv is bwrap's full command line, argv[0] the bwrap binary.
	argv []string
	// sep indexes the "--" that ends bwrap's options in argv.
	sep int
	// scratch is the host directory holding files the mounts come from;
	// empty when no mount needs one.
	scratch string
	// files are the scratch files to create: path to contents.
	files map[string][]byte
	// emptyDir is the scratch directory bound over denied directories;
	// empty when none is denied.
	emptyDir string
	seccomp  []bpf.RawInstruction
	// rlimits go on the sandbox's init before it starts the command.
	rlimits []rlimit
	// guarded are the workspace's guarded paths, for sandbox.Aftercare
	// once the run has ended; workspace is the workspace's real path. A
	// run (not a self-test) owes its aftercare (sandbox.Owe), and paid,
	// once set, removes the record of it.
	guarded   []sandbox.GuardedPath
	workspace string
	owes      bool
	paid      func()
	// cannot is set when the command cannot be executed: the launch
	// answers as a shell would, without building the box.
	cannot *execFailure
	// wentAhead is set once the go-ahead is written (release): from then
	// on the box's init starts the command.
	wentAhead bool
}

// probeMode replaces the command with cordon's self-test.
type probeMode struct {
	// outside is a host directory that is not mounted: writing there must fail.
	outside string
}

// build renders s for bwrap, using scratch (not created here) for the
// files mounts are made from, when any is. With probe set, cordon's
// self-test runs instead of s.Argv.
//
// bwrap's own init is pid 1 of the sandbox's pid namespace: it reaps
// orphans and reports the command's exit. The command is pid 2, which the
// init forks only once cordon has recorded the launch and put the
// rlimits on it (the go-ahead): the command inherits them, the init needs
// none of what they bound. A command that cannot be executed is answered
// with 126 or 127, as a shell would, from the host's view of the same
// files.
func build(s *sandbox.Spec, h hostInfo, scratch string, probe *probeMode) (*launch, error) {
	p := s.Policy
	if p == nil {
		return nil, fmt.Errorf("no policy")
	}
	if probe == nil && len(s.Argv) == 0 {
		return nil, fmt.Errorf("no command to run: put it after --")
	}
	l := &launch{files: map[string][]byte{}}
	h.guard = h.guard.withConfig(s.Config)

	ws, workdir, err := workspaceOf(s, h.guard)
	if err != nil {
		return nil, err
	}
	l.workspace = ws
	a := []string{h.bwrap,
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup"}
	switch p.Network {
	case policy.NetOff:
		a = append(a, "--unshare-net")
	case policy.NetOpen:
	case policy.NetRestricted:
		if !h.holderNet {
			return nil, fmt.Errorf("network mode restricted is not available in this build; use --net off, or --net open to share the host network")
		}
		a = append(a, "--uid", strconv.Itoa(h.uid), "--gid", strconv.Itoa(h.gid))
	default:
		return nil, fmt.Errorf("network mode %q is not one of off, open, restricted", p.Network)
	}
	a = append(a, "--hostname", "cordon",
		"--die-with-parent", "--new-session", "--disable-userns", "--cap-drop", "ALL")

	roots := []string{"/usr", "/etc"}
	a = append(a, "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc")
	for _, e := range systemEntries {
		fi, err := os.Lstat(e)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(e)
			if err != nil {
				return nil, fmt.Errorf("read symlink %s: %w", e, err)
			}
			a = append(a, "--symlink", target, e)
		case fi.IsDir():
			a = append(a, "--ro-bind", e, e)
		default:
			continue
		}
		roots = append(roots, e)
	}
	// Every tmpfs the box can write holds at most tmp_size: tmpfs pages
	// are charged to the run's memory cgroup, but without one (the
	// rlimit fallback) nothing else bounds the RAM a box fills there.
	// bwrap's --dev is a tmpfs it cannot size, so /dev is made
	// read-only below, and /dev/shm is a tmpfs of its own.
	tmpfs := func(perms, path string) {
		if p.Limits.TmpSize > 0 {
			a = append(a, "--size", strconv.FormatInt(p.Limits.TmpSize, 10))
		}
		a = append(a, "--perms", perms, "--tmpfs", path)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	tmpfs("1777", "/dev/shm")
	tmpfs("1777", "/tmp")
	tmpfs("0700", h.home)
	if p.Network == policy.NetOpen {
		if r, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !sandbox.Within(r, "/etc") && !sandbox.Within(r, "/usr") {
			a = append(a, "--ro-bind", r, r)
			roots = append(roots, r)
		}
	}

	binds, err := userBinds(p, ws, h.guard)
	if err != nil {
		return nil, err
	}
	visible := func(q string) bool {
		for _, r := range roots {
			if sandbox.Within(q, r) {
				return true
			}
		}
		for _, b := range binds {
			if sandbox.Within(q, b.path) {
				return true
			}
		}
		return false
	}
	var cmdline []string
	if probe == nil {
		res := resolver{path: envValue(h.env, "PATH"), workdir: workdir, workspace: ws, guard: h.guard, visible: visible,
			self: boxHoldsSelf(p, probe)}
		cmd, err := res.lookup(s.Argv[0])
		if err != nil {
			return nil, err
		}
		for _, m := range cmd.Mounts {
			binds = append(binds, bind{path: m, walk: true})
		}
		l.cannot = res.unrunnable(s.Argv[0], cmd, h.uid, h.gid)
		l.rlimits = h.limits.rlimits()
		cmdline = append([]string{s.Argv[0]}, s.Argv[1:]...)
		if cmd.Exe != "" {
			cmdline[0] = cmd.Exe
		}
	} else {
		cmdline = []string{selfPath, ProbeCommand, strconv.Itoa(fdProbe), probe.outside}
	}
	sortBinds(binds)
	sources, err := credentialSources(p, binds)
	if err != nil {
		return nil, err
	}
	if err := makeOwnDirs(h.guard.ownDirs(), binds, visible); err != nil {
		return nil, err
	}
	// The three checks below resolve the deny_read entries, and the
	// directories above them, each in turn: they share what the kernel
	// said of each name (nothing changes the host's files in between).
	names := &sandbox.Resolver{}
	if err := checkDenyReadLinks(p, ws, s.Files, binds, names); err != nil {
		return nil, err
	}
	if err := refuseHiddenLinks(p, ws, s.Files, binds, names); err != nil {
		return nil, err
	}
	masks, err := maskPaths(p, ws, h.guard, binds, sources, visible, names)
	if err != nil {
		return nil, err
	}
	// Where each file shown lands, bwrap following the links on the way.
	shown := make(map[string]string, len(s.Files))
	for dst := range s.Files {
		shown[dst] = shownAt(dst, visible, names)
	}
	masks = unmaskShown(masks, slices.Collect(maps.Values(shown)), sources)
	// What is mounted over a path in a read-write bind (a mask, a file
	// shown in the box) moves with a directory above it renamed: those
	// directories are pinned too.
	over := make([]string, 0, len(masks)+len(s.Files))
	for _, m := range masks {
		over = append(over, m.path)
	}
	for _, at := range shown {
		over = append(over, at)
	}
	// So does a read-only bind inside a read-write one (an allow_path in
	// the workspace): renamed away with a directory above it, it left its
	// path to a writable tree of the box's making.
	for _, b := range binds {
		if !b.write {
			over = append(over, b.path)
		}
	}
	slices.Sort(over)
	pins := pinsAbove(nil, over, binds)
	// The pins go in with the binds, parents first, so that a bind
	// nested in a pinned directory still lands on top of it.
	mounts := slices.Clone(binds)
	for _, d := range pins {
		mounts = append(mounts, bind{path: d, write: true})
	}
	sortBinds(mounts)
	for _, b := range mounts {
		op := "--ro-bind"
		if b.write {
			op = "--bind"
		}
		a = append(a, op, b.path, b.path)
	}
	var writable []string
	for _, b := range binds {
		if b.write && b.path != ws {
			writable = append(writable, b.path)
		}
	}
	empty := filepath.Join(scratch, "empty")
	guards, guarded, err := guardArgs(sandbox.GuardSpec{Workspace: ws, ReadOnly: p.ReadOnly,
		Own: []string{h.self, holderPath(h.self)}, Writable: writable, Config: s.Config, Audit: h.guard.audit, Projects: s.Projects}, empty)
	if err != nil {
		return nil, err
	}
	a = append(a, guards...)
	l.guarded = guarded
	if slices.ContainsFunc(guarded, func(g sandbox.GuardedPath) bool { return g.Guard == sandbox.AbsentFile }) {
		l.files[empty] = nil
	}
	if boxHoldsSelf(p, probe) {
		a = append(a, "--ro-bind", h.self, selfPath)
	}

	dsts := make([]string, 0, len(s.Files))
	for dst := range s.Files {
		if !filepath.IsAbs(dst) {
			return nil, fmt.Errorf("sandbox file %q: path must be absolute", dst)
		}
		dsts = append(dsts, dst)
	}
	sort.Strings(dsts)
	// One scratch file per distinct content: the trust bundle, say, is
	// placed at several paths, usually as the very same slice, which is
	// known without comparing it again. Contents are compared whole:
	// hashing the system roots' bundle (225 KB) took a restricted run
	// over 1 ms of CPU on a CPU without SHA extensions; comparing it
	// takes 8 µs.
	type scratchFile struct {
		data []byte
		path string
	}
	var made []scratchFile
	type slice struct {
		first *byte
		n     int
	}
	same := map[slice]string{}
	bound := map[string]bool{}
	for _, dst := range dsts {
		at := shown[dst]
		if bound[at] {
			// A link and the file it leads to, both listed: one file,
			// shown once (a second mount would lie on the scratch file).
			continue
		}
		bound[at] = true
		data := s.Files[dst]
		id := slice{n: len(data)}
		if len(data) > 0 {
			id.first = &data[0]
		}
		src, ok := same[id]
		if !ok {
			if i := slices.IndexFunc(made, func(f scratchFile) bool { return bytes.Equal(f.data, data) }); i >= 0 {
				src = made[i].path
			} else {
				src = filepath.Join(scratch, "file-"+strconv.Itoa(len(made)))
				made = append(made, scratchFile{data, src})
				l.files[src] = data
			}
			same[id] = src
		}
		a = append(a, "--ro-bind", src, at)
	}

	for _, m := range masks {
		src := empty
		if m.dir {
			src = filepath.Join(scratch, "empty.d")
			l.emptyDir = src
		} else {
			l.files[src] = nil
		}
		a = append(a, "--ro-bind", src, m.path)
	}
	for _, f := range hiddenProc {
		if _, err := os.Stat(f); err == nil {
			a = append(a, "--dev-bind", "/dev/null", f)
		}
	}
	if len(l.files) > 0 || l.emptyDir != "" {
		l.scratch = scratch
	}
	// /dev goes read-only last, once the devices named with allow_path
	// have their mount points there; /dev/shm and /dev/pts, mounts of
	// their own, stay writable.
	a = append(a, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", workdir, "--clearenv")
	env, err := environment(p.Env, h.env, h.home, h.user, s.Env)
	if err != nil {
		return nil, err
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	if l.seccomp, err = seccompProgram(h.goarch, chmodRefused); err != nil {
		return nil, err
	}
	a = append(a, "--seccomp", strconv.Itoa(fdSeccomp), "--block-fd", strconv.Itoa(fdBuilt), "--json-status-fd", strconv.Itoa(fdStatus))
	l.sep = len(a)
	a = append(a, "--")
	l.argv = append(a, cmdline...)
	if n := bwrapWords(l.argv); n > bwrapMaxWords {
		return nil, newTooLongError(n, len(cmdline), masks, binds)
	}
	return l, nil
}

// bwrapMaxWords is how many words bubblewrap takes in all, its options
// (those it reads through --args too) and the command's together: past
// it, it refuses to start (MAX_ARGS in its bubblewrap.c).
const bwrapMaxWords = 9000

// bwrapWords is how many words bwrap counts of a launch's argv: all but
// its own name, and the "--args N" that hands it the options.
func bwrapWords(argv []string) int { return len(argv) - 1 + 2 }

// tooLongError is a box whose bwrap command line bubblewrap would refuse
// for its length (bwrapMaxWords): the command's words, or the masks of
// a tree with many files named as credentials, are the usual cause.
type tooLongError struct {
	words, command, masks int
	// tree is the bound tree with the most masks in it, and treeMasks
	// their number; "" when no mask lies in a bound tree.
	tree      string
	treeMasks int
}

func newTooLongError(words, command int, masks []mask, binds []bind) *tooLongError {
	e := &tooLongError{words: words, command: command, masks: len(masks)}
	for _, b := range binds {
		n := 0
		for _, m := range masks {
			if sandbox.Within(m.path, b.path) {
				n++
			}
		}
		if n > e.treeMasks {
			e.tree, e.treeMasks = b.path, n
		}
	}
	return e
}

func (e *tooLongError) Error() string {
	parts := fmt.Sprintf("%d are the command's", e.command)
	if e.masks > 0 {
		parts += fmt.Sprintf(", %d go to %d masks (over files named as credentials, denied reads and hidden sockets", 3*e.masks, e.masks)
		if e.tree != "" {
			parts += fmt.Sprintf(", %d of them in %s", e.treeMasks, e.tree)
		}
		parts += ")"
	}
	return fmt.Sprintf("the box would take %d words on bwrap's command line, more than the %d bubblewrap accepts: %s, the rest to its mounts and settings; %s",
		e.words, bwrapMaxWords, parts, e.Fix())
}

// Fix says to shorten whichever part is the larger: the command's words
// or the masks.
func (e *tooLongError) Fix() string {
	if e.command >= 3*e.masks {
		return "pass the command its arguments through a file or a pipe instead (cordon run -- sh -c 'xargs CMD < list')"
	}
	where := "the tree with the most of them"
	if e.tree != "" {
		where = e.tree
	}
	return fmt.Sprintf("expose or allow less than %s (a directory below it), or add the directories in it that hold the files to deny_read (one mask for a whole directory)", where)
}

// workspaceOf resolves the workspace and the working directory inside it.
func workspaceOf(s *sandbox.Spec, g guard) (ws, workdir string, err error) {
	if s.Workspace == "" {
		return "", "", fmt.Errorf("no workspace: run cordon from inside a project directory")
	}
	if ws, err = realPath(s.Workspace); err != nil {
		return "", "", fmt.Errorf("workspace: %w", err)
	}
	if err := g.check("workspace", ws); err != nil {
		return "", "", err
	}
	workdir = ws
	if s.Workdir != "" {
		if workdir, err = realPath(s.Workdir); err != nil {
			return "", "", fmt.Errorf("working directory: %w", err)
		}
		if !sandbox.Within(workdir, ws) {
			return "", "", fmt.Errorf("working directory %s is outside the workspace %s", workdir, ws)
		}
	}
	return ws, workdir, nil
}

// userBinds are the workspace (read-write), expose paths (read-only) and
// allow_paths entries, each checked against the guard and resolved to its
// real path. A path named twice is writable if any entry makes it so.
func userBinds(p *policy.Policy, ws string, g guard) ([]bind, error) {
	byPath := map[string]*bind{ws: {path: ws, write: true}}
	order := []string{ws}
	add := func(what, path string, write bool) error {
		if err := g.check(what, path); err != nil {
			return err
		}
		real, err := realPath(path)
		if errors.Is(err, errNoPath) {
			return &missingPathError{what: what, path: path}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if b, ok := byPath[real]; ok {
			b.write = b.write || write
			return nil
		}
		byPath[real] = &bind{path: real, write: write, walk: !sandbox.Within(real, ws)}
		order = append(order, real)
		return nil
	}
	for _, e := range p.Expose {
		if err := add("expose", e, false); err != nil {
			return nil, err
		}
	}
	for _, e := range p.AllowPaths {
		r, err := policy.ParsePathRule(e)
		if err != nil {
			return nil, fmt.Errorf("allow_paths: %w", err)
		}
		if err := add("allow_paths", r.Path, r.Write); err != nil {
			return nil, err
		}
	}
	out := make([]bind, 0, len(order))
	for _, k := range order {
		out = append(out, *byPath[k])
	}
	return out, nil
}

// missingPathError is an expose or allow_paths entry naming a path that
// is not there. It says where such an entry is written: a one-shot
// --allow-path is no entry of the policy, which the fix named alone.
type missingPathError struct{ what, path string }

// entryOrigins says where each kind of entry is written.
var entryOrigins = map[string]string{
	"expose":      "expose: in the config",
	"allow_paths": "--allow-path, or allow_paths: in the config",
}

func (e *missingPathError) Error() string {
	return fmt.Sprintf("%s: path %s does not exist; %s", e.what, e.path, e.Fix())
}

// Fix says to make the path or drop the entry.
func (e *missingPathError) Fix() string {
	return fmt.Sprintf("create it, or drop the entry (%s)", entryOrigins[e.what])
}

// sortBinds orders binds parents first, so a nested bind lands on top.
func sortBinds(b []bind) {
	sort.SliceStable(b, func(i, j int) bool { return depth(b[i].path) < depth(b[j].path) })
}

// depth counts a path's components.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// envValue returns NAME's value in a KEY=VALUE list.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}
