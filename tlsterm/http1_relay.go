package tlsterm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/survive"
)

// Bodies and switched protocols on the HTTP/1.x path, relayed both ways.

// relayBody copies a response body to the client, chunk-encoding it when
// chunked is set, one TLS record at a time; what is buffered is flushed
// whenever the upstream has nothing more at hand, so streamed responses
// are not held back. Unless src reads the upstream directly (direct), as
// a masking reader with its read-ahead does not, that is not known, and
// each read is flushed.
func (h *conn1) relayBody(src io.Reader, chunked, direct bool) (n int64, rerr, werr error) {
	bp := copyBuffers.get()
	defer copyBuffers.put(bp)
	buf := *bp
	h.cork.hold()
	defer func() {
		if err := h.cork.release(); werr == nil {
			werr = err
		}
	}()
	// A chunk is "hex size CRLF data CRLF": its size line goes in front
	// of the data, read in place.
	const pre = 6
	for {
		data := buf
		if chunked {
			data = buf[pre : maxRecord-2]
		}
		k, err := src.Read(data)
		if k > 0 {
			frame := data[:k]
			if chunked {
				size := strconv.AppendInt(buf[maxRecord:maxRecord], int64(k), 16)
				size = append(size, '\r', '\n')
				s := pre - len(size)
				copy(buf[s:], size)
				frame = append(buf[s:pre+k], '\r', '\n')
			}
			if _, werr = h.bw.Write(frame); werr != nil {
				return n, nil, werr
			}
			n += int64(k)
			if !direct || h.up == nil || h.up.br.Buffered() == 0 {
				if werr = h.bw.Flush(); werr != nil {
					return n, nil, werr
				}
				if !direct || h.up == nil || h.up.raw == nil || h.up.raw.drained() {
					werr = h.cork.flush()
				} else {
					h.cork.wait() // the upstream has more at hand
				}
				if werr != nil {
					return n, nil, werr
				}
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return n, nil, nil
		case err != nil:
			return n, err, nil
		}
	}
}

// mask replaces real secrets in a response header (or trailer) with their
// placeholders.
func (h *conn1) mask(hdr http.Header) {
	if creds := h.st.t.cfg.Creds; len(creds.Names()) > 0 {
		creds.MaskHeader(hdr)
	}
}

// writeTrailer ends a chunked body, with the response's trailers.
func writeTrailer(w *bufio.Writer, trailer http.Header) error {
	w.WriteString("0\r\n")
	if err := trailer.Write(w); err != nil {
		return err
	}
	_, err := w.WriteString("\r\n")
	return err
}

// switchProtocols relays a 101 response and then the bytes of the new
// protocol both ways until both sides are done; the connection is then
// over. Credentials are guarded and masked in the new protocol's bytes as
// in bodies.
func (h *conn1) switchProtocols(x *exchange, body *clientBody) (int, int64, bool) {
	resp := x.resp
	got := upgradeType(resp.Header)
	switch {
	case x.upgrade == "":
		return h.fail(x, errors.New("upstream switched protocols unasked"), body)
	case !isPrint(got):
		return h.fail(x, fmt.Errorf("upstream tried to switch to invalid protocol %q", got), body)
	case !strings.EqualFold(x.upgrade, got):
		return h.fail(x, fmt.Errorf("upstream tried to switch protocol %q when %q was requested", got, x.upgrade), body)
	}
	if err := CheckSwitch(h.st.t.cfg.Creds, resp); err != nil {
		return h.fail(x, err, body)
	}
	if x.wrote != nil {
		// The request's body goes up whole before the new protocol.
		err := <-x.wrote
		x.wrote = nil
		if err != nil {
			return h.fail(x, err, body)
		}
	}
	creds := h.st.t.cfg.Creds
	fromClient, fromUpstream := io.Reader(h.br), io.Reader(h.up.br)
	h.mask(resp.Header)
	var guard SwitchGuard
	var masked io.ReadCloser
	if len(creds.Names()) > 0 {
		guard = GuardSwitched(creds, got, io.NopCloser(h.br), h.st.s.Host, h.st.s.Port)
		masked = MaskSwitched(creds, got, io.NopCloser(h.up.br))
		fromClient, fromUpstream = guard, masked
	}
	writeHead(h.bw, x.req, resp.StatusCode, resp.Header)
	if h.bw.Flush() != nil {
		return http.StatusSwitchingProtocols, 0, false
	}
	h.guard.Stop() // what follows is not HTTP
	up, down := relayBoth(h.client, h.up.conn, fromClient, fromUpstream)
	if masked != nil {
		// relayBoth has closed the connection or read it to its end, so
		// the read-ahead ends, before the upstream's buffers go back.
		h.up.conn.Close()
		masked.Close()
	}
	if guard != nil && guard.Err() != nil {
		// The switched protocol was cut for what the client sent on it.
		d := Failure(guard.Err(), creds)
		x.reason, x.detail = string(d.Reason), d.Detail
	} else if d, ok := UncheckedEncoding(wsRefusal(masked)); ok {
		// Or for what the upstream sent.
		x.reason, x.detail = string(d.Reason), d.Detail
	}
	x.bytesUp += up
	h.dropUpstream()
	return http.StatusSwitchingProtocols, down, false
}

// relayBoth copies fromClient to upstream and fromUpstream to client until
// both directions end (a failing direction ends both), half-closing each
// destination as its source ends. A panic in fromClient's reads (a
// guard's) fails that direction (survive.Recover).
func relayBoth(client, upstream net.Conn, fromClient, fromUpstream io.Reader) (up, down int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := func() (err error) {
			defer survive.Recover(&err, "relaying a client's bytes upstream")
			up, err = copyPlain(upstream, fromClient)
			return err
		}()
		endWrite(upstream, client, err)
	}()
	var err error
	down, err = copyPlain(client, fromUpstream)
	endWrite(client, upstream, err)
	<-done
	return up, down
}

// endWrite half-closes dst after a clean end of its source, or closes both
// connections after a failure so that the other direction ends too.
func endWrite(dst, other net.Conn, err error) {
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	other.Close()
}

// copyPlain copies src to dst through a pooled buffer (never ReadFrom or
// WriteTo, which would pick their own small buffers); a clean end is a nil
// error.
func copyPlain(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBuffers.get()
	defer copyBuffers.put(bp)
	buf := *bp
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n *int64
}

// bodyAllowed says whether a response with status to req carries a body.
func bodyAllowed(req *http.Request, status int) bool {
	return req.Method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
