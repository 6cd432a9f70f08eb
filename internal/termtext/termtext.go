// Package termtext makes text safe to print on a terminal: cordon's
// messages and audit tables name what a sandboxed command chose (a host it
// asked for, a request path, a file it made in the workspace), and a
// control character or escape sequence there would have the terminal
// rewrite or hide what cordon prints, set its title or its clipboard.
package termtext

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Printable escapes the characters of s a terminal would not just show
// (control characters, tabs and newlines too, C1 controls, bidi overrides,
// zero-width and other invisible characters) as Go escapes (\x1b, \u202e,
// \u3164). With limit > 0, s is cut after limit runes.
func Printable(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit && limit > 0 {
			b.WriteString("…")
			break
		}
		if Shows(r) {
			b.WriteRune(r)
		} else {
			b.WriteString(strings.Trim(strconv.QuoteRuneToASCII(r), "'"))
		}
		n++
	}
	return b.String()
}

// Shows says whether a terminal just shows r, as a character one can see:
// it is printable (no control, format or private-use character, no
// separator but the space) and not one that, though printable to Go,
// shows as nothing (a Hangul filler, the combining grapheme joiner, a
// variation selector: default-ignorable code points), with which a name a
// sandboxed command chose would look like another (github.com with a
// Hangul filler after it, denied, like github.com).
//
// Under a locale whose character set is not UTF-8 (eightBitLocale), a
// character whose UTF-8 holds a byte from 0x80 to 0x9F does not show
// either: such a terminal reads that byte as a C1 control (U+011D's
// C4 9D as OSC), and a file name the box chose, printed by cordon after
// the run, set the title and had the terminal answer to the shell (red
// team, round 7).
func Shows(r rune) bool {
	if !unicode.IsPrint(r) || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
		return false
	}
	if r < utf8.RuneSelf || !eightBit() {
		return true
	}
	var b [utf8.UTFMax]byte
	return !hasC1Byte(b[:utf8.EncodeRune(b[:], r)])
}

// eightBit is eightBitLocale of this process's locale, read once.
var eightBit = sync.OnceValue(func() bool { return eightBitLocale(os.Getenv) })

// Lines is msg, a message of several lines, with each line Printable:
// its newlines are kept. Only for a message whose every line its writer
// chose: a newline in text a hostile side chose would start a line of
// its own, which reads as the writer's (use Printable).
func Lines(msg string) string {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = Printable(l, 0)
	}
	return strings.Join(lines, "\n")
}
