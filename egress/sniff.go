package egress

import (
	"bufio"
	"net"
	"time"
)

// protocol is what the first bytes of a tunnel say it carries.
type protocol int

const (
	protoOpaque protocol = iota // server speaks first, or not TLS nor HTTP
	protoTLS                    // a TLS handshake record from the client
	protoHTTP                   // a plaintext HTTP/1.x request from the client
)

// sniff waits for whichever side of a fresh tunnel speaks first. A client
// that opens with a TLS handshake or an HTTP method is inspected; a server
// that speaks first (SSH banners, SMTP) or anything else is relayed as is.
// The returned conns replay every byte sniff read.
func sniff(client, upstream net.Conn, timeout time.Duration) (protocol, net.Conn, net.Conn) {
	cr := bufio.NewReader(client)
	type result struct {
		b   []byte
		err error
	}
	fromClient := make(chan result, 1)
	fromUpstream := make(chan result, 1)
	go func() {
		b, err := cr.Peek(1)
		fromClient <- result{b, err}
	}()
	go func() {
		buf := make([]byte, 4096)
		n, err := upstream.Read(buf)
		fromUpstream <- result{buf[:n], err}
	}()
	client.SetReadDeadline(time.Now().Add(timeout))
	var c, u result
	select {
	case c = <-fromClient:
		upstream.SetReadDeadline(time.Now())
		u = <-fromUpstream
	case u = <-fromUpstream:
		client.SetReadDeadline(time.Now())
		c = <-fromClient
	}
	client.SetReadDeadline(time.Time{})
	upstream.SetReadDeadline(time.Time{})

	proto := protoOpaque
	switch {
	case len(u.b) > 0 || len(c.b) == 0:
	case c.b[0] == 0x16:
		proto = protoTLS
	case c.b[0] >= 'A' && c.b[0] <= 'Z':
		// Maybe a request line: look at the first word (SSH clients also
		// open with capitals: "SSH-2.0-...").
		client.SetReadDeadline(time.Now().Add(methodWait))
		head, _ := cr.Peek(maxMethod + 1)
		client.SetReadDeadline(time.Time{})
		if isRequestLine(head) {
			proto = protoHTTP
		}
	}
	client = readerConn(client, cr)
	if len(u.b) > 0 {
		upstream = newPrefixConn(upstream, u.b)
	}
	return proto, client, upstream
}

// methodWait bounds how long sniff waits for a whole first word.
const methodWait = 2 * time.Second

// httpMethods are the request methods a plaintext tunnel is parsed for.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "PROPFIND"}

// maxMethod is the longest of httpMethods.
const maxMethod = 8

// isRequestLine reports whether b starts with an HTTP method and a space.
func isRequestLine(b []byte) bool {
	for _, m := range httpMethods {
		if len(b) > len(m) && string(b[:len(m)]) == m && b[len(m)] == ' ' {
			return true
		}
	}
	return false
}

// readerConn reads through br, which may hold bytes already taken from c.
func readerConn(c net.Conn, br *bufio.Reader) net.Conn {
	if br.Buffered() == 0 {
		return c
	}
	b, _ := br.Peek(br.Buffered())
	return newPrefixConn(c, b)
}
