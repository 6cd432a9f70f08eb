//go:build linux

package linux

import (
	"path/filepath"
	"testing"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// TestBwrapVersionOutsideTheWorkspace: bwrap --version, run on the host,
// runs from / with no environment, whatever cordon's working directory
// (the workspace) and environment are.
func TestBwrapVersionOutsideTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	t.Setenv("LD_LIBRARY_PATH", ":/opt/lib")
	fake := filepath.Join(t.TempDir(), "bwrap")
	writeFile(t, fake, "#!/bin/sh\n[ \"$(pwd)\" = / ] && [ -z \"${LD_LIBRARY_PATH+set}\" ] && echo 'bubblewrap 0.9.0'\n", 0o755)
	if _, c := bwrapVersion(t.Context(), fake, "fix"); c.Status != sandbox.Ready {
		t.Fatalf("bwrap --version ran in the workspace or with cordon's environment: %+v", c)
	}
}
