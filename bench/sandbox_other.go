//go:build !linux

package main

import (
	"fmt"
	"io"
)

// sandboxSection explains that the restricted sandbox is measured on Linux
// only (bwrap and its own network namespace).
func sandboxSection(w io.Writer, _ string, _ settings, _ io.Writer) {
	fmt.Fprintf(w, "\n## Clients inside the restricted sandbox\n\nMeasured on Linux only: the restricted network there is a network namespace of the box's own, with nftables, around bubblewrap.\n")
}
