package termtext

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Display returns a writer that passes to w, a terminal, what it is
// written for the terminal to show, and nothing the terminal would answer
// or take as a change of what it sends as input: text, the controls that
// move the cursor within it (BS, HT, LF, VT, FF, CR) or switch its
// character set (SO, SI), BEL, and the escape sequences of colours and
// attributes (SGR), cursor movement and erasing, scrolling, tabs and
// character sets. The rest is dropped: ENQ (the answerback), every
// control string (OSC, DCS, APC, PM, SOS: colour, clipboard and XTGETTCAP
// queries, DECRQSS, the kitty graphics protocol) and every other sequence
// (device attributes and status reports, window reports, modes such as
// mouse and focus reporting, a reset). C1 controls, as UTF-8 characters
// or as bytes, are read as their escape sequences; other bytes that are
// not UTF-8 are written as U+FFFD, so that nothing a write leaves
// unfinished makes a control character of what follows it.
//
// A write w takes only part of (a non-blocking one with the terminal's
// buffer full) may leave the terminal in the middle of a sequence, which
// whatever is written next would end: the next write starts with CAN,
// which ends it, and which a terminal otherwise ignores.
//
// A terminal's answers reach whatever reads it, as if typed: Display is
// for output to a terminal whose reader is not the writer, that of a
// command run in the background.
//
// dropped, if not nil, is called with each control string dropped
// ("OSC 52", "DCS"), as Foreground's is.
//
// Where the locale names a character set other than UTF-8 (LC_ALL,
// LC_CTYPE or LANG set to C, POSIX, ISO-8859-1, …), the terminal decodes
// bytes, not UTF-8, and reads a byte from 0x80 to 0x9F as a C1 control:
// the second byte of U+011D (C4 9D) as OSC. A character whose UTF-8
// holds such a byte is then written as "?", and dropped is told
// ("C1 byte in a character") once a write.
func Display(w io.Writer, dropped func(what string)) *Writer {
	return &Writer{w: w, dropped: dropped, eightBit: eightBit()}
}

// eightBitLocale says whether the locale, as getenv reads LC_ALL, LC_CTYPE
// and LANG (the first that is set decides), names a character set other
// than UTF-8. An unset locale is taken for UTF-8, as terminals now are:
// a container without LANG runs its programs under a UTF-8 terminal far
// more often than not, and their box-drawing characters would all be "?".
func eightBitLocale(getenv func(string) string) bool {
	for _, name := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := strings.ToLower(getenv(name)); v != "" {
			return !strings.Contains(v, "utf-8") && !strings.Contains(v, "utf8")
		}
	}
	return false
}

// c1Byte is what dropped is told of a character written as "?" in an
// 8-bit locale.
const c1Byte = "C1 byte in a character"

// Foreground returns a writer that passes to w, a terminal, the output of
// a command that runs on a pseudo-terminal of cordon's, whose input is
// what is typed on w: so the terminal's answers reach the command, and
// the command may ask (device attributes, the cursor's place) and set the
// modes of what the terminal sends (mouse, focus, keyboard protocols).
// What acts beyond the terminal's screen is dropped: the control strings
// DCS but DECRQSS and XTGETTCAP (tmux's passthrough to the terminal
// outside it, kitty's remote control), APC (the kitty graphics protocol, which reads files on the
// terminal's host), PM and SOS, and every OSC but the window title,
// colours, hyperlinks to web pages, files and mail, the pointer's shape
// and prompt marks (OSC 52, the clipboard; notifications; iTerm2's and
// kitty's file transfers; the working directory new tabs open in; a link
// to another scheme, which opens whatever handles it). So are media copy,
// the title reports, VT52 mode and DECSCL (droppedSequence), and the
// escape sequences that change how the terminal decodes or answers
// (foregroundIntermediates).
// C1 controls and bytes that are not UTF-8 are as Display has them.
// dropped, if not nil, is called with what was dropped ("OSC 52", "DCS")
// as each is.
func Foreground(w io.Writer, dropped func(what string)) *Writer {
	d := Display(w, dropped)
	d.fore = true
	return d
}

// shownOSC are the OSC commands Foreground passes: the window and icon
// titles, the palette and the dynamic colours and their resets, the
// hyperlink, the pointer's shape, and FinalTerm's prompt marks.
var shownOSC = map[string]bool{
	"0": true, "1": true, "2": true, "4": true, "5": true, "8": true,
	"10": true, "11": true, "12": true, "13": true, "14": true, "15": true, "16": true, "17": true, "18": true, "19": true,
	"22": true, "104": true, "105": true,
	"110": true, "111": true, "112": true, "113": true, "114": true, "115": true, "116": true, "117": true, "118": true, "119": true,
	"133": true,
}

// Writer is the writer Display returns. It is safe for concurrent use:
// a command's stdout and stderr on one terminal share one, each Write
// going to w whole before the next (two writers of one terminal would
// have their writes interleaved where the kernel cuts one short, one in
// the middle of a sequence the other passed).
type Writer struct {
	mu   sync.Mutex // held through a Write
	w    io.Writer
	st   state
	seq  []byte // the escape sequence read so far, ESC first
	part []byte // the start of a UTF-8 character a write cut off
	out  []byte
	// cut says w took only part of the last write.
	cut bool
	// fore is Foreground's policy; dropped is its callback.
	fore    bool
	dropped func(what string)
	// eightBit: the locale's character set is not UTF-8 (eightBitLocale).
	eightBit bool
	// linkAt is where a hyperlink's URI starts in seq, 0 before its
	// parameters have ended (linkHead).
	linkAt int
}

// state is what display is in the middle of.
type state int

const (
	ground       state = iota // text
	escape                    // after ESC
	escInter                  // after ESC and an intermediate (ESC ( 0), until the final byte
	csi                       // after ESC [: parameters and intermediates until the final byte
	dropCSI                   // a control sequence too long to keep, until its final byte
	str                       // a control string, until ST, BEL, CAN or SUB
	strEscape                 // ESC in a control string: ST, or a sequence that ends it
	oscNum                    // after ESC ]: the OSC's number, until ; or its end
	oscText                   // the text of an OSC or DCS Foreground passes, its start passed
	oscEscape                 // ESC in an OSC or DCS Foreground passes
	oscNumEscape              // ESC after an OSC's number: ST, or a sequence that ends it, dropped
	dcsHead                   // after ESC P: a DCS's parameters, intermediates and final byte (Foreground)
	linkHead                  // after ESC ] 8 ;: a hyperlink's parameters and its URI's scheme (Foreground)
)

const (
	esc = 0x1b
	can = 0x18
	sub = 0x1a
	// maxSeq bounds the escape sequence display holds: SGR with a
	// true colour for the text and its background takes 40 bytes.
	maxSeq = 256
)

// shownControls are the C0 controls passed.
const shownControls = "\a\b\t\n\v\f\r\x0e\x0f"

// shownCSI are the final bytes of the control sequences passed, with
// no private parameter marker (< = > ?) and no intermediate byte: the
// cursor's movement and place, erasing, inserting and deleting, scrolling,
// tabs, repeating, the scrolling region, saving and restoring the cursor,
// and SGR. None is answered, nor changes what the terminal sends.
const shownCSI = "@ABCDEFGHIJKLMPSTXZ`abdefgmrsu"

// shownESC are the final bytes of the two-byte escape sequences passed:
// save and restore the cursor, index, next line, reverse index, set a tab.
const shownESC = "78DEMH"

// charsetIntermediates introduce the designation of a character set (ESC
// ( 0, line drawing), passed with its final byte; the escape sequences of
// other intermediates (ESC SP F, ESC # 8) are dropped.
const charsetIntermediates = "()*+"

// foregroundIntermediates introduce the other escape sequences Foreground
// passes: the 96-character sets (ESC - A) and the line's size and the
// screen alignment test (ESC # 3 to 8). Others are dropped: ESC % (which
// character encoding the terminal decodes: out of UTF-8, the bytes of a
// character such as U+011D, C4 9D, read as an 8-bit OSC), ESC SP (which
// makes the terminal send its answers with 8-bit controls, or changes its
// conformance level).
const foregroundIntermediates = "-./#"

func (d *Writer) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.start()
	in := p
	c1 := false
	if len(d.part) > 0 {
		in = append(d.part, p...)
		d.part = nil
	}
	for len(in) > 0 {
		if d.st == ground {
			// Text passes in runs, as byte would pass it.
			if n := plainRun(in); n > 0 {
				d.out = append(d.out, in[:n]...)
				in = in[n:]
				continue
			}
		}
		b := in[0]
		if b < utf8.RuneSelf {
			d.byte(b)
			in = in[1:]
			continue
		}
		if !utf8.FullRune(in) {
			d.part = append([]byte(nil), in...)
			break
		}
		r, size := utf8.DecodeRune(in)
		switch {
		case r == utf8.RuneError && size == 1 && b <= 0x9f, r >= 0x80 && r <= 0x9f:
			// A C1 control, the 8-bit form of ESC and a byte.
			c := byte(r)
			if size == 1 {
				c = b
			}
			d.byte(esc)
			d.byte(c - 0x40)
		case r == utf8.RuneError && size == 1:
			d.char([]byte(string(utf8.RuneError)))
		case d.eightBit && hasC1Byte(in[:size]):
			d.char([]byte{'?'})
			c1 = true
		default:
			d.char(in[:size])
		}
		in = in[size:]
	}
	if c1 {
		d.drop(c1Byte)
	}
	if len(d.out) == 0 {
		return len(p), nil
	}
	if err := d.send(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// hasC1Byte says whether c, a UTF-8 character, holds a byte from 0x80 to
// 0x9F, which a terminal decoding bytes reads as a C1 control.
func hasC1Byte(c []byte) bool {
	for _, b := range c {
		if b >= 0x80 && b <= 0x9f {
			return true
		}
	}
	return false
}

// plainRun is the length of the run of printable ASCII, DEL, LF, CR and HT
// that p starts with: what ground passes as it is, in either mode.
func plainRun(p []byte) int {
	for i, b := range p {
		if b < 0x20 && b != '\n' && b != '\r' && b != '\t' || b >= utf8.RuneSelf {
			return i
		}
	}
	return len(p)
}

// start empties out for a write, but for the CAN a cut write owes. The
// CAN ends an OSC whose start was passed, and the rest of it is dropped.
func (d *Writer) start() {
	d.out = d.out[:0]
	if d.cut {
		d.out = append(d.out, can)
		d.abandonOSC()
	}
}

// abandonOSC has the rest of an OSC whose start was passed, and which the
// terminal was told to end (CAN), dropped.
func (d *Writer) abandonOSC() {
	if d.st == oscText || d.st == oscEscape {
		d.st = str
	}
}

// send writes out to w and notes whether w took only part of it.
func (d *Writer) send() error {
	n, err := d.w.Write(d.out)
	d.cut = n < len(d.out)
	return err
}

// Aside returns a writer of text that is not the command's to d's
// terminal (what cordon says while the command's output goes through d),
// passed as it is,
// in turn with d's writes and after the CAN that a write the terminal
// took only part of leaves owed: otherwise the rest of a cut sequence
// and the start of that text would make a question (ESC [ and "cordon:"
// make ESC [ c, the device attributes). What a write of d left
// unfinished (a sequence, a control string, part of a character) is held
// for its next: it neither swallows the text nor is ended by it.
func (d *Writer) Aside() io.Writer {
	return aside{d}
}

// aside is the writer Aside returns.
type aside struct{ d *Writer }

func (a aside) Write(p []byte) (int, error) {
	d := a.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.start()
	if d.st == oscText || d.st == oscEscape {
		// Passed, the OSC's start would take the text in.
		d.out = append(d.out, can)
		d.abandonOSC()
	}
	d.out = append(d.out, p...)
	if err := d.send(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// char takes a character other than ASCII and the C1 controls.
func (d *Writer) char(c []byte) {
	switch d.st {
	case str:
	case oscText:
		d.out = append(d.out, c...)
	case oscNum:
		d.st = str
		d.endOSC(false)
	case dcsHead:
		d.st = str
		d.drop("DCS")
	case linkHead:
		d.st = str
		d.drop("OSC 8")
	case oscNumEscape:
		d.endOSC(false)
		d.st = ground
		d.out = append(d.out, c...)
	case oscEscape:
		d.st = ground
		d.out = append(d.out, esc, '\\')
		d.out = append(d.out, c...)
	default:
		d.st = ground
		d.out = append(d.out, c...)
	}
}

// byte takes an ASCII byte.
func (d *Writer) byte(b byte) {
	switch d.st {
	case ground:
		d.ground(b)
	case escape:
		d.escape(b)
	case escInter:
		d.escInter(b)
	case csi, dropCSI:
		d.csi(b)
	case str:
		switch b {
		case esc:
			d.st = strEscape
		case '\a', can, sub:
			d.st = ground
		}
	case strEscape:
		d.st = escape
		if b == '\\' {
			d.st = ground
			return
		}
		d.escape(b)
	case oscNum:
		d.oscNum(b)
	case dcsHead:
		d.dcsHead(b)
	case linkHead:
		d.linkHead(b)
	case oscText:
		d.oscText(b)
	case oscNumEscape:
		d.st = ground
		if d.endOSC(b == '\\') {
			d.out = append(d.out, esc, b)
		} else if b != '\\' {
			d.escape(b)
		}
	case oscEscape:
		d.out = append(d.out, esc, '\\')
		d.st = ground
		if b != '\\' {
			d.escape(b)
		}
	}
}

// oscNum takes b in an OSC's number, which names it, and decides whether
// Foreground passes it. A number ended by ; or by the OSC's end (BEL, ST) is looked
// up; an OSC a sequence or a control cuts short there is dropped.
func (d *Writer) oscNum(b byte) {
	switch {
	case b >= '0' && b <= '9' && len(d.seq) < 8:
		d.seq = append(d.seq, b)
	case b >= '0' && b <= '9':
		d.st = str
		d.drop("OSC of over 6 digits")
	case b == ';' && d.fore && string(d.seq[2:]) == "8":
		d.st, d.seq, d.linkAt = linkHead, append(d.seq, b), 0
	case b == ';':
		d.st = str
		if d.endOSC(true) {
			d.out = append(d.out, ';')
			d.st = oscText
		}
	case b == '\a':
		d.st = ground
		if d.endOSC(true) {
			d.out = append(d.out, b)
		}
	case b == esc:
		d.st = oscNumEscape
	case b == can || b == sub:
		d.st = ground
		d.endOSC(false)
	default:
		d.st = str
		d.endOSC(false)
	}
}

// linkHead takes b in a hyperlink's (OSC 8's) parameters and the scheme
// of its URI, which decides whether Foreground passes it (shownSchemes):
// a link the terminal opens with whatever handles its scheme (a URL
// handler of an editor, of the desktop) does what that handler does with
// a URI of the command's choosing, behind a text of its choosing. A link
// with no URI, the end of one, passes.
func (d *Writer) linkHead(b byte) {
	switch {
	case b == ';' && d.linkAt == 0 && len(d.seq) < maxSeq:
		d.seq = append(d.seq, b)
		d.linkAt = len(d.seq)
	case b == ':' && d.linkAt > 0:
		scheme := strings.ToLower(string(d.seq[d.linkAt:]))
		if shownSchemes[scheme] {
			d.out = append(d.out, d.seq...)
			d.out = append(d.out, b)
			d.st = oscText
			return
		}
		d.st = str
		d.drop(linkName(scheme))
	case b == '\a' || b == esc:
		ends := d.linkAt > 0 && d.linkAt == len(d.seq)
		switch {
		case ends && b == '\a':
			d.out = append(d.out, d.seq...)
			d.out = append(d.out, b)
			d.st = ground
		case ends:
			d.out = append(d.out, d.seq...)
			d.st = oscEscape
		default:
			d.abandon(b, "OSC 8")
		}
	case b >= 0x20 && b < 0x7f && len(d.seq) < maxSeq:
		d.seq = append(d.seq, b)
	default:
		d.abandon(b, "OSC 8")
	}
}

// abandon drops the control string what, whose head b cut short: BEL,
// CAN and SUB end it, ESC may start ST or a sequence that ends it, and
// after anything else the rest of it is dropped.
func (d *Writer) abandon(b byte, what string) {
	switch b {
	case '\a', can, sub:
		d.st = ground
	case esc:
		d.st = strEscape
	default:
		d.st = str
	}
	d.drop(what)
}

// shownSchemes are the schemes of the hyperlinks Foreground passes: web
// pages, files and mail.
var shownSchemes = map[string]bool{"http": true, "https": true, "file": true, "mailto": true}

// linkName names a hyperlink dropped for its scheme: by the scheme, when
// it is one (RFC 3986: a letter, then letters, digits, + - .).
func linkName(scheme string) string {
	for i, c := range scheme {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "OSC 8"
		}
	}
	if scheme == "" || len(scheme) > 32 {
		return "OSC 8"
	}
	return "OSC 8 to " + scheme + ":"
}

// dcsHead takes b in a DCS's parameters, intermediates and final byte,
// which decide whether Foreground passes it (shownDCS); a DCS a control
// cuts short there is dropped.
func (d *Writer) dcsHead(b byte) {
	switch {
	case b >= 0x20 && b < 0x40 && len(d.seq) < maxSeq:
		d.seq = append(d.seq, b)
	case b >= 0x40 && b < 0x7f && len(d.seq) < maxSeq:
		d.st = str
		if shownDCS[string(d.seq[2:])+string(b)] {
			d.out = append(d.out, d.seq...)
			d.out = append(d.out, b)
			d.st = oscText
			return
		}
		d.drop("DCS")
	default:
		d.abandon(b, "DCS")
	}
}

// shownDCS are the DCS Foreground passes, by their intermediates and
// final byte: DECRQSS and XTGETTCAP, questions about the terminal's
// settings and capabilities, whose answers reach the command.
var shownDCS = map[string]bool{"$q": true, "+q": true}

// endOSC decides on the OSC whose number was read: it passes its start
// and says so when ok, for Foreground, and the number is one of shownOSC,
// and otherwise tells dropped.
func (d *Writer) endOSC(ok bool) bool {
	num := string(d.seq[2:])
	if ok && d.fore && shownOSC[num] {
		d.out = append(d.out, d.seq...)
		return true
	}
	d.drop(oscName(num))
	return false
}

// oscName names a dropped OSC by its number's value, as a terminal reads
// it (OSC 052 is OSC 52).
func oscName(num string) string {
	if num == "" {
		return "OSC"
	}
	if v := strings.TrimLeft(num, "0"); v != "" {
		return "OSC " + v
	}
	return "OSC 0"
}

// oscText takes b in the text of an OSC or DCS Foreground passes: printable
// ASCII passes, BEL ends it, CAN and SUB abandon it, and the other
// controls are dropped.
func (d *Writer) oscText(b byte) {
	switch {
	case b == '\a', b == can, b == sub:
		d.out = append(d.out, b)
		d.st = ground
	case b == esc:
		d.st = oscEscape
	case b >= 0x20 && b < 0x7f:
		d.out = append(d.out, b)
	}
}

// drop tells dropped, if there is one, what was dropped.
func (d *Writer) drop(what string) {
	if d.dropped != nil {
		d.dropped(what)
	}
}

// stringNames name the control strings by their introducer's final byte.
var stringNames = map[byte]string{'P': "DCS", '_': "APC", '^': "PM", 'X': "SOS"}

// ground takes b outside any sequence.
func (d *Writer) ground(b byte) {
	switch {
	case b == esc:
		d.st, d.seq = escape, append(d.seq[:0], esc)
	case b < 0x20 && !d.fore && strings.IndexByte(shownControls, b) < 0:
	default:
		d.out = append(d.out, b)
	}
}

// escape takes b after ESC.
func (d *Writer) escape(b byte) {
	d.st = ground
	switch {
	case b == '[':
		d.st, d.seq = csi, append(d.seq[:0], esc, b)
	case b == ']':
		d.st, d.seq = oscNum, append(d.seq[:0], esc, b)
	case b == 'P' && d.fore:
		d.st, d.seq = dcsHead, append(d.seq[:0], esc, b)
	case strings.IndexByte("P_^X", b) >= 0:
		d.st = str
		d.drop(stringNames[b])
	case b >= 0x20 && b < 0x30:
		d.st, d.seq = escInter, append(d.seq[:0], esc, b)
	case b == '}' && d.fore:
		// Terminology's commands (ESC } … NUL) show media from a file or
		// URL of the command's choosing; LS2R, what ESC } is elsewhere,
		// no program of today needs (red team, round 7).
		d.drop("ESC }")
	case b >= 0x30 && b < 0x7f:
		// ST outside a string ends nothing, and is dropped.
		if d.fore && b != '\\' || strings.IndexByte(shownESC, b) >= 0 {
			d.out = append(d.out, esc, b)
		}
	default:
		// A control (ESC ESC starts anew) or DEL: ESC is dropped.
		d.ground(b)
	}
}

// escInter takes b after ESC and an intermediate.
func (d *Writer) escInter(b byte) {
	switch {
	case b >= 0x20 && b < 0x30:
		// A second intermediate: no longer a character set's.
		if len(d.seq) < maxSeq {
			d.seq = append(d.seq, b)
		}
	case b >= 0x30 && b < 0x7f:
		d.st = ground
		switch {
		case len(d.seq) == 2 && strings.IndexByte(charsetIntermediates, d.seq[1]) >= 0,
			d.fore && len(d.seq) == 2 && strings.IndexByte(foregroundIntermediates, d.seq[1]) >= 0:
			d.out = append(d.out, d.seq...)
			d.out = append(d.out, b)
		case d.fore:
			// Named by the first intermediate alone: the kinds logged
			// are few, whatever the command writes.
			d.drop("ESC " + strings.Replace(string(d.seq[1]), " ", "SP", 1))
		}
	default:
		d.st = ground
		d.ground(b)
	}
}

// csi takes b in a control sequence, or in one too long, dropped.
func (d *Writer) csi(b byte) {
	switch {
	case b >= 0x40 && b < 0x7f:
		var dropped string
		if d.fore {
			dropped = droppedSequence(d.seq[2:], b)
		}
		switch {
		case d.st != csi:
		case dropped != "":
			d.drop(dropped)
		case d.fore || shownSequence(d.seq[2:], b):
			d.out = append(d.out, d.seq...)
			d.out = append(d.out, b)
		}
		d.st = ground
	case b >= 0x20 && b < 0x40:
		if d.st == csi && len(d.seq) < maxSeq {
			d.seq = append(d.seq, b)
			return
		}
		d.st = dropCSI
	default:
		// A control or DEL ends it, unfinished, as does ESC, which starts
		// another.
		d.st = ground
		d.ground(b)
	}
}

// droppedSequence names the control sequence with parameters (and
// intermediates) params and final byte final if Foreground drops it, ""
// if it passes it: media copy (CSI i), which has the terminal print or save the
// screen; the window title and icon label reports (XTWINOPS 20 and 21,
// however written: 021 is 21), which answer with text the command set
// (OSC 0, 1, 2), and an answer that came once the run was over reached
// the user's shell as typed, a line of the command's choosing; VT52 mode
// (DECANM reset, CSI ? 2 l), in which the terminal takes none of what
// cordon writes to put its input modes back (inputDefaults); DECSCL
// (CSI … " p), which has it answer with 8-bit controls; and the reports
// of what the screen shows, which would read the user's earlier output
// (a token printed before the run) into the box: DECRQCRA (CSI … * y), a
// checksum of an area, one cell's being its character (red team, round
// 7, rebuilt a line of the screen a cell at a time), and XTREPORTSGR
// (CSI … # |), an area's colours and attributes, and Contour's buffer
// capture (CSI > … t), lines of it as text, with every t sequence that
// has a private marker.
func droppedSequence(params []byte, final byte) string {
	p := string(params)
	switch {
	case final == 'i':
		return "CSI i"
	case final == 'y' && strings.HasSuffix(p, "*"):
		return "CSI * y"
	case final == '|' && strings.HasSuffix(p, "#"):
		return "CSI # |"
	case final == 't' && strings.ContainsAny(p, "<=>?"):
		// Contour's buffer capture (CSI > Pl ; Pr t) answers with lines
		// of the screen as text (red team, round 7); xterm's title modes
		// (CSI > … t) and the rest are nothing a command needs.
		return "CSI " + p[:1] + " t"
	case final == 't':
		first, _, _ := strings.Cut(p, ";")
		first, _, _ = strings.Cut(first, ":")
		if n, err := strconv.Atoi(first); err == nil && (n == 20 || n == 21) {
			return "CSI " + strconv.Itoa(n) + " t"
		}
	case final == 'l' && strings.HasPrefix(p, "?"):
		for v := range strings.SplitSeq(p[1:], ";") {
			if n, err := strconv.Atoi(v); err == nil && n == 2 {
				return "CSI ?2 l"
			}
		}
	case final == 'p' && strings.HasSuffix(p, `"`):
		return `CSI " p`
	}
	return ""
}

// shownSequence says whether the control sequence with parameters params
// and final byte final is passed: no private marker, no intermediate, and
// a final byte of shownCSI; SD (T) with one parameter at most, as with
// five it starts mouse tracking.
func shownSequence(params []byte, final byte) bool {
	for _, c := range params {
		if (c < '0' || c > '9') && c != ';' && c != ':' {
			return false
		}
	}
	if final == 'T' && strings.ContainsAny(string(params), ";:") {
		return false
	}
	return strings.IndexByte(shownCSI, final) >= 0
}
