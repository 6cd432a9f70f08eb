// Command bench measures, side by side in one run, a local HTTPS origin
// reached directly, through a bare goproxy, through cordon's proxy as an
// opaque tunnel and terminating TLS, and through goproxy's own MITM; then
// a client inside cordon's restricted sandbox against the same client
// outside through cordon proxy; and it times cordon run against bare
// bubblewrap. It writes a Markdown report to stdout and to -out, and never
// fails on a number: it reports.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	out := flag.String("out", "", "also write the Markdown report to this file")
	rounds := flag.Int("rounds", 8, "rounds of every measurement; each cell is the median over rounds")
	dur := flag.Duration("dur", 500*time.Millisecond, "time bound of one measurement (each also has a request cap)")
	bulkMiB := flag.Int64("bulk-mib", 64, "size of the bulk download in MiB")
	originH2 := flag.Bool("origin-h2", true, "let the HTTPS origin offer HTTP/2 (cordon MITM then speaks h2 upstream for h2 clients); false leaves it HTTP/1.1 only, without the h2 column")
	runs := flag.Int("runs", 40, "timed runs of each cordon run command")
	only := flag.String("only", "", "measure one section only: proxy, sandbox or run (default: all three)")
	bin := flag.String("cordon", "bin/cordon", "cordon binary for the cordon run timings and the sandbox section; built from ./cmd/cordon if missing")
	client := flag.String("client", "", "act as the sandbox section's client instead: "+modeProxyEnv+" or "+modeTransparent+" (see runClient)")
	base := flag.String("url", "", "with -client: the origin's base URL")
	flag.Parse()
	if *rounds < 1 || *dur <= 0 || *bulkMiB < 1 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "bench: -rounds, -dur, -bulk-mib and -runs must be positive")
		os.Exit(2)
	}
	if *client != "" {
		if err := runClient(*client, *base, *dur, *bulkMiB<<20, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench -client: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *only != "" && *only != "proxy" && *only != "sandbox" && *only != "run" {
		fmt.Fprintf(os.Stderr, "bench: -only %q: want proxy, sandbox or run\n", *only)
		os.Exit(2)
	}
	want := func(section string) bool { return *only == "" || *only == section }
	s := settings{rounds: *rounds, dur: *dur, bulkSize: *bulkMiB << 20, originH2: *originH2, runs: *runs}
	var report bytes.Buffer
	header(&report, s)
	if want("proxy") {
		if err := proxySection(&report, s, os.Stderr); err != nil {
			fmt.Fprintf(&report, "\n## Proxy paths\n\nnot available: %v\n", err)
		}
	}
	if want("sandbox") {
		sandboxSection(&report, *bin, s, os.Stderr)
	}
	if want("run") {
		cordonRunSection(&report, *bin, s.runs, os.Stderr)
	}
	os.Stdout.Write(report.Bytes())
	if *out != "" {
		if err := os.WriteFile(*out, report.Bytes(), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: write %s: %v\n", *out, err)
			os.Exit(1)
		}
	}
}

// proxySection sets the paths up, measures them and writes their tables.
func proxySection(w io.Writer, s settings, progress io.Writer) error {
	dir, err := os.MkdirTemp("", "cordon-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := newEnv(ctx, dir, s.bulkSize, s.originH2)
	if err != nil {
		return err
	}
	defer e.Close()
	res := measure(e, s.rounds, s.dur, progress)
	proxyTables(w, e, res)
	return nil
}
