package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// wideWorkers is how many goroutines the parallel figure runs.
const wideWorkers = 32

// figure is one column of the table: an operation repeated on a path, and
// how a rate of operations becomes the reported number.
type figure struct {
	name string
	unit string
	// workers run op concurrently.
	workers int
	// maxOps bounds one measurement in count (time bounds it too).
	maxOps int
	// perOp converts operations per second into the unit, for a /bulk of
	// bulkSize bytes.
	perOp func(bulkSize int64) float64
	// op is one operation on p, whose /bulk is bulkSize bytes, or nil where
	// the figure does not apply.
	op func(bulkSize int64, p *path) func() error
}

// The figures, by column.
const (
	fKeep  = "keep-alive"
	fFresh = "new conn"
	fBulk  = "bulk"
	fWide  = "32-way"
	fH2    = "h2 keep-alive"
)

var figures = []figure{
	{name: fKeep, unit: "req/s", workers: 1, maxOps: 50000, perOp: one,
		op: func(_ int64, p *path) func() error { return getSmall(p.keep, p.url, 1) }},
	{name: fFresh, unit: "req/s", workers: 1, maxOps: 20000, perOp: one,
		op: func(_ int64, p *path) func() error { return getSmall(p.fresh, p.url, 1) }},
	{name: fBulk, unit: "MiB/s", workers: 1, maxOps: 4,
		perOp: func(bulkSize int64) float64 { return float64(bulkSize) / (1 << 20) },
		op: func(bulkSize int64, p *path) func() error {
			return func() error { return getBulk(p.keep, p.url, bulkSize) }
		}},
	{name: fWide, unit: "req/s", workers: wideWorkers, maxOps: 200000, perOp: one,
		op: func(_ int64, p *path) func() error { return getSmall(p.wide, p.url, 1) }},
	{name: fH2, unit: "req/s", workers: 1, maxOps: 50000, perOp: one,
		op: func(_ int64, p *path) func() error {
			if !p.h2 {
				return nil
			}
			return getSmall(p.h2c, p.url, 2)
		}},
}

func one(int64) float64 { return 1 }

// getSmall returns an operation that GETs /small and checks the status,
// the body and the protocol major version.
func getSmall(c *http.Client, base string, major int) func() error {
	u := base + "/small"
	return func() error {
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return fmt.Errorf("read /small: %w", err)
		}
		if err := checkResponse(resp, major); err != nil {
			return err
		}
		if n != int64(len(smallBody)) {
			return fmt.Errorf("/small: %d bytes, want %d", n, len(smallBody))
		}
		return nil
	}
}

// getBulk downloads /bulk and checks its length.
func getBulk(c *http.Client, base string, size int64) error {
	resp, err := c.Get(base + "/bulk")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := checkResponse(resp, 1); err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read /bulk after %d bytes: %w", n, err)
		}
	}
	if n != size {
		return fmt.Errorf("/bulk: %d bytes, want %d", n, size)
	}
	return nil
}

// checkResponse wants a 200 over the expected HTTP major version; a
// refusal's reason and first line are the error.
func checkResponse(resp *http.Response, major int) error {
	if resp.StatusCode != http.StatusOK {
		line, _ := bufio.NewReader(io.LimitReader(resp.Body, 512)).ReadString('\n')
		return fmt.Errorf("status %s (X-Cordon-Reason %q): %s", resp.Status, resp.Header.Get("X-Cordon-Reason"), line)
	}
	if resp.ProtoMajor != major {
		return fmt.Errorf("%s negotiated, not HTTP/%d", resp.Proto, major)
	}
	return nil
}

// loop runs op on workers goroutines until maxOps succeeded or d passed
// (every worker finishes the operation it started), and returns successful
// operations per second. The first error stops it.
func loop(workers, maxOps int, d time.Duration, op func() error) (float64, error) {
	var tickets, ok atomic.Int64
	var stop atomic.Bool
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range workers {
		wg.Go(func() {
			for !stop.Load() && time.Now().Before(deadline) && tickets.Add(1) <= int64(maxOps) {
				if err := op(); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(ok.Load()) / time.Since(start).Seconds(), nil
}

// cell is one figure on one path over all rounds.
type cell struct {
	samples []float64
	err     error
	// skip marks a figure that does not apply to the path.
	skip bool
	// unavailable says why the path could not be measured at all.
	unavailable string
}

// median of the samples; zero if there are none.
func (c *cell) median() float64 { return median(c.samples) }

// median of xs; zero if there are none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// results holds every cell, by path name and figure name.
type results map[string]map[string]*cell

func (r results) at(pathName, fig string) *cell {
	m := r[pathName]
	if m == nil {
		m = map[string]*cell{}
		r[pathName] = m
	}
	c := m[fig]
	if c == nil {
		c = &cell{}
		m[fig] = c
	}
	return c
}

// measure warms every path up, then runs rounds of every figure on every
// path in turn, in table order in even rounds and backwards in odd ones,
// so no path always runs first or last and neighbours in the table (the
// pairs the ratios compare) always run one after the other. A path whose
// figure failed once is not measured again on that figure.
func measure(e *env, rounds int, d time.Duration, progress io.Writer) results {
	res := results{}
	for _, p := range e.paths {
		for _, f := range figures {
			c := res.at(p.name, f.name)
			op := f.op(e.origin.BulkSize, p)
			if op == nil {
				c.skip = true
				continue
			}
			if _, err := loop(f.workers, max(f.workers*2, 4), d/4, op); err != nil {
				c.err = fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for round := range rounds {
		fmt.Fprintf(progress, "bench: round %d/%d\n", round+1, rounds)
		for _, f := range figures {
			for i := range e.paths {
				p := e.paths[i]
				if round%2 == 1 {
					p = e.paths[len(e.paths)-1-i]
				}
				c := res.at(p.name, f.name)
				if c.skip || c.err != nil {
					continue
				}
				rate, err := loop(f.workers, f.maxOps, d, f.op(e.origin.BulkSize, p))
				if err != nil {
					c.err = err
					continue
				}
				c.samples = append(c.samples, rate*f.perOp(e.origin.BulkSize))
			}
		}
	}
	return res
}
