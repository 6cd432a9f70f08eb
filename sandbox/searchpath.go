package sandbox

import (
	"os"
	"path/filepath"
)

// SearchPath finds name in the absolute entries of path (a PATH value): the
// first regular file there with an execute bit, or "" when there is none.
func SearchPath(path, name string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
