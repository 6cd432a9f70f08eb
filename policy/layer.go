package policy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Overrides are one-shot command-line flags. They widen (or narrow) the
// policy for one invocation only and are applied after the project file.
// A nil pointer or an empty list leaves the key as the files set it.
type Overrides struct {
	// Network replaces the mode, in any direction.
	Network *NetMode
	// Allow, Deny, AllowPaths, Env, Resolve and ExtraCA are appended to
	// the file lists. Relative paths are taken from LoadOptions.Workdir.
	Allow      []string
	Deny       []string
	AllowPaths []string
	Env        []string
	Resolve    []string
	ExtraCA    []string
	// Terminate, when not empty, replaces the TLS termination mode.
	Terminate string
	// Credentials are appended; their names must not repeat a file's.
	Credentials []Credential
	// Timeout, Memory, Pids and TmpSize replace the limits; 0 lifts one.
	Timeout *time.Duration
	Memory  *int64
	Pids    *int
	TmpSize *int64
}

// FlagError is a one-shot flag's value (Overrides) written in a way the
// policy cannot take: a usage error, not a refusal of what it would allow.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// WidenError is a project file's attempt to widen the operator's policy.
type WidenError struct {
	// File is the project file, Key the YAML key, Value the offending entry.
	File, Key, Value string
	// Reason says why the entry is wider than the global policy.
	Reason string
	// Above are the project files of the directories above File, which
	// narrowed the global policy before it, outermost first.
	Above []string
}

// Error leads with the fix on the project's side, removing the entry:
// the file is the repository's to write, and the value its choice, so
// a refusal that told the operator to add it to the global config
// handed a hostile repository cordon's voice to ask for a wider posture.
// Widening is left to the operator, for an entry they trust.
func (e *WidenError) Error() string {
	if len(e.Above) > 0 {
		return fmt.Sprintf("%s: %s %s: %s, as narrowed by the project file(s) above it (%s); a project file can only narrow the policy further: remove the entry from %s (only if you trust it, widen it yourself in the global config and in those files, or pass a one-shot flag)", e.File, e.Key, e.Value, e.Reason, strings.Join(e.Above, ", "), e.File)
	}
	return fmt.Sprintf("%s: %s %s: %s; a project file can only narrow the policy: remove the entry from %s (only if you trust it, add it yourself to the global config, which cordon init writes, or pass a one-shot flag)", e.File, e.Key, e.Value, e.Reason, e.File)
}

// layer is one source's settings and which keys it sets.
type layer struct {
	// file names the source in errors: a path, or "flags".
	file string
	p    Policy
	set  map[string]bool
}

func newLayer(file string) *layer { return &layer{file: file, set: map[string]bool{}} }

// mark records a key as set; nested keys are dotted ("limits.pids").
func (l *layer) mark(key string) { l.set[key] = true }

// has reports whether the layer sets key, or any key nested below it.
func (l *layer) has(key string) bool {
	for k := range l.set {
		if k == key || strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

// keys lists the keys the layer sets, sorted.
func (l *layer) keys() []string {
	var ks []string
	for k := range l.set {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// check validates the keys the layer sets and expands its paths.
func (l *layer) check(home string) error {
	for _, c := range checks {
		if l.has(c.key) {
			if err := c.check(&l.p); err != nil {
				return fmt.Errorf("%s: %w", l.file, err)
			}
		}
	}
	if err := expandPaths(&l.p, home); err != nil {
		return fmt.Errorf("%s: %w", l.file, err)
	}
	return nil
}

// layer turns the flags into a layer named "flags", taking relative paths
// from wd.
func (o Overrides) layer(wd string) *layer {
	l := newLayer("flags")
	setFlag(l, "network", &l.p.Network, o.Network)
	if o.Terminate != "" {
		l.p.Terminate = o.Terminate
		l.mark("terminate")
	}
	for _, f := range []struct {
		key string
		dst *[]string
		src []string
	}{
		{"allow", &l.p.Allow, o.Allow},
		{"deny", &l.p.Deny, o.Deny},
		{"allow_paths", &l.p.AllowPaths, o.AllowPaths},
		{"env", &l.p.Env, o.Env},
		{"resolve", &l.p.Resolve, o.Resolve},
		{"extra_ca", &l.p.ExtraCA, o.ExtraCA},
	} {
		if len(f.src) > 0 {
			*f.dst = slices.Clone(f.src)
			l.mark(f.key)
		}
	}
	for _, paths := range [][]string{l.p.AllowPaths, l.p.ExtraCA} {
		for i, s := range paths {
			if s != "" && s[0] != '~' && s[0] != '$' && !filepath.IsAbs(s) {
				paths[i] = filepath.Join(wd, s)
			}
		}
	}
	if len(o.Credentials) > 0 {
		for _, c := range o.Credentials {
			c.Hosts = slices.Clone(c.Hosts)
			l.p.Credentials = append(l.p.Credentials, c)
		}
		l.mark("credentials")
	}
	setFlag(l, "limits.timeout", &l.p.Limits.Timeout, o.Timeout)
	setFlag(l, "limits.memory", &l.p.Limits.Memory, o.Memory)
	setFlag(l, "limits.pids", &l.p.Limits.Pids, o.Pids)
	setFlag(l, "limits.tmp_size", &l.p.Limits.TmpSize, o.TmpSize)
	return l
}

// setFlag copies a flag that was given (src not nil) into dst and marks key set.
func setFlag[T any](l *layer, key string, dst, src *T) {
	if src != nil {
		*dst = *src
		l.mark(key)
	}
}

// widenWith applies a trusted layer (the global file or the flags):
// scalars and limits it sets replace, lists it sets are appended.
func (p *Policy) widenWith(l *layer) {
	if l.has("network") {
		p.Network = l.p.Network
	}
	if l.has("deny_private") {
		p.DenyPrivate = l.p.DenyPrivate
	}
	if l.has("terminate") {
		p.Terminate = l.p.Terminate
	}
	if l.has("run_as") {
		p.RunAs = l.p.RunAs
	}
	p.Allow = appendUnique(p.Allow, l.p.Allow...)
	p.Exclude = appendUnique(p.Exclude, l.p.Exclude...)
	p.Resolve = appendUnique(p.Resolve, l.p.Resolve...)
	p.ExtraCA = appendUnique(p.ExtraCA, l.p.ExtraCA...)
	p.Expose = appendUnique(p.Expose, l.p.Expose...)
	p.AllowPaths = appendUnique(p.AllowPaths, l.p.AllowPaths...)
	p.Env = appendUnique(p.Env, l.p.Env...)
	p.appendDenies(l)
	p.Credentials = append(p.Credentials, l.p.Credentials...)
	p.setLimits(l)
}

// appendDenies adds a layer's deny lists (and read_only, which denies
// writes): no layer ever removes a deny.
func (p *Policy) appendDenies(l *layer) {
	p.Deny = appendUnique(p.Deny, l.p.Deny...)
	p.DenyRead = appendUnique(p.DenyRead, l.p.DenyRead...)
	p.ReadOnly = appendUnique(p.ReadOnly, l.p.ReadOnly...)
	p.DenyCommands = appendUnique(p.DenyCommands, l.p.DenyCommands...)
}

// setLimits copies the limits a layer sets.
func (p *Policy) setLimits(l *layer) {
	if l.has("limits.timeout") {
		p.Limits.Timeout = l.p.Limits.Timeout
	}
	if l.has("limits.memory") {
		p.Limits.Memory = l.p.Limits.Memory
	}
	if l.has("limits.pids") {
		p.Limits.Pids = l.p.Limits.Pids
	}
	if l.has("limits.tmp_size") {
		p.Limits.TmpSize = l.p.Limits.TmpSize
	}
	if l.has("limits.audit_budget") {
		p.Limits.AuditBudget = l.p.Limits.AuditBudget
	}
}

// projectKeys are the keys narrowWith knows how to narrow. A key added to
// Policy is refused in project files until it is handled and listed here.
var projectKeys = []string{
	"network", "allow", "deny", "deny_private", "terminate", "exclude", "resolve", "extra_ca",
	"expose", "allow_paths", "deny_read", "read_only", "deny_commands", "env", "run_as", "limits", "credentials",
}

// maxProjectMounts bounds the paths the project files of a workspace name
// together in deny_read, read_only, expose and allow_paths, which a
// repository cloned with them chooses: each is a mount, and a box's build
// grows with the square of its mounts (bwrap reads all of them for each
// one it makes). An expose or allow_paths entry narrows when it names a
// directory below one of the global config's, and each is a mount all the
// same; and a workspace may have a project file in each directory from
// its root down to where cordon runs, so the bound is on them all.
const maxProjectMounts = 256

// projectMounts is how many paths a project file names to mount.
func (l *layer) projectMounts() int {
	return len(l.p.DenyRead) + len(l.p.ReadOnly) + len(l.p.Expose) + len(l.p.AllowPaths)
}

// tooManyMounts refuses project files that name n paths to mount: file,
// and those above it (above, outermost first).
func tooManyMounts(file string, above []string, n int) error {
	with := ""
	if len(above) > 0 {
		with = fmt.Sprintf(" with the project files above it (%s)", strings.Join(above, ", "))
	}
	return fmt.Errorf("%s: deny_read, read_only, expose and allow_paths name %d paths%s, more than the %d project files may: each is a mount of the box, and bubblewrap takes a time that grows with the square of the box's mounts to build it (400 took 3 s here, 1,400 about 25 s, on every run); name the directories that hold them instead, or put the entries in the global config, which cordon init writes, if you need them all", file, n, with, maxProjectMounts)
}

// maxProjectEntries bounds each other list of a project file: every entry
// is checked, and some looked up, on every run (a deny_commands entry on
// each directory of PATH: 100,000 of them, which fit in the file's 1 MiB,
// took every run 7 s).
const maxProjectEntries = 1024

// narrowWith applies a project file, refusing any key that would widen p,
// and a list longer than maxProjectEntries.
func (p *Policy) narrowWith(l *layer) error {
	refuse := func(key, value, reason string) error {
		return &WidenError{File: l.file, Key: key, Value: value, Reason: reason}
	}
	for _, k := range l.keys() {
		top, _, _ := strings.Cut(k, ".")
		if !slices.Contains(projectKeys, top) {
			return refuse(k, "(any value)", "cordon does not know how to narrow this key")
		}
	}
	for _, list := range []struct {
		key string
		n   int
	}{{"allow", len(l.p.Allow)}, {"deny", len(l.p.Deny)}, {"exclude", len(l.p.Exclude)}, {"resolve", len(l.p.Resolve)},
		{"extra_ca", len(l.p.ExtraCA)}, {"deny_commands", len(l.p.DenyCommands)}, {"env", len(l.p.Env)}, {"credentials", len(l.p.Credentials)}} {
		if list.n > maxProjectEntries {
			return fmt.Errorf("%s: %s names %d entries, more than the %d a project file may: each is checked, and some looked up, on every run; keep the list short, or put it in the global config, which cordon init writes, if you need it all", l.file, list.key, list.n, maxProjectEntries)
		}
	}
	if l.has("network") && l.p.Network.rank() > p.Network.rank() {
		return refuse("network", string(l.p.Network), fmt.Sprintf("it is wider than the global mode %s (off < restricted < open)", p.Network))
	}
	if l.has("deny_private") && !l.p.DenyPrivate && p.DenyPrivate {
		return refuse("deny_private", "false", "the global config denies private addresses")
	}
	if l.has("terminate") && l.p.Terminate == TerminateNone && p.Terminate != TerminateNone {
		return refuse("terminate", TerminateNone, "the global config terminates TLS on every connection")
	}
	if l.has("run_as") && l.p.RunAs != p.RunAs {
		return refuse("run_as", strconv.Quote(l.p.RunAs), fmt.Sprintf("only the global config chooses the user (%q, its run_as or the default)", p.RunAs))
	}
	lists := []struct {
		key    string
		dst    *[]string
		next   []string
		within func(cur, next string) bool
		reason string
	}{
		{"allow", &p.Allow, l.p.Allow, patternCovers, "no global allow entry covers it"},
		{"exclude", &p.Exclude, l.p.Exclude, patternCovers, "no global exclude entry covers it"},
		{"resolve", &p.Resolve, l.p.Resolve, equal, "the global config does not pin it"},
		{"extra_ca", &p.ExtraCA, l.p.ExtraCA, equal, "the global config does not trust it"},
		{"expose", &p.Expose, l.p.Expose, pathCovers, "it is not inside a globally exposed path"},
		{"allow_paths", &p.AllowPaths, l.p.AllowPaths, pathRuleCovers, "it is not inside a global allow_paths entry with at least that access"},
		{"env", &p.Env, l.p.Env, equal, "the global config does not pass it through"},
	}
	for _, f := range lists {
		if !l.has(f.key) {
			continue
		}
		for _, n := range f.next {
			if !slices.ContainsFunc(*f.dst, func(c string) bool { return f.within(c, n) }) {
				return refuse(f.key, strconv.Quote(n), f.reason)
			}
		}
	}
	if l.has("credentials") {
		for _, c := range l.p.Credentials {
			if !slices.ContainsFunc(p.Credentials, func(g Credential) bool { return reflect.DeepEqual(g, c) }) {
				return refuse("credentials", strconv.Quote(c.Name), "it is not a credential of the global config, word for word")
			}
		}
	}
	if err := p.narrowLimits(l, refuse); err != nil {
		return err
	}

	if l.has("network") {
		p.Network = l.p.Network
	}
	p.DenyPrivate = p.DenyPrivate || l.p.DenyPrivate
	if l.has("terminate") {
		p.Terminate = l.p.Terminate
	}
	// Every check passed: the project's lists replace the global ones.
	for _, f := range lists {
		if l.has(f.key) {
			*f.dst = appendUnique([]string{}, f.next...)
		}
	}
	if l.has("credentials") {
		p.hideDroppedSources(l.p.Credentials)
		p.Credentials = l.p.Credentials
	}
	p.appendDenies(l)
	p.setLimits(l)
	return nil
}

// hideDroppedSources adds to deny_read the source file of each credential
// of p that kept (a project file's credentials) leaves out. The file still
// holds a real secret, and the box hides only the sources of the
// credentials in the effective policy: without the entry, a project file
// that dropped a credential (credentials: []) let the box read its secret.
func (p *Policy) hideDroppedSources(kept []Credential) {
	for _, c := range p.Credentials {
		if c.Source.File != "" && !slices.ContainsFunc(kept, func(k Credential) bool { return k.Source.File == c.Source.File }) {
			p.DenyRead = appendUnique(p.DenyRead, c.Source.File)
		}
	}
}

// narrowLimits refuses a project limit above the current one; 0 is no
// limit, so it may only replace 0.
func (p *Policy) narrowLimits(l *layer, refuse func(key, value, reason string) error) error {
	cur, next := p.Limits, l.p.Limits
	for _, f := range []struct {
		key       string
		cur, next int64
		show      func(int64) string
	}{
		{"limits.timeout", int64(cur.Timeout), int64(next.Timeout), func(n int64) string { return time.Duration(n).String() }},
		{"limits.memory", cur.Memory, next.Memory, FormatSize},
		{"limits.pids", int64(cur.Pids), int64(next.Pids), func(n int64) string { return strconv.FormatInt(n, 10) }},
		{"limits.tmp_size", cur.TmpSize, next.TmpSize, FormatSize},
		{"limits.audit_budget", cur.AuditBudget, next.AuditBudget, FormatSize},
	} {
		if l.has(f.key) && f.cur != 0 && (f.next == 0 || f.next > f.cur) {
			return refuse(f.key, f.show(f.next), fmt.Sprintf("it is above the global limit %s (0 means no limit)", f.show(f.cur)))
		}
	}
	return nil
}

func equal(a, b string) bool { return a == b }

// patternCovers reports whether allow-style entry c covers entry n; both
// have been validated.
func patternCovers(c, n string) bool {
	cp, err1 := ParsePattern(c)
	np, err2 := ParsePattern(n)
	return err1 == nil && err2 == nil && cp.Covers(np)
}

// pathCovers reports whether expanded path n lies at or below c, both as
// written and with symlinks resolved: a link inside an allowed directory
// must not carry a project file to its target.
func pathCovers(c, n string) bool {
	return Within(n, c) && Within(resolvePath(n), resolvePath(c))
}

// pathRuleCovers reports whether allow_paths entry n is inside c and asks
// for no more access.
func pathRuleCovers(c, n string) bool {
	cr, err1 := ParsePathRule(c)
	nr, err2 := ParsePathRule(n)
	return err1 == nil && err2 == nil && pathCovers(cr.Path, nr.Path) && (cr.Write || !nr.Write)
}
