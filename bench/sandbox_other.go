//go:build !linux

package main

import (
	"fmt"
	"io"
)

// sandboxSection explains that the restricted sandbox is measured on Linux
// only (bwrap and slirp4netns).
func sandboxSection(w io.Writer, _ string, _ settings, _ io.Writer) {
	fmt.Fprintf(w, "\n## Clients inside the restricted sandbox\n\nMeasured on Linux only: the restricted network there is slirp4netns and nftables around bubblewrap.\n")
}
