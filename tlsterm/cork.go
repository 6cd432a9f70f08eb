package tlsterm

import (
	"net"
	"sync"
)

// corkConn is the client's connection under TLS. While a response body is
// relayed it is held: what TLS writes collects, and leaves in one write
// when the upstream has nothing more at hand, instead of one write per
// record.
type corkConn struct {
	net.Conn
	held bool
	buf  *[]byte
}

// maxCork is how much a held corkConn collects before it writes anyway.
const maxCork = 64 << 10

var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, maxCork+maxRecord+1024); return &b }}

func (c *corkConn) Write(p []byte) (int, error) {
	if !c.held {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBuffers.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	if len(*c.buf) >= maxCork {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold starts collecting writes.
func (c *corkConn) hold() { c.held = true }

// flush writes what was collected.
func (c *corkConn) flush() error {
	if c.buf == nil {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	corkBuffers.Put(c.buf)
	c.buf = nil
	return err
}

// release writes what was collected and stops collecting.
func (c *corkConn) release() error {
	c.held = false
	return c.flush()
}

// CloseWrite half-closes the connection under it.
func (c *corkConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// drainConn is an upstream connection that remembers whether its last read
// emptied what the kernel held.
type drainConn struct {
	net.Conn
	drained bool
}

func (d *drainConn) Read(p []byte) (int, error) {
	n, err := d.Conn.Read(p)
	d.drained = n < len(p)
	return n, err
}

// more says whether bytes are waiting in the kernel, so that the next read
// will not wait for the peer: held writes can wait for it.
func (d *drainConn) more() bool {
	return !d.drained && pending(d.Conn) > 0
}
