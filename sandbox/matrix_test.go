package sandbox

import (
	"strings"
	"testing"
)

// fullTable lists every capability as READY, with why as the reason.
func fullTable(platform, why string) Table {
	t := Table{Platform: platform}
	for _, c := range matrixOrder {
		t.Rows = append(t.Rows, Row{Capability: c, Status: Ready, Why: why})
	}
	return t
}

func TestMatrix(t *testing.T) {
	a := fullTable("A", "a box")
	b := fullTable("B | pipe", "b | box")
	b.Rows[0].Status = NotApplicable
	// Rows may come in any order; the matrix orders them.
	b.Rows[0], b.Rows[1] = b.Rows[1], b.Rows[0]
	got, err := Matrix(a, b)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2+len(matrixOrder) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2+len(matrixOrder), got)
	}
	if want := `| capability | A | B \| pipe |`; lines[0] != want {
		t.Errorf("header %q, want %q", lines[0], want)
	}
	if want := "|---|---|---|"; lines[1] != want {
		t.Errorf("separator %q, want %q", lines[1], want)
	}
	if want := `| filesystem box | **READY**: a box | **N/A**: b \| box |`; lines[2] != want {
		t.Errorf("first row %q, want %q", lines[2], want)
	}
	for i, c := range matrixOrder {
		if !strings.HasPrefix(lines[2+i], "| "+c+" |") {
			t.Errorf("row %d is %q, want capability %q", i, lines[2+i], c)
		}
	}
}

func TestMatrixRefuses(t *testing.T) {
	edit := func(f func(*Table)) Table {
		t := fullTable("A", "why")
		f(&t)
		return t
	}
	cases := []struct {
		name  string
		table Table
		want  string
	}{
		{"missing capability", edit(func(t *Table) { t.Rows = t.Rows[1:] }), `capability "filesystem box" is missing`},
		{"listed twice", edit(func(t *Table) { t.Rows = append(t.Rows, t.Rows[0]) }), "listed twice"},
		{"unknown capability", edit(func(t *Table) { t.Rows[0].Capability = "teleport" }), `unknown capability "teleport"`},
		{"bad status", edit(func(t *Table) { t.Rows[0].Status = "MAYBE" }), `status "MAYBE"`},
		{"no reason", edit(func(t *Table) { t.Rows[0].Why = " " }), "say why on one line"},
		{"two-line reason", edit(func(t *Table) { t.Rows[0].Why = "a\nb" }), "say why on one line"},
		{"no platform", edit(func(t *Table) { t.Platform = "" }), "name it on one line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Matrix(fullTable("ok", "fine"), tc.table)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Matrix(); err == nil {
		t.Fatal("a matrix of no tables rendered")
	}
}
