// Package darwin is cordon's sandbox on macOS: a Seatbelt profile rendered
// from the policy and run with /usr/bin/sandbox-exec. The renderer, the
// capability table and Plan build and work on every OS, so Linux can show a
// macOS launch with --dry-run; Check and Run need a Mac.
package darwin

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// Machine is what a profile needs to know about the Mac it runs on. Detect
// gathers it; Render takes it as an input so that rendering is a pure
// function of the Spec and the Machine.
type Machine struct {
	// Home is the user's home directory: "~" in policy paths and the
	// protected credential stores are taken from it.
	Home string
	// OtherHomes are the user's home directory as the user database has
	// it, when $HOME names another: refused and protected like Home, as
	// the stores there are the user's all the same.
	OtherHomes []string
	// Xcode is the selected Xcode bundle, readable like the system; empty
	// when there is none (the Command Line Tools are always readable).
	Xcode string
	// Protected lists more paths denied like ~/.ssh: the audit log's
	// directory, cordon's configuration when it lives elsewhere.
	Protected []string
	// RealPaths maps a canonical path the Spec, the policy or this Machine
	// names to where it resolves on disk, when that differs. Seatbelt
	// matches resolved paths, so every rule names both.
	RealPaths map[string]string
	// Guarded is how the workspace is guarded (its git repository and
	// read_only paths), as sandbox.GuardWorkspace finds it.
	Guarded []sandbox.GuardedPath
	// Named are the files named as credentials (sandbox.CredentialFiles)
	// in the read-write allow_paths outside the workspace. The profile
	// denies every such name there already; it denies these by path too,
	// so that the directories above them stay where they are: renamed
	// into the workspace, one would take its file where no rule denies it.
	Named []string
	// Terminals are the terminals (/dev/ttysN) the command inherits as
	// its stdin, stdout or stderr: the only ones it may write to.
	Terminals []string
}

// protectedHome are, below the home directory, the stores no policy can
// open to a command: the platform-wide list, the login keychain's files,
// and cordon's cache where macOS keeps caches.
var protectedHome = append(append([]string(nil), sandbox.ProtectedHome...), "Library/Keychains", "Library/Caches/cordon")

// sharedDirs are directories every process on a Mac writes to. A workspace
// or TMPDIR that is or contains one would share it with the host.
var sharedDirs = []string{"/private/tmp", "/private/var/tmp", "/private/var/folders"}

// Render returns the Seatbelt profile for s on m. It reads nothing from
// disk, and refuses a Spec that would open a protected path, naming it.
func Render(s *sandbox.Spec, m Machine) (string, error) {
	l, err := newLayout(s, m, m.names)
	if err != nil {
		return "", err
	}
	return l.rules().render()
}

// resolver canonicalises a path and lists its names: the canonical path
// first, then where it leads on disk when that differs.
type resolver func(path string) ([]string, error)

// names is the pure resolver: it looks paths up in m.RealPaths.
func (m Machine) names(p string) ([]string, error) {
	c, err := canonical(p)
	if err != nil {
		return nil, err
	}
	out := []string{c}
	if r, ok := m.RealPaths[c]; ok {
		if rc, err := canonical(r); err == nil && rc != c {
			out = append(out, rc)
		}
	}
	return out, nil
}

// layout is a Spec resolved against a Machine: every path canonical and
// joined by its other name on disk, sorted by what the profile grants.
type layout struct {
	names     resolver
	net       policy.NetMode
	proxyPort int
	homes     []string
	xcode     []string
	read      []string // expose and read-only allow_paths
	write     []string // workspace, TMPDIR and read-write allow_paths
	tmpdir    []string
	terminals []string
	denyRead  []string // deny_read and credential source files
	exposed   []string // expose and allow_paths outside the workspace
	protected []string
	// The workspace's guarded paths (its git repository, read_only):
	// files and trees not written, directories neither renamed nor removed.
	guardFiles, guardTrees, guardDirs []string
}

func newLayout(s *sandbox.Spec, m Machine, names resolver) (*layout, error) {
	if s == nil || s.Policy == nil {
		return nil, fmt.Errorf("render seatbelt profile: no policy given")
	}
	p := s.Policy
	l := &layout{names: names}
	var err error
	if m.Home == "" || !strings.HasPrefix(m.Home, "/") {
		return nil, fmt.Errorf("home directory %q is not an absolute path; set $HOME", m.Home)
	}
	for _, h := range append([]string{m.Home}, m.OtherHomes...) {
		if l.homes, err = l.add(l.homes, h); err != nil {
			return nil, fmt.Errorf("home directory: %w", err)
		}
	}
	for _, h := range l.homes {
		for _, rel := range protectedHome {
			if l.protected, err = l.add(l.protected, h+"/"+rel); err != nil {
				return nil, fmt.Errorf("protected path: %w", err)
			}
		}
	}
	for _, q := range m.Protected {
		if l.protected, err = l.add(l.protected, q); err != nil {
			return nil, fmt.Errorf("protected path: %w", err)
		}
	}
	if m.Xcode != "" {
		if l.xcode, err = l.grant("the selected Xcode", m.Xcode); err != nil {
			return nil, err
		}
	}

	ws, err := l.place("workspace", s.Workspace)
	if err != nil {
		return nil, err
	}
	l.write = append(l.write, ws...)
	if s.Workdir != "" {
		wd, err := names(s.Workdir)
		if err != nil {
			return nil, fmt.Errorf("workdir: %w", err)
		}
		inside := func(n string) bool {
			return slices.ContainsFunc(ws, func(w string) bool { return sandbox.Within(n, w) })
		}
		if !slices.ContainsFunc(wd, inside) {
			return nil, fmt.Errorf("workdir %s is not inside the workspace %s; run cordon from inside the project", wd[0], ws[0])
		}
	}
	for _, r := range m.Guarded {
		list := &l.guardFiles
		switch {
		case r.Guard == sandbox.Checkouts || r.Guard == sandbox.Unborn || r.Guard == sandbox.Nested || r.Guard == sandbox.Watched:
			continue // seen to after the run (sandbox.Aftercare), not a rule
		case r.Guard == sandbox.Pinned:
			list = &l.guardDirs
		case r.Dir:
			list = &l.guardTrees
		}
		if *list, err = l.add(*list, r.Path); err != nil {
			return nil, fmt.Errorf("the workspace's guarded paths: %w", err)
		}
	}
	for _, t := range m.Terminals {
		if !isTTYName(t) {
			return nil, fmt.Errorf("terminal %q is not a /dev/ttysN", t)
		}
		if !slices.Contains(l.terminals, t) {
			l.terminals = append(l.terminals, t)
		}
	}
	tmp, ok := lookupEnv(s.Env, "TMPDIR")
	if !ok {
		return nil, fmt.Errorf("the command's environment has no TMPDIR; the launcher must create a per-session directory and set TMPDIR to it")
	}
	td, err := l.place("TMPDIR", tmp)
	if err != nil {
		return nil, err
	}
	l.write, l.tmpdir = append(l.write, td...), td

	// An exposed tree's files named as credentials are denied, as Linux
	// shows them empty; the workspace's own are the project's.
	expose := func(got []string) {
		for _, n := range got {
			if !slices.ContainsFunc(ws, func(w string) bool { return sandbox.Within(n, w) }) {
				l.exposed = append(l.exposed, n)
			}
		}
	}
	for _, e := range p.Expose {
		got, err := l.place("expose", expandHome(e, m.Home))
		if err != nil {
			return nil, err
		}
		l.read = append(l.read, got...)
		expose(got)
	}
	for _, e := range p.AllowPaths {
		r, err := policy.ParsePathRule(e)
		if err != nil {
			return nil, fmt.Errorf("allow_paths: %w", err)
		}
		got, err := l.place("allow_paths", expandHome(r.Path, m.Home))
		if err != nil {
			return nil, err
		}
		if r.Write {
			l.write = append(l.write, got...)
		} else {
			l.read = append(l.read, got...)
		}
		expose(got)
	}
	for _, e := range p.DenyRead {
		if l.denyRead, err = l.add(l.denyRead, expandHome(e, m.Home)); err != nil {
			return nil, fmt.Errorf("deny_read: %w", err)
		}
	}
	for _, c := range p.Credentials {
		if c.Source.File == "" {
			continue
		}
		if l.denyRead, err = l.add(l.denyRead, expandHome(c.Source.File, m.Home)); err != nil {
			return nil, fmt.Errorf("credentials %q: source.file: %w", c.Name, err)
		}
	}
	for _, n := range m.Named {
		if l.denyRead, err = l.add(l.denyRead, n); err != nil {
			return nil, fmt.Errorf("a file named as credentials: %w", err)
		}
	}
	// A denied path (deny_read, a credential's source, a protected store
	// or cordon's own files) is denied by its name: a directory above it
	// that the command could rename (one below a path it writes) would take
	// it to a name nothing denies, at this run and the next. Those
	// directories may not be unlinked, which renaming takes.
	for _, d := range slices.Concat(l.denyRead, l.protected) {
		for _, w := range l.write {
			if d == w || !sandbox.Within(d, w) {
				continue
			}
			for dir := path.Dir(d); dir != w && sandbox.Within(dir, w); dir = path.Dir(dir) {
				if !slices.Contains(l.guardDirs, dir) {
					l.guardDirs = append(l.guardDirs, dir)
				}
			}
		}
	}

	switch p.Network {
	case "", policy.NetOff:
		l.net = policy.NetOff
	case policy.NetOpen:
		l.net = policy.NetOpen
	case policy.NetRestricted:
		if s.Network == nil || s.Network.ProxyPort < 1 || s.Network.ProxyPort > 65535 {
			return nil, fmt.Errorf("network restricted: the launcher gave no proxy port; start the egress proxy first and pass its port in Spec.Network")
		}
		l.net, l.proxyPort = policy.NetRestricted, s.Network.ProxyPort
	default:
		return nil, fmt.Errorf("network: %q is not one of off, restricted, open", p.Network)
	}
	return l, nil
}

// add appends the names of p not already in list.
func (l *layout) add(list []string, p string) ([]string, error) {
	got, err := l.names(p)
	if err != nil {
		return nil, err
	}
	for _, n := range got {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list, nil
}

// place grants a directory of the host (the workspace, TMPDIR, expose
// and allow_paths), refusing one that would hand over a directory every
// process shares, as Linux refuses /tmp: the box would read what others
// leave there, and, where it writes, plant files they then use.
func (l *layout) place(what, p string) ([]string, error) {
	got, err := l.grant(what, p)
	if err != nil {
		return nil, err
	}
	for _, n := range got {
		for _, d := range sharedDirs {
			if withinFold(d, n) {
				return nil, fmt.Errorf("%s %s: refusing a directory that is or contains %s, which every process on this Mac shares; use a directory of its own", what, p, d)
			}
		}
		if hostDevice(n) {
			return nil, fmt.Errorf("%s %s: refusing the host's %s: /dev holds the user's terminals, whose keystrokes a reader takes; name the device the command needs", what, p, n)
		}
	}
	return got, nil
}

// terminalDevices begin the names, in /dev, of the terminals and the
// pseudo-terminal multiplexer.
var terminalDevices = []string{"tty", "pty", "ptmx"}

// hostDevice says whether the canonical path n is /dev or a terminal in
// it, which no grant may name (the profile names the command's own).
// Case is ignored, as the root volume ignores it in /DEV.
func hostDevice(n string) bool {
	n = strings.ToLower(n)
	if n == "/dev" {
		return true
	}
	return path.Dir(n) == "/dev" && slices.ContainsFunc(terminalDevices, func(t string) bool { return strings.HasPrefix(path.Base(n), t) })
}

// grant returns the names of p, or why the sandbox may never be given it:
// it is or contains the home directory, or is or lies in a protected path
// (one that merely contains a protected path is fine: the denials win).
// Case is ignored, as APFS ignores it.
func (l *layout) grant(what, p string) ([]string, error) {
	got, err := l.names(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, n := range got {
		for _, h := range l.homes {
			if withinFold(h, n) {
				return nil, fmt.Errorf("%s %s: refusing a path that is or contains your home directory %s; name the project or tool directory inside it instead", what, p, h)
			}
		}
		for _, q := range l.protected {
			if withinFold(n, q) {
				return nil, fmt.Errorf("%s %s: refusing %s, which cordon protects (credentials, its own configuration or the audit trail) whatever the policy says; remove it from %s", what, p, q, what)
			}
		}
	}
	return got, nil
}

// lookupEnv returns the last value of key in env, as exec does.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// filter is one SBPL filter: (kind "arg"), or raw when the filter is a
// fixed expression. note is a trailing comment; neither raw nor note ever
// carries a path from the policy. A subpath filter with names matches only
// the files below it called one of them.
type filter struct {
	kind, arg string
	raw       string
	note      string
	names     []string
}

func subpath(p string) filter { return filter{kind: "subpath", arg: p} }
func literal(p string) filter { return filter{kind: "literal", arg: p} }

// rule is one SBPL rule. It applies to an operation when one of its
// filters matches, or always when it has none. comment is fixed text
// written above it.
type rule struct {
	comment string
	allow   bool
	ops     []string
	filters []filter
}

// profile is a list of rules; Seatbelt applies the last one that matches.
type profile []rule

// isTTYName says whether p names a terminal (a pseudo-terminal replica),
// /dev/ttys and decimal digits.
func isTTYName(p string) bool {
	n, ok := strings.CutPrefix(p, "/dev/ttys")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// rules builds the profile, broadest grants first and denials last.
func (l *layout) rules() profile {
	pr := profile{
		{comment: "cordon's Seatbelt profile, generated from the session's policy: do not edit.\n" +
			"Seatbelt applies the last rule that matches, so the denials that must win come last.",
			ops: []string{"default"}},
		{comment: "Processes: children inherit this profile, so fork and exec are free;\n" +
			"signals and process inspection stay inside the sandbox.",
			allow: true, ops: []string{"process-fork"}},
		{allow: true, ops: []string{"process-exec"}},
		{allow: true, ops: []string{"signal"}, filters: []filter{{raw: "(target same-sandbox)"}}},
		{allow: true, ops: []string{"process-info*"}, filters: []filter{{raw: "(target same-sandbox)"}}},
		{comment: "Kernel facts a runtime asks at start. Not kern.procargs2, which returns the\n" +
			"arguments and environment of other processes, cordon's own included.\n" +
			"Not mach-host*: it is setting the host's special and exception ports, no query;\n" +
			"host_processor_info (Node's os.cpus()) needs no rule.",
			allow: true, ops: []string{"sysctl-read"}, filters: sysctls},
		{comment: "Mach services, each one on purpose. Not allowed, also on purpose:\n" +
			"com.apple.SecurityServer and com.apple.securityd serve the keychain;\n" +
			"com.apple.pasteboard.1 is the clipboard; com.apple.coreservices.launchservicesd\n" +
			"and com.apple.lsd.* open applications outside this sandbox; com.apple.cfprefsd.*\n" +
			"serve every application's preferences; com.apple.FSEvents reports changes\n" +
			"anywhere on the disk.",
			allow: true, ops: []string{"mach-lookup"}, filters: machServices},
		{comment: "libnotify's shared state page, read only; POSIX semaphores for Python's multiprocessing.",
			allow: true, ops: []string{"ipc-posix-shm-read-data"}, filters: []filter{{kind: "ipc-posix-name", arg: "apple.shm.notification_center"}}},
		{allow: true, ops: []string{"ipc-posix-sem"}},
		{comment: "The system, read only. /usr/share/zoneinfo links into /private/var/db/timezone.",
			allow: true, ops: []string{"file-read*"}, filters: systemRead},
		{comment: "/usr/local is what the user installed (Homebrew on Intel Macs): expose it to use it.\n" +
			"/System/Volumes/Data is the data volume under its second name: the user's files\n" +
			"must not be readable through it.",
			ops: []string{"file-read*"}, filters: []filter{subpath("/usr/local"), subpath("/System/Volumes/Data")}},
		{comment: "Devices a shell needs. Not /dev/tty: cordon starts the command in a new session,\n" +
			"without a controlling terminal, so it cannot push keystrokes into the user's shell.\n" +
			"Not /dev/ptmx: a new pseudo-terminal's /dev/ttysN would need a rule reaching every\n" +
			"terminal. Not /dev/dtracehelper: dyld registers DTrace probes there at each exec;\n" +
			"refusing costs a log line and keeps the kernel's DOF parser out of reach.",
			allow: true, ops: []string{"file-read*", "file-write-data"}, filters: devicesRW},
		{allow: true, ops: []string{"file-read*"}, filters: devicesRO},
	}
	if len(l.terminals) > 0 {
		pr = append(pr, rule{comment: "The terminal cordon was started from, through the descriptors the command inherits:\n" +
			"output and window-size ioctls. No read rule, and no other terminal: the user's other\n" +
			"terminals, written to, would show the box's escape sequences (OSC 52 sets the clipboard,\n" +
			"a query's reply is typed into that shell) and take its ioctls. Without a controlling\n" +
			"terminal TIOCSTI is refused by the kernel.",
			allow: true, ops: []string{"file-write-data", "file-ioctl"}, filters: literals(l.terminals)})
	}
	if len(l.xcode) > 0 {
		pr = append(pr, rule{comment: "The selected Xcode, read only.",
			allow: true, ops: []string{"file-read*"}, filters: pathFilters(l.xcode)})
	}
	if len(l.read) > 0 {
		pr = append(pr, rule{comment: "expose and read-only allow_paths.",
			allow: true, ops: []string{"file-read*"}, filters: pathFilters(l.read)})
	}
	pr = append(pr, rule{comment: "The workspace, the session's TMPDIR and read-write allow_paths.",
		allow: true, ops: []string{"file-read*", "file-write*"}, filters: pathFilters(l.write)})
	pr = append(pr, rule{comment: "The directories above every granted path, metadata only: realpath, getcwd and\n" +
		"path lookups lstat each one. /etc, /tmp and /var are the root's links into /private.",
		allow: true, ops: []string{"file-read-metadata"}, filters: l.ancestors()})
	pr = append(pr, l.network()...)
	if len(l.denyRead) > 0 {
		pr = append(pr, rule{comment: "deny_read, the files credentials are read from and the files named as credentials\n" +
			"found in read-write allow_paths: neither read nor written.",
			ops: []string{"file-read*", "file-write*"}, filters: pathFilters(l.denyRead)})
	}
	if len(l.exposed) > 0 {
		pr = append(pr, rule{comment: "Files named as credentials (" + strings.Join(sandbox.CredentialFiles, ", ") + ")\n" +
			"anywhere in an exposed tree: neither read nor written, as Linux shows them empty.",
			ops: []string{"file-read*", "file-write*"}, filters: credentialFilters(l.exposed)})
	}
	// A guard may hold no pinned directory (a read_only file at the
	// workspace's root, cordon's binary there), so each rule stands alone.
	if trees := append(pathFilters(l.guardTrees), literals(l.guardFiles)...); len(trees) > 0 {
		pr = append(pr, rule{comment: "The workspace's git repository, its read_only paths and cordon's own files: git runs\n" +
			"on the host what the repository's config and hooks name, and cordon its own binary,\n" +
			"so they are not written (nor made, where missing), and the directories they are in\n" +
			"are neither renamed nor removed (the box could swap in its own).\n" +
			"What else is in those directories stays writable.",
			ops: []string{"file-write*"}, filters: trees})
	}
	if len(l.guardDirs) > 0 {
		pr = append(pr, rule{ops: []string{"file-write-unlink"}, filters: literals(l.guardDirs)})
	}
	pr = append(pr, rule{comment: "The directories the command writes, by their own names: on Linux each is a mount\n" +
		"point, which cannot be renamed or removed. Renaming one (the workspace into TMPDIR)\n" +
		"would take its git repository and deny_read paths to names no rule above denies,\n" +
		"and renaming it back would hand the host what the box wrote there.",
		ops: []string{"file-write-unlink"}, filters: literals(l.write)})
	pr = append(pr, rule{comment: "Protected whatever the policy says: credential stores, cordon's configuration,\n" +
		"CA and audit trail. Last, so they win over every grant above.",
		ops: []string{"file-read*", "file-write*"}, filters: pathFilters(l.protected)})
	return pr
}

// network returns the rules of the policy's network mode.
func (l *layout) network() profile {
	switch l.net {
	case policy.NetOpen:
		return profile{
			{comment: "Network open: no network box. Outbound IP to any host and port, DNS through\n" +
				"mDNSResponder and the resolver configuration; unix sockets stay closed\n" +
				"(ssh-agent, Docker's socket).",
				allow: true, ops: []string{"network-outbound"}, filters: []filter{
					{kind: "remote ip", arg: "*:*"},
					literal("/private/var/run/mDNSResponder"),
				}},
			{allow: true, ops: []string{"file-read*"}, filters: []filter{literal("/private/var/run/resolv.conf")}},
			{allow: true, ops: []string{"mach-lookup"}, filters: []filter{
				{kind: "global-name", arg: "com.apple.SystemConfiguration.DNSConfiguration", note: "resolver configuration for getaddrinfo"},
				trustd,
			}},
		}
	case policy.NetRestricted:
		return profile{
			{comment: "Network restricted: cordon's egress proxy on the loopback is the only destination.\n" +
				"No DNS: names are the proxy's to resolve, and a lookup would leak data in its name.\n" +
				"A client that ignores the proxy settings cannot connect at all. TCP only: the\n" +
				"proxy's port number in UDP is any local user's to bind, and a datagram sent there\n" +
				"would leave the box for that user's process.",
				allow: true, ops: []string{"network-outbound"}, filters: []filter{
					{kind: "remote tcp", arg: "localhost:" + strconv.Itoa(l.proxyPort)},
				}},
			{comment: "trustd verifies TLS through the proxy. It also fetches, itself and past the proxy,\n" +
				"the intermediates and revocation a chain it is shown names: a way out this mode keeps.",
				allow: true, ops: []string{"mach-lookup"}, filters: []filter{trustd}},
		}
	}
	return profile{{comment: "Network off: no network rule, so every connection, unix sockets included, is refused.\n" +
		"Nor trustd: it fetches the intermediates and revocation a certificate chain names,\n" +
		"over the network, for whoever shows it one."}}
}

// trustd is certificate trust, which Go's crypto/x509 and Security.framework
// verify TLS through; it reaches the network itself, so only a mode with a
// network may look it up.
var trustd = filter{kind: "global-name", arg: "com.apple.trustd.agent", note: "certificate trust: Go's crypto/x509 and Security.framework verify TLS through it"}

// ancestors returns metadata filters for the root links and every
// directory above a granted path, sorted.
func (l *layout) ancestors() []filter {
	seen := map[string]bool{"/": true, "/etc": true, "/tmp": true, "/var": true}
	for _, group := range [][]filter{systemRead, devicesRW, devicesRO, pathFilters(l.xcode), pathFilters(l.read), pathFilters(l.write)} {
		for _, f := range group {
			for _, a := range ancestors(f.arg) {
				seen[a] = true
			}
		}
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return literals(dirs)
}

// literals returns literal filters for paths.
func literals(paths []string) []filter {
	out := make([]filter, len(paths))
	for i, p := range paths {
		out[i] = literal(p)
	}
	return out
}

// credentialFilters returns filters for the files named in
// sandbox.CredentialFiles below each of paths.
func credentialFilters(paths []string) []filter {
	out := pathFilters(paths)
	for i := range out {
		out[i].names = sandbox.CredentialFiles
	}
	return out
}

// pathFilters returns subpath filters for paths.
func pathFilters(paths []string) []filter {
	out := make([]filter, len(paths))
	for i, p := range paths {
		out[i] = subpath(p)
	}
	return out
}

// render writes the profile as SBPL text.
func (pr profile) render() (string, error) {
	var b strings.Builder
	b.WriteString("(version 1)\n")
	for _, r := range pr {
		if r.comment != "" {
			b.WriteByte('\n')
			for line := range strings.SplitSeq(r.comment, "\n") {
				b.WriteString("; " + line + "\n")
			}
		}
		if len(r.ops) == 0 {
			continue
		}
		head := "(deny "
		if r.allow {
			head = "(allow "
		}
		head += strings.Join(r.ops, " ")
		if len(r.filters) == 0 {
			b.WriteString(head + ")\n")
			continue
		}
		exprs := make([]string, len(r.filters))
		for i, f := range r.filters {
			e, err := f.render()
			if err != nil {
				return "", err
			}
			exprs[i] = e
		}
		if len(r.filters) == 1 && r.filters[0].note == "" {
			b.WriteString(head + " " + exprs[0] + ")\n")
			continue
		}
		b.WriteString(head + "\n")
		for i, e := range exprs {
			b.WriteString("    " + e)
			if n := r.filters[i].note; n != "" {
				b.WriteString(" ; " + n)
			}
			b.WriteByte('\n')
		}
		b.WriteString(")\n")
	}
	return b.String(), nil
}

func (f filter) render() (string, error) {
	if f.raw != "" {
		return f.raw, nil
	}
	q, err := quote(f.arg)
	if err != nil {
		return "", err
	}
	e := "(" + f.kind + " " + q + ")"
	if len(f.names) == 0 {
		return e, nil
	}
	return "(require-all " + e + " (regex #\"" + nameRegex(f.names) + "\"))", nil
}

// nameRegex returns a regular expression matching a path whose last name
// is one of names, in any case: APFS ignores case, and a regex filter does
// not (sandbox-exec refuses the (?i) flag), so each letter is written as a
// class of both ([cC]). The names are fixed, of ASCII letters, digits,
// '-', '_' and '.': a dot is written [.], so no backslash is needed.
func nameRegex(names []string) string {
	alts := make([]string, len(names))
	for i, n := range names {
		var b strings.Builder
		for _, r := range n {
			switch {
			case r == '.':
				b.WriteString("[.]")
			case unicode.IsLetter(r):
				b.WriteString("[" + string(unicode.ToLower(r)) + string(unicode.ToUpper(r)) + "]")
			default:
				b.WriteRune(r)
			}
		}
		alts[i] = b.String()
	}
	return "/(" + strings.Join(alts, "|") + ")$"
}

// decide evaluates op on the canonical path p the way Seatbelt does:
// the last rule whose operation and a path filter match wins; nothing
// matching means denied. Only subpath, literal and regex filters are
// evaluated; the others never match a path.
func (pr profile) decide(op, p string) bool {
	allowed := false
	for _, r := range pr {
		if !slices.ContainsFunc(r.ops, func(o string) bool { return opMatches(o, op) }) {
			continue
		}
		if len(r.filters) == 0 || slices.ContainsFunc(r.filters, func(f filter) bool { return f.matches(p) }) {
			allowed = r.allow
		}
	}
	return allowed
}

func opMatches(ruleOp, op string) bool {
	if ruleOp == "default" || ruleOp == op {
		return true
	}
	prefix, wild := strings.CutSuffix(ruleOp, "*")
	return wild && strings.HasPrefix(op, prefix)
}

func (f filter) matches(p string) bool {
	switch f.kind {
	case "subpath":
		return sandbox.Within(p, f.arg) && (len(f.names) == 0 || slices.ContainsFunc(f.names, func(n string) bool { return strings.EqualFold(n, path.Base(p)) }))
	case "literal":
		return p == f.arg
	}
	return false
}

// machServices are the Mach services a CLI agent and its tools need.
var machServices = []filter{
	{kind: "global-name", arg: "com.apple.system.opendirectoryd.libinfo", note: "users, groups and /etc/hosts: getpwuid, ~ expansion, whoami"},
	{kind: "global-name", arg: "com.apple.system.opendirectoryd.membership", note: "group membership behind getgrouplist and id"},
	{kind: "global-name", arg: "com.apple.system.notification_center", note: "libnotify: time zone and configuration changes libSystem listens for"},
}

// sysctls are the kernel values runtimes read at start.
var sysctls = []filter{
	{kind: "sysctl-name-prefix", arg: "hw.", note: "CPU count, page size, memory size, CPU features"},
	{kind: "sysctl-name-prefix", arg: "machdep.cpu.", note: "CPU brand and features"},
	{kind: "sysctl-name", arg: "kern.argmax", note: "xargs and shells size argument lists"},
	{kind: "sysctl-name", arg: "kern.hostname"},
	{kind: "sysctl-name", arg: "kern.maxfilesperproc"},
	{kind: "sysctl-name", arg: "kern.maxproc"},
	{kind: "sysctl-name", arg: "kern.osproductversion"},
	{kind: "sysctl-name", arg: "kern.osrelease"},
	{kind: "sysctl-name", arg: "kern.ostype"},
	{kind: "sysctl-name", arg: "kern.osvariant_status", note: "libSystem reads it at start"},
	{kind: "sysctl-name", arg: "kern.osversion"},
	{kind: "sysctl-name", arg: "kern.secure_kernel"},
	{kind: "sysctl-name", arg: "kern.usrstack64"},
	{kind: "sysctl-name", arg: "kern.version"},
	{kind: "sysctl-name-prefix", arg: "kern.proc.pid.", note: "one process's kinfo_proc (no arguments, no environment)"},
	{kind: "sysctl-name", arg: "sysctl.proc_cputype"},
	{kind: "sysctl-name", arg: "sysctl.proc_translated", note: "running under Rosetta?"},
	{kind: "sysctl-name", arg: "vm.loadavg"},
}

// systemRead is the read-only system: binaries, libraries, the dyld cache,
// the Command Line Tools and the configuration a shell and a compiler read.
var systemRead = []filter{
	subpath("/bin"),
	subpath("/sbin"),
	subpath("/usr"),
	{kind: "subpath", arg: "/System", note: "frameworks and, under Cryptexes, the dyld shared cache"},
	subpath("/Library/Developer/CommandLineTools"),
	{kind: "literal", arg: "/Library/Preferences/com.apple.dt.Xcode.plist", note: "xcrun checks the Xcode licence was accepted"},
	subpath("/private/etc"),
	subpath("/private/var/db/dyld"),
	subpath("/private/var/db/timezone"),
	{kind: "literal", arg: "/private/var/db/xcode_select_link", note: "xcrun: which developer directory is selected"},
	{kind: "subpath", arg: "/private/var/select", note: "/bin/sh reads which shell it is from here"},
}

// devicesRW and devicesRO are the device nodes a shell needs.
var (
	devicesRW = []filter{
		literal("/dev/null"),
		{kind: "subpath", arg: "/dev/fd", note: "the command's own descriptors: bash's <(...), /dev/stdin"},
		literal("/dev/stdin"),
		literal("/dev/stdout"),
		literal("/dev/stderr"),
	}
	devicesRO = []filter{
		literal("/dev/zero"),
		literal("/dev/random"),
		literal("/dev/urandom"),
	}
)

// xcodeBundle returns the Xcode bundle holding a developer directory
// ("/Applications/Xcode.app/Contents/Developer" gives
// "/Applications/Xcode.app"), the directory itself when it is a developer
// directory outside a bundle, and "" for anything else.
func xcodeBundle(dir string) string {
	if dir == "" {
		return ""
	}
	dir = path.Clean(dir)
	parts := strings.Split(dir, "/")
	for i, part := range parts {
		if strings.HasSuffix(part, ".app") && i > 0 {
			return strings.Join(parts[:i+1], "/")
		}
	}
	if path.Base(dir) == "Developer" {
		return dir
	}
	return ""
}
