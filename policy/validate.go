package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
)

// The two values of Policy.Terminate.
const (
	TerminateAll  = "all"
	TerminateNone = "none"
)

// netModes lists the network modes from narrowest to widest.
var netModes = []NetMode{NetOff, NetRestricted, NetOpen}

// ParseNetMode parses "off", "restricted" or "open".
func ParseNetMode(s string) (NetMode, error) {
	for _, m := range netModes {
		if s == string(m) {
			return m, nil
		}
	}
	return "", fmt.Errorf("network mode %q is not one of off, restricted, open", s)
}

// rank orders network modes: off < restricted < open. It is -1 for an
// unknown mode.
func (m NetMode) rank() int {
	for i, n := range netModes {
		if m == n {
			return i
		}
	}
	return -1
}

// ParseResolve parses a "NAME=ADDRESS" pin into a normalised host and an
// unmapped address. NAME may be "*.example.com", pinning every subdomain;
// the returned host keeps its "*." prefix.
func ParseResolve(s string) (string, netip.Addr, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return "", netip.Addr{}, fmt.Errorf("pin %q: write NAME=ADDRESS, e.g. api.internal=10.0.0.7", s)
	}
	name, wild := strings.CutPrefix(name, "*.")
	if name == "" {
		return "", netip.Addr{}, fmt.Errorf("pin %q: no NAME before the '='; write NAME=ADDRESS, e.g. api.internal=10.0.0.7", s)
	}
	h, err := NormalizeHost(name)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("pin %q: %w", s, err)
	}
	if wild {
		h = "*." + h
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return "", netip.Addr{}, fmt.Errorf("pin %q: %q is not an IP address", s, addr)
	}
	return h, a.Unmap(), nil
}

// PathRule is one parsed allow_paths entry.
type PathRule struct {
	// Path is absolute once the entry has been loaded (~ expanded).
	Path string
	// Write is set by a ":rw" suffix; the default and ":ro" are read-only.
	Write bool
}

// ParsePathRule parses "PATH", "PATH:ro" or "PATH:rw". A colon after the
// last slash must introduce one of those two suffixes.
func ParsePathRule(s string) (PathRule, error) {
	r := PathRule{Path: s}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.ContainsRune(s[i:], '/') {
		return r, nil
	}
	switch s[i+1:] {
	case "rw":
		r.Path, r.Write = s[:i], true
	case "ro":
		r.Path = s[:i]
	default:
		return r, fmt.Errorf("path %q: suffix %q is not :rw or :ro; write PATH for read-only or PATH:rw for read-write", s, s[i:])
	}
	return r, nil
}

// WritePaths lists the paths of p's read-write allow_paths entries.
func (p *Policy) WritePaths() []string {
	var out []string
	for _, s := range p.AllowPaths {
		if r, err := ParsePathRule(s); err == nil && r.Write {
			out = append(out, r.Path)
		}
	}
	return out
}

// String renders the rule canonically: "PATH" or "PATH:rw".
func (r PathRule) String() string {
	if r.Write {
		return r.Path + ":rw"
	}
	return r.Path
}

// Validate reports the first rule of p that cannot be enforced as written,
// naming the key and the entry. Paths may still carry a leading "~".
func (p *Policy) Validate() error {
	for _, c := range checks {
		if err := c.check(p); err != nil {
			return err
		}
	}
	return nil
}

// check validates the keys one layer sets; key is the YAML key it guards
// (a key under "limits." selects the limits check).
type check struct {
	key   string
	check func(*Policy) error
}

var checks = []check{
	{"network", func(p *Policy) error {
		if p.Network.rank() < 0 {
			return fmt.Errorf("network: %q is not one of off, restricted, open", p.Network)
		}
		return nil
	}},
	{"allow", func(p *Policy) error { return checkPatterns("allow", p.Allow) }},
	{"deny", func(p *Policy) error { return checkPatterns("deny", p.Deny) }},
	{"exclude", func(p *Policy) error { return checkPatterns("exclude", p.Exclude) }},
	{"resolve", func(p *Policy) error {
		for _, s := range p.Resolve {
			if _, _, err := ParseResolve(s); err != nil {
				return fmt.Errorf("resolve: %w", err)
			}
		}
		return nil
	}},
	{"terminate", func(p *Policy) error {
		if p.Terminate != TerminateAll && p.Terminate != TerminateNone {
			return fmt.Errorf("terminate: %q is not all or none", p.Terminate)
		}
		return nil
	}},
	{"extra_ca", func(p *Policy) error { return checkPaths("extra_ca", p.ExtraCA) }},
	{"expose", func(p *Policy) error { return checkPaths("expose", p.Expose) }},
	{"allow_paths", func(p *Policy) error {
		for _, s := range p.AllowPaths {
			r, err := ParsePathRule(s)
			if err != nil {
				return fmt.Errorf("allow_paths: %w", err)
			}
			if err := checkPath(r.Path); err != nil {
				return fmt.Errorf("allow_paths: %w", err)
			}
		}
		return nil
	}},
	{"deny_read", func(p *Policy) error { return checkPaths("deny_read", p.DenyRead) }},
	{"read_only", func(p *Policy) error {
		for _, s := range p.ReadOnly {
			if err := CheckWorkspacePath(s); err != nil {
				return fmt.Errorf("read_only: %w", err)
			}
		}
		return nil
	}},
	{"deny_commands", func(p *Policy) error {
		for _, s := range p.DenyCommands {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("deny_commands: empty entry; write a command name such as sudo or a path such as /usr/bin/sudo")
			}
		}
		return nil
	}},
	{"env", func(p *Policy) error {
		for _, s := range p.Env {
			if name, _, ok := strings.Cut(s, "="); ok && isEnvName(name) {
				return fmt.Errorf("env: %q is not a variable name: an entry names a variable of cordon's environment, whose value it passes; set %s there (export %s) and name it alone, as %s", s, name, s, name)
			}
			if !isEnvName(s) {
				return fmt.Errorf("env: %q is not a variable name (letters, digits and _, not starting with a digit)", s)
			}
		}
		return nil
	}},
	{"run_as", func(p *Policy) error {
		if strings.TrimSpace(p.RunAs) == "" {
			return fmt.Errorf("run_as: empty; name a user such as %s", DefaultRunAs)
		}
		return nil
	}},
	{"limits", func(p *Policy) error {
		l := p.Limits
		switch {
		case l.Timeout < 0:
			return fmt.Errorf("limits.timeout: %s is negative; write 0s for no deadline", l.Timeout)
		case l.Memory < 0:
			return fmt.Errorf("limits.memory: %d is negative; write 0 for no limit", l.Memory)
		case l.Memory > 0 && l.Memory < minMemory:
			return fmt.Errorf("limits.memory: %d bytes is less than any command needs to start (1MiB at least); write a size with its unit, such as 512MiB or 2GiB, or 0 for no limit", l.Memory)
		case l.Pids < 0:
			return fmt.Errorf("limits.pids: %d is negative; write 0 for no limit", l.Pids)
		case l.TmpSize < 0:
			return fmt.Errorf("limits.tmp_size: %d is negative; write 0 for no limit", l.TmpSize)
		case l.AuditBudget < 0:
			return fmt.Errorf("limits.audit_budget: %d is negative; write 0 for no limit", l.AuditBudget)
		case l.AuditBudget > 0 && l.AuditBudget < minAuditBudget:
			return fmt.Errorf("limits.audit_budget: %d bytes would not hold a session's first lines (64KiB at least); write a size with its unit, such as 1GiB, or 0 for no limit", l.AuditBudget)
		}
		return nil
	}},
	{"credentials", func(p *Policy) error { return checkCredentials(p.Credentials) }},
}

// minAuditBudget is the smallest audit budget taken: a session's first
// lines must fit.
const minAuditBudget = 64 << 10

// minMemory is the smallest memory limit taken: below it nothing starts,
// and the command dies of it without a word.
const minMemory = 1 << 20

func checkPatterns(key string, entries []string) error {
	for _, s := range entries {
		if _, err := ParsePattern(s); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func checkPaths(key string, paths []string) error {
	for _, s := range paths {
		if err := checkPath(s); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// CheckWorkspacePath accepts a path relative to the workspace's root that
// stays inside it, as read_only entries are.
func CheckWorkspacePath(s string) error {
	switch {
	case s == "":
		return errors.New("empty path; write a path relative to the workspace's root, such as .vscode")
	case filepath.IsAbs(s) || strings.HasPrefix(s, "~"):
		return fmt.Errorf("path %q is not relative to the workspace; write it from the workspace's root, such as .vscode (outside the workspace, nothing is writable anyway)", s)
	case filepath.Clean(s) == "." || filepath.Clean(s) == ".." || strings.HasPrefix(filepath.Clean(s), "../"):
		return fmt.Errorf("path %q is not inside the workspace; name something in it, such as .vscode", s)
	}
	return nil
}

// checkPath accepts an absolute path or one starting with "~/" (or "~").
func checkPath(s string) error {
	switch {
	case s == "":
		return errors.New("empty path; write an absolute path or one starting with ~/")
	case s == "~" || strings.HasPrefix(s, "~/") || filepath.IsAbs(s):
		return nil
	case strings.HasPrefix(s, "~"):
		return fmt.Errorf("path %q: only ~ and ~/ are expanded; write the home directory out in full", s)
	case strings.HasPrefix(s, "$"):
		// Quoted in a shell, or written in a config: a flag's was taken
		// from the working directory, as a directory named $HOME.
		return fmt.Errorf("path %q: cordon expands no variables; write ~/ for your home, or the path out in full", s)
	}
	return fmt.Errorf("path %q is relative; write an absolute path or one starting with ~/", s)
}

func checkCredentials(creds []Credential) error {
	seen := map[string]bool{}
	for i, c := range creds {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Errorf("credentials[%d]: name is empty; give each credential a unique name", i)
		}
		if seen[c.Name] {
			return fmt.Errorf("credentials: name %q is used twice; names must be unique", c.Name)
		}
		seen[c.Name] = true
		n := 0
		for _, s := range []string{c.Source.Env, c.Source.File, c.Source.Command} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("credentials %q: source must set exactly one of env, file, command (it sets %d)", c.Name, n)
		}
		if c.Source.File != "" {
			if err := checkPath(c.Source.File); err != nil {
				return fmt.Errorf("credentials %q: source.file: %w", c.Name, err)
			}
		}
		if len(c.Hosts) == 0 {
			return fmt.Errorf("credentials %q: hosts is empty; list the hosts the secret may be sent to", c.Name)
		}
		if err := checkPatterns(fmt.Sprintf("credentials %q: hosts", c.Name), c.Hosts); err != nil {
			return err
		}
		if c.Env != "" && !isEnvName(c.Env) {
			return fmt.Errorf("credentials %q: env %q is not a variable name", c.Name, c.Env)
		}
	}
	return nil
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
