//go:build linux

package main

import (
	"errors"
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

// cell is l's wall times in milliseconds, one sample per run.
func (l *launch) cell() *cell {
	if l.unavailable != "" {
		return &cell{err: errors.New(l.unavailable)}
	}
	c := &cell{}
	for _, d := range l.walls {
		c.samples = append(c.samples, float64(d.Microseconds())/1000)
	}
	return c
}

// Targets of the cordon run section: --net off at most twice bare bwrap,
// restricted at most 40 ms.
const (
	maxOffOverBwrap = 2
	maxRestrictedMS = 40
)

// runRatios writes the floor's and each cordon run's wall time over bare
// bwrap's from the same round, and restricted's median against its
// target.
func runRatios(w io.Writer, bwrap, floor, off, restricted *launch) {
	fmt.Fprintf(w, "\n")
	row(w, "ratio to bare bwrap, same round", "median [range]")
	row(w, separator(2)...)
	row(w, floor.name, formatRatio(floor.cell(), bwrap.cell(), 0))
	row(w, off.name, formatRatioAtMost(off.cell(), bwrap.cell(), maxOffOverBwrap))
	row(w, restricted.name, formatRatio(restricted.cell(), bwrap.cell(), 0))
	verdict := "no figure"
	if c := restricted.cell(); len(c.samples) > 0 {
		verdict = fmt.Sprintf("%.1f ms ≤ %d met", c.median(), maxRestrictedMS)
		if c.median() > maxRestrictedMS {
			verdict = fmt.Sprintf("**%.1f ms** ≤ %d **MISSED**", c.median(), maxRestrictedMS)
		}
	}
	fmt.Fprintf(w, "\n%s, median wall time: %s.\n", restricted.name, verdict)
}
