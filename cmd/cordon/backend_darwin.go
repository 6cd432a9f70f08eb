//go:build darwin

package main

import (
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/darwin"
)

// newBackend returns this platform's sandbox.
func newBackend(string) sandbox.Backend { return darwin.New() }
