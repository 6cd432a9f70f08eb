package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEQuotesResults wants the tables in the README's Benchmarks
// section to be tables of bench/RESULTS.md, the run they quote, whole and
// in the same order: they are copied by hand after each make bench, and a
// slip once put the proxy ratios under the sandbox clients' table.
func TestREADMEQuotesResults(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile("RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Benchmarks\n")
	if !ok {
		t.Fatal("README.md has no Benchmarks section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	tables := markdownTables(section)
	if len(tables) == 0 {
		t.Fatal("README's Benchmarks section has no tables")
	}
	rest := string(results)
	for _, table := range tables {
		i := strings.Index(rest, "\n"+table+"\n")
		if i < 0 {
			t.Errorf("README's table is not in bench/RESULTS.md after the tables before it:\n%s", table)
			continue
		}
		rest = rest[i+len(table)+1:]
	}
}

// markdownTables returns each run of lines starting with "|" in text.
func markdownTables(text string) []string {
	var tables, rows []string
	for _, line := range strings.Split(text+"\n", "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
			continue
		}
		if len(rows) > 0 {
			tables = append(tables, strings.Join(rows, "\n"))
			rows = nil
		}
	}
	return tables
}
