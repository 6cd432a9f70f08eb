package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ratio compares one path with another on every figure; a target, where
// set, is the least acceptable value.
type ratio struct {
	num, den string
	targets  map[string]float64
}

// ratios are the comparisons the report judges.
var ratios = []ratio{
	{pCordonTunnel, pGoproxyTunnel, map[string]float64{fKeep: 0.9, fFresh: 0.9, fBulk: 0.9, fWide: 0.9, fH2: 0.9}},
	{pCordonMITM, pCordonTunnel, map[string]float64{fKeep: 0.8, fFresh: 0.5, fBulk: 0.8}},
	{pTLSRelay, pCordonTunnel, nil},
	{pCordonMITM, pTLSRelay, nil},
	{pCordonMITM, pGoproxyMITM, nil},
	{pCordonPlain, pGoproxyPlain, nil},
}

// settings are the knobs a report states.
type settings struct {
	rounds   int
	dur      time.Duration
	bulkSize int64
	originH2 bool
	runs     int
}

// header describes the machine and the run.
func header(w io.Writer, s settings) {
	fmt.Fprintf(w, "# cordon benchmark results\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- machine: %d CPUs (GOMAXPROCS %d), %s, kernel %s, %s/%s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), kernel(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- Go: %s\n", runtime.Version())
	if rev := firstLine(commandOutput("git", "describe", "--always", "--dirty")); rev != "" {
		fmt.Fprintf(w, "- cordon: %s\n", rev)
	}
	fmt.Fprintf(w, "- method: every path is measured in turn in each of %d rounds (in table order, then backwards, alternately), after a warm-up; each measurement stops after %s or its request cap, whichever comes first; a cell is the median over rounds, with the lowest and highest round in brackets. bulk downloads a %d MiB body up to 4 times per measurement. The HTTPS origin offers %s.\n",
		s.rounds, s.dur, s.bulkSize>>20, map[bool]string{true: "h2 and HTTP/1.1", false: "HTTP/1.1 only (-origin-h2=false)"}[s.originH2])
	fmt.Fprintf(w, "\nAll figures in a table were measured in this one run, on this machine, with client, proxies and origin sharing one process and its cores. Absolute numbers move with the machine and its load; the ratios are the meaningful part.\n")
}

// proxyTables writes the figures per path, then the ratios.
func proxyTables(w io.Writer, e *env, res results) {
	fmt.Fprintf(w, "\n## Proxy paths\n\n")
	fmt.Fprintf(w, "Origin: Go net/http on 127.0.0.1, HTTPS with a throwaway CA, and plain HTTP. Clients speak HTTP/1.1 except in the h2 column. keep-alive: one connection, sequential small GETs. new conn: a new TCP (+ CONNECT) + TLS connection per request. 32-way: 32 goroutines over up to 32 keep-alive connections.\n\n")
	names := make([]string, len(e.paths))
	for i, p := range e.paths {
		names[i] = p.name
	}
	figureTable(w, "path", names, figureNames(), res)
	fmt.Fprintf(w, "\nPaths: direct = client to origin. goproxy tunnel = goproxy v1.9.3 defaults, opaque CONNECT, no auth. cordon tunnel = session.StartProxy with terminate none (token auth, allowlist, guarded dial, audit lines). cordon MITM = terminate all, ephemeral CA, per-request authority check and audit lines, verified upstream TLS. goproxy MITM = AlwaysMitm with its built-in CA (an RSA leaf signed per CONNECT, no cache), Tr trusting the origin's CA; it offers clients HTTP/1.1 only (AllowHTTP2 is off by default), hence no h2 figure. Upstream, cordon MITM speaks the client's protocol (HTTP/1.1 for the HTTP/1.1 columns, h2 for the h2 column, with an origin that offers it), goproxy MITM always HTTP/1.1. TLS relay = the least any TLS-terminating proxy does, for comparison: it answers CONNECT, ends the client's TLS with the origin's own certificate (no leaf minted), opens TLS to the origin and copies the bytes both ways through crypto/tls, parsing, checking and logging nothing; HTTP/1.1 only. The (http) rows are absolute-form plain HTTP through the same proxies.\n")

	fmt.Fprintf(w, "\n### Ratios\n\n")
	ratioTable(w, ratios, figureNames(), res)
	fmt.Fprintf(w, "\nEach ratio is the median over rounds of the two paths' figures from the same round, with the lowest and highest round in brackets. A target reads \"≥ T met\" or \"≥ T **MISSED**\"; ratios without a target are for information.\n")
}

// figureNames are the names of all figures, in column order.
func figureNames() []string {
	names := make([]string, len(figures))
	for i, f := range figures {
		names[i] = f.name
	}
	return names
}

// figureTable writes a table with one row per name (first heads that
// column) and one column per figure in figs: each cell's median and range.
func figureTable(w io.Writer, first string, names, figs []string, res results) {
	cols := []string{first}
	for _, name := range figs {
		f, _ := figureNamed(name)
		cols = append(cols, fmt.Sprintf("%s %s", f.name, f.unit))
	}
	row(w, cols...)
	row(w, separator(len(cols))...)
	for _, n := range names {
		cells := []string{n}
		for _, f := range figs {
			cells = append(cells, formatCell(res.at(n, f)))
		}
		row(w, cells...)
	}
}

// ratioTable writes one row per ratio and one column per figure in figs.
func ratioTable(w io.Writer, rs []ratio, figs []string, res results) {
	row(w, append([]string{"ratio"}, figs...)...)
	row(w, separator(len(figs)+1)...)
	for _, r := range rs {
		cells := []string{r.num + " / " + r.den}
		for _, f := range figs {
			cells = append(cells, formatRatio(res.at(r.num, f), res.at(r.den, f), r.targets[f]))
		}
		row(w, cells...)
	}
}

// row writes one table row, escaping pipes inside cells.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// separator is a table's header rule for n columns.
func separator(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "---"
	}
	return out
}

// formatCell is the median with its range, or why there is no number.
func formatCell(c *cell) string {
	switch {
	case c.skip:
		return "n/a"
	case c.unavailable != "":
		return "not available: " + clip(c.unavailable, 160)
	case c.err != nil:
		return "error: " + clip(firstLine(c.err.Error()), 100)
	case len(c.samples) == 0:
		return "no samples"
	}
	lo, hi := c.samples[0], c.samples[0]
	for _, s := range c.samples {
		lo, hi = min(lo, s), max(hi, s)
	}
	return fmt.Sprintf("%s (%s–%s)", number(c.median()), number(lo), number(hi))
}

// formatRatio is the median over rounds of num/den measured in the same
// round (the two paths ran close together, so load that drifts between
// rounds cancels), with its range, judged against target: at least it,
// when target is not zero.
func formatRatio(num, den *cell, target float64) string {
	return formatJudged(num, den, target, false)
}

// formatRatioAtMost is formatRatio for a ratio that must stay at most
// limit.
func formatRatioAtMost(num, den *cell, limit float64) string {
	return formatJudged(num, den, limit, true)
}

func formatJudged(num, den *cell, target float64, atMost bool) string {
	if num.skip || den.skip {
		return "n/a"
	}
	sign := "≥"
	if atMost {
		sign = "≤"
	}
	var qs []float64
	if num.err == nil && den.err == nil {
		for i := range min(len(num.samples), len(den.samples)) {
			if den.samples[i] > 0 {
				qs = append(qs, num.samples[i]/den.samples[i])
			}
		}
	}
	if len(qs) == 0 {
		if target > 0 {
			return fmt.Sprintf("no figure (%s %.1f not judged)", sign, target)
		}
		return "no figure"
	}
	q := median(qs)
	spread := fmt.Sprintf("[%.2f–%.2f]", slices.Min(qs), slices.Max(qs))
	switch {
	case target == 0:
		return fmt.Sprintf("%.2f %s", q, spread)
	case atMost && q <= target, !atMost && q >= target:
		return fmt.Sprintf("%.2f %s %s %.1f met", q, spread, sign, target)
	default:
		return fmt.Sprintf("**%.2f** %s %s %.1f **MISSED**", q, spread, sign, target)
	}
}

// number prints a figure with sensible precision.
func number(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		if m := firstLine(commandOutput("sysctl", "-n", "machdep.cpu.brand_string")); m != "" {
			return m
		}
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernel() string {
	if k := firstLine(commandOutput("uname", "-sr")); k != "" {
		return k
	}
	return "unknown"
}

// commandOutput is a command's stdout, or "" if it failed.
func commandOutput(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// firstLine is the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
