package sandbox

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/internal/owner"
	"github.com/cordon-sandbox/cordon/internal/regular"
	"github.com/cordon-sandbox/cordon/policy"
)

// A git repository holds commands that git runs on the host: its config
// (core.fsmonitor, core.hooksPath, aliases, filter and diff drivers) and
// its hooks. A box that could write them would run code outside the box
// the next time anyone ran git in the workspace: the user, an editor, or
// a shell prompt that shows the branch, which runs `git status` on every
// cd. So backends guard the workspace's repository: its config files and
// hooks, and the hooks directory and programs its config names in the
// workspace, are read-only, and each git directory, and each directory
// above a guarded path, is pinned (neither renamed nor removed, so the
// box cannot swap in one of its own). Objects, refs
// and the index stay writable: git add, commit, branch and merge work.
//
// cordon's own binary and its helpers can lie in a directory the box may
// write, too (a project that builds cordon, or keeps it in a tools
// directory): cordon runs them outside any box, so they are guarded the
// same way.

// Bounds on the search for submodules' git directories under modules/.
const (
	maxRepoModuleDepth   = 8
	maxRepoModuleEntries = 10_000
)

// maxIndexSize bounds the git index cordon reads (the largest real ones,
// of millions of files, are a few hundred megabytes): the box could
// otherwise hold cordon's exit for as long as it takes to read a sparse
// file of any size.
const maxIndexSize = 1 << 30

// maxGitFileSize bounds the other files of a repository cordon reads
// whole: its config files (and what they include), commondir and .git
// files. Real ones are kilobytes; an include may name any file of the
// host, and /proc/self/pagemap, a regular file that says it is empty,
// reads on for hundreds of gigabytes, which cordon took into memory until
// it died of it.
const maxGitFileSize = 16 << 20

// errGitFileTooLarge is a file of a repository longer than maxGitFileSize.
var errGitFileTooLarge = errors.New("longer than the " + strconv.Itoa(maxGitFileSize) + " bytes cordon reads of a git config file")

// Guard says how a backend guards one path of the workspace.
type Guard int

const (
	// Pinned is a git directory: it stays where it is, while what is in it
	// stays writable (but for the read-only paths listed after it).
	Pinned Guard = iota
	// ReadOnly is an existing file or directory (a config, a hooks
	// directory, a .git file, a read_only path), with everything under it.
	ReadOnly
	// AbsentFile is a file that does not exist (a git config, a helper
	// of cordon's): it is to read as empty, and the box must not create it.
	AbsentFile
	// AbsentDir is a directory that does not exist (a hooks directory):
	// it is to be an empty directory the box cannot write.
	AbsentDir
	// Unmade is a file that does not exist and must not come to: a git
	// directory's commondir, which would point git's config and hooks at
	// a directory of the box's choosing. No placeholder can stand in
	// for it (git refuses an empty one), so a backend that cannot forbid
	// its creation (a mount cannot) removes one the run made, once the
	// run has ended, and says so.
	Unmade
	// Checkouts is a repository's worktree (Path) whose submodule
	// checkouts are checked once the run has ended (Aftercare). Git, run
	// there on the host (a plain git status does it), runs git in each
	// checkout a gitlink of its index names, with that checkout's own
	// config and hooks: a command could otherwise register, or fill, a
	// checkout of its own making. Those present when the run was built
	// are guarded as repositories, and pinned where they are.
	Checkouts
	// Unborn is the .git of a workspace root (or a read-write allow_path)
	// that is no repository when the run is built, or the project file a
	// read-write allow_path lacks then (a later run from below it would
	// take it for the workspace). A repository the run
	// makes there has config and hooks of the box's writing, which git run
	// there on the host (a shell prompt that shows the branch does it at
	// every cd) would run: Aftercare sets it aside. So is the missing git
	// directory a .git file in the workspace names there.
	Unborn
	// Nested is the workspace, walked once the run has ended for the
	// repositories nested in it that the run made, or whose config or
	// hooks it changed (Aftercare sets them aside): git run in them on the
	// host would run what the box wrote. Since is when the run began.
	Nested
	// Watched is a read-write allow_path outside the workspace, walked
	// once the run has ended as the workspace is (Nested), but for what
	// lies in the workspace or in another Watched path (walked from its
	// own), and no further than maxWatchedEntries: often a cache of many
	// directories. Since is when the run began.
	Watched
)

// GuardedPath is one guarded path of the workspace, or of a directory
// the box may write.
type GuardedPath struct {
	Path  string
	Guard Guard
	// Dir says the path is (or, absent, is to be) a directory.
	Dir bool
	// Since is when the guard was taken, for Nested.
	Since time.Time
	// Hidden is what the repository's index hid from git status when
	// the guard was taken, for Checkouts: Aftercare reports what the
	// run hid besides (see Hidden.Since).
	Hidden *Hidden
	// Config is what a git config file (ReadOnly, AbsentFile) was when
	// the guard was taken: Aftercare sets aside one that the host
	// replaced during the run, taking the guard with it, and that names
	// something new for git to run (configCare).
	Config *ConfigSeen
	// ID is which file an existing ReadOnly file that is no git config
	// was when the guard was taken: Aftercare reports one that the host
	// replaced during the run, taking the guard with it (replacedCare).
	ID *FileID
}

// GuardSpec is what a box's guard covers.
type GuardSpec struct {
	// Workspace is the workspace root, a real path.
	Workspace string
	// ReadOnly are the policy's read_only paths, relative to Workspace.
	ReadOnly []string
	// Own are the files cordon runs on the host, outside any box, as real
	// paths: its own binary and the helpers it starts from beside it.
	// Those under Workspace or Writable are guarded.
	Own []string
	// Writable are the directories other than Workspace the box may write
	// (read-write allow_paths), as real paths.
	Writable []string
	// Config is cordon's configuration the run uses (Spec.Config): under
	// Workspace or Writable, the run is refused (checkConfigOutside).
	Config []string
	// Audit are the audit log's directories (AuditDirs): under Workspace
	// or Writable, at any depth, the run is refused (checkAuditOutside).
	Audit []string
	// Projects are project files above the workspace (Spec.Projects);
	// one under Writable is read-only, with the directories between
	// that root and it pinned, as the workspace's own is read-only.
	Projects []string
}

// GuardWorkspace lists how to guard the workspace (a real path): its git
// repository (GuardRepo), or what the repository enclosing it names in it
// (GuardEnclosing); its project file, which the next run reads as
// policy (a regular one; one that is a link is refused, see
// linkedProjectRefusal);
// the read_only paths that exist, each with the directories between the
// workspace and it pinned, so that none can be renamed away with it and
// replaced; the repository of each other directory the box may write,
// where one is a repository's root (or what the repository enclosing it
// names in it); the user's global git config and what it includes, where
// they lie under a directory the box may write (guardGlobalConfig);
// cordon's own files under a
// directory the box may write (see guardOwn); what earlier runs there set
// aside (guardSetAside); and the workspace's nested repositories, checked
// after the run (Nested), and those of each directory outside it the box
// may write (Watched). The list is settled: see
// settle. A run whose configuration lies where the box may write is
// refused (checkConfigOutside).
func GuardWorkspace(g GuardSpec) ([]GuardedPath, error) {
	ws := g.Workspace
	writable := append([]string{ws}, g.Writable...)
	if err := checkConfigOutside(g.Config, writable); err != nil {
		return nil, err
	}
	if err := checkAuditOutside(g.Audit, writable); err != nil {
		return nil, err
	}
	out, err := GuardRepo(ws)
	if err != nil {
		return nil, err
	}
	more, err := GuardEnclosing(ws)
	if err != nil {
		return nil, err
	}
	out = append(out, more...)
	project := filepath.Join(ws, policy.ProjectFile)
	if fi, err := os.Lstat(project); err == nil && fi.Mode().IsRegular() {
		out = append(out, GuardedPath{Path: project, Guard: ReadOnly})
	} else if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, linkedProjectRefusal(project)
	}
	for _, rel := range g.ReadOnly {
		if err := policy.CheckWorkspacePath(rel); err != nil {
			return nil, fmt.Errorf("read_only: %w", err)
		}
		more, err := guardUnder(ws, rel, false)
		if err != nil {
			return nil, fmt.Errorf("read_only: %w", err)
		}
		out = append(out, more...)
	}
	for _, w := range g.Writable {
		more, err := GuardRepo(w)
		if err != nil {
			return nil, fmt.Errorf("read-write path %s: %w", w, err)
		}
		out = append(out, more...)
		if more, err = GuardEnclosing(w); err != nil {
			return nil, fmt.Errorf("read-write path %s: %w", w, err)
		}
		out = append(out, more...)
		// A project file the box made there would make w the workspace
		// of a later run from a directory below it without a marker of
		// its own, wider than that directory: it is set aside, as a
		// .git made there is.
		pf := filepath.Join(w, policy.ProjectFile)
		if _, err := os.Lstat(pf); errors.Is(err, fs.ErrNotExist) {
			out = append(out, GuardedPath{Path: pf, Guard: Unborn})
		}
	}
	more, err = guardGlobalConfig(writable)
	if err != nil {
		return nil, err
	}
	out = append(out, more...)
	for _, f := range g.Own {
		more, err := guardOwn(f, writable)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	for _, f := range g.Projects {
		more, err := guardProject(f, writable, g.Writable)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	// Nor may the box write a project file above, or reach cordon's
	// configuration, through another name.
	kept := append(slices.Clone(g.Projects), configFiles(g.Config)...)
	for _, g := range out {
		if g.Guard == ReadOnly {
			kept = append(kept, g.Path)
		}
	}
	if err := refuseHardLinked(kept, writable); err != nil {
		return nil, err
	}
	aside, err := guardSetAside(writable)
	if err != nil {
		return nil, err
	}
	out = append(out, aside...)
	since := fileClockNow()
	out = append(out, GuardedPath{Path: ws, Guard: Nested, Dir: true, Since: since})
	for _, w := range g.Writable {
		if fi, err := os.Stat(w); err == nil && fi.IsDir() && !Within(w, ws) {
			out = append(out, GuardedPath{Path: w, Guard: Watched, Dir: true, Since: since})
		}
	}
	return seeFiles(settle(out)), nil
}

// Bounds on the search for the other names of a hard-linked file
// (refuseHardLinked), as for credential files in exposed trees.
const (
	maxLinkSearchEntries = 100_000
	maxLinkSearchTime    = 5 * time.Second
)

// linkSearch is one search within those bounds, over as many trees as it
// is given.
type linkSearch struct {
	entries  int
	deadline time.Time
}

func newLinkSearch() *linkSearch {
	return &linkSearch{deadline: time.Now().Add(maxLinkSearchTime)}
}

// regularFiles calls fn with each regular file below root and its status,
// failing past the search's bounds or on a directory it cannot read (what
// cannot be read could hold a name searched for); a file gone meanwhile is
// passed over.
func (s *linkSearch) regularFiles(root string, fn func(path string, st *syscall.Stat_t) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if s.entries++; s.entries > maxLinkSearchEntries || time.Now().After(s.deadline) {
			return fmt.Errorf("more than %d entries, or %s, to search", maxLinkSearchEntries, maxLinkSearchTime)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		return fn(path, st)
	})
}

// configFiles lists the files of cordon's configuration (config, as in
// GuardSpec.Config), by their real paths: a path that is a file, and the
// files in one that is a directory (the CA's certificate and key).
func configFiles(config []string) []string {
	var out []string
	for _, c := range config {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			out = append(out, real)
			continue
		}
		entries, _ := os.ReadDir(real)
		for _, e := range entries {
			out = append(out, filepath.Join(real, e.Name()))
		}
	}
	return out
}

// refuseHardLinked refuses a file of files, ones the box must not write
// (those kept read-only, the user's global git config, the project files
// above the workspace) or read (cordon's configuration), that has another
// name in one of writable, the directories the box may write: a read-only
// mount holds one name, and the box wrote the file through another (a
// dotfiles workspace whose gitconfig ~/.gitconfig is a hard link of: a
// core.fsmonitor it appended ran at the user's next git status anywhere).
// Only a file with more than one link is searched for, by a walk of
// writable within a bound; a search that cannot be finished refuses too.
func refuseHardLinked(files, writable []string) error {
	return refuseOtherNames(files, writable, "it could write the file through this name; make it a symbolic link, or a copy")
}

// RefuseSecretLinks refuses a file of files, the credentials' source files
// that the box must never read, that has another name in one of roots,
// the trees the box sees: the box is shown an empty file in place of the
// source, and read the secret whole through a hard link in the workspace
// or an exposed tree. The search is refuseHardLinked's.
func RefuseSecretLinks(files, roots []string) error {
	return refuseOtherNames(files, roots, "it could read the secret through this name; remove this name (the secret's own file is enough)")
}

// refuseOtherNames refuses a file of files that has more than one link and
// another name under one of roots, saying why (what the box could do
// through that name, and how to undo it).
func refuseOtherNames(files, roots []string, why string) error {
	type inode struct{ dev, ino uint64 }
	want := map[inode]string{}
	for _, p := range files {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			want[inode{uint64(st.Dev), uint64(st.Ino)}] = p
		}
	}
	if len(want) == 0 {
		return nil
	}
	search := newLinkSearch()
	for _, w := range roots {
		err := search.regularFiles(w, func(path string, st *syscall.Stat_t) error {
			if p, found := want[inode{uint64(st.Dev), uint64(st.Ino)}]; found && path != p {
				return fmt.Errorf("%s is a hard link of %s, which cordon keeps from the sandboxed command: %s", path, p, why)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("looking in %s for other names of %s, which have more hard links than one: %w", w, strings.Join(slices.Sorted(maps.Values(want)), ", "), err)
		}
	}
	return nil
}

// guardOwn guards file, one cordon runs on the host, when it lies under
// one of the writable roots: the box could otherwise replace it (or, where
// it is missing, plant it), and cordon would run the box's program
// outside any box when it next starts. It is read-only, or, missing, an
// empty file the box cannot create, and the directories between the
// outermost root holding it and it are pinned.
func guardOwn(file string, roots []string) ([]GuardedPath, error) {
	out, err := guardBelowRoot(file, roots, true, true)
	if err != nil {
		return nil, fmt.Errorf("cordon's own files: %w", err)
	}
	return out, nil
}

// guardBelowRoot guards file with guardUnder (absent as there) below the
// outermost of roots holding it, a root itself included when self is set;
// nothing when none holds it.
func guardBelowRoot(file string, roots []string, self, absent bool) ([]GuardedPath, error) {
	root := ""
	for _, r := range roots {
		if Within(file, r) && (self || file != r) && (root == "" || Within(root, r)) {
			root = r
		}
	}
	if root == "" {
		return nil, nil
	}
	rel, err := filepath.Rel(root, file)
	if err != nil {
		return nil, err
	}
	return guardUnder(root, rel, absent)
}

// guardProject guards a project file above the workspace (a real path)
// that lies under one of the writable roots: the next run reads it as
// policy, so a box that could remove it, or rename a directory above it
// away, would drop its narrowing. It is read-only, and the directories
// between the outermost root holding it and it are pinned. One that is a
// symbolic link leading into writable (the workspace and roots), or
// through a link there, is refused as the workspace's own would be
// (linkedProjectRefusal): the box would rewrite the file the link reaches
// (policy reads a target anywhere in the file's directory, the workspace
// included), or replace the link on the way.
func guardProject(file string, writable, roots []string) ([]GuardedPath, error) {
	out, err := guardBelowRoot(file, roots, false, false)
	if err != nil {
		return nil, fmt.Errorf("project file %s: %w", file, err)
	}
	inReach := func(p string) bool {
		return slices.ContainsFunc(writable, func(w string) bool { return Within(p, w) })
	}
	if fi, err := os.Lstat(file); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return out, nil
	}
	real, _, err := Resolve(file, func(link string) error {
		if inReach(link) {
			return linkedProjectRefusal(file)
		}
		return nil
	})
	if err == nil && inReach(real) {
		err = linkedProjectRefusal(file)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkConfigOutside refuses a run whose configuration (config, as in
// Spec.Config) lies under one of the writable directories (the workspace,
// read-write allow_paths): a box could rewrite the policy of the next run,
// or read the CA key, and no mount keeps it from renaming a directory
// above them away and putting its own in their place.
// Each path is compared as given and as the kernel resolves it (links
// followed, ".." after one leaving its target; a part not made yet, the
// CA before its first run, kept as it is); the writable directories are
// real paths.
func checkConfigOutside(config, writable []string) error {
	for _, c := range config {
		if w, ok := lyingIn(c, writable); ok {
			return fmt.Errorf("cordon's configuration %s lies in %s, which the command may write: it could rewrite your next run's policy, or read the CA key; keep cordon's configuration outside (set $XDG_CONFIG_HOME or $CORDON_CONFIG elsewhere)", c, w)
		}
	}
	return nil
}

// CheckCacheOutside refuses a run whose cache directory (cache, as
// CacheDir gives it; "" for none) lies under one of the writable
// directories (real paths: the workspace, read-write allow_paths). What
// cordon keeps there it acts on as its own: the aftercare a killed run
// owes (Collect removes and sets aside the paths its record names,
// anywhere on the host), what runs set aside (which later runs keep in
// place), the probe memos and the trust bundles. A box hides it only in
// a run for which it is the cache: a run from a shell with another
// $XDG_CACHE_HOME (a project's .envrc sets it to the workspace's .cache)
// left it open to its box, which wrote records there that the next run
// paid. The one place every run hides, whatever its environment, may lie
// there: the default under home, the user database's (DefaultCacheDir),
// reached through no link. It is compared as checkConfigOutside compares
// the configuration, and checked before anything is read there.
func CheckCacheOutside(cache, home string, writable []string) error {
	if filepath.IsAbs(home) && filepath.Clean(cache) == DefaultCacheDir(home) {
		rel, err := filepath.Rel(home, cache)
		if err == nil && resolvedPrefix(nil, cache) == filepath.Join(resolvedPrefix(nil, home), rel) {
			return nil
		}
	}
	if w, ok := lyingIn(cache, writable); ok {
		return fmt.Errorf("cordon's cache directory %s lies in %s, which the command may write: what cordon keeps there and acts on in later runs (the aftercare a run owes, which removes and sets aside files on the host; what runs set aside; the probes' results; the trust bundles sandboxes are given) could be of a command's writing, from a run whose cache was elsewhere", cache, w)
	}
	return nil
}

// lyingIn returns the writable directory (a real path) that p lies
// under, as written or as the kernel resolves it (links followed, ".."
// after one leaving its target, a part not made yet kept as it is); a
// relative p lies nowhere.
func lyingIn(p string, writable []string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	for _, n := range []string{filepath.Clean(p), resolvedPrefix(nil, p)} {
		for _, w := range writable {
			if Within(n, w) {
				return w, true
			}
		}
	}
	return "", false
}

// checkAuditOutside refuses a run in which the command may write where
// the audit log's directories (audit, as AuditDirs gives them) are: under
// one of the writable directories (real paths), at any depth. The
// directory itself is hidden in the box, but one above it is not, and a
// box that renamed that away could put a directory of its own in its
// place, holding a link (cordon, on the host, would then append the next
// runs' lines, with text the box chose in them, to ~/.bashrc, say) or a
// second name of the log (which a later box would read and rewrite). As
// with cordon's configuration, the run is refused, not merely masked.
// Each directory is compared as given and with the links of its longest
// existing part resolved.
func checkAuditOutside(audit, writable []string) error {
	for _, a := range audit {
		if w, ok := lyingIn(a, writable); ok {
			return &AuditDirError{Dir: filepath.Clean(a), Writable: w}
		}
	}
	return nil
}

// AuditDirError is the refusal of a run in which the command may write
// where the audit log's directory is (checkAuditOutside).
type AuditDirError struct {
	// Dir is the audit log's directory; Writable, the directory the
	// command may write that holds it.
	Dir, Writable string
}

func (e *AuditDirError) Error() string {
	return fmt.Sprintf("refusing the audit log directory %s: it lies in %s, which the command may write, so a command could move it away and have cordon write the next runs' lines into a file of its choosing; %s", e.Dir, e.Writable, e.Fix())
}

// Fix says how to run with the log out of the command's reach.
func (e *AuditDirError) Fix() string {
	return "keep the audit log outside the workspace and every read-write --allow-path (point --audit or CORDON_AUDIT elsewhere), or allow a narrower path"
}

// settle makes a list of guards one that bind mounts can follow in
// order: a path under a read-only one is dropped (the read-only one holds
// it already, and a writable bind made after it would open it again); of
// a path listed twice, the read-only entry wins; a directory comes before
// what is under it.
func settle(in []GuardedPath) []GuardedPath {
	var readOnly []string
	for _, g := range in {
		if g.Guard == ReadOnly {
			readOnly = append(readOnly, g.Path)
		}
	}
	covered := func(p string) bool {
		for _, r := range readOnly {
			if p != r && Within(p, r) {
				return true
			}
		}
		return false
	}
	at := map[string]int{}
	var out []GuardedPath
	for _, g := range in {
		key := g.Path
		if g.Guard == Checkouts || g.Guard == Nested || g.Guard == Watched {
			key += "\x00" + strconv.Itoa(int(g.Guard)) // no mount: it stands beside the path's own guard
		}
		switch i, ok := at[key]; {
		case covered(g.Path):
		case ok:
			if g.Guard == ReadOnly {
				g.Config = cmp.Or(g.Config, out[i].Config) // one of them a git config's guard
				g.ID = cmp.Or(g.ID, out[i].ID)             // or of a file git runs
				out[i] = g
			}
		default:
			at[key] = len(out)
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].Path, string(filepath.Separator)) < strings.Count(out[j].Path, string(filepath.Separator))
	})
	return out
}

// creatable says whether this user could create the missing path p. A
// guard of a missing path is only needed where the box could create it,
// and only possible there: bwrap makes its mount point as the user.
func creatable(p string) bool {
	const accessWrite = 2 // access(2)'s W_OK
	return syscall.Access(filepath.Dir(p), accessWrite) == nil
}

// guardUnder guards root/rel read-only, with the directories between
// root and it pinned. A symbolic link on the way is refused. What does not
// exist is left alone, unless absent is set: then a missing file is to be
// an empty one, and a missing directory on the way an empty one, that the
// box cannot create anything in, where the user could create them.
func guardUnder(root, rel string, absent bool) ([]GuardedPath, error) {
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	var out []GuardedPath
	p := root
	for i, name := range parts {
		p = filepath.Join(p, name)
		last := i == len(parts)-1
		fi, err := os.Lstat(p)
		switch {
		case err != nil && !absent:
			return nil, nil // not there: nothing to guard
		case err != nil && !creatable(p):
			return out, nil
		case err != nil && last:
			return append(out, GuardedPath{Path: p, Guard: AbsentFile}), nil
		case err != nil:
			return append(out, GuardedPath{Path: p, Guard: AbsentDir, Dir: true}), nil
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkRefusal(p)
		case last:
			out = append(out, GuardedPath{Path: p, Guard: ReadOnly, Dir: fi.IsDir()})
		case !fi.IsDir():
			return nil, nil
		default:
			out = append(out, GuardedPath{Path: p, Guard: Pinned, Dir: true})
		}
	}
	return out, nil
}

// GuardRepo lists how to guard the git repository at the workspace root
// ws (a real path), in an order in which bind mounts can be made: a git
// directory before the paths inside it. A workspace that is no repository
// gives nothing. A .git file (a linked worktree, a submodule's checkout)
// is read-only, so it keeps naming its git directory, which is guarded
// too when it is inside the workspace. A guarded path that is a symbolic
// link is refused: a guard would land on the link's target, and the link
// itself could be replaced.
func GuardRepo(ws string) ([]GuardedPath, error) {
	g := repoWalk{entries: maxRepoModuleEntries, top: ws}
	out, err := g.repo(ws, 0)
	if err != nil {
		return nil, err
	}
	return pinAbove(ws, out)
}

// pinAbove pins the directories between root and each path under it
// that guards holds in a mount (pinned, read-only, or a placeholder), and
// returns guards with them, each directory before what is under it. A
// mount moves with a directory renamed above it, and the box could then
// put one of its own in its place: a linked worktree's directory under
// worktrees/ (its read-only commondir moved along, and the box made a
// new one naming its own config), or modules/ (every submodule's git
// directory with it). A directory that is a mount point cannot be
// renamed or removed.
func pinAbove(root string, guards []GuardedPath) ([]GuardedPath, error) {
	have := map[string]bool{}
	for _, g := range guards {
		if g.Guard == Pinned || g.Guard == ReadOnly {
			have[g.Path] = true
		}
	}
	out := guards
	for _, g := range guards {
		switch g.Guard {
		case Pinned, ReadOnly, AbsentFile, AbsentDir:
		default:
			continue
		}
		if g.Path == root || !Within(g.Path, root) {
			continue
		}
		// A directory pinned already has its own guard, which pins what
		// is above it.
		for d := filepath.Dir(g.Path); d != root && !have[d]; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			switch {
			case err != nil:
				return nil, err
			case fi.Mode()&fs.ModeSymlink != 0:
				return nil, linkRefusal(d)
			case !fi.IsDir():
				return nil, fmt.Errorf("%s, on the way to the guarded %s, is no directory", d, g.Path)
			}
			have[d] = true
			out = append(out, GuardedPath{Path: d, Guard: Pinned, Dir: true})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].Path, string(filepath.Separator)) < strings.Count(out[j].Path, string(filepath.Separator))
	})
	return out, nil
}

// repo guards the repository whose worktree is root, and its submodule
// checkouts (see Checkouts).
func (g *repoWalk) repo(root string, depth int) ([]GuardedPath, error) {
	dotgit := filepath.Join(root, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		if depth == 0 && errors.Is(err, fs.ErrNotExist) {
			return g.bare(root)
		}
		return nil, nil
	}
	var out []GuardedPath
	dir := dotgit
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, linkRefusal(dotgit)
	case fi.IsDir():
		if out, err = g.dir(dotgit, root, depth); err != nil {
			return nil, err
		}
	case fi.Mode().IsRegular():
		out = []GuardedPath{{Path: dotgit, Guard: ReadOnly}}
		var ok bool
		if dir, ok = gitdirOf(dotgit); !ok {
			// A git directory it names in the workspace that is not
			// there (a submodule's under .git/modules, removed by hand)
			// would be git's, run in the checkout on the host, once the
			// run made it: it is set aside after the run, as a
			// repository the run made where none was.
			named, ok := gitdirNamed(dotgit)
			if _, err := os.Lstat(named); ok && errors.Is(err, fs.ErrNotExist) && Within(named, g.top) && named != g.top {
				if err := linkUnder(g.top, named); err != nil {
					return nil, fmt.Errorf("%s names the git directory %s: %w", dotgit, named, err)
				}
				out = append(out, GuardedPath{Path: named, Guard: Unborn})
			}
			return out, nil
		}
		more, err := g.configured(dir, root) // a linked worktree's config may name hooks in it
		if Within(dir, g.top) {
			more, err = g.dir(dir, root, depth)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	case depth == 0:
		// A named pipe, say, which no guard holds: the box could
		// replace it with a repository of its own, and the root's .git
		// is not the walk's to set aside (Nested).
		return nil, fmt.Errorf("%s is neither a directory nor a file (%s): git cannot use it, and the sandboxed command could replace it with a repository of its own, whose config and hooks git run there on the host would follow; remove it", dotgit, fi.Mode().Type())
	default:
		return nil, nil // a checkout's: one the run makes is set aside (Checkouts)
	}
	links, hidden, err := repoGitlinks(dir, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("read the index of %s, to guard its submodule checkouts: %w", root, err)
	}
	out = append(out, GuardedPath{Path: root, Guard: Checkouts, Dir: true, Hidden: &hidden})
	for _, l := range links {
		checkout := filepath.Join(root, filepath.FromSlash(l))
		if _, err := os.Lstat(filepath.Join(checkout, ".git")); err != nil {
			continue // not checked out: Aftercare sees to one the run makes
		}
		if g.entries--; g.entries < 0 || depth >= maxRepoModuleDepth {
			return nil, fmt.Errorf("the workspace's repository has too many submodules, or nested too deep, to guard (the bound is %d entries, %d levels)", maxRepoModuleEntries, maxRepoModuleDepth)
		}
		pins, err := pinUnder(root, l)
		if err != nil {
			return nil, err
		}
		more, err := g.repo(checkout, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(append(out, pins...), more...)
	}
	return out, nil
}

// bare guards root, a workspace or a read-write allow_path with no .git,
// as a repository the run may make there (Unborn) and, when root is
// itself laid out as a git directory (a bare repository: one that
// projects push to, given as --allow-path DIR:rw), as that git directory
// (dir): its config and hooks are read-only for the run. Before, they
// were the box's to write during the run, and a host's git push to it
// while the run went on ran the box's hook (the walk after the run sets
// aside only what it finds then). root itself is not pinned: it is the
// box's mount already.
func (g *repoWalk) bare(root string) ([]GuardedPath, error) {
	out := []GuardedPath{{Path: filepath.Join(root, ".git"), Guard: Unborn}}
	if !isGitDir(root) {
		return out, nil
	}
	more, err := g.dir(root, "", 0)
	if err != nil {
		return nil, fmt.Errorf("the bare repository %s: %w", root, err)
	}
	return append(out, slices.DeleteFunc(more, func(p GuardedPath) bool { return p.Path == root })...), nil
}

// pinUnder pins root/rel (slash-separated) and each directory between
// root and it, refusing a symbolic link on the way: git would follow it.
func pinUnder(root, rel string) ([]GuardedPath, error) {
	var out []GuardedPath
	p := root
	for _, name := range strings.Split(rel, "/") {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkRefusal(p)
		case !fi.IsDir():
			return nil, fmt.Errorf("%s is a submodule checkout that is not a directory", p)
		}
		out = append(out, GuardedPath{Path: p, Guard: Pinned, Dir: true})
	}
	return out, nil
}

// repoGitlinks lists the gitlinks of the index in the git directory dir
// (and of its shared index, when it is split), and what it hides from
// git status (Hidden); none when there is no index. With a
// *badGitlinksError, the gitlinks it lists are those read. With since
// set, the Hidden also keeps the entries recorded as changed since then
// (recordedSince).
func repoGitlinks(dir string, since time.Time) ([]string, Hidden, error) {
	size := hashSizeOf(dir)
	var hidden Hidden
	if !since.IsZero() {
		hidden.recorded = &recordedSince{since: since, anyTime: changeTimeIgnored(dir, os.Getenv("HOME"))}
	}
	links, shared, err := indexGitlinks(filepath.Join(dir, "index"), size, &hidden)
	var bad *badGitlinksError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Hidden{}, nil
	case err != nil && !errors.As(err, &bad):
		return nil, Hidden{}, err
	case shared == "":
		hidden.done()
		return links, hidden, err
	}
	more, _, err2 := indexGitlinks(filepath.Join(dir, "sharedindex."+shared), size, &hidden)
	if err2 != nil && !errors.As(err2, &bad) {
		return nil, Hidden{}, err2
	}
	hidden.done()
	return append(links, more...), hidden, errors.Join(err, err2)
}

// indexGitlinks reads the gitlinks of the index file p (gitlinks), which
// must be a regular file (openRegular), and counts what it hides in
// hidden.
func indexGitlinks(p string, hashSize int, hidden *Hidden) ([]string, string, error) {
	f, fi, err := openRegular(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if fi.Size() > maxIndexSize {
		return nil, "", fmt.Errorf("%s is %d bytes, more than the %d cordon reads", p, fi.Size(), maxIndexSize)
	}
	links, shared, err := readIndex(f, fi.Size(), hashSize, hidden)
	if err != nil {
		return links, shared, fmt.Errorf("%s: %w", p, err)
	}
	return links, shared, nil
}

// commonDir is the common directory a linked worktree's git directory dir
// names in its commondir file, if it has one.
func commonDir(dir string) (string, bool) {
	c, err := readRegular(filepath.Join(dir, "commondir"))
	if err != nil {
		return "", false
	}
	common := gitFilePath(c)
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	return common, true
}

// hashSizeOf is the size of the object names of the repository whose git
// directory is dir: 32 where its config (a linked worktree's is in the
// common directory) sets extensions.objectFormat to sha256, else 20.
func hashSizeOf(dir string) int {
	configs := []string{filepath.Join(dir, "config")}
	if common, ok := commonDir(dir); ok {
		configs = append(configs, filepath.Join(common, "config"))
	}
	for _, c := range configs {
		data, _ := readRegular(c)
		for _, line := range strings.Split(strings.ToLower(string(data)), "\n") {
			k, v, ok := strings.Cut(line, "=")
			if ok && strings.TrimSpace(k) == "objectformat" && strings.TrimSpace(v) == "sha256" {
				return 32
			}
		}
	}
	return 20
}

// gitdirOf reads the git directory a .git file names ("gitdir: PATH",
// relative to the file's directory), resolved to its real path.
func gitdirOf(dotgit string) (string, bool) {
	p, ok := gitdirNamed(dotgit)
	if !ok {
		return "", false
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	return real, true
}

// gitdirNamed reads the git directory a .git file names, as written
// (relative to the file's directory), whether it exists or not.
func gitdirNamed(dotgit string) (string, bool) {
	b, err := readRegular(dotgit)
	if err != nil {
		return "", false
	}
	rest, ok := bytes.CutPrefix(b, []byte("gitdir:"))
	if !ok {
		return "", false
	}
	p := gitFilePath(bytes.TrimPrefix(rest, []byte(" ")))
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(dotgit), p)
	}
	return filepath.Clean(p), true
}

// gitFilePath is the path a file of git's names (a .git file's, after its
// "gitdir: "; a commondir), as git reads it: only the line's end, \n and
// \r, is dropped, so a space at either end is part of the name (git's
// "gitdir: gd " is the directory "gd ").
func gitFilePath(b []byte) string {
	return strings.TrimRight(string(b), "\r\n")
}

// linkUnder refuses a symbolic link under root on the way to p, a path
// under root that does not exist, which cordon removes or sets aside
// after the run if the run made it (Unmade, Unborn): through a link,
// aftercare would act where the link leads, on what the box did not make
// (a repository's gd linked to ~/.cache/cordon, and include.path =
// gd/aftercare: cordon removed its own records of owed aftercare, which
// it had made during the run), and the box could point the link
// elsewhere.
func linkUnder(root, p string) error {
	_, _, err := Resolve(p, func(l string) error {
		if Within(l, root) && l != root {
			return linkRefusal(l)
		}
		return nil
	})
	return err
}

// linkRefusal is the error for a guarded path that is a symbolic link: a
// guard would land on the link's target, and the link itself could be
// replaced.
func linkRefusal(p string) error {
	return fmt.Errorf("%s is a symbolic link: cordon keeps it read-only in the box, and cannot guard a link (the box could replace it); replace it with what it points to", p)
}

// repoWalk walks one repository's git directories within a bound.
type repoWalk struct {
	entries int    // directory entries the modules search may still read
	top     string // the outermost worktree, whose git directories are guarded
}

// dir guards the git directory dir and, under its modules/, the git
// directories of its submodules (depth counts the nesting); worktree is
// the repository's worktree, or "" to take it from dir (configured).
func (g *repoWalk) dir(dir, worktree string, depth int) ([]GuardedPath, error) {
	out := []GuardedPath{{Path: dir, Guard: Pinned, Dir: true}}
	// config.worktree is read only when the (read-only) config turns
	// extensions.worktreeConfig on; a missing one is seen to then
	// (configured). A missing config reads as empty to git.
	for _, name := range []string{"config", "config.worktree"} {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		switch {
		case err != nil && name == "config":
			if creatable(p) {
				out = append(out, GuardedPath{Path: p, Guard: AbsentFile, Config: seeConfig(p)})
			}
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, linkRefusal(p)
		default:
			out = append(out, GuardedPath{Path: p, Guard: ReadOnly, Dir: fi.IsDir(), Config: seeConfig(p)})
			more, err := g.includes(p)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
	}
	// What the config names for git to run, in the workspace, is git's
	// hooks and commands as much as the hooks directory here.
	more, err := g.configured(dir, worktree)
	if err != nil {
		return nil, err
	}
	out = append(out, more...)
	// Only a linked worktree's private directory (under worktrees/) has
	// a commondir; one here points git's config and hooks elsewhere, and
	// a box may have left it (cordon removes one a run made, unless
	// cordon was killed first). The user is to look at it.
	commondir := filepath.Join(dir, "commondir")
	if _, err := os.Lstat(commondir); err == nil {
		return nil, fmt.Errorf("%s exists: git takes this repository's config and hooks from where it points, and only a linked worktree's private directory has one; a sandboxed command may have left it (cordon removes one a run makes, unless cordon is killed first): remove it if you did not put it there", commondir)
	}
	out = append(out, GuardedPath{Path: commondir, Guard: Unmade})
	hooks := filepath.Join(dir, "hooks")
	fi, err := os.Lstat(hooks)
	switch {
	case err != nil:
		if creatable(hooks) {
			out = append(out, GuardedPath{Path: hooks, Guard: AbsentDir, Dir: true})
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, linkRefusal(hooks)
	default:
		out = append(out, GuardedPath{Path: hooks, Guard: ReadOnly, Dir: fi.IsDir()})
	}
	worktrees, _ := os.ReadDir(filepath.Join(dir, "worktrees"))
	for _, w := range worktrees {
		// A linked worktree's commondir names the repository whose config
		// and hooks git uses there.
		for _, name := range []string{"config.worktree", "commondir"} {
			p := filepath.Join(dir, "worktrees", w.Name(), name)
			if fi, err := os.Lstat(p); err == nil {
				if fi.Mode()&fs.ModeSymlink != 0 {
					return nil, linkRefusal(p)
				}
				wg := GuardedPath{Path: p, Guard: ReadOnly}
				if name == "config.worktree" {
					wg.Config = seeConfig(p)
				}
				out = append(out, wg)
			}
		}
	}
	more, err = g.modules(filepath.Join(dir, "modules"), depth)
	return append(out, more...), err
}

// includes guards what the git config file p includes from under g.top:
// it is git's config as much as the file itself, so it is read-only, and
// a missing one is removed after the run if the run made it.
func (g *repoWalk) includes(p string) ([]GuardedPath, error) {
	var out []GuardedPath
	for _, inc := range configIncludes(p, os.Getenv("HOME")) {
		if !Within(inc, g.top) || inc == g.top {
			continue
		}
		if _, err := os.Lstat(inc); errors.Is(err, fs.ErrNotExist) {
			// A placeholder would not do: git fails on an include it
			// cannot read. One the run makes is removed after it.
			if err := linkUnder(g.top, inc); err != nil {
				return nil, fmt.Errorf("%s includes %s: %w", p, inc, err)
			}
			out = append(out, GuardedPath{Path: inc, Guard: Unmade})
			continue
		}
		rel, err := filepath.Rel(g.top, inc)
		if err != nil {
			return nil, err
		}
		more, err := guardUnder(g.top, rel, false)
		if err != nil {
			return nil, fmt.Errorf("%s includes %s: %w", p, inc, err)
		}
		out = append(out, seeConfigIn(more, inc)...)
	}
	return out, nil
}

// enclosingRepo finds the repository git discovers from root, a
// directory with no .git of its own, as git does: the nearest directory
// above it holding a .git (a directory, or a file naming one; git
// follows links), or one that is itself a git directory by its layout (a
// bare repository). dir is its git directory, as a real path; worktree
// is its worktree, or "" for configured to take from dir (core.worktree,
// or the directory above a .git). As git does (safe.directory), it
// refuses a repository another user owns, and looks no further: another
// user's /tmp/.git, above a workspace in /tmp, would otherwise have its
// config name paths in the workspace that cordon guards, and removes
// after the run when the run made them (the user's new work).
func enclosingRepo(root string) (dir, worktree string, ok bool) {
	found := func(marker, dir, worktree string) (string, string, bool) {
		for _, p := range []string{marker, dir} {
			if fi, err := os.Lstat(p); err != nil || !owner.Mine(fi) {
				return "", "", false
			}
		}
		return dir, worktree, true
	}
	for d := filepath.Dir(root); ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		if fi, err := os.Stat(dotgit); err == nil {
			if fi.IsDir() && isGitDir(dotgit) {
				if real, err := filepath.EvalSymlinks(dotgit); err == nil && real == dotgit {
					return found(dotgit, real, "")
				} else if err == nil {
					return found(dotgit, real, d) // a link: the worktree is still d
				}
			} else if gd, ok := gitdirOf(dotgit); ok && !fi.IsDir() {
				return found(dotgit, gd, d)
			}
		}
		if isGitDir(d) {
			return found(d, d, "")
		}
		if d == filepath.Dir(d) {
			return "", "", false
		}
	}
}

// isGitDir says whether d is laid out as a git directory (gitDirLayout).
func isGitDir(d string) bool {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(d, name))
		return err == nil
	}
	return has("HEAD") && (has("commondir") || has("objects") && has("refs"))
}

// GuardEnclosing lists how to guard what the repository enclosing root
// (a real path: the workspace, or a read-write allow_path, with no .git
// of its own) names under root for git to run on the host: a workspace
// inside a larger repository (a monorepo's frontend/, with the
// repository's core.hooksPath = frontend/.husky) is that repository's
// worktree to git run anywhere in it. What its config, with its includes
// and the user's global config, includes or names (configured) under root
// is guarded as for the workspace's own repository, with the directories
// between root and it pinned. Its git directory lies outside root, out of
// the box's reach.
func GuardEnclosing(root string) ([]GuardedPath, error) {
	if _, err := os.Lstat(filepath.Join(root, ".git")); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil // a repository of its own (GuardRepo), which git finds first
	}
	dir, worktree, ok := enclosingRepo(root)
	if !ok || Within(dir, root) {
		return nil, nil
	}
	g := repoWalk{entries: maxRepoModuleEntries, top: root}
	var out []GuardedPath
	configs := []string{filepath.Join(dir, "config"), filepath.Join(dir, "config.worktree")}
	if common, ok := commonDir(dir); ok {
		configs = append(configs, filepath.Join(common, "config"))
	}
	for _, c := range configs {
		more, err := g.includes(c)
		if err != nil {
			return nil, fmt.Errorf("the repository enclosing %s: %w", root, err)
		}
		out = append(out, more...)
	}
	more, err := g.configured(dir, worktree)
	if err != nil {
		return nil, fmt.Errorf("the repository enclosing %s: %w", root, err)
	}
	return pinAbove(root, append(out, more...))
}

// modules finds the submodules' git directories under d (a submodule's
// name may hold slashes, so they can sit at any depth): a directory with
// a HEAD file is one.
func (g *repoWalk) modules(d string, depth int) ([]GuardedPath, error) {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil, nil
	}
	var out []GuardedPath
	for _, e := range entries {
		if g.entries--; g.entries < 0 || depth >= maxRepoModuleDepth {
			return nil, fmt.Errorf("the workspace's repository has too many submodules, or nested too deep, to guard (the bound is %d entries, %d levels under .git/modules)", maxRepoModuleEntries, maxRepoModuleDepth)
		}
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(d, e.Name())
		next := g.modules
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			next = func(p string, depth int) ([]GuardedPath, error) { return g.dir(p, "", depth) }
		}
		more, err := next(p, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// openRegular opens the file p for reading, refusing a symbolic link and
// anything but a regular file: the files of a repository are the box's to
// have made, and a named pipe would hold cordon's read until someone
// wrote to it (the non-blocking open does not wait for one).
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	return regular.Open(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// readRegular reads the regular file p (openRegular), refusing one longer
// than maxGitFileSize (errGitFileTooLarge): its size is no bound, as a
// file of /proc says it is empty.
func readRegular(p string) ([]byte, error) {
	data, _, err := readRegularFile(p)
	return data, err
}

// readRegularFile is readRegular, and says which file it read.
func readRegularFile(p string) ([]byte, fs.FileInfo, error) {
	f, fi, err := openRegular(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxGitFileSize+1))
	switch {
	case len(data) > maxGitFileSize:
		return nil, nil, fmt.Errorf("%s is %w", p, errGitFileTooLarge)
	case err != nil:
		return nil, nil, err
	}
	return data, fi, nil
}
