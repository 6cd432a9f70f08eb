// Package homedir finds the user's home directory.
package homedir

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
)

// Dir returns $HOME when it is an absolute path, else the home directory
// the password database gives the current user. A relative $HOME names
// another directory in each one cordon starts in, a run's workspace
// among them: cordon's CA, cache and audit log, and the files a
// credential names with ~/, would lie where the box reads and writes.
func Dir() (string, error) {
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Clean(h), nil
	}
	u, err := user.Current()
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return "", errors.New("cannot find your home directory: set $HOME to an absolute path")
	}
	return filepath.Clean(u.HomeDir), nil
}
