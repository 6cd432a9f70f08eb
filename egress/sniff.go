package egress

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cordon-sandbox/cordon/internal/survive"
)

// protocol is what the first bytes of a tunnel say it carries.
type protocol int

const (
	protoRefused protocol = iota // neither side made it plain in time
	protoEnded                   // a side left before either made it plain
	protoOpaque                  // the server spoke first: SSH, SMTP
	protoTLS                     // a TLS handshake record from the client
	protoHTTP                    // a plaintext HTTP/1.x request line from the client
)

// sniff decides what a fresh, checked tunnel carries. A client that opens
// with a TLS handshake record or an HTTP request line is inspected. Any
// other tunnel is relayed unread only once the upstream has spoken of its
// own accord, before a byte of the client's reached it: a TLS or HTTP
// server never does, so a tunnel relayed unread cannot reach a server
// that routes by name. sniff waits up to timeout for one or the other; a
// tunnel neither side made plain by then is refused, and one a side left
// before that has ended. The returned conns replay every byte sniff read;
// why says, for a refused tunnel, what was seen.
func sniff(client, upstream net.Conn, timeout time.Duration) (proto protocol, why string, c, u net.Conn) {
	deadline := time.Now().Add(timeout)
	cr := bufio.NewReader(client)
	var clientErr error
	fromClient := make(chan protocol, 1)
	go func() {
		p, err := func() (p protocol, err error) {
			defer survive.Recover(&err, "reading a tunnel's opening")
			return readOpening(cr)
		}()
		clientErr = err
		fromClient <- p
	}()
	var first []byte
	var upstreamErr error
	fromUpstream := make(chan bool, 1)
	go func() {
		buf := make([]byte, 4096)
		n, err := upstream.Read(buf)
		first, upstreamErr = buf[:n], err
		fromUpstream <- n > 0
	}()
	client.SetReadDeadline(deadline)
	upstream.SetReadDeadline(deadline)

	left := func(err error) bool { return err != nil && !errors.Is(err, os.ErrDeadlineExceeded) }
	var spoke bool
	select {
	case spoke = <-fromUpstream:
		client.SetReadDeadline(time.Now())
		<-fromClient
	case proto = <-fromClient:
		if proto != protoRefused || clientErr != nil {
			upstream.SetReadDeadline(time.Now()) // decided, or nothing more will come
		}
		spoke = <-fromUpstream
	}
	switch {
	case spoke:
		proto = protoOpaque // it spoke first: none of the client's bytes have gone
	case proto != protoRefused:
	case left(clientErr), left(upstreamErr):
		proto = protoEnded
	case cr.Buffered() > 0:
		why = "the client's first bytes are neither a TLS ClientHello nor an HTTP request line, and the server did not speak first"
	default:
		why = fmt.Sprintf("neither side spoke within %s", timeout)
	}
	client.SetReadDeadline(time.Time{})
	upstream.SetReadDeadline(time.Time{})
	c, u = readerConn(client, cr), upstream
	if len(first) > 0 {
		u = newPrefixConn(upstream, first)
	}
	return proto, why, c, u
}

// readOpening reads a tunnel's first client bytes until they decide its
// protocol: protoTLS or protoHTTP, or protoRefused for anything else or
// with the error of a read that failed first. It only peeks; the bytes
// stay in r.
func readOpening(r *bufio.Reader) (protocol, error) {
	for {
		b, _ := r.Peek(r.Buffered())
		if p, ok := opening(b); ok {
			return p, nil
		}
		if _, err := r.Peek(len(b) + 1); err != nil {
			b, _ = r.Peek(r.Buffered())
			if p, ok := opening(b); ok {
				return p, nil
			}
			return protoRefused, err
		}
	}
}

// maxMethod bounds the request method opening accepts: longer than any
// registered one.
const maxMethod = 24

// opening judges a tunnel's first client bytes: a TLS handshake record,
// or an HTTP/1.x request line's method (capitals, '-' and '_', as every
// registered method is written) and its space. ok is false while b is too
// short to tell. An SSH client's banner ("SSH-2.0-…") is neither.
func opening(b []byte) (p protocol, ok bool) {
	if len(b) == 0 {
		return protoRefused, false
	}
	if b[0] == 0x16 {
		return protoTLS, true
	}
	for i, c := range b {
		switch {
		case c == ' ' && i > 0:
			return protoHTTP, true
		case i == maxMethod:
			return protoRefused, true
		case c >= 'A' && c <= 'Z', i > 0 && (c == '-' || c == '_'):
		default:
			return protoRefused, true
		}
	}
	return protoRefused, false
}

// readerConn reads through br, which may hold bytes already taken from c.
func readerConn(c net.Conn, br *bufio.Reader) net.Conn {
	if br.Buffered() == 0 {
		return c
	}
	b, _ := br.Peek(br.Buffered())
	return newPrefixConn(c, b)
}
