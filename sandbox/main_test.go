package sandbox

import (
	"os"
	"testing"
)

// TestMain keeps the tests' records (owed aftercare, what was set aside)
// out of the user's own cache directory: a test that looks at them sets
// XDG_CACHE_HOME itself.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cordon-sandbox-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
