package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/policy"
)

// CacheDir is cordon's cache directory (its kept trust bundles and probe
// results), in the user's cache directory ($XDG_CACHE_HOME, as
// os.UserCacheDir has it, but under homedir.Dir's home: a relative
// $HOME, which os.UserCacheDir takes as it is, would put the cache in
// whatever directory cordon starts in, the repository's, where the box
// writes records that later runs act on); "" when there is none. A
// relative $XDG_CACHE_HOME is ignored, as the XDG specification says
// and as cordon ignores a relative $XDG_CONFIG_HOME or $XDG_STATE_HOME:
// it used to leave cordon with no cache directory, and cordon proxy
// then asked for $XDG_CACHE_HOME to be set, which it was.
func CacheDir() string {
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) && runtime.GOOS != "darwin" {
		return filepath.Join(x, "cordon")
	}
	home, err := homedir.Dir()
	if err != nil {
		return ""
	}
	return DefaultCacheDir(home)
}

// DefaultCacheDir is CacheDir as it is with home for $HOME and no
// $XDG_CACHE_HOME: a place under the home directory (OwnHome, or macOS's
// Library/Caches) that every run's guard keeps from its box, whatever
// that run's environment.
func DefaultCacheDir(home string) string {
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Caches", "cordon")
	}
	return filepath.Join(home, ".cache", "cordon")
}

// OwnHome lists, relative to the home directory, cordon's own
// directories at their default places: its configuration and CA, its
// data, its state (the audit log) and its cache (the records later runs
// act on). A run whose environment puts its own elsewhere
// ($XDG_CONFIG_HOME, $XDG_STATE_HOME, $XDG_CACHE_HOME) keeps these from
// its box all the same: the runs from a shell without those variables
// use them.
var OwnHome = []string{
	".config/cordon",
	".local/share/cordon",
	".local/state/cordon",
	".cache/cordon",
}

// ProtectedHome lists, relative to the home directory, the stores no
// policy may open to a command on any platform: keys, cloud and cluster
// credentials, cordon's own directories (OwnHome), the desktop's
// keyrings, and browsers' profiles (session cookies and saved logins,
// which no toolchain reads). Backends add their platform's own (the
// macOS login keychain).
var ProtectedHome = slices.Concat([]string{
	".ssh",
	".gnupg",
	".aws",
	".kube",
	".docker",
	".config/gh",
}, OwnHome, []string{
	".local/share/keyrings",
	".local/share/kwalletd",
	".mozilla",
	".thunderbird",
	".config/google-chrome",
	".config/chromium",
	".config/BraveSoftware",
	".config/microsoft-edge",
	".config/vivaldi",
})

// CredentialFiles are the names of files that hold a tool's credentials
// (cargo's, npm's, netrc, PyPI's, git's store, the cloud CLIs'
// "credentials"): inside an exposed tree, a backend keeps every file so
// named from the command (Linux shows it empty, macOS denies it).
var CredentialFiles = []string{
	"credentials.toml",
	"credentials",
	".npmrc",
	".netrc",
	".pypirc",
	".git-credentials",
}

// AuditDirs are the directories a command must not reach for the audit
// log at path to be safe from it: the one it is named in and, when the log
// is a symlink, the one it is written in (whether or not the file is there
// yet). A relative path is taken from the working directory, where the
// log is opened. The directories are found as the kernel finds them when
// it opens the log (Resolve: one name at a time, links followed, on the
// path as written), not from the path cleaned as text: in
// /x/link/../audit.jsonl the ".." leaves the link's target, not /x, and
// the log is written there. The directory the cleaned path names is
// listed first all the same (a backend hides it too, and resolves it
// further).
func AuditDirs(path string) []string {
	raw := path
	if !filepath.IsAbs(raw) {
		wd, err := os.Getwd()
		if err != nil {
			return []string{filepath.Dir(filepath.Clean(raw))}
		}
		raw = wd + "/" + raw
	}
	dirs := []string{filepath.Dir(filepath.Clean(raw))}
	var names Resolver // the two below resolve the same directories
	add := func(d string) {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	// Where the log's own name is: its parent as the kernel resolves it.
	if i := strings.LastIndex(raw, "/"); i >= 0 {
		switch name := raw[i+1:]; name {
		case "", ".", "..":
			// Names a directory, which no log can be opened as.
		default:
			add(resolvedPrefix(&names, raw[:i+1]))
		}
	}
	// Where it is written: the end of its links (the kernel's bound of
	// 40 applies), whether or not the file is there yet.
	add(filepath.Dir(resolvedPrefix(&names, raw)))
	return dirs
}

// CheckAuditOpened refuses an audit log opened (at real, where the kernel
// says the open file is; "" when it does not say) somewhere other than in
// the directories judged for it (AuditDirs(path)): those are the ones kept
// out of every box's reach, and a log elsewhere could be one a box reads
// and rewrites.
func CheckAuditOpened(path, real string) error {
	if real == "" {
		return nil
	}
	dir := filepath.Dir(real)
	dirs := AuditDirs(path)
	if slices.Contains(dirs, dir) {
		return nil
	}
	return fmt.Errorf("the audit log %s was opened in %s, not where cordon judged it would be (%s), so the directory that holds it may be within the command's reach: nothing was written to it; point --audit or CORDON_AUDIT at a path with no links and no \"..\" in it, outside the workspace", path, dir, strings.Join(dirs, ", "))
}

// Within reports whether p is dir or lies below it (policy.Within).
func Within(p, dir string) bool { return policy.Within(p, dir) }
