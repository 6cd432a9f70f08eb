package main

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// newTestEnv starts the origin and every path.
func newTestEnv(tb testing.TB, bulkSize int64) *env {
	tb.Helper()
	e, err := newEnv(tb.Context(), tb.TempDir(), bulkSize, true)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	return e
}

// TestMeasureEveryPath runs one short round and wants a number in every
// cell that applies, then the report's tables with a judged target.
func TestMeasureEveryPath(t *testing.T) {
	e := newTestEnv(t, 1<<20)
	res := measure(e, 1, 50*time.Millisecond, t.Output())
	for _, p := range e.paths {
		for _, f := range figures {
			c := res.at(p.name, f.name)
			wantSkip := f.name == fH2 && !p.h2
			switch {
			case c.skip != wantSkip:
				t.Errorf("%s / %s: skip = %v, want %v", p.name, f.name, c.skip, wantSkip)
			case c.err != nil:
				t.Errorf("%s / %s: %v", p.name, f.name, c.err)
			case !c.skip && (len(c.samples) != 1 || c.samples[0] <= 0):
				t.Errorf("%s / %s: samples %v, want one positive", p.name, f.name, c.samples)
			}
		}
	}
	var b bytes.Buffer
	proxyTables(&b, e, res)
	for _, want := range []string{"| " + pCordonMITM + " | ", "| " + pCordonTunnel + " / " + pGoproxyTunnel + " | ", "≥ 0.9"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestFormatRatio(t *testing.T) {
	for _, tc := range []struct {
		name     string
		num, den cell
		target   float64
		atMost   bool
		want     string
	}{
		{"met", cell{samples: []float64{90, 95, 100}}, cell{samples: []float64{100, 100, 100}}, 0.9, false, "0.95 [0.90–1.00] ≥ 0.9 met"},
		{"paired by round", cell{samples: []float64{50, 100, 200}}, cell{samples: []float64{50, 100, 250}}, 0.9, false, "1.00 [0.80–1.00] ≥ 0.9 met"},
		{"missed", cell{samples: []float64{40, 50}}, cell{samples: []float64{100, 100}}, 0.8, false, "**0.45** [0.40–0.50] ≥ 0.8 **MISSED**"},
		{"no target", cell{samples: []float64{300}}, cell{samples: []float64{100}}, 0, false, "3.00 [3.00–3.00]"},
		{"failed", cell{err: errors.New("refused")}, cell{samples: []float64{100}}, 0.5, false, "no figure (≥ 0.5 not judged)"},
		{"skipped", cell{skip: true}, cell{samples: []float64{100}}, 0.5, false, "n/a"},
		{"at most, met", cell{samples: []float64{40, 45, 60}}, cell{samples: []float64{20, 25, 20}}, 2, true, "2.00 [1.80–3.00] ≤ 2.0 met"},
		{"at most, missed", cell{samples: []float64{50, 45}}, cell{samples: []float64{20, 20}}, 2, true, "**2.38** [2.25–2.50] ≤ 2.0 **MISSED**"},
		{"at most, failed", cell{samples: []float64{50}}, cell{err: errors.New("no bwrap")}, 2, true, "no figure (≤ 2.0 not judged)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := formatRatio(&tc.num, &tc.den, tc.target)
			if tc.atMost {
				got = formatRatioAtMost(&tc.num, &tc.den, tc.target)
			}
			if got != tc.want {
				t.Errorf("formatRatio = %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkPaths runs every figure's operation on every path: go test
// ./bench -bench 'Paths/cordon_MITM/keep' -cpuprofile cpu.out profiles one.
func BenchmarkPaths(b *testing.B) {
	e := newTestEnv(b, 16<<20)
	for _, p := range e.paths {
		for _, f := range figures {
			op := f.op(e.origin.BulkSize, p)
			if op == nil {
				continue
			}
			b.Run(p.name+"/"+f.name, func(b *testing.B) {
				if f.name == fBulk {
					b.SetBytes(e.origin.BulkSize)
				}
				if f.workers == 1 {
					for b.Loop() {
						if err := op(); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism((f.workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := op(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
