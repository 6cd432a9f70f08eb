package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEMatrix guards drift: the README's block is what the tables say.
func TestREADMEMatrix(t *testing.T) {
	want, err := block()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start, end := strings.Index(doc, startMarker), strings.Index(doc, endMarker)
	if start < 0 || end < start {
		t.Fatalf("README.md has no %s ... %s block; run go run ./sandbox/matrixgen -w README.md", startMarker, endMarker)
	}
	if got := doc[start:end+len(endMarker)] + "\n"; got != want {
		t.Fatalf("README.md's platform matrix is stale; run go run ./sandbox/matrixgen -w README.md\ngot:\n%s\nwant:\n%s", got, want)
	}
}

func TestSplice(t *testing.T) {
	b := startMarker + "\nNEW\n" + endMarker + "\n"
	cases := []struct {
		name, doc, want, err string
	}{
		{"append to a document without markers", "# title\ntext", "# title\ntext\n\n" + b, ""},
		{"append to an empty document", "", "\n" + b, ""},
		{"replace only the block", "a\n" + startMarker + "\nOLD\n" + endMarker + "\nz\n", "a\n" + b + "z\n", ""},
		{"replace a block at the end", "a\n" + startMarker + "\nOLD\n" + endMarker, "a\n" + b, ""},
		{"only a start marker", "a\n" + startMarker + "\n", "", "incomplete or out of order"},
		{"markers reversed", endMarker + "\n" + startMarker + "\n", "", "incomplete or out of order"},
		{"two blocks", b + b, "", "more than once"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splice(tc.doc, b)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("splice = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRunWrite rewrites a file in place twice: the second run changes nothing.
func TestRunWrite(t *testing.T) {
	f := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(f, []byte("# cordon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run(f); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := block()
	if string(data) != "# cordon\n\n"+b {
		t.Fatalf("rewritten file:\n%s", data)
	}
}
