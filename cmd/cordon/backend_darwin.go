//go:build darwin

package main

import (
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/darwin"
	"github.com/cordon-sandbox/cordon/session"
)

// newBackend returns this platform's sandbox.
func newBackend(string) sandbox.Backend { return darwin.New() }

// sandboxInside is where a Seatbelt sandbox finds cordon's pieces: the
// proxy on the loopback, the bundle where the session wrote it, no DNS
// capture.
var sandboxInside = session.Inside{ProxyHost: "127.0.0.1", Cordon: "cordon"}
