package darwin

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// xcodeSelectLink is where xcode-select records the selected developer
// directory.
const xcodeSelectLink = "/private/var/db/xcode_select_link"

// writableRoots are the real paths of p's read-write allow_paths (those
// that exist and parse; the profile reports the others).
func writableRoots(p *policy.Policy, home string) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, e := range p.AllowPaths {
		r, err := policy.ParsePathRule(e)
		if err != nil || !r.Write {
			continue
		}
		if real, err := filepath.EvalSymlinks(expandHome(r.Path, home)); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// refuseSourceLinks refuses a credential's source file (of every
// configured credential), or a file a deny_read entry hides
// (sandbox.DenyReadFiles), with a second name, a hard link, in the
// workspace ws or a tree the policy exposes: the profile denies the file
// by its own name only, and the box would read it whole through the
// other, as Linux refuses it (sandbox.RefuseSecretLinks).
func refuseSourceLinks(p *policy.Policy, ws, home string) error {
	if p == nil {
		return nil
	}
	var files []string
	for _, c := range p.Credentials {
		if f := expandHome(c.Source.File, home); filepath.IsAbs(f) {
			if real, err := filepath.EvalSymlinks(f); err == nil {
				files = append(files, real)
			}
		}
	}
	if len(files) == 0 && len(p.DenyRead) == 0 {
		return nil
	}
	roots := []string{ws}
	trees := slices.Clone(p.Expose)
	for _, e := range p.AllowPaths {
		if r, err := policy.ParsePathRule(e); err == nil {
			trees = append(trees, r.Path)
		}
	}
	for _, t := range trees {
		if real, err := filepath.EvalSymlinks(expandHome(t, home)); err == nil {
			roots = append(roots, real)
		}
	}
	if err := sandbox.RefuseSecretLinks(files, roots); err != nil {
		return fmt.Errorf("a credential's source file: %w", err)
	}
	denied, err := sandbox.DenyReadFiles(p, ws, roots, nil)
	if err == nil {
		err = sandbox.RefuseSecretLinks(denied, roots)
	}
	if err != nil {
		return fmt.Errorf("a deny_read file: %w", err)
	}
	return nil
}

// refuseReplaceableLinks refuses a deny_read entry (a relative one is in
// the workspace ws), or a credential's source file, with a symbolic link
// on the way to it that the box could replace: one in the workspace or a
// read-write allow_path. The profile denies the path and where the link
// leads now; the next run would deny where the box then pointed it, and
// the file it leads to now would be readable. Linux refuses it alike.
func refuseReplaceableLinks(p *policy.Policy, ws, home string) error {
	if p == nil {
		return nil
	}
	writable := append([]string{ws}, writableRoots(p, home)...)
	replaceable := func(link string) error {
		for _, w := range writable {
			if link != w && sandbox.Within(link, w) {
				return fmt.Errorf("%s is a symbolic link the command could replace, and the next run would deny whatever it then pointed to; name the file by its real path", link)
			}
		}
		return nil
	}
	check := func(what, q string) error {
		if q = expandHome(q, home); q != "" && !filepath.IsAbs(q) {
			q = filepath.Join(ws, q)
		}
		if !filepath.IsAbs(q) {
			return nil
		}
		if _, _, err := sandbox.Resolve(filepath.Clean(q), replaceable); err != nil {
			return fmt.Errorf("%s %s: %w", what, q, err)
		}
		return nil
	}
	for _, d := range p.DenyRead {
		if err := check("deny_read", d); err != nil {
			return err
		}
	}
	for _, c := range p.Credentials {
		if c.Source.File == "" {
			continue
		}
		if err := check(fmt.Sprintf("credentials %q: source.file", c.Name), c.Source.File); err != nil {
			return err
		}
	}
	return nil
}

// The bound on the search for files named as credentials in the
// read-write allow_paths, as on Linux: a tree too large to search is
// refused rather than left unsearched.
const (
	maxNamedEntries = 100_000
	maxNamedTime    = 5 * time.Second
)

// namedFiles returns the files named as credentials (by
// sandbox.CredentialFiles, in any case) in the read-write allow_paths of
// p outside the workspace ws (Machine.Named).
func namedFiles(p *policy.Policy, ws, home string) ([]string, error) {
	var out []string
	entries, deadline := 0, time.Now().Add(maxNamedTime)
	for _, root := range writableRoots(p, home) {
		if sandbox.Within(root, ws) {
			continue
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if d != nil && d.IsDir() && path != root {
					return fs.SkipDir // the command, the same user, cannot read it either
				}
				return nil
			}
			if entries++; entries > maxNamedEntries || entries%256 == 0 && time.Now().After(deadline) {
				return fmt.Errorf("more than %d entries, or %s, to search for files named as credentials; allow a narrower directory", maxNamedEntries, maxNamedTime)
			}
			if path != root && slices.ContainsFunc(sandbox.CredentialFiles, func(n string) bool { return strings.EqualFold(n, d.Name()) }) {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("allow_paths %s: %w", root, err)
		}
	}
	return out, nil
}

// Detect gathers the Machine for s from this computer: the home directory,
// the selected Xcode, the directories of the audit log at auditPath ("" for
// the default) and of the configuration, the guarded paths (the
// workspace's, and cordon's own binary where the box may write),
// and where each path the profile will name really leads.
func Detect(s *sandbox.Spec, auditPath string) (Machine, error) {
	home, err := homedir.Dir()
	if err != nil {
		return Machine{}, err
	}
	if auditPath == "" {
		if auditPath, err = audit.DefaultPath(); err != nil {
			return Machine{}, err
		}
	}
	m := Machine{Home: home, Protected: sandbox.AuditDirs(auditPath)}
	if me, err := user.Current(); err == nil && filepath.IsAbs(me.HomeDir) && filepath.Clean(me.HomeDir) != filepath.Clean(home) {
		m.OtherHomes = []string{me.HomeDir}
	}
	// The default log's directory too, when the run writes another: the
	// runs that log there are as much the user's (as on Linux).
	if def, err := audit.DefaultPath(); err == nil && def != auditPath {
		m.Protected = append(m.Protected, sandbox.AuditDirs(def)...)
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		m.Protected = append(m.Protected, filepath.Join(x, "cordon"))
	}
	if s != nil {
		m.Protected = append(m.Protected, s.Config...)
	}
	var env []string
	if s != nil {
		env = s.Env
	}
	m.Xcode = selectedXcode(env)
	if s != nil {
		m.Terminals = terminals("/dev", s.Stdin, s.Stdout, s.Stderr)
	}
	if s != nil && s.Workspace != "" {
		var readOnly []string
		if s.Policy != nil {
			readOnly = s.Policy.ReadOnly
		}
		if ws, err := filepath.EvalSymlinks(s.Workspace); err == nil {
			g := sandbox.GuardSpec{Workspace: ws, ReadOnly: readOnly, Writable: writableRoots(s.Policy, home), Config: s.Config,
				Audit: sandbox.AuditDirs(auditPath), Projects: s.Projects}
			if self, err := os.Executable(); err == nil {
				if self, err = filepath.EvalSymlinks(self); err == nil {
					g.Own = []string{self}
				}
			}
			if m.Guarded, err = sandbox.GuardWorkspace(g); err != nil {
				return Machine{}, err
			}
			if err := refuseSourceLinks(s.Policy, ws, home); err != nil {
				return Machine{}, err
			}
			if err := refuseReplaceableLinks(s.Policy, ws, home); err != nil {
				return Machine{}, err
			}
			if m.Named, err = namedFiles(s.Policy, ws, home); err != nil {
				return Machine{}, err
			}
		}
	}
	m.RealPaths = map[string]string{}
	// The layout walks every path the profile names; resolving each one on
	// the way fills RealPaths. Its errors are Render's to report.
	_, _ = newLayout(s, m, func(p string) ([]string, error) {
		c, err := canonical(p)
		if err != nil {
			return nil, err
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return []string{c}, nil
		}
		rc, err := canonical(r)
		if err != nil || rc == c {
			return []string{c}, nil
		}
		m.RealPaths[c] = r
		return []string{c, rc}, nil
	})
	return m, nil
}

// terminals returns the /dev names of the terminals among stdio (the
// command's stdin, stdout and stderr): the ttysN entries of dev that are
// the device a character-device descriptor there is open on.
func terminals(dev string, stdio ...any) []string {
	var want []uint64
	for _, s := range stdio {
		f, ok := s.(*os.File)
		if !ok {
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				want = append(want, uint64(st.Rdev))
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	entries, err := os.ReadDir(dev)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := "/dev/" + e.Name()
		if !isTTYName(name) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dev, e.Name()))
		if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && slices.Contains(want, uint64(st.Rdev)) {
			out = append(out, name)
		}
	}
	return out
}

// selectedXcode finds the Xcode bundle the command's tools will use:
// DEVELOPER_DIR from its environment, else xcode-select's choice, else
// /Applications/Xcode.app when it exists.
func selectedXcode(env []string) string {
	if d, ok := lookupEnv(env, "DEVELOPER_DIR"); ok && filepath.IsAbs(d) {
		return xcodeBundle(d)
	}
	if d, err := os.Readlink(xcodeSelectLink); err == nil && filepath.IsAbs(d) {
		return xcodeBundle(d)
	}
	if fi, err := os.Stat("/Applications/Xcode.app"); err == nil && fi.IsDir() {
		return "/Applications/Xcode.app"
	}
	return ""
}
