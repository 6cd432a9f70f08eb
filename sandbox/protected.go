package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// CacheDir is cordon's cache directory (its kept trust bundles and probe
// results), in the user's cache directory; "" when there is none.
func CacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "cordon")
}

// ProtectedHome lists, relative to the home directory, the stores no
// policy may open to a command on any platform: keys, cloud and cluster
// credentials, and cordon's own configuration, CA, state and cache (whose
// kept trust bundles sandboxes are given to trust). Backends add
// their platform's own (the macOS login keychain).
var ProtectedHome = []string{
	".ssh",
	".gnupg",
	".aws",
	".kube",
	".docker",
	".config/gh",
	".config/cordon",
	".local/share/cordon",
	".cache/cordon",
	".local/share/keyrings",
}

// AuditDirs are the directories a command must not reach for the audit
// log at path to be safe from it: the one it is named in and, when the log
// is a symlink, the one it is written in (whether or not the file is there
// yet). Each is as written (a relative path taken from the working
// directory, where the log is opened); a backend resolves them further.
func AuditDirs(path string) []string {
	stated := filepath.Clean(path)
	if abs, err := filepath.Abs(stated); err == nil {
		stated = abs
	}
	dirs := []string{filepath.Dir(stated)}
	if real := filepath.Dir(finalTarget(stated)); real != dirs[0] {
		dirs = append(dirs, real)
	}
	return dirs
}

// finalTarget follows path while it is a symlink (at most 40 times, as
// the kernel does) and returns where it ends, which need not exist.
func finalTarget(path string) string {
	for range 40 {
		target, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = filepath.Clean(target)
	}
	return path
}

// Within reports whether p is dir or lies below it; both are absolute and
// clean.
func Within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
