package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/internal/owner"
	"github.com/cordon-sandbox/cordon/internal/regular"
)

// ProjectFile is the name of the project file at a workspace root.
const ProjectFile = ".cordon.yaml"

// maxConfigSize bounds a config file; real ones are a few kilobytes.
const maxConfigSize = 1 << 20

// LoadOptions says where Load looks and what the command line adds.
type LoadOptions struct {
	// ConfigPath replaces the global config location (--config); it must exist.
	ConfigPath string
	// Workdir is the caller's cwd; empty means os.Getwd.
	Workdir string
	// OptionalWorkspace reads the project file when Workdir is in a
	// workspace and carries on without one when it is not (cordon proxy
	// runs anywhere, $HOME included; cordon run needs a workspace).
	OptionalWorkspace bool
	// Overrides are the one-shot flags, applied last.
	Overrides Overrides
}

// Sources records what Load read, for doctor and --json.
type Sources struct {
	// Global is the global config path consulted; GlobalRead says it existed.
	Global     string `json:"global"`
	GlobalRead bool   `json:"global_read"`
	// Workspace is the project root holding the working directory.
	Workspace string `json:"workspace"`
	// Project is the workspace's own project file, empty when it has none.
	Project string `json:"project,omitempty"`
	// Projects are every project file read, outermost first: those of
	// the directories above the workspace (see projectFiles), then its
	// own.
	Projects []string `json:"projects,omitempty"`
	// Flags names the keys the one-shot flags set, e.g. "allow", "network".
	Flags []string `json:"flags,omitempty"`
	// Granted are the paths of the global config's read-write
	// allow_paths, before any project file narrowed them: a box of an
	// earlier run may have written there (a box can write the project
	// file that narrows them now), so a program cordon runs on the host
	// keeps away from them as from this run's (see credinject's
	// Options.Writable).
	Granted []string `json:"-"`
}

// configFile is one file's bytes and the path its errors are reported under.
type configFile struct {
	path string
	data []byte
}

// Load builds the effective policy: defaults, then the global config, then
// the workspace's project file (which may only narrow), then o.Overrides.
func Load(o LoadOptions) (*Policy, Sources, error) {
	var src Sources
	home, err := homedir.Dir()
	if err != nil {
		return nil, src, err
	}
	globalPath, mustExist, err := globalConfigPath(o.ConfigPath, home)
	if err != nil {
		return nil, src, err
	}
	src.Global = globalPath
	global, err := readConfig(globalPath, mustExist, "")
	if err != nil {
		return nil, src, err
	}
	src.GlobalRead = global != nil

	wd := o.Workdir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return nil, src, fmt.Errorf("find the working directory: %w", err)
		}
	}
	var projects []*configFile
	src.Workspace, err = findWorkspace(wd, home)
	switch {
	case err != nil && !o.OptionalWorkspace:
		return nil, src, err
	case err == nil:
		if projects, err = readProjectFiles(src.Workspace, home); err != nil {
			return nil, src, err
		}
	}
	for _, f := range projects {
		src.Projects = append(src.Projects, f.path)
		if filepath.Dir(f.path) == src.Workspace {
			src.Project = f.path
		}
	}

	p, err := buildLayers(home, wd, src.Workspace, global, projects, o.Overrides)
	if err != nil {
		return nil, src, err
	}
	src.Flags = o.Overrides.layer(wd).keys()
	base, err := buildLayers(home, wd, src.Workspace, global, nil, Overrides{})
	if err != nil {
		return nil, src, err
	}
	src.Granted = base.WritePaths()
	return p, src, nil
}

// build layers the defaults, a global file, a project file and overrides
// (their relative paths taken from wd); a nil file is absent.
func build(home, wd string, global, project *configFile, o Overrides) (*Policy, error) {
	var projects []*configFile
	if project != nil {
		projects = append(projects, project)
	}
	return buildLayers(home, wd, filepath.Dir(wd), global, projects, o)
}

// buildLayers layers the defaults, a global file (nil: absent), the
// project files, outermost first, each narrowing what the ones before
// left, and the overrides (their relative paths taken from wd). The
// read_only entries of a project file above the workspace ws, written
// from that file's directory, are rewritten from ws (see rebaseReadOnly).
func buildLayers(home, wd, ws string, global *configFile, projects []*configFile, o Overrides) (*Policy, error) {
	p := Defaults()
	if err := expandPaths(p, home); err != nil {
		return nil, fmt.Errorf("defaults: %w", err)
	}
	if global != nil {
		l, err := parseLayer(global.path, global.data, home)
		if err != nil {
			return nil, err
		}
		p.widenWith(l)
	}
	var above []string
	mounts := 0
	for _, project := range projects {
		l, err := parseLayer(project.path, project.data, home)
		if err != nil {
			return nil, err
		}
		if mounts += l.projectMounts(); mounts > maxProjectMounts {
			return nil, tooManyMounts(project.path, above, mounts)
		}
		if dir := filepath.Dir(project.path); dir != ws {
			if l.p.ReadOnly, err = rebaseReadOnly(l.p.ReadOnly, dir, ws); err != nil {
				return nil, fmt.Errorf("%s: %w", project.path, err)
			}
		}
		if err := p.narrowWith(l); err != nil {
			var we *WidenError
			if errors.As(err, &we) {
				we.Above = above
			}
			return nil, err
		}
		above = append(above, project.path)
	}
	ol := o.layer(wd)
	if err := ol.check(home); err != nil {
		return nil, &FlagError{Err: err}
	}
	p.widenWith(ol)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("effective policy: %w", err)
	}
	return p, nil
}

// GlobalConfigPath returns where the global config lives: $CORDON_CONFIG,
// else $XDG_CONFIG_HOME/cordon/config.yaml, else ~/.config/cordon/config.yaml.
func GlobalConfigPath() (string, error) {
	home, err := homedir.Dir()
	if err != nil {
		return "", err
	}
	path, _, err := globalConfigPath("", home)
	return path, err
}

// globalConfigPath resolves the global config location; a path named
// explicitly (flag or $CORDON_CONFIG) must exist. $CORDON_CONFIG must be
// absolute: set once for every directory cordon starts in, a relative
// one named a file in each, which the repository there could hold, and
// that file, the operator's posture, could widen it at will (cordon
// proxy took its allowlist). --config, typed for one invocation, is
// taken from the working directory.
func globalConfigPath(explicit, home string) (path string, mustExist bool, err error) {
	if explicit == "" {
		explicit = os.Getenv("CORDON_CONFIG")
		if explicit != "" && !filepath.IsAbs(explicit) {
			return "", false, fmt.Errorf("$CORDON_CONFIG=%q is not an absolute path: it would name another file in each directory cordon starts in, one the repository there may hold, as your global config; set it to an absolute path (export CORDON_CONFIG=\"$PWD/%s\" where the file is), or pass --config", explicit, explicit)
		}
	}
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", false, fmt.Errorf("config path %q: %w", explicit, err)
		}
		return abs, true, nil
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "cordon", "config.yaml"), false, nil
	}
	return filepath.Join(home, ".config", "cordon", "config.yaml"), false, nil
}

// readConfig reads a config file; a missing file is nil unless mustExist.
// It must be a regular file (a FIFO would hold cordon up forever). A
// project file, whose workspace is given, must also lie in it once its
// symlinks are resolved: the workspace is the sandboxed side's to write,
// and a link planted there must not have cordon read, and quote in its
// errors, a file the sandbox cannot.
func readConfig(path string, mustExist bool, workspace string) (*configFile, error) {
	f, fi, err := regular.Open(path, os.O_RDONLY, 0)
	var nr *regular.NotRegular
	switch {
	case errors.Is(err, fs.ErrNotExist) && !mustExist:
		return nil, nil
	case errors.As(err, &nr) && workspace != "":
		return nil, fmt.Errorf("project config %s is %s, not a regular file; a project file is a short YAML file: replace it with one, or remove it", path, nr.Kind())
	case errors.As(err, &nr):
		return nil, fmt.Errorf("config %s is %s, not a regular file; a cordon config is a short YAML file: name one with --config or CORDON_CONFIG", path, nr.Kind())
	case err != nil:
		return nil, configOpenError(path, workspace != "", err)
	}
	defer f.Close()
	if workspace == "" {
		if err := othersCannotWrite(path, fi); err != nil {
			return nil, err
		}
	}
	if workspace != "" {
		real := resolvePath(path)
		if ri, err := os.Stat(real); err != nil || !os.SameFile(fi, ri) || !Within(real, resolvePath(workspace)) {
			return nil, fmt.Errorf("project config %s leads outside the workspace %s (to %s); cordon reads a project file only from the workspace itself: replace the link with the file", path, workspace, real)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("config %s is larger than %d bytes; a cordon config is a short YAML file", path, maxConfigSize)
	}
	return &configFile{path: path, data: data}, nil
}

// othersCannotWrite refuses a global config (path, opened as fi) that a
// user other than this one or root could have written: one they own, one
// writable by group or others, or one in a directory they own or may
// write in (without the sticky bit, as /tmp has, that keeps them from
// replacing a file that is not theirs). The global config may widen the
// sandbox, so whoever can edit it chooses what the box may reach.
func othersCannotWrite(path string, fi fs.FileInfo) error {
	const fix = "make it yours and writable by you alone, or point --config or CORDON_CONFIG at a file that is"
	real, name := resolvePath(path), path
	if real != path {
		name = fmt.Sprintf("%s (%s)", path, real)
	}
	if !owner.Mine(fi) {
		return fmt.Errorf("config %s belongs to another user (uid %d), who could widen your sandbox by editing it; %s", name, fi.Sys().(*syscall.Stat_t).Uid, fix)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("config %s is writable by other users (mode %04o), who could widen your sandbox by editing it; run chmod go-w %s", name, perm, real)
	}
	dir := filepath.Dir(real)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("config %s: check its directory: %w", name, err)
	}
	switch {
	case !owner.Mine(di):
		return fmt.Errorf("config %s lies in %s, which belongs to another user (uid %d), who could replace it and so widen your sandbox; %s", name, dir, di.Sys().(*syscall.Stat_t).Uid, fix)
	case owner.OthersMayReplace(di):
		return fmt.Errorf("config %s lies in %s, which other users may write in (mode %04o), so they could replace it and widen your sandbox; run chmod go-w %s", name, dir, di.Mode().Perm(), dir)
	}
	return nil
}

// configOpenError explains why the config at path (a project file's,
// if project) could not be opened, with the fix for that reason: one
// that exists but cannot be read was told to be created with cordon
// init, and a project file's to name another global config.
func configOpenError(path string, project bool, err error) error {
	switch {
	case project && errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("read project config %s: %w (let your user read it, and search the directories above it, or remove it)", path, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read config %s: %w (create it with cordon init, or point --config or CORDON_CONFIG at an existing file)", path, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("read config %s: %w (let your user read it, and search the directories above it, or point --config or CORDON_CONFIG at another file)", path, err)
	}
	return fmt.Errorf("read config %s: %w", path, err)
}

// readProjectFiles reads the project files that apply to the workspace
// ws (a real path), outermost first: the .cordon.yaml of every directory
// above it, up to the home directory (not included; up to / for a
// workspace outside it), then its own. Each must lie, once its links are
// resolved, in the directory it is found in (see readConfig). One above
// the workspace that neither the user nor root owns is passed over: on a
// shared machine another user may write /tmp/.cordon.yaml, say, but
// cannot choose the policy of the user's runs, not even to narrow it.
//
// Reading every level, and not just the workspace's own, is what keeps a
// planted file from dropping the project's narrowing: the workspace is
// the nearest directory with a .cordon.yaml or a .git, so a box that wrote
// pkg/.cordon.yaml made pkg the workspace of the next run started in it;
// the project's file above is read all the same, and the planted one can
// only narrow it further.
func readProjectFiles(ws, home string) ([]*configFile, error) {
	home = resolvePath(home)
	var dirs []string // innermost first
	for d := filepath.Dir(ws); d != home && d != filepath.Dir(d); d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	if !Within(ws, home) {
		dirs = append(dirs, string(filepath.Separator))
	}
	var out []*configFile
	for _, d := range slices.Backward(dirs) {
		path := filepath.Join(d, ProjectFile)
		fi, err := os.Lstat(path)
		if err != nil || !owner.Mine(fi) {
			continue
		}
		f, err := readConfig(path, false, d)
		if err != nil {
			return nil, err
		}
		if f != nil {
			out = append(out, f)
		}
	}
	f, err := readConfig(filepath.Join(ws, ProjectFile), false, ws)
	if err != nil {
		return nil, err
	}
	if f != nil {
		out = append(out, f)
	}
	return out, nil
}

// rebaseReadOnly rewrites read_only entries written from dir, a
// directory above the workspace ws, from ws. An entry beside ws is
// dropped (the box does not see it); one that holds ws is refused, as
// the workspace cannot be made read-only.
func rebaseReadOnly(entries []string, dir, ws string) ([]string, error) {
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e)
		if Within(ws, p) {
			return nil, fmt.Errorf("read_only: %q holds the whole workspace %s, which cannot be made read-only; run cordon from %s, whose project file this is", e, ws, dir)
		}
		if rel, err := filepath.Rel(ws, p); err == nil && Within(p, ws) {
			out = append(out, rel)
		}
	}
	return out, nil
}

// findWorkspace returns the project root holding cwd (Sources.Workspace):
// the nearest directory at or above cwd, below home, holding .cordon.yaml
// or .git, else cwd itself; above cwd, not in a shared temporary
// directory, and not for a marker another user owns (SharedTemp). It
// refuses home, /, any directory containing home, and a shared temporary
// directory.
func findWorkspace(cwd, home string) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("working directory %q is not absolute", cwd)
	}
	dir, home := resolvePath(cwd), resolvePath(home)
	switch {
	case dir == string(filepath.Separator):
		return "", fmt.Errorf("refusing / as a workspace: it would hand the whole machine to the command; cd into a project directory first")
	case dir == home:
		return "", fmt.Errorf("refusing your home directory %s as a workspace: cd into a project directory first", home)
	case Within(home, dir):
		return "", fmt.Errorf("refusing %s as a workspace: it contains your home directory %s; cd into a project directory first", dir, home)
	case SharedTemp(dir):
		return "", fmt.Errorf("refusing %s as a workspace: every user may make files in it, and it holds your sockets (a tmux server's, an ssh agent's), through which the command could act outside the box; make a project directory in it and cd there first", dir)
	}
	for d := dir; d != home && d != filepath.Dir(d); d = filepath.Dir(d) {
		if SharedTemp(d) {
			break
		}
		for _, marker := range []string{ProjectFile, ".git"} {
			if fi, err := os.Lstat(filepath.Join(d, marker)); err == nil {
				if d != dir && !owner.Mine(fi) {
					return dir, nil
				}
				return d, nil
			}
		}
	}
	return dir, nil
}

// SharedTemp says whether d is a directory every user may make files
// in, as /tmp (world-writable and sticky). The workspace is bound
// read-write in the box: such a directory holds the user's sockets (a
// tmux server's, an ssh agent's), through which the command would act
// outside the box, and others' files; and a .git another user made in
// /tmp, above the working directory /tmp/proj, would make all of /tmp
// the workspace. So such a directory is refused as the workspace, and
// the search for the project root stops below it, and at a marker
// neither the user nor root owns.
func SharedTemp(d string) bool {
	fi, err := os.Stat(d)
	return err == nil && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky != 0
}

// resolvePath cleans an absolute path and resolves the symlinks of its
// longest existing prefix.
func resolvePath(p string) string {
	rest := ""
	for d := filepath.Clean(p); ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// Within reports whether p is dir or lies below it; both are absolute and
// clean.
func Within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// expandPath expands a leading "~" and cleans an absolute path.
func expandPath(s, home string) (string, error) {
	if err := checkPath(s); err != nil {
		return "", err
	}
	if s == "~" || strings.HasPrefix(s, "~/") {
		s = home + s[1:]
	}
	return filepath.Clean(s), nil
}

// expandPaths rewrites every path in p absolute, allow_paths canonically.
func expandPaths(p *Policy, home string) error {
	for _, list := range []struct {
		key   string
		paths []string
	}{{"expose", p.Expose}, {"deny_read", p.DenyRead}, {"extra_ca", p.ExtraCA}} {
		for i, s := range list.paths {
			e, err := expandPath(s, home)
			if err != nil {
				return fmt.Errorf("%s: %w", list.key, err)
			}
			list.paths[i] = e
		}
	}
	for i, s := range p.AllowPaths {
		r, err := ParsePathRule(s)
		if err == nil {
			r.Path, err = expandPath(r.Path, home)
		}
		if err != nil {
			return fmt.Errorf("allow_paths: %w", err)
		}
		p.AllowPaths[i] = r.String()
	}
	for i := range p.Credentials {
		c := &p.Credentials[i]
		if c.Source.File != "" {
			e, err := expandPath(c.Source.File, home)
			if err != nil {
				return fmt.Errorf("credentials %q: source.file: %w", c.Name, err)
			}
			c.Source.File = e
		}
		for j, f := range c.Files {
			e, err := expandPath(f, home)
			if err != nil {
				return fmt.Errorf("credentials %q: files: %w", c.Name, err)
			}
			c.Files[j] = e
		}
	}
	return nil
}

// appendUnique appends the entries of add not already in list.
func appendUnique(list []string, add ...string) []string {
	// A set, not a search of list for each: a project file may name
	// 100,000 entries, and a search each took every run 30 s and more.
	seen := make(map[string]bool, len(list)+len(add))
	for _, s := range list {
		seen[s] = true
	}
	for _, s := range add {
		if !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	return list
}
