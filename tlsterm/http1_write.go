package tlsterm

import (
	"bufio"
	"errors"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeBodyless writes a request without a body the way req.Write does,
// byte for byte, without the allocations and formatting req.Write spends
// on every request (about a microsecond of a kept-alive request here). A
// request it does not cover (a body, transfer codings, trailers, a close,
// a host needing IDNA or zone handling) goes to req.Write.
func writeBodyless(w *bufio.Writer, req *http.Request) error {
	host := req.Host
	if req.Body != nil || req.ContentLength != 0 || req.TransferEncoding != nil || req.Trailer != nil || req.Close ||
		host == "" || !isPrint(host) || strings.Contains(host, "%") || !httpguts.ValidHostHeader(host) ||
		req.URL == nil || req.URL.Opaque != "" || req.Method == "" || req.Method == http.MethodConnect {
		return req.Write(w)
	}
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] < ' ' || uri[i] == 0x7f {
			return errors.New("net/http: can't write control character in Request.URL")
		}
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	if ua := userAgent(req.Header); ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(ua)
		w.WriteString("\r\n")
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// As net/http: many servers expect a length for these methods.
		w.WriteString("Content-Length: 0\r\n")
	}
	if err := req.Header.WriteSubset(w, requestOwnHeaders); err != nil {
		return err
	}
	_, err := w.WriteString("\r\n")
	return err
}

// requestOwnHeaders are the header fields req.Write writes from the
// request itself rather than from its Header.
var requestOwnHeaders = map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true,
	"Transfer-Encoding": true, "Trailer": true}

// userAgent is the User-Agent req.Write sends: Go's own when the header
// has none (outgoing always sets one), else its first value with line
// breaks made spaces and surrounding space trimmed; "" sends none.
func userAgent(h http.Header) string {
	v, ok := h["User-Agent"]
	switch {
	case !ok:
		return "Go-http-client/1.1"
	case len(v) == 0:
		return ""
	}
	return textproto.TrimString(lineBreaksToSpaces.Replace(v[0]))
}

var lineBreaksToSpaces = strings.NewReplacer("\n", " ", "\r", " ")
