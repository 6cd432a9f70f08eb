package tlsterm

import (
	"bytes"
	"context"
	"io"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// An upstream that answers a request without reading its body reads the
// body next, as a request of its own. A body that starts as a request
// with a length (POST /collect HTTP/1.1, Content-Length: 80) then takes
// the start of the next request cordon sends on that connection as its
// body: that request's headers, with the credentials cordon injected
// into them, stored where the box can ask for them again. So a
// connection that carried a body starting like a request line (any blank
// lines, then a token and a space: the method) is not used for another
// request. A body that is a request's start only in part (a token cut
// off by the body's end) counts too.

// BodyLikeRequestDetail is the close line's detail for a request whose
// body started like a request line.
const BodyLikeRequestDetail = "the body starts like a request line (a token and a space): its upstream connection carried no other request, as a server that ignored the body would read it as a request of its own, which could take the next request as its body"

type bodyNoticeKey struct{}

// WithBodyNotice returns ctx carrying notice, which a WatchingTransport
// calls when the body of a request made with ctx starts like a request
// line, so that the request's close line can say so.
func WithBodyNotice(ctx context.Context, notice func()) context.Context {
	return context.WithValue(ctx, bodyNoticeKey{}, notice)
}

// requestLikeLen bounds how much of a body is looked at: a method longer
// than that is taken for one.
const requestLikeLen = 64

// requestLike says whether body (a request body's first bytes, all of it
// when ended) starts like a request line, and whether that is decided.
func requestLike(body []byte, ended bool) (like, decided bool) {
	i := 0
	for i < len(body) && (body[i] == '\r' || body[i] == '\n' || body[i] == ' ' || body[i] == '\t') {
		i++
	}
	method := 0
	for ; i < len(body); i++ {
		switch c := body[i]; {
		case httpguts.IsTokenRune(rune(c)):
			method++
		case c == ' ' && method > 0:
			return true, true
		default:
			return false, true
		}
	}
	if ended || len(body) >= requestLikeLen {
		return method > 0, true
	}
	return false, false
}

// startWatch is a request body that records whether it starts like a
// request line (requestLike), as it is read.
type startWatch struct {
	io.ReadCloser

	mu      sync.Mutex
	head    []byte
	decided bool
	like    bool
	// onLike, when set, is called when the body is found to start like
	// a request, or at once when set after that.
	onLike func()
}

// whenLike sets w's onLike.
func (w *startWatch) whenLike(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onLike = f
	if w.decided && w.like {
		f()
	}
}

func (w *startWatch) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	w.mu.Lock()
	if !w.decided {
		chunk := p[:n]
		if len(w.head) == 0 {
			// Blank lines, as many as there are, before the start: a
			// server that skips them reads on to the request after.
			chunk = bytes.TrimLeft(chunk, "\r\n \t")
		}
		w.head = append(w.head, chunk[:min(len(chunk), requestLikeLen-len(w.head))]...)
		w.like, w.decided = requestLike(w.head, err != nil)
		if w.like && w.onLike != nil {
			w.onLike()
		}
	}
	w.mu.Unlock()
	return n, err
}

// startsLikeRequest says whether what was read of the body started like
// a request line; a body not read far enough to tell counts as one.
func (w *startWatch) startsLikeRequest() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.decided {
		like, _ := requestLike(w.head, true)
		return like
	}
	return w.like
}
