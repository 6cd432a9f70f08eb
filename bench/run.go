//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// launch is one command line timed several times.
type launch struct {
	// name is how the report shows the command.
	name string
	argv []string
	// walls and rss hold one wall time and one peak RSS (bytes) per run.
	walls []time.Duration
	rss   []int64
	// unavailable says why the command could not be timed.
	unavailable string
}

// runTable writes the cordon run section's table.
func runTable(w io.Writer, ls []*launch) {
	row(w, "command", "runs", "median wall ms", "wall ms range", "peak RSS MiB median (max)")
	row(w, separator(5)...)
	for _, l := range ls {
		if l.unavailable != "" {
			row(w, l.name, "0", "not available: "+clip(l.unavailable, 160), "", "")
			continue
		}
		var ms, mib []float64
		for i := range l.walls {
			ms = append(ms, float64(l.walls[i].Microseconds())/1000)
			mib = append(mib, float64(l.rss[i])/(1<<20))
		}
		row(w, l.name, fmt.Sprint(len(ms)), fmt.Sprintf("%.1f", median(ms)),
			fmt.Sprintf("%.1f–%.1f", slices.Min(ms), slices.Max(ms)),
			fmt.Sprintf("%.1f (%.1f)", median(mib), slices.Max(mib)))
	}
}
