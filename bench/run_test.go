//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRunRatios(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x*float64(time.Millisecond)))
		}
		return d
	}
	bwrap := &launch{name: "bwrap", walls: ms(20, 22, 21)}
	off := &launch{name: "off", walls: ms(44, 40, 50)}
	restricted := &launch{name: "restricted", walls: ms(80, 70, 75)}
	floor := &launch{name: "floor", walls: ms(30, 33, 31)}
	var b bytes.Buffer
	runRatios(&b, bwrap, floor, off, restricted)
	for _, want := range []string{
		"| floor | 1.50 [1.48–1.50] |",
		"| off | **2.20** [1.82–2.38] ≤ 2.0 **MISSED** |",
		"| restricted | 3.57 [3.18–4.00] |",
		"restricted, median wall time: **75.0 ms** ≤ 40 **MISSED**.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}

	fast := &launch{name: "restricted", walls: ms(30, 35)}
	none := &launch{name: "off", unavailable: "no cordon binary"}
	b.Reset()
	noFloor := &launch{name: "floor", unavailable: "no go command"}
	runRatios(&b, bwrap, noFloor, none, fast)
	for _, want := range []string{"| floor | no figure |", "| off | no figure (≤ 2.0 not judged) |", "restricted, median wall time: 32.5 ms ≤ 40 met."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
