//go:build darwin

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/darwin"
	"github.com/cordon-sandbox/cordon/session"
)

// targetBackend returns the backend --target names, for --dry-run; the
// Linux launch can only be planned on Linux.
func targetBackend(target, auditPath string) (sandbox.Backend, error) {
	switch target {
	case "", "darwin":
		return darwin.New(auditPath), nil
	}
	return nil, fmt.Errorf("--target %q: this build renders darwin only (run the dry run on Linux for the bwrap launch)", target)
}

// newBackend returns this platform's sandbox, guarding auditPath.
func newBackend(auditPath string) sandbox.Backend { return darwin.New(auditPath) }

// sandboxInside is where a Seatbelt sandbox finds cordon's pieces: the
// proxy on the loopback, the bundle where the session wrote it, no DNS
// capture.
var sandboxInside = session.Inside{ProxyHost: "127.0.0.1", Cordon: "cordon"}

// prepareRun gives a Seatbelt run its per-session TMPDIR (with HOME inside
// it): macOS has no private mounts, so the run's scratch space is a host
// directory of its own, removed afterwards, and held until then
// (sandbox.HoldDir): a killed run's is swept by a later session.
func prepareRun(s *sandbox.Spec) (func(), error) {
	dir, unhold, err := sandbox.MkdirHeld("", sandbox.ScratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("per-session TMPDIR: %w", err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		os.RemoveAll(dir)
		unhold()
		return nil, fmt.Errorf("per-session HOME: %w", err)
	}
	s.Env = append(s.Env, "TMPDIR="+dir, "HOME="+home)
	return func() { os.RemoveAll(dir); unhold() }, nil
}
