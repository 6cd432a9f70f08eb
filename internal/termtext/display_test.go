package termtext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// displayed is what Display passes of the writes in order.
func displayed(t testing.TB, writes ...string) string {
	t.Helper()
	var b bytes.Buffer
	d := Display(&b)
	for _, w := range writes {
		if n, err := d.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	return b.String()
}

func TestDisplay(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want string
	}{
		{"text", "café 日本\ta\r\n\b\a\x0e\x0f\x7f", "café 日本\ta\r\n\b\a\x0e\x0f\x7f"},
		{"colours and attributes", "\x1b[1;31mred\x1b[38;2;1;2;3;48:5:17m\x1b[0m\x1b[m", "\x1b[1;31mred\x1b[38;2;1;2;3;48:5:17m\x1b[0m\x1b[m"},
		{"cursor movement and erasing", "\x1b[2A\x1b[K\x1b[10;3H\x1b[2J\x1b[G\x1b[3@\x1b[2P\x1b[1;20r\x1b[s\x1b[u\x1b7\x1b8\x1bM\x1bD\x1bE",
			"\x1b[2A\x1b[K\x1b[10;3H\x1b[2J\x1b[G\x1b[3@\x1b[2P\x1b[1;20r\x1b[s\x1b[u\x1b7\x1b8\x1bM\x1bD\x1bE"},
		{"character sets", "\x1b(0qq\x1b(B\x1b)0", "\x1b(0qq\x1b(B\x1b)0"},
		{"answerback", "a\x05b", "ab"},
		{"device attributes and reports", "\x1b[c\x1b[0c\x1b[>c\x1b[=c\x1bZ\x1b[6n\x1b[5n\x1b[?6n\x1b[x\x1b[>q\x1b[?u", ""},
		{"window reports", "\x1b[21t\x1b[14t\x1b[18t\x1b[22;0t", ""},
		{"modes", "\x1b[?1000h\x1b[?1004h\x1b[12l\x1b[2h\x1b[?1h\x1b=\x1b>\x1b[>4;2m\x1b[>1u\x1b[?25l\x1bc", ""},
		{"mode and setting queries", "\x1b[?2004$p\x1b[1;1;1;1;1;1*y\x1b[?1m", ""},
		{"mouse tracking through SD", "\x1b[1;2;3;4;5T\x1b[2T", "\x1b[2T"},
		{"colour and clipboard queries", "\x1b]11;?\a\x1b]4;1;?\x1b\\\x1b]52;c;?\a\x1b]10;?\x1b\\x", "x"},
		{"title", "\x1b]0;title\athen", "then"},
		{"DECRQSS and XTGETTCAP", "\x1bP$qm\x1b\\\x1bP+q544e\x1b\\x", "x"},
		{"kitty graphics", "\x1b_Ga=q,i=1;AAAA\x1b\\x", "x"},
		{"a string ended by CAN", "\x1b]0;t\x18x", "x"},
		{"ESC in a string starts a sequence", "\x1bPtmux;\x1b\x1b[6n\x1b\\\x1b[31mx", "\x1b[31mx"},
		{"8-bit C1", "\x9b6n\x9b31mx\x9d11;?\x9cy\x90$qm\x9cz\x05", "\x1b[31mxyz"},
		{"UTF-8 C1", "\u009b6n\u009b31mx\u009d11;?\u009cy\u0085", "\x1b[31mxy\x1bE"},
		{"overlong C1", "\xe0\x82\x9b6nx", "\ufffdx"},
		{"bytes not UTF-8", "a\xc2b\xffc", "a\ufffdb\ufffdc"},
		{"controls and DEL end a sequence", "\x1b[3\n1m\x1b\x7fx\x1b[\x05c", "\n1m\x7fxc"},
		{"other intermediates", "\x1b#8x\x1b F\x1b(%5", "x"},
		{"private and intermediate in SGR", "\x1b[?1m\x1b[1 m\x1b[1\"q", ""},
		{"too long", "\x1b[" + strings.Repeat("1;", maxSeq) + "mx", "x"},
	} {
		if got := displayed(t, c.in); got != c.want {
			t.Errorf("%s: Display(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
		// Written a byte at a time, the same passes.
		var bytes []string
		for i := range len(c.in) {
			bytes = append(bytes, c.in[i:i+1])
		}
		if got := displayed(t, bytes...); got != c.want {
			t.Errorf("%s: Display(%q) a byte at a time = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// FuzzDisplay: however the output is cut into writes, the same passes,
// and what passes is UTF-8 without C1 controls, in which Display passes
// every sequence: nothing of it starts anything but a sequence of those
// it keeps, and nothing it left unfinished does.
func FuzzDisplay(f *testing.F) {
	for _, s := range []string{"\x1b[31mred\x1b[0m", "\x1b]11;?\a\x1bP$qm\x1b\\", "\x9b6n\u009b6n\xc2", "\x1b(0\x1b#8\x1b[?1000h\x05"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, cut uint8) {
		whole := displayed(t, in)
		at := min(int(cut), len(in))
		if split := displayed(t, in[:at], in[at:]); split != whole {
			t.Fatalf("Display(%q) = %q, cut at %d: %q", in, whole, at, split)
		}
		if !utf8.ValidString(whole) || strings.ContainsFunc(whole, func(r rune) bool { return r >= 0x80 && r <= 0x9f || r == 0x05 }) {
			t.Fatalf("Display(%q) = %q: not UTF-8, or a C1 control or ENQ", in, whole)
		}
		if again := displayed(t, whole); again != whole {
			t.Fatalf("Display(%q) = %q, of which it drops some: %q", in, whole, again)
		}
		if again := displayed(t, whole+"x"); again != whole+"x" {
			t.Fatalf("Display(%q) = %q, which is unfinished: x after it is %q", in, whole, again)
		}
	})
}
