//go:build linux

package main

import (
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/linux"
)

// newBackend returns this platform's sandbox, guarding auditPath.
func newBackend(auditPath string) sandbox.Backend {
	return linux.New(linux.Options{AuditPath: auditPath})
}
