package tlsterm

import (
	"net"
	"sync"
	"time"
)

// corkConn is the client's connection under TLS. While a response body is
// relayed it is held: what TLS writes collects, and leaves in one write
// when the upstream has nothing more at hand, instead of one write per
// record. Collected bytes never wait longer than maxHold.
type corkConn struct {
	net.Conn
	mu    sync.Mutex
	held  bool
	buf   *[]byte
	timer *time.Timer
	err   error // of a write the timer made
}

const (
	// maxCork is how much a held corkConn collects before it writes anyway.
	maxCork = 64 << 10
	// maxHold bounds how long collected bytes wait for more: the upstream
	// may go quiet just when a read filled TLS's buffer exactly.
	maxHold = time.Millisecond
)

var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, maxCork+maxRecord+1024); return &b }}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBuffers.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	if len(*c.buf) >= maxCork {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold starts collecting writes.
func (c *corkConn) hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// wait lets collected bytes wait for more, at most maxHold.
func (c *corkConn) wait() {
	if c.timer == nil {
		c.timer = time.AfterFunc(maxHold, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := c.flushLocked(); err != nil && c.err == nil {
				c.err = err
			}
		})
		return
	}
	c.timer.Reset(maxHold)
}

// flush writes what was collected.
func (c *corkConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	err := c.flushLocked()
	if c.err != nil {
		err, c.err = c.err, nil
	}
	return err
}

func (c *corkConn) flushLocked() error {
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
	err := c.flush()
	c.mu.Lock()
	c.held = false
	c.mu.Unlock()
	return err
}

// CloseWrite half-closes the connection under it.
func (c *corkConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// drainConn is an upstream connection that remembers whether its last read
// emptied what the kernel held. A read smaller than readAhead is served
// from a read-ahead buffer filled by one larger read: TLS asks for about a
// record at a time, and a system call per record costs more than a copy.
type drainConn struct {
	net.Conn
	short bool    // the last read from the kernel did not fill its buffer
	ahead *[]byte // read-ahead, pooled; nil when empty
	r, w  int     // the unread bytes of ahead
	err   error   // of the read that filled ahead, due once it is read
	// atHand makes a read that would wait fail with errNotAtHand instead;
	// gotAtHand is set when such a read found bytes.
	atHand, gotAtHand bool
	now               atHandRead
}

// errNotAtHand is a drainConn's read, in atHand mode, of a socket that has
// nothing waiting. It is temporary, so TLS does not keep it as the
// connection's error.
var errNotAtHand error = notAtHand{}

type notAtHand struct{}

func (notAtHand) Error() string   { return "nothing at hand" }
func (notAtHand) Timeout() bool   { return true }
func (notAtHand) Temporary() bool { return true }

// readAhead is the size of a drainConn's read-ahead buffer.
const readAhead = 128 << 10

var aheadBuffers = sync.Pool{New: func() any { b := make([]byte, readAhead); return &b }}

func (d *drainConn) Read(p []byte) (int, error) {
	if d.ahead == nil {
		if d.err != nil {
			err := d.err
			d.err = nil
			return 0, err
		}
		if len(p) >= readAhead {
			n, err := d.Conn.Read(p)
			d.short = n < len(p)
			return n, err
		}
		d.ahead = aheadBuffers.Get().(*[]byte)
		var n int
		var err error
		if d.atHand {
			n, err = d.now.read(d.Conn, *d.ahead)
			if n == 0 && err == errNotAtHand {
				aheadBuffers.Put(d.ahead)
				d.ahead = nil
				return 0, err
			}
			d.gotAtHand = true
		} else {
			n, err = d.Conn.Read(*d.ahead)
		}
		d.short = n < readAhead
		d.r, d.w, d.err = 0, n, err
	}
	n := copy(p, (*d.ahead)[d.r:d.w])
	d.r += n
	if d.r == d.w {
		aheadBuffers.Put(d.ahead)
		d.ahead = nil
	}
	return n, nil
}

// drained says whether the last read emptied what the kernel held, and
// nothing read ahead is left.
func (d *drainConn) drained() bool { return d.short && d.ahead == nil }

// buffered says whether read-ahead bytes wait to be read.
func (d *drainConn) buffered() bool { return d.ahead != nil }
