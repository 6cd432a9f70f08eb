package sandbox

import (
	"os"
	"path/filepath"
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
