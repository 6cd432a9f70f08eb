//go:build linux

package main

import (
	"context"
	"fmt"

	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/darwin"
	"github.com/cordon-sandbox/cordon/sandbox/linux"
	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
	"github.com/cordon-sandbox/cordon/session"
)

// targetBackend returns the backend --target names, for --dry-run: this
// platform's, or the macOS profile rendered from here.
func targetBackend(target, auditPath string) (sandbox.Backend, error) {
	switch target {
	case "", "linux":
		return newBackend(auditPath), nil
	case "darwin":
		return darwin.New(auditPath), nil
	}
	return nil, fmt.Errorf("--target %q: use linux or darwin", target)
}

// newBackend returns this platform's sandbox, guarding auditPath.
func newBackend(auditPath string) sandbox.Backend {
	r := &linux.Restricted{}
	b := linux.New(linux.Options{AuditPath: auditPath, Holder: r})
	r.Probe = func(ctx context.Context) error { return session.ProbeRestricted(ctx, b, sandboxInside) }
	return b
}

// sandboxInside is where a restricted Linux sandbox finds cordon's pieces:
// the proxy and the resolver on its own network's gateway, files under
// bwrap's /run.
var sandboxInside = session.Inside{
	ProxyHost:     holder.Gateway.String(),
	ProxyPort:     holder.ProxyPort,
	OwnNetwork:    true,
	Bundle:        "/run/cordon/ca-bundle.pem",
	Cordon:        "/run/cordon/cordon",
	SystemBundles: []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"},
	Resolver:      holder.Gateway.String(),
}

// prepareRun has nothing to do on Linux: bwrap gives every run a private
// /tmp and HOME.
func prepareRun(*sandbox.Spec) (func(), error) { return func() {}, nil }
