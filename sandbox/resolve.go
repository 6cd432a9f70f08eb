package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A Resolver resolves paths as the kernel would and remembers what each
// name it looked up was, so that checks made together, which resolve the
// same directories again and again (every deny_read entry under the home
// directory, say), ask the kernel once per name. Use one only where
// nothing the command does can run in between, as in the checks before a
// launch; never across a run. A nil *Resolver remembers nothing. It is
// safe for concurrent use.
type Resolver struct {
	mu    sync.Mutex
	names map[string]name
	// paths are whole walks (Resolve), by the path walked: the checks
	// before a launch resolve each deny_read entry several times.
	paths map[string]walk
}

// walk is what Resolve found for a path: its result, and the links it
// crossed on the way, in order.
type walk struct {
	real  string
	whole bool
	links []string
}

// name is what lstat(2), and readlink(2) for a link, said of a path.
type name struct {
	info fs.FileInfo
	err  error
	// target is a link's target; linkErr says why it could not be read.
	target  string
	linkErr error
}

// lookup is what p is, from memory when r has looked it up before.
func (r *Resolver) lookup(p string) name {
	if r != nil {
		r.mu.Lock()
		n, ok := r.names[p]
		r.mu.Unlock()
		if ok {
			return n
		}
	}
	var n name
	n.info, n.err = os.Lstat(p)
	if n.err == nil && n.info.Mode()&fs.ModeSymlink != 0 {
		n.target, n.linkErr = os.Readlink(p)
	}
	if r != nil {
		r.mu.Lock()
		if r.names == nil {
			r.names = map[string]name{}
		}
		r.names[p] = n
		r.mu.Unlock()
	}
	return n
}

// Lstat is os.Lstat(p), remembered.
func (r *Resolver) Lstat(p string) (fs.FileInfo, error) {
	n := r.lookup(p)
	return n.info, n.err
}

// Resolve resolves p (absolute, clean) one name at a time, as the kernel
// would, every link followed (dangling ones too), calling link, when not
// nil, with each symbolic link's path before following it: its error
// stops the walk. whole says every name resolved; if not, the names past
// the first that does not (or a link that cannot be followed) are kept as
// they are.
func (r *Resolver) Resolve(p string, link func(path string) error) (real string, whole bool, err error) {
	if r != nil {
		r.mu.Lock()
		w, ok := r.paths[p]
		r.mu.Unlock()
		if ok {
			if link != nil {
				for _, l := range w.links {
					if err := link(l); err != nil {
						return "", false, err
					}
				}
			}
			return w.real, w.whole, nil
		}
	}
	var w walk
	w.real, w.whole, err = r.walk(p, func(l string) error {
		w.links = append(w.links, l)
		if link != nil {
			return link(l)
		}
		return nil
	})
	if err == nil && r != nil {
		r.mu.Lock()
		if r.paths == nil {
			r.paths = map[string]walk{}
		}
		r.paths[p] = w
		r.mu.Unlock()
	}
	return w.real, w.whole, err
}

// walk is Resolve, every name looked up.
func (r *Resolver) walk(p string, link func(path string) error) (real string, whole bool, err error) {
	const maxLinks = 40 // the kernel's own bound
	cur, rest := "/", strings.Split(p, "/")
	for links := 0; len(rest) > 0; {
		elem := rest[0]
		rest = rest[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		// cur is clean and elem one name: no Join (which cleans) needed.
		next := cur + "/" + elem
		if cur == "/" {
			next = "/" + elem
		}
		n := r.lookup(next)
		if n.err != nil {
			return filepath.Join(append([]string{next}, rest...)...), false, nil
		}
		if n.info.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if err := link(next); err != nil {
			return "", false, err
		}
		if links++; n.linkErr != nil || links > maxLinks {
			return filepath.Join(append([]string{next}, rest...)...), false, nil
		}
		if filepath.IsAbs(n.target) {
			cur = "/"
		}
		rest = append(strings.Split(n.target, "/"), rest...)
	}
	return cur, true, nil
}

// EvalSymlinks is filepath.EvalSymlinks for an absolute p, remembered: p
// with every link followed, or an error when a name in it does not
// resolve.
func (r *Resolver) EvalSymlinks(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return filepath.EvalSymlinks(p)
	}
	real, whole, err := r.Resolve(filepath.Clean(p), nil)
	if err != nil {
		return "", err
	}
	if !whole {
		return "", &fs.PathError{Op: "resolve", Path: real, Err: fs.ErrNotExist}
	}
	return real, nil
}

// Resolve is Resolver.Resolve, nothing remembered.
func Resolve(p string, link func(path string) error) (real string, whole bool, err error) {
	return (*Resolver)(nil).Resolve(p, link)
}

// resolvedPrefix is p (absolute) as r resolves it, every link followed,
// the last name too; what does not resolve is kept as it is, so the end
// need not exist.
func resolvedPrefix(r *Resolver, p string) string {
	real, _, _ := r.Resolve(p, nil)
	return real
}
