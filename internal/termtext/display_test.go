package termtext

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// TestMain runs the tests under a UTF-8 locale, whatever the caller's:
// the writers read it (eightBitLocale), and every test but
// TestEightBitLocale, which sets its own, has characters passed whole.
func TestMain(m *testing.M) {
	os.Setenv("LC_ALL", "C.UTF-8")
	os.Exit(m.Run())
}

// displayed is what Display passes of the writes in order.
func displayed(t testing.TB, writes ...string) string {
	t.Helper()
	var b bytes.Buffer
	d := Display(&b, nil)
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
		{"ESC in a control sequence starts another", "\x1b[1\x1b[6nx", "x"},
		{"CAN and SUB end a sequence, another follows", "\x1b[6\x18\x1b[6n\x1a\x1b]11;?\x07y", "y"},
		{"SOS, PM and APC, ended by BEL or ST", "\x1bXsos\x07a\x1b^pm\x1b\\b\x1b_apc\x9cc\u0098sos\u009cd", "abcd"},
		{"more questions and settings", "\x1b[0c\x1b[>0c\x1b[=0c\x1b[?c\x1b[5n\x1b[?996n\x1b[?15n\x1b[?26n\x1b[1x\x1b[>0q\x1b[?1;1;1S" +
			"\x1b[?1$p\x1b[2$p\x1b[1$w\x1b[1$u\x1b[?u\x1b[=5u\x1b[<u\x1b[13t\x1b[14;2t\x1b[16t\x1b[19t\x1b[5i\x1b[#P\x1b[2 q\x1b[!p\x1b[?1049h\x1b%G", ""},
		{"private modes restored, SD's mouse tracking spelt otherwise", "\x1b[?1000r\x1b[?1000s\x1b[;;;;T\x1b[:5T", ""},
		{"OSC questions, hyperlinks, iTerm2's", "\x1b]52;c;?\x07\x1b]4;1;?\x1b\\\x1b]12;?\x07\x1b]1337;ReportCellSize\x07\x1b]8;;http://x\x07link\x1b]8;;\x07\x9d10;?\x07x", "linkx"},
		{"UTF-8 C1 strings", "\u0090$qm\u009c\u009f_Ga=q\u009c\u009ex\u009cz\u0090+q544e\x07y", "zy"},
		{"C1 after a byte that cannot start a character", "\xc0\x9b6nx\xc1\x9b5ny\xe0\x80\x9bcz\xed\xa0\x80\xf4\x90\x80\x80", "\ufffdx\ufffdy\ufffdz\ufffd\ufffd\ufffd"},
		{"a character cut by a sequence", "\xe6\x1b[6n\xc2\x1b[c", "\ufffd\ufffd"},
		{"device status with more", "\x1b[6;n\x1b[06n\x1b[6 n\x1b[6\"n", ""},
		{"shown with parameters", "\x1b[1;31;2;3;4;5m\x1b[5T\x1b[T\x1b[4b", "\x1b[1;31;2;3;4;5m\x1b[5T\x1b[T\x1b[4b"},
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

// TestDisplayDropped: Display names each control string it drops, an
// OSC by its number, for cordon to log.
func TestDisplayDropped(t *testing.T) {
	var dropped []string
	d := Display(io.Discard, func(what string) { dropped = append(dropped, what) })
	d.Write([]byte("\x1b]52;c;eA==\a\x1b]0;t\x1b\\\x1bP$qm\x1b\\\x9d8;;x\x9c\x1b_G\x1b\\\x1b[6n"))
	if got, want := strings.Join(dropped, ","), "OSC 52,OSC 0,DCS,OSC 8,APC"; got != want {
		t.Errorf("dropped %q, want %q", got, want)
	}
}

// FuzzDisplay: however the output is cut into writes, the same passes,
// and what passes is UTF-8 without C1 controls, in which Display passes
// every sequence: nothing of it starts anything but a sequence of those
// it keeps, and nothing it left unfinished does.
func FuzzDisplay(f *testing.F) {
	for _, s := range []string{"\x1b[31mred\x1b[0m", "\x1b]11;?\a\x1bP$qm\x1b\\", "\x9b6n\u009b6n\xc2", "\x1b(0\x1b#8\x1b[?1000h\x05", "\xc0\x9b6n\xf4\x90\x80\x80", "\x1b[6\x18\x1b[6n\x1a"} {
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

// cutWriter takes the first n bytes of the first write, failing if that
// is not all of it, as a terminal whose buffer is full fails a
// non-blocking write, and the whole of every later one.
type cutWriter struct {
	bytes.Buffer
	n      int
	writes int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > 1 || w.n >= len(p) {
		return w.Buffer.Write(p)
	}
	w.Buffer.Write(p[:w.n])
	return w.n, errors.New("resource temporarily unavailable")
}

// TestDisplayWriteCut: a write the terminal takes only part of (a
// non-blocking one with its buffer full) may leave it in the middle of a
// sequence Display passed, which the next write would end: with the
// command's own text there, a question. The next write ends it with CAN
// first.
func TestDisplayWriteCut(t *testing.T) {
	for _, c := range []struct {
		name        string
		first, next string
		taken       int
		want        string
	}{
		{"after ESC [", "\x1b[31mred", "6n", 2, "\x1b[\x186n"},
		{"after ESC", "\x1b[31mred", "Z", 1, "\x1b\x18Z"},
		{"in the parameters", "\x1b[1;31m", "5;6n", 4, "\x1b[1;\x185;6n"},
		{"at a sequence's end", "\x1b[31mred", "6n", 5, "\x1b[31m\x186n"},
		{"nothing taken", "\x1b[31m", "x", 0, "\x18x"},
		{"whole", "\x1b[31m", "x", 5, "\x1b[31mx"},
	} {
		w := &cutWriter{n: c.taken}
		d := Display(w, nil)
		if _, err := d.Write([]byte(c.first)); err == nil && c.taken < len(c.first) {
			t.Errorf("%s: a cut write did not fail", c.name)
		}
		if n, err := d.Write([]byte(c.next)); n != len(c.next) || err != nil {
			t.Fatalf("%s: Write(%q) = %d, %v", c.name, c.next, n, err)
		}
		if got := w.String(); got != c.want {
			t.Errorf("%s: the terminal got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDisplayAside: cordon's own lines, written to the terminal while
// the command's output goes through a Display to it, go through its Aside:
// after a write of the command the terminal took only part of, a line
// written straight to the terminal ended the cut sequence (ESC [ and
// "cordon:" made ESC [ c, a device attributes query). Through Aside it
// follows CAN; and a sequence or string the command left unfinished
// neither swallows the line nor is ended by it.
func TestDisplayAside(t *testing.T) {
	const line = "cordon: warning\n"
	for _, c := range []struct {
		name        string
		first, last string
		taken       int
		want        string
	}{
		{"after a cut ESC [", "\x1b[31mred", "", 2, "\x1b[\x18" + line},
		{"after a cut ESC", "\x1b[31mred", "", 1, "\x1b\x18" + line},
		{"after a whole write", "\x1b[31mred", "", 8, "\x1b[31mred" + line},
		{"in a sequence", "x\x1b[3", "1m", 8, "x" + line + "\x1b[31m"},
		{"in a control string", "x\x1b]0;title", "\ay", 20, "x" + line + "y"},
		{"in a character", "x\xc3", "\xa9", 8, "x" + line + "\u00e9"},
	} {
		w := &cutWriter{n: c.taken}
		d := Display(w, nil)
		d.Write([]byte(c.first))
		if n, err := d.Aside().Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("%s: Aside().Write = %d, %v", c.name, n, err)
		}
		if c.last != "" {
			d.Write([]byte(c.last))
		}
		if got := w.String(); got != c.want {
			t.Errorf("%s: the terminal got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDisplayConcurrent: the command's stdout and stderr on one terminal
// share one Display (written from a copy of each, masked apart with
// --credential), whose writes reach the terminal whole and in turn.
func TestDisplayConcurrent(t *testing.T) {
	const each, unit = 500, "\x1b[31mx"
	var b bytes.Buffer
	d := Display(&b, nil)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range each {
				d.Write([]byte(unit))
			}
		})
	}
	wg.Wait()
	if want := strings.Repeat(unit, 2*each); b.String() != want {
		t.Errorf("two writers of one Display: the terminal got %d bytes, not %d writes of %q whole", b.Len(), 2*each, unit)
	}
}

// foreground is what Foreground passes of the writes in order, and what
// it said it dropped.
func foreground(t testing.TB, writes ...string) (string, []string) {
	t.Helper()
	var b bytes.Buffer
	var dropped []string
	d := Foreground(&b, func(what string) { dropped = append(dropped, what) })
	for _, w := range writes {
		if n, err := d.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	return b.String(), dropped
}

func TestForeground(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      string
		want    string
		dropped string
	}{
		{"text and controls", "café\ta\r\n\b\a\x05\x00\x0e", "café\ta\r\n\b\a\x05\x00\x0e", ""},
		{"questions and modes pass: the answers reach the command",
			"\x1b[c\x1b[>c\x1b[6n\x1b[?1000h\x1b[?1006h\x1b[?1004h\x1b[?2004h\x1b[?1049h\x1b[>1u\x1b[?u\x1b[18t\x1b[?2026h\x1b=\x1bc\x1b#8\x1b-A\x1b(0",
			"\x1b[c\x1b[>c\x1b[6n\x1b[?1000h\x1b[?1006h\x1b[?1004h\x1b[?2004h\x1b[?1049h\x1b[>1u\x1b[?u\x1b[18t\x1b[?2026h\x1b=\x1bc\x1b#8\x1b-A\x1b(0", ""},
		{"title reports: the answer is the command's text", "\x1b]2;;touch x\a\x1b[21t\x1b[20;1ta\x1b[021t\x1b[0021:1t\x1b[22;0t\x1b[?21t", "\x1b]2;;touch x\aa\x1b[22;0t", "CSI 21 t,CSI 20 t,CSI 21 t,CSI 21 t,CSI ? t"},
		{"VT52 mode and DECSCL", "\x1b[?2l\x1b[?1;02la\x1b[?2h\x1b[?25l\x1b[62;0\"pb\x1b[!p", "a\x1b[?2h\x1b[?25lb\x1b[!p", "CSI ?2 l,CSI ?2 l,CSI \" p"},
		{"the encoding and 8-bit answers", "\x1b%@\u011dx\x1b%G\x1b G\x1b Fy", "\u011dxy", "ESC %,ESC %,ESC SP,ESC SP"},
		{"title, colours, hyperlink, prompt marks",
			"\x1b]0;t\u00e9\a\x1b]2;x\x1b\\\x1b]11;?\a\x1b]4;1;#ff0000\x1b\\\x1b]8;;http://x\alink\x1b]8;;\a\x1b]104\a\x1b]133;A\a",
			"\x1b]0;t\u00e9\a\x1b]2;x\x1b\\\x1b]11;?\a\x1b]4;1;#ff0000\x1b\\\x1b]8;;http://x\alink\x1b]8;;\a\x1b]104\a\x1b]133;A\a", ""},
		{"the clipboard", "a\x1b]52;c;ZWNobyBwd25lZA==\ab\x1b]52;c;?\x1b\\c", "abc", "OSC 52,OSC 52"},
		{"notifications, files, the working directory",
			"\x1b]9;hi\a\x1b]777;notify;a;b\a\x1b]1337;File=name=eA==:eA==\a\x1b]5113;ac=send\a\x1b]7;file:///etc\a\x1b]50;?\ax",
			"x", "OSC 9,OSC 777,OSC 1337,OSC 5113,OSC 7,OSC 50"},
		{"DCS, APC, PM, SOS", "\x1bPtmux;\x1b\x1b]52;c;eA==\a\x1b\\\x1bP@kitty-cmd{}\x1b\\\x1b_Gt=f;L2V0Yw==\x1b\\\x1b^pm\a\x1bXsos\ax",
			"x", "DCS,OSC 52,DCS,APC,PM,SOS"},
		{"8-bit and UTF-8 C1", "\x9d52;c;eA==\x9cx\u009d0;t\u009cy\u0090q\u009cz", "x\x1b]0;t\x1b\\yz", "OSC 52,DCS"},
		{"an OSC number too long, or not a number", "\x1b]000000001;x\a\x1b]x;y\a\x1b];z\az", "z", "OSC of over 6 digits,OSC,OSC"},
		{"an OSC named by its value", "\x1b]052;c;eA==\a\x1b]00;t\a\x1b]0000\az", "z", "OSC 52,OSC 0,OSC 0"},
		{"controls in a passed OSC dropped", "\x1b]0;a\x05\x7fb\a", "\x1b]0;ab\a", ""},
		{"CAN abandons a passed OSC", "\x1b]0;a\x18b", "\x1b]0;a\x18b", ""},
		{"a sequence ends a passed OSC", "\x1b]0;a\x1b[31mb", "\x1b]0;a\x1b\\\x1b[31mb", ""},
		{"ST right after the number", "\x1b]110\x1b\\x\x1b]52\x1b\\y", "\x1b]110\x1b\\xy", "OSC 52"},
		{"DECRQSS and XTGETTCAP pass: the answers reach the command", "\x1bP$qm\x1b\\\x1bP+q544e\x1b\\\x1bP1$r0m\x1b\\\x1bP$q\x18x\x1bP$", "\x1bP$qm\x1b\\\x1bP+q544e\x1b\\\x1bP$q\x18x", "DCS"},
		{"DCS cut short", "\x1bP1\x18a\x1bP\x1b[31mb\x1bP\u00e9c", "a\x1b[31mb", "DCS,DCS,DCS"},
		{"links to the web, files and mail", "\x1b]8;;https://x.example/a\a1\x1b]8;;\a\x1b]8;id=2;file:///w/f\x1b\\2\x1b]8;;\x1b\\\x1b]8;;MAILTO:a@b\a3",
			"\x1b]8;;https://x.example/a\a1\x1b]8;;\a\x1b]8;id=2;file:///w/f\x1b\\2\x1b]8;;\x1b\\\x1b]8;;MAILTO:a@b\a3", ""},
		{"links to other schemes, or none", "\x1b]8;;vscode://x/y\a1\x1b]8;;\a\x1b]8;;x-man-page://ls\a2\x1b]8;;java script:x\a3\x1b]8;;relative\a4\x1b]8;x\a5\x1b]8;;http\u00e9:\a6",
			"1\x1b]8;;\a23456", "OSC 8 to vscode:,OSC 8 to x-man-page:,OSC 8,OSC 8,OSC 8,OSC 8"},
		{"media copy", "\x1b[5i\x1b[?5ix", "x", "CSI i,CSI i"},
		{"Terminology's commands", "a\x1b}pn/etc/passwd\x00b", "apn/etc/passwd\x00b", "ESC }"},
		{"reports of what the screen shows", "\x1b[1001;1;2;3;2;3*ya\x1b[1;1;24;80#|b\x1b[1*yc\x1b[2#yd\x1b[>0;50te", "abc\x1b[2#yde", "CSI * y,CSI # |,CSI * y,CSI > t"},
		{"too long", "\x1b[" + strings.Repeat("1;", maxSeq) + "mx\x1b" + strings.Repeat(" ", maxSeq) + "Fy", "xy", "ESC SP"},
	} {
		for _, split := range []bool{false, true} {
			writes := []string{c.in}
			if split {
				writes = nil
				for i := range len(c.in) {
					writes = append(writes, c.in[i:i+1])
				}
			}
			got, dropped := foreground(t, writes...)
			if got != c.want || strings.Join(dropped, ",") != c.dropped {
				t.Errorf("%s (a byte at a time: %v): Foreground(%q) = %q, dropped %q; want %q, dropped %q", c.name, split, c.in, got, dropped, c.want, c.dropped)
			}
		}
	}
}

// TestForegroundAsideEndsAPassedOSC: a line of cordon's in the middle of
// an OSC whose start was passed would be taken into it (the title); CAN
// ends it first, and the rest of the OSC is dropped.
func TestForegroundAsideEndsAPassedOSC(t *testing.T) {
	var b bytes.Buffer
	d := Foreground(&b, nil)
	d.Write([]byte("\x1b]0;tit"))
	d.Aside().Write([]byte("cordon: x\r\n"))
	d.Write([]byte("le\ay"))
	if got, want := b.String(), "\x1b]0;tit\x18cordon: x\r\ny"; got != want {
		t.Errorf("the terminal got %q, want %q", got, want)
	}
}

// passedOSC says whether out, Foreground's output, holds no control
// string but those Foreground passes.
func passedOSC(out string) bool {
	for i := strings.IndexByte(out, esc); i >= 0 && i+1 < len(out); {
		switch out[i+1] {
		case 'P':
			head := out[i+2:]
			n := len(head) - len(strings.TrimLeft(head, "0123456789:;<=>? !\"#$%&'()*+,-./"))
			if n >= len(head) || !shownDCS[head[:n+1]] {
				return false
			}
		case '_', '^', 'X':
			return false
		case ']':
			num := out[i+2:]
			num = num[:len(num)-len(strings.TrimLeft(num, "0123456789"))]
			if !shownOSC[num] {
				return false
			}
			// A link's URI, if it has one, is of a scheme it passes.
			if link, ok := strings.CutPrefix(out[i+2:], "8;"); ok {
				if _, uri, ok := strings.Cut(link, ";"); ok && uri != "" && uri[0] != '\a' && uri[0] != esc {
					scheme, _, _ := strings.Cut(uri, ":")
					if !shownSchemes[strings.ToLower(scheme)] {
						return false
					}
				}
			}
		}
		j := strings.IndexByte(out[i+1:], esc)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return true
}

// FuzzForeground: however the output is cut into writes, the same passes;
// what passes is UTF-8 without C1 controls, holds no control string but
// those Foreground passes, and passes again unchanged.
func FuzzForeground(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;eA==\a", "\x1b]0;t\x1b\\\x1bPtmux;\x1b\x1b]52;c;?\a\x1b\\", "\x9d8;;x\x9c\u009d52;\u009c", "\x1b[?1000h\x1b_Ga=q\x1b\\", "\x1b]0;a\x18\x1b]133\x1b[", "\x1bP$qm\x1b\\\x1bP+q\x1bP1$r", "\x1b]8;;vscode://a\ax\x1b]8;;HTTPS://a\x1b\\y\x1b]8;;\a", "\x1b[21;1t\x1b[5i\x1b%@\x1b G\x1b(0"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, cut uint8) {
		whole, _ := foreground(t, in)
		at := min(int(cut), len(in))
		if split, _ := foreground(t, in[:at], in[at:]); split != whole {
			t.Fatalf("Foreground(%q) = %q, cut at %d: %q", in, whole, at, split)
		}
		if !utf8.ValidString(whole) || strings.ContainsFunc(whole, func(r rune) bool { return r >= 0x80 && r <= 0x9f }) {
			t.Fatalf("Foreground(%q) = %q: not UTF-8, or a C1 control", in, whole)
		}
		if !passedOSC(whole) {
			t.Fatalf("Foreground(%q) = %q: a control string it drops", in, whole)
		}
		if again, dropped := foreground(t, whole); again != whole || len(dropped) > 0 {
			t.Fatalf("Foreground(%q) = %q, of which it drops some: %q (%q)", in, whole, again, dropped)
		}
	})
}

// BenchmarkForeground: a TUI's or a build's output through the relay's
// filter, text with colours every so often.
func BenchmarkForeground(b *testing.B) {
	line := []byte(strings.Repeat("compiling package github.com/x/y ", 3) + "\x1b[32mok\x1b[0m café\r\n")
	buf := bytes.Repeat(line, 32<<10/len(line))
	d := Foreground(io.Discard, nil)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		d.Write(buf)
	}
}

// TestEightBitLocale: under a locale whose character set is not UTF-8, a
// character whose UTF-8 holds a byte a terminal decoding bytes reads as a
// C1 control (U+011D, C4 9D: OSC) is written as "?", and dropped is told
// once a write; other characters pass, and under UTF-8, or no locale
// set, every character does.
func TestEightBitLocale(t *testing.T) {
	const in = "a\u011d52;c;eA==\ab\u00e9\u2500c"
	for _, c := range []struct {
		env     map[string]string
		want    string
		dropped string
	}{
		{map[string]string{"LANG": "C"}, "a?52;c;eA==\ab\u00e9?c", "C1 byte in a character"},
		{map[string]string{"LC_CTYPE": "en_US.ISO-8859-1", "LANG": "en_US.UTF-8"}, "a?52;c;eA==\ab\u00e9?c", "C1 byte in a character"},
		{map[string]string{"LC_ALL": "POSIX", "LC_CTYPE": "C.UTF-8"}, "a?52;c;eA==\ab\u00e9?c", "C1 byte in a character"},
		{map[string]string{"LC_ALL": "en_US.utf8", "LANG": "C"}, in, ""},
		{map[string]string{"LANG": "C.UTF-8"}, in, ""},
		{nil, in, ""},
	} {
		env := func(name string) string { return c.env[name] }
		for _, fore := range []bool{false, true} {
			var b bytes.Buffer
			var dropped []string
			d := &Writer{w: &b, fore: fore, dropped: func(what string) { dropped = append(dropped, what) }, eightBit: eightBitLocale(env)}
			d.Write([]byte(in))
			if b.String() != c.want || strings.Join(dropped, ",") != c.dropped {
				t.Errorf("%v (foreground %v): %q became %q, dropped %q; want %q, dropped %q", c.env, fore, in, b.String(), dropped, c.want, c.dropped)
			}
		}
	}
}
