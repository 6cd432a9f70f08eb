package tlsterm

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// Masking what comes back: response header blocks as httputil.ReverseProxy
// writes them, and bodies the upstream encoded although nobody asked it to.

// ReasonUncheckedEncoding is a response refused because the upstream
// encoded its body (Content-Encoding), or a switched protocol's messages
// (a WebSocket extension), in a way cordon did not ask for and cannot see
// through, so a real secret in it could not be masked.
const ReasonUncheckedEncoding policy.Reason = "unchecked_encoding"

// EncodingError is a response MaskResponse or CheckSwitch refused: its
// encoding hides it from masking.
type EncodingError struct {
	// Header names the codings: Content-Encoding, or
	// Sec-WebSocket-Extensions.
	Header string
	// Codings are the response's codings, in the order applied.
	Codings []string
}

func (e *EncodingError) Error() string {
	shown := make([]string, len(e.Codings))
	for i, c := range e.Codings {
		shown[i] = c
		switch c {
		case "br", "zstd", "deflate", "compress", "x-compress", "gzip", "x-gzip", "dcb", "dcz", "aes128gcm", "exi", "pack200-gzip",
			"permessage-deflate", "x-webkit-deflate-frame":
		default:
			// The header came from the upstream: nothing of it but the
			// names of known codings goes into a line or a page.
			shown[i] = "(unrecognised)"
		}
	}
	return fmt.Sprintf("the upstream sent its response with %s %q, which cordon did not ask for and cannot check for real credentials; refused rather than passed on unchecked",
		e.Header, strings.Join(shown, ", "))
}

// UncheckedEncoding is the refusal of a response MaskResponse or
// CheckSwitch turned away (err is or wraps an *EncodingError), for its 502
// and its close line, or of a WebSocket cut for a frame masking could not
// read (a *WebSocketError), for its close line.
func UncheckedEncoding(err error) (policy.Decision, bool) {
	var ee *EncodingError
	var we *WebSocketError
	switch {
	case errors.As(err, &ee):
		return policy.Decision{Reason: ReasonUncheckedEncoding, Detail: ee.Error()}, true
	case errors.As(err, &we):
		return policy.Decision{Reason: ReasonUncheckedEncoding, Detail: we.Error()}, true
	}
	return policy.Decision{}, false
}

// decodeBody makes resp's body readable to masking. A body the upstream
// gzipped (though cordon, which removes Accept-Encoding, asked for no
// coding) is decoded as it is read: nothing is held whole, and a
// decompression bomb costs only the time its output takes to stream. Any
// other coding, stacked codings included, is an *EncodingError.
func decodeBody(resp *http.Response) error {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(textproto.TrimString(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		resp.Body = &gunzipBody{src: resp.Body}
		resp.Header.Del("Content-Encoding")
		resp.Uncompressed = true
		return nil
	}
	return &EncodingError{Header: "Content-Encoding", Codings: codings}
}

// CheckSwitch refuses a 101 whose new protocol the upstream encodes in a
// way cordon cannot see through: a WebSocket extension (permessage-deflate
// compresses every message, and masking, which reads the bytes as they
// pass, would find no secret in them). ApplyCredentials keeps the client
// from offering one, so only an upstream that ignores that names one. It
// returns an *EncodingError, and nil without credentials.
func CheckSwitch(creds *credinject.Set, resp *http.Response) error {
	if len(creds.Names()) == 0 {
		return nil
	}
	var exts []string
	for _, v := range resp.Header.Values("Sec-WebSocket-Extensions") {
		for ext := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(ext, ";")
			if name = strings.ToLower(textproto.TrimString(name)); name != "" {
				exts = append(exts, name)
			}
		}
	}
	if len(exts) > 0 {
		return &EncodingError{Header: "Sec-WebSocket-Extensions", Codings: exts}
	}
	return nil
}

// gunzipBody is a gzip-encoded body, decoded as it is read. The gzip header
// is read with the first Read, so the response's header is not held back
// waiting for the body.
type gunzipBody struct {
	src io.ReadCloser
	zr  *gzip.Reader
	err error
}

func (g *gunzipBody) Read(p []byte) (int, error) {
	if g.zr == nil {
		if g.err != nil {
			return 0, g.err
		}
		zr, err := gzip.NewReader(g.src)
		if err != nil {
			g.err = err // io.EOF for an empty body
			return 0, err
		}
		g.zr = zr
	}
	return g.zr.Read(p)
}

// Close closes the encoded body.
func (g *gunzipBody) Close() error { return g.src.Close() }

// ServeMasked has h, an httputil.ReverseProxy whose ModifyResponse calls
// MaskResponse, serve r on w, with every real secret masked in the header
// blocks it writes: the 1xx responses it relays (Early Hints) through its
// own trace hook, the final header, and the trailers it copies into w's
// header map after the body. Without credentials it is h.ServeHTTP.
func ServeMasked(creds *credinject.Set, h http.Handler, w http.ResponseWriter, r *http.Request) {
	if len(creds.Names()) == 0 {
		h.ServeHTTP(w, r)
		return
	}
	// The trailers are sent once the handler returns, from the header map.
	defer creds.MaskHeader(w.Header())
	h.ServeHTTP(&maskedWriter{ResponseWriter: w, creds: creds}, r)
}

// maskedWriter masks the header map each time a header block is written.
// Unwrap lets http.ResponseController reach the writer underneath (for
// Hijack, deadlines); a 101's header, which ReverseProxy writes to the
// hijacked connection itself, is masked before that, with its body.
type maskedWriter struct {
	http.ResponseWriter
	creds *credinject.Set
	// final is set once the final (non-1xx) header is written.
	final bool
}

func (m *maskedWriter) WriteHeader(code int) {
	if m.final {
		m.ResponseWriter.WriteHeader(code) // superfluous: net/http logs it
		return
	}
	if code >= 200 || code == http.StatusSwitchingProtocols {
		m.final = true
	}
	m.creds.MaskHeader(m.ResponseWriter.Header())
	m.ResponseWriter.WriteHeader(code)
}

func (m *maskedWriter) Write(b []byte) (int, error) {
	if !m.final {
		m.WriteHeader(http.StatusOK)
	}
	return m.ResponseWriter.Write(b)
}

func (m *maskedWriter) Flush() {
	if !m.final {
		m.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(m.ResponseWriter).Flush()
}

func (m *maskedWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
