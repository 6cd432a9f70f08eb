package denycmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{bin, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string) {
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "curl"), "the curl binary")
	write(filepath.Join(bin, "ok"), "another binary!")
	if err := os.Link(filepath.Join(bin, "curl"), filepath.Join(ws, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(bin, "curl"), filepath.Join(ws, "symlink")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ws, "copy"), "the curl binary")
	write(filepath.Join(ws, "same-size"), "the curl binarY")
	if err := os.Symlink(filepath.Join(ws, "copy"), filepath.Join(bin, "innocent")); err != nil {
		t.Fatal(err)
	}
	c := New([]string{"curl", "wget"}, bin+":relative", ws)
	tests := []struct {
		argv []string
		how  string // "" means allowed
	}{
		{[]string{"curl", "x"}, "name"},
		{[]string{"/opt/elsewhere/wget"}, "name"},
		{[]string{"./hardlink"}, "same file"},
		{[]string{filepath.Join(ws, "symlink")}, "same file"},
		{[]string{"./copy"}, "same contents"},
		{[]string{"innocent"}, "same contents"},
		{[]string{"sh", "-c", "./copy x"}, "same contents"},
		{[]string{"env", "./hardlink"}, "same file"},
		{[]string{"./same-size"}, ""},
		{[]string{"ok"}, ""},
		{[]string{"echo", "curl"}, ""},
		{[]string{"./missing"}, ""},
	}
	for _, tt := range tests {
		m, blocked := c.Check(tt.argv)
		switch {
		case tt.how == "" && blocked:
			t.Errorf("Check(%q) blocked: %v", tt.argv, m)
		case tt.how != "" && !blocked:
			t.Errorf("Check(%q) allowed, want %s", tt.argv, tt.how)
		case tt.how != "" && m.How != tt.how:
			t.Errorf("Check(%q) matched by %s, want %s", tt.argv, m.How, tt.how)
		}
	}
	m, _ := c.Check([]string{"sh", "-c", "curl x"})
	if s := m.String(); !strings.Contains(s, `"curl"`) || !strings.Contains(s, "sh > -c") {
		t.Errorf("Match.String() = %q", s)
	}
	if _, blocked := New(nil, bin, ws).Check([]string{"curl"}); blocked {
		t.Error("an empty deny list blocked a command")
	}
}

func TestCheckEntryByPath(t *testing.T) {
	dir := t.TempDir()
	write := func(p, data string) {
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "tool"), "tool contents")
	if err := os.Symlink(filepath.Join(dir, "tool"), filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	c := New([]string{filepath.Join(dir, "tool")}, "", dir)
	if m, ok := c.Check([]string{"./alias"}); !ok || m.How != "same file" {
		t.Fatalf("a symlink to a denied path: %v %v", m, ok)
	}
}
