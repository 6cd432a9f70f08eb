//go:build !linux

package main

import (
	"fmt"
	"io"
)

// cordonRunSection explains that start-up timings need Linux (bwrap).
func cordonRunSection(w io.Writer, _ string, _ int, _ io.Writer) {
	fmt.Fprintf(w, "\n## cordon run start-up\n\nMeasured on Linux only: the comparison is against bare bubblewrap.\n")
}
