package termtext

import "testing"

func TestPrintable(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"example.com/a b", 0, "example.com/a b"},
		{"café 日本 🙂", 0, "café 日本 🙂"},
		{"a\tb\nc\r\x00\x7f", 0, `a\tb\nc\r\x00\x7f`},
		{"\x1b]52;c;eA==\a\x1b[1A\x1b[2K", 0, `\x1b]52;c;eA==\a\x1b[1A\x1b[2K`},
		// C1 controls as characters (CSI, OSC, ST); as single bytes they
		// are not UTF-8, and print as U+FFFD.
		{"\u009b2K\u009d0;t\u009c", 0, `\u009b2K\u009d0;t\u009c`},
		{"\x9b2K", 0, "\ufffd2K"},
		// A bidi override, zero-width characters, a tag character.
		{"evil\u202emoc.\u200bgithub\u200d.com\U000e0041", 0, `evil\u202emoc.\u200bgithub\u200d.com\U000e0041`},
		// Printable to Go, but invisible: Hangul fillers, the combining
		// grapheme joiner, variation selectors.
		{"github.com\u3164\uffa0\u115f", 0, `github.com\u3164\uffa0\u115f`},
		{"/pay\u034f\ufe0f\U000e0100", 0, `/pay\u034f\ufe0f\U000e0100`},
		{"abcdef", 3, "abc…"},
		{"\x1b\x1b\x1b\x1b", 2, `\x1b\x1b…`},
	} {
		if got := Printable(c.in, c.limit); got != c.want {
			t.Errorf("Printable(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
	if got, want := Lines("one\x1b[2K\ntwo\r"), "one\\x1b[2K\ntwo\\r"; got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

// TestPrintableEightBitLocale: under a locale whose character set is not
// UTF-8, a character whose UTF-8 holds a byte from 0x80 to 0x9F is
// escaped: cordon printed a file name the box chose after the run, and
// "x\u011d0;t\u011c" set an 8-bit terminal's title (red team, round 7).
func TestPrintableEightBitLocale(t *testing.T) {
	const in = "x\u011d0;pwned\u011c\u011b6n caf\u00e9 \u2500"
	for _, c := range []struct {
		eightBit bool
		want     string
	}{
		{false, in},
		{true, `x\u011d0;pwned\u011c\u011b6n café \u2500`},
	} {
		was := eightBit
		eightBit = func() bool { return c.eightBit }
		got := Printable(in, 0)
		eightBit = was
		if got != c.want {
			t.Errorf("8-bit locale %v: Printable(%q) = %q, want %q", c.eightBit, in, got, c.want)
		}
	}
}
