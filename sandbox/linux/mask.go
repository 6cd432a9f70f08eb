//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// The bound on the search for credential files inside exposed trees: at
// most maxWalkEntries directory entries in all, within maxWalkTime. A tree
// too large to search is refused rather than exposed unsearched.
const (
	maxWalkEntries = 100_000
	maxWalkTime    = 5 * time.Second
)

// errWalkBound reports that an exposed tree is too large to search.
var errWalkBound = errors.New("too large to search for credential files")

// mask hides one path: an empty file over a file, an empty read-only
// directory over a directory.
type mask struct {
	path string
	dir  bool
}

// maskPaths lists what reads as empty inside the sandbox: deny_read
// entries (relative ones are in the workspace), the guard's protected
// paths, the credentials' source files (sources, see credentialSources),
// and files with credential names inside walked binds. Each is resolved
// to its real path and masked only where the sandbox can see it.
func maskPaths(p *policy.Policy, ws string, g guard, binds []bind, sources []string, visible func(string) bool, names *sandbox.Resolver) ([]mask, error) {
	cands := slices.Clone(sources)
	for _, d := range p.DenyRead {
		if !filepath.IsAbs(d) {
			d = filepath.Join(ws, d)
		}
		cands = append(cands, d)
	}
	// The guard's paths are listed in every spelling that matters (homes
	// as written and resolved, cordon's own resolved, the host's sockets
	// under /run and /var/run), so one the sandbox cannot see as written
	// is skipped without a system call: most are nowhere near a mount.
	for _, c := range g.protected() {
		if visible(c) {
			cands = append(cands, c)
		}
	}
	// cordon's own directories are hidden wherever they resolve, a link
	// on the way followed (makeOwnDirs made each the box could).
	cands = append(cands, g.ownDirs()...)
	cands = append(cands, listeningSockets(procNetUnix, binds)...)
	w := walker{limit: maxWalkEntries, deadline: time.Now().Add(maxWalkTime)}
	for _, b := range binds {
		if !b.walk {
			continue
		}
		found, err := w.credentialFiles(b.path)
		if err != nil {
			return nil, fmt.Errorf("exposed path %s: %w (the bound is %d entries in %s); expose a narrower directory", b.path, err, maxWalkEntries, maxWalkTime)
		}
		cands = append(cands, found...)
	}

	seen := map[string]bool{}
	var out []mask
	for _, c := range cands {
		// Most candidates (the protected paths) do not exist: one Lstat
		// says so, where resolving would stat each of their parents too.
		if _, err := names.Lstat(c); err != nil {
			continue
		}
		real, err := names.EvalSymlinks(c)
		if err != nil || seen[real] {
			continue
		}
		if !visible(real) {
			// What is shown inside a path the box does not see as a
			// whole is hidden itself: an expose or allow_paths entry a
			// project file narrowed to a file in a deny_read directory
			// showed that file whole, read-write with :rw (red team,
			// round 8). No layer removes a deny.
			for _, b := range binds {
				// The workspace, and what lies in it, is shown whole
				// wherever it is.
				if sandbox.Within(b.path, ws) || !sandbox.Within(b.path, real) || seen[b.path] {
					continue
				}
				if fi, err := names.Lstat(b.path); err == nil {
					seen[b.path] = true
					out = append(out, mask{path: b.path, dir: fi.IsDir()})
				}
			}
			continue
		}
		fi, err := names.Lstat(real) // real names no link
		if err != nil {
			continue
		}
		seen[real] = true
		out = append(out, mask{path: real, dir: fi.IsDir()})
	}
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].path) < depth(out[j].path) })
	kept := out[:0]
	for _, m := range out {
		hidden := false
		for _, k := range kept {
			if k.dir && sandbox.Within(m.path, k.path) {
				hidden = true
				break
			}
		}
		if !hidden {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// unmaskShown drops the mask of each file the box is shown at its path
// (shown, where each file of Spec.Files lands, shownAt: a credential's
// files: entry, its secrets swapped for placeholders), so that the file
// shown is what the box reads there, as it is where no tree around it is
// exposed: a default deny_read store (~/.m2/settings.xml in an exposed
// ~/.m2) is given to the box masked that way. A directory's mask stays,
// and so does a credential source's (sources), which may hold the secret
// of a credential not loaded for the run, which no placeholder stands
// for.
func unmaskShown(masks []mask, shown []string, sources []string) []mask {
	return slices.DeleteFunc(masks, func(m mask) bool {
		return !m.dir && slices.Contains(shown, m.path) && !slices.Contains(sources, m.path)
	})
}

// errUnseen stops shownAt at a link the box does not see.
var errUnseen = errors.New("a link the box does not see")

// shownAt is the path bwrap mounts a file shown at dst on: dst with the
// links on the way followed, as bwrap follows them in the box, when each
// is one the box sees (in a tree bound from the host) and the file they
// lead to is seen too; else dst as written (a link of the host's in the
// home, which the box has empty, is not there, and bwrap makes the file
// at dst). A link in an exposed tree to a file beside it (a dotfiles
// manager's) has the mount land on that file: the watch of the box's
// mounts, the pins and the masks must know it there.
func shownAt(dst string, visible func(string) bool, names *sandbox.Resolver) string {
	if !filepath.IsAbs(dst) {
		return dst // refused as it is placed
	}
	real, whole, err := names.Resolve(filepath.Clean(dst), func(link string) error {
		if !visible(link) {
			return errUnseen
		}
		return nil
	})
	if err != nil || !whole || !visible(real) {
		return dst
	}
	return real
}

// credentialSources returns the real paths of the credentials' source
// files (source: {file: PATH}) that exist and are no directory, of every
// credential in the config, selected for the run or not: each holds a
// real secret, which the box must never read. (An env source never
// reaches the box, whose environment is cleared; a command source leaves
// nothing to hide.) A symbolic link on the way to one that the box could
// replace is refused: the next run would hide whatever it pointed to
// then. (The directories above each are pinned with the other masks',
// pinsAbove.)
func credentialSources(p *policy.Policy, binds []bind) ([]string, error) {
	var files []string
	for _, c := range p.Credentials {
		// Load has made the path absolute; a relative one is never read.
		if c.Source.File == "" || !filepath.IsAbs(c.Source.File) {
			continue
		}
		real, err := resolveSource(c.Source.File, func(q string) bool { return movable(q, binds) }, nil)
		if err != nil {
			return nil, fmt.Errorf("credential %q: source.file %s: %w", c.Name, c.Source.File, err)
		}
		if real == "" {
			continue
		}
		if fi, err := os.Stat(real); err != nil || fi.IsDir() {
			continue // not a file a secret is read from
		}
		if !slices.Contains(files, real) {
			files = append(files, real)
		}
	}
	// The box sees an empty file at each source's path; a second name of
	// it, in a tree the box sees, would show the secret.
	if err := sandbox.RefuseSecretLinks(files, seenTrees(binds)); err != nil {
		return nil, fmt.Errorf("a credential's source file: %w", err)
	}
	return files, nil
}

// seenTrees are the trees of binds in which the box could find a second
// name of a file hidden from it: the read-write ones and the exposed
// ones (those searched for credential files).
func seenTrees(binds []bind) []string {
	var seen []string
	for _, b := range binds {
		if b.write || b.walk {
			seen = append(seen, b.path)
		}
	}
	return seen
}

// refuseHiddenLinks refuses a file hidden from the box that has a second
// name, a hard link, in a tree it sees (seenTrees): a deny_read file
// (sandbox.DenyReadFiles), or a file shown masked in the box (files, a
// credential's files:, by their paths). The box reads the empty or
// masked file at its path, and read the real one whole through the other
// name: one an earlier run's box linked to a deny_read entry it made
// before the secret was written into it.
func refuseHiddenLinks(p *policy.Policy, ws string, files map[string][]byte, binds []bind, names *sandbox.Resolver) error {
	seen := seenTrees(binds)
	hidden, err := sandbox.DenyReadFiles(p, ws, seen, names)
	if err != nil {
		return err
	}
	for dst := range files {
		if filepath.IsAbs(dst) {
			hidden = append(hidden, dst)
		}
	}
	if err := sandbox.RefuseSecretLinks(hidden, seen); err != nil {
		return fmt.Errorf("a deny_read file, or a credential's files: entry: %w", err)
	}
	return nil
}

// procNetUnix lists the unix sockets of cordon's network namespace, the
// host's.
const procNetUnix = "/proc/net/unix"

// listeningSockets are the paths of the unix sockets listening on the host
// (read from table, as /proc/net/unix has them) that exist there, socket
// files still, below a bind (the workspace above all, which is not
// searched for sockets as an exposed tree is): whatever listens may act
// outside the box at its asking, as a dev database whose socket is in the
// project (devenv's .devenv/state/postgres) runs a program for its
// superuser (COPY … TO PROGRAM). A socket that is a bind itself was named
// to be exposed. The table has each socket's path as it was bound: one
// bound by a relative path, or moved since, is not found; one bound
// through a symbolic link is found at its real path.
func listeningSockets(table string, binds []bind) []string {
	data, err := os.ReadFile(table)
	if err != nil {
		return nil
	}
	var found []string
	for line := range strings.Lines(string(data)) {
		// Num RefCount Protocol Flags Type St Inode Path: the inode is
		// padded on the left, the path (which may hold spaces) follows
		// one space.
		rest := strings.TrimSuffix(line, "\n")
		var f []string
		for range 7 {
			rest = strings.TrimLeft(rest, " ")
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				break
			}
			f, rest = append(f, rest[:i]), rest[i+1:]
		}
		if len(f) < 7 {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&soAcceptCon == 0 || !filepath.IsAbs(rest) {
			continue
		}
		// Binds are real paths; the socket may have been bound through
		// a symbolic link.
		path, err := filepath.EvalSymlinks(rest)
		if err != nil {
			continue
		}
		under := false
		for _, b := range binds {
			if path == b.path {
				under = false
				break
			}
			under = under || sandbox.Within(path, b.path)
		}
		if fi, err := os.Lstat(path); under && err == nil && fi.Mode()&fs.ModeSocket != 0 && !slices.Contains(found, path) {
			found = append(found, path)
		}
	}
	return found
}

// soAcceptCon is the flag /proc/net/unix shows on a listening socket
// (__SO_ACCEPTCON).
const soAcceptCon = 1 << 16

// resolveSource resolves path (absolute, cleaned) as the kernel would:
// its real path, or "" when it does not resolve. A symbolic link on the
// way that the box could replace (writable) is refused.
func resolveSource(path string, writable func(string) bool, names *sandbox.Resolver) (string, error) {
	real, whole, err := names.Resolve(path, func(link string) error {
		if writable(link) {
			return fmt.Errorf("%s is a symbolic link the command could replace, and the next run would hide whatever it then pointed to; name the file by its real path", link)
		}
		return nil
	})
	if err != nil || !whole {
		return "", err
	}
	return real, nil
}

// walker searches trees for credential file names and sockets within one
// budget.
type walker struct {
	entries, limit int
	deadline       time.Time
}

// credentialFiles returns the paths under root whose names are in
// credentialNames, and the unix sockets below it: a read-only mount does
// not stop a connection, and whatever listens there (a tmux server, an
// editor's server, an ssh agent in the user's runtime directory) may act
// outside the box, or use the user's keys. A socket that is root itself
// was named to be exposed (a database's). Unreadable directories are
// skipped: the sandboxed process, the same user, cannot read them either.
func (w *walker) credentialFiles(root string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && path != root {
				return fs.SkipDir
			}
			return nil
		}
		w.entries++
		if w.entries > w.limit || (w.entries%256 == 0 && time.Now().After(w.deadline)) {
			return errWalkBound
		}
		if credentialNames[d.Name()] || (d.Type()&fs.ModeSocket != 0 && path != root) {
			found = append(found, path)
		}
		return nil
	})
	return found, err
}
