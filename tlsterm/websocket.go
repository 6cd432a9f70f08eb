package tlsterm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/wsframe"
)

// A WebSocket's messages, masked as they come back. A server may spread a
// message over frames (many split every message longer than their write
// buffer), with control frames among them, so a secret split between two
// frames is whole only in the message the client puts together, never in
// the bytes that pass: masking those bytes would let it through. So the
// frames are read, each message's payload is masked across them, and what
// is handed out is framed anew.

// MaskSwitched returns what the upstream sends on a switched connection
// (src), as the client is to get it with creds' secrets masked: a
// WebSocket's messages (protocol is the 101's Upgrade) frame by frame, any
// other protocol's bytes as a body's. Its Close closes src.
func MaskSwitched(creds *credinject.Set, protocol string, src io.ReadCloser) io.ReadCloser {
	if !strings.EqualFold(protocol, "websocket") {
		return creds.MaskBody(src)
	}
	return &wsMasker{src: src, br: bufio.NewReaderSize(src, bufSize), creds: creds, msg: creds.NewMasker(),
		buf: make([]byte, maxRecord)}
}

// SwitchGuard is what a client sends on a switched connection, read
// through a credential guard; Err says whether the guard cut it.
type SwitchGuard interface {
	io.ReadCloser
	Err() error
}

// GuardSwitched returns what the client sends on a switched connection
// (src) toward host and port, failing the read that would complete a real
// secret or the placeholder of a credential not bound there: a
// WebSocket's frames (protocol is the 101's Upgrade) passed on as they
// are, their payloads checked unmasked (a client masks every frame with a
// key of its own, so the bytes that pass show nothing), any other
// protocol's bytes as a request body's (credinject.GuardBody). Its Close
// closes src.
func GuardSwitched(creds *credinject.Set, protocol string, src io.ReadCloser, host string, port int) SwitchGuard {
	if !strings.EqualFold(protocol, "websocket") {
		return creds.GuardBody(src, host, port)
	}
	return &wsGuard{src: src, br: bufio.NewReaderSize(src, bufSize),
		data: creds.NewScreen(host, port), control: creds.NewScreen(host, port)}
}

// wsGuard passes a client's WebSocket frames on unchanged, checking each
// frame's payload, unmasked: a message's across its fragments (data), and
// each control frame's on its own (control), since one may come between
// two fragments. A frame with a reserved bit set (a compressed message,
// though no extension was let through) is a WebSocketError: its payload
// could not be checked.
type wsGuard struct {
	src           io.Closer
	br            *bufio.Reader
	data, control *credinject.Screen
	// head is the raw header of the frame being read, still to hand
	// out; left is what remains of its payload, key its masking key and
	// at the key's place for the next payload byte.
	head    []byte
	left    uint64
	key     [4]byte
	at      int
	screen  *credinject.Screen
	scratch []byte
	err     error
	// refused is a frame it could not check, for Err.
	refused atomic.Pointer[WebSocketError]
}

func (g *wsGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(g.head) == 0 && g.left == 0 {
		if g.err = g.nextFrame(); g.err != nil {
			return 0, g.err
		}
	}
	if len(g.head) > 0 {
		n := copy(p, g.head)
		g.head = g.head[n:]
		return n, nil
	}
	k, err := g.br.Read(p[:min(uint64(len(p)), g.left)])
	g.scratch = append(g.scratch[:0], p[:k]...)
	for i := range g.scratch {
		g.scratch[i] ^= g.key[(g.at+i)%4]
	}
	g.at, g.left = (g.at+k)%4, g.left-uint64(k)
	if cerr := g.screen.Check(g.scratch); cerr != nil {
		g.err = cerr
		return 0, cerr
	}
	if err != nil && g.left > 0 {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		g.err = err
	}
	return k, nil
}

// nextFrame reads a frame's header, keeping its raw bytes to pass on.
func (g *wsGuard) nextFrame() error {
	first, err := g.br.ReadByte()
	if err != nil {
		return err // io.EOF between frames
	}
	if first&wsRSV != 0 {
		err := &WebSocketError{"a frame from the client with a reserved bit set, as a compressed message has, though no extension was negotiated"}
		g.refused.Store(err)
		return err
	}
	second, err := g.br.ReadByte()
	if err != nil {
		return io.ErrUnexpectedEOF
	}
	g.head = append(g.head[:0], first, second)
	extra := 0
	switch second &^ wsMask {
	case 126:
		extra = 2
	case 127:
		extra = 8
	}
	if second&wsMask != 0 {
		extra += 4
	}
	start := len(g.head)
	for range extra {
		b, err := g.br.ReadByte()
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		g.head = append(g.head, b)
	}
	ext := g.head[start:]
	switch n := second &^ wsMask; n {
	case 126:
		g.left, ext = uint64(binary.BigEndian.Uint16(ext)), ext[2:]
	case 127:
		g.left, ext = binary.BigEndian.Uint64(ext), ext[8:]
	default:
		g.left = uint64(n)
	}
	g.key, g.at = [4]byte{}, 0
	if second&wsMask != 0 {
		copy(g.key[:], ext)
	}
	g.screen = g.data
	if first&wsOpcode >= wsClose {
		g.screen = g.control
		g.control.Reset()
	}
	return nil
}

// Close closes the source.
func (g *wsGuard) Close() error { return g.src.Close() }

// Err returns what cut what the client sent (a *credinject.Error, or a
// *WebSocketError for a frame it could not check), or nil.
func (g *wsGuard) Err() error {
	if err := g.data.Err(); err != nil {
		return err
	}
	if err := g.control.Err(); err != nil {
		return err
	}
	if err := g.refused.Load(); err != nil {
		return err
	}
	return nil
}

// WebSocketError is a WebSocket upstream's frame that masking cannot read:
// a bit or an opcode no negotiated extension gives a meaning to (a
// compressed message sets one), a masked frame, or frames out of order.
// The connection is cut there.
type WebSocketError struct{ msg string }

func (e *WebSocketError) Error() string {
	return "the upstream's WebSocket frames could not be checked for real credentials, so the connection was cut: " + e.msg
}

// wsRefusal is the *WebSocketError that cut what a MaskSwitched reader
// read, or nil; its reads must be over.
func wsRefusal(masked io.Reader) error {
	w, ok := masked.(*wsMasker)
	var we *WebSocketError
	if ok && errors.As(w.err, &we) {
		return we
	}
	return nil
}

// wsMasker reads a server's WebSocket frames and hands out the same
// messages with every real secret masked: each data frame's payload, as it
// arrives, goes through the message's Masker, and what that decides goes
// out as a frame of the message; the held-back rest goes out with the
// message's last frame. A control frame is masked whole.
type wsMasker struct {
	src   io.Closer
	br    *bufio.Reader
	creds *credinject.Set
	msg   *credinject.Masker
	// inMsg says a message has begun and not ended; opcode is its type,
	// and begun says a frame of it has gone out (the next is a
	// continuation).
	inMsg, begun bool
	opcode       byte
	// left is what remains of the payload of the frame being read, and
	// fin says that frame ends its message.
	left uint64
	fin  bool
	// buf takes a read of payload, masked its decided part.
	buf, masked []byte
	out         []byte
	off         int
	err         error
}

// WebSocket opcodes and header bits (RFC 6455, section 5.2).
const (
	wsFin          = 0x80
	wsRSV          = 0x70
	wsOpcode       = 0x0f
	wsMask         = 0x80
	wsContinuation = 0x0
	wsBinary       = 0x2
	wsClose        = 0x8
	// wsMaxControl is the most a control frame's payload may hold.
	wsMaxControl = 125
)

func (w *wsMasker) Read(p []byte) (int, error) {
	for w.off == len(w.out) {
		if w.err != nil {
			return 0, w.err
		}
		w.out, w.off = w.out[:0], 0
		w.err = w.next()
	}
	n := copy(p, w.out[w.off:])
	w.off += n
	return n, nil
}

// Close closes the source.
func (w *wsMasker) Close() error { return w.src.Close() }

// next reads a frame's header (and a control frame's payload), or the next
// piece of a data frame's payload, and puts what it decides in w.out.
func (w *wsMasker) next() error {
	if w.left > 0 {
		return w.payload()
	}
	fin, op, n, err := readWSHeader(w.br)
	switch {
	case errors.Is(err, io.EOF) && !w.inMsg:
		return io.EOF
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF // what was held back goes nowhere
	case err != nil:
		return err
	case op >= wsClose:
		return w.control(fin, op, n)
	case op > wsBinary:
		return &WebSocketError{fmt.Sprintf("a frame with opcode %#x, which no extension gives a meaning to", op)}
	case op == wsContinuation && !w.inMsg:
		return &WebSocketError{"a continuation frame outside a message"}
	case op != wsContinuation && w.inMsg:
		return &WebSocketError{"a new message before the last one ended"}
	case op != wsContinuation:
		w.inMsg, w.begun, w.opcode = true, false, op
	}
	w.left, w.fin = n, fin
	if n == 0 && fin {
		w.endMessage(nil)
	}
	return nil
}

// payload reads the next piece of a data frame's payload and frames what
// the message's Masker decides.
func (w *wsMasker) payload() error {
	k, err := w.br.Read(w.buf[:min(w.left, uint64(len(w.buf)))])
	w.left -= uint64(k)
	w.masked = w.msg.Mask(w.masked[:0], w.buf[:k])
	switch {
	case w.left == 0 && w.fin:
		w.endMessage(w.masked)
	case len(w.masked) > 0:
		w.out = wsframe.Append(w.out, w.frameOpcode(), w.masked, nil)
	}
	if err != nil && w.left > 0 {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// endMessage frames decided, and what the Masker held back, as the
// message's last frame.
func (w *wsMasker) endMessage(decided []byte) {
	w.masked = w.msg.End(decided)
	w.out = wsframe.Append(w.out, wsFin|w.frameOpcode(), w.masked, nil)
	w.inMsg = false
}

// frameOpcode is the opcode of the message's next frame out: the
// message's own for its first, continuation after.
func (w *wsMasker) frameOpcode() byte {
	if w.begun {
		return wsContinuation
	}
	w.begun = true
	return w.opcode
}

// control reads a control frame's payload and frames it masked. A
// placeholder longer than its secret could take the payload past what a
// control frame may hold; it is cut there (what goes is the placeholder's
// start, never the secret's).
func (w *wsMasker) control(fin bool, op byte, n uint64) error {
	if !fin || n > wsMaxControl {
		return &WebSocketError{"a fragmented or oversized control frame"}
	}
	payload := w.buf[:n]
	if _, err := io.ReadFull(w.br, payload); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	masked := w.creds.MaskBytes(payload)
	w.out = wsframe.Append(w.out, wsFin|op, masked[:min(len(masked), wsMaxControl)], nil)
	return nil
}

// readWSHeader reads a server's frame header: its FIN bit, opcode and
// payload length. A reserved bit (no extension was let through to give one
// a meaning) or a mask (a server's frames have none) is a WebSocketError.
func readWSHeader(br *bufio.Reader) (fin bool, op byte, n uint64, err error) {
	var head [2]byte
	if _, err := io.ReadFull(br, head[:1]); err != nil {
		return false, 0, 0, err // io.EOF only here, between frames
	}
	if _, err := io.ReadFull(br, head[1:]); err != nil {
		return false, 0, 0, io.ErrUnexpectedEOF
	}
	switch {
	case head[0]&wsRSV != 0:
		return false, 0, 0, &WebSocketError{"a frame with a reserved bit set, as a compressed message has, though no extension was negotiated"}
	case head[1]&wsMask != 0:
		return false, 0, 0, &WebSocketError{"a masked frame, which a server never sends"}
	}
	fin, op, n = head[0]&wsFin != 0, head[0]&wsOpcode, uint64(head[1]&^wsMask)
	var ext []byte
	switch n {
	case 126:
		ext = make([]byte, 2)
	case 127:
		ext = make([]byte, 8)
	default:
		return fin, op, n, nil
	}
	if _, err := io.ReadFull(br, ext); err != nil {
		return false, 0, 0, io.ErrUnexpectedEOF
	}
	if len(ext) == 2 {
		return fin, op, uint64(binary.BigEndian.Uint16(ext)), nil
	}
	if n = binary.BigEndian.Uint64(ext); n>>63 != 0 {
		return false, 0, 0, &WebSocketError{"a frame length with its top bit set"}
	}
	return fin, op, n, nil
}
