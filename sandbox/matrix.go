package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// NotApplicable marks, in a platform table only, a capability the platform
// has no counterpart of. Doctor never reports it.
const NotApplicable Status = "N/A"

// The capabilities every platform table lists, one row each.
const (
	CapFilesystem    = "filesystem box"
	CapNetOff        = "network off"
	CapNetOpen       = "network open"
	CapNetRestricted = "network restricted"
	CapPerHost       = "per-host decisions for clients that ignore the proxy settings"
	CapSyscalls      = "system call filter"
	CapLimits        = "resource limits"
	CapProcessTree   = "the whole process tree ends with the run"
)

// matrixOrder is the order of the matrix's rows.
var matrixOrder = []string{
	CapFilesystem, CapNetOff, CapNetOpen, CapNetRestricted,
	CapPerHost, CapSyscalls, CapLimits, CapProcessTree,
}

// Row is one capability of one platform: how well it is enforced, and why.
type Row struct {
	Capability string
	Status     Status
	Why        string
}

// Table is one backend's capabilities, as the README's platform matrix
// shows them.
type Table struct {
	// Platform heads the table's column, e.g. "Linux (bubblewrap)".
	Platform string
	Rows     []Row
}

// Matrix renders tables as one Markdown table, a row per capability and a
// column per platform. Every table must list each capability exactly once.
func Matrix(tables ...Table) (string, error) {
	if len(tables) == 0 {
		return "", fmt.Errorf("platform matrix: no tables given")
	}
	cells := make([]map[string]string, len(tables))
	var b strings.Builder
	b.WriteString("| capability |")
	for i, t := range tables {
		c, err := t.cells()
		if err != nil {
			return "", err
		}
		cells[i] = c
		b.WriteString(" " + escapeCell(t.Platform) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(tables)) + "\n")
	for _, capability := range matrixOrder {
		b.WriteString("| " + capability + " |")
		for _, c := range cells {
			b.WriteString(" " + c[capability] + " |")
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// cells checks t and returns its Markdown cells by capability.
func (t Table) cells() (map[string]string, error) {
	if strings.TrimSpace(t.Platform) == "" || strings.ContainsAny(t.Platform, "\r\n") {
		return nil, fmt.Errorf("platform matrix: table with platform %q: name it on one line", t.Platform)
	}
	out := map[string]string{}
	for _, r := range t.Rows {
		switch {
		case !slices.Contains(matrixOrder, r.Capability):
			return nil, fmt.Errorf("platform matrix: %s: unknown capability %q; use one of the Cap constants", t.Platform, r.Capability)
		case out[r.Capability] != "":
			return nil, fmt.Errorf("platform matrix: %s: capability %q listed twice", t.Platform, r.Capability)
		case !slices.Contains([]Status{Ready, Degraded, Blocked, NotApplicable}, r.Status):
			return nil, fmt.Errorf("platform matrix: %s: %s: status %q is not READY, DEGRADED, BLOCKED or N/A", t.Platform, r.Capability, r.Status)
		case strings.TrimSpace(r.Why) == "" || strings.ContainsAny(r.Why, "\r\n"):
			return nil, fmt.Errorf("platform matrix: %s: %s: say why on one line", t.Platform, r.Capability)
		}
		out[r.Capability] = "**" + string(r.Status) + "**: " + escapeCell(r.Why)
	}
	for _, c := range matrixOrder {
		if out[c] == "" {
			return nil, fmt.Errorf("platform matrix: %s: capability %q is missing", t.Platform, c)
		}
	}
	return out, nil
}

// escapeCell keeps a '|' from ending a Markdown table cell.
func escapeCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
