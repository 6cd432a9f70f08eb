package tlsterm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// scriptConn is a net.Conn whose reads return scripted chunks, each with
// its error, and record the buffer sizes asked for.
type scriptConn struct {
	net.Conn
	chunks []scriptRead
	asked  []int
}

type scriptRead struct {
	data string
	err  error
}

func (c *scriptConn) Read(p []byte) (int, error) {
	c.asked = append(c.asked, len(p))
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	r := c.chunks[0]
	c.chunks = c.chunks[1:]
	if len(r.data) > len(p) {
		panic("scripted chunk larger than the read")
	}
	return copy(p, r.data), r.err
}

func TestDrainConnReadAhead(t *testing.T) {
	errBroken := errors.New("broken")
	big := string(bytes.Repeat([]byte("x"), readAhead))
	tests := []struct {
		name   string
		chunks []scriptRead
		read   int // the size of each Read
		want   string
		err    error
		kernel int // reads the kernel saw
	}{
		{"small reads share one kernel read", []scriptRead{{"0123456789", nil}}, 3, "0123456789", io.EOF, 2},
		{"data and error together: the data first", []scriptRead{{"abcdef", errBroken}}, 4, "abcdef", errBroken, 1},
		{"data and end of file together", []scriptRead{{"abc", io.EOF}}, 2, "abc", io.EOF, 1},
		{"a full read-ahead is not the end", []scriptRead{{big, nil}, {"tail", nil}}, 16 << 10, big + "tail", io.EOF, 3},
		{"reads as large as the read-ahead go straight through", []scriptRead{{"direct", nil}}, readAhead, "direct", io.EOF, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &scriptConn{chunks: tt.chunks}
			d := &drainConn{Conn: sc}
			var got bytes.Buffer
			buf := make([]byte, tt.read)
			var err error
			for i := 0; i < 1000; i++ {
				var n int
				n, err = d.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			if got.String() != tt.want {
				t.Fatalf("read %d bytes %.20q..., want %d bytes %.20q...", got.Len(), got.String(), len(tt.want), tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("ended with %v, want %v", err, tt.err)
			}
			if len(sc.asked) != tt.kernel {
				t.Fatalf("the connection was read %d times (%v), want %d", len(sc.asked), sc.asked, tt.kernel)
			}
			if d.buffered() {
				t.Fatal("bytes still buffered after the end")
			}
		})
	}
}

func TestDrainConnDrained(t *testing.T) {
	big := string(bytes.Repeat([]byte("y"), readAhead))
	sc := &scriptConn{chunks: []scriptRead{{"0123456789", nil}, {big, nil}}}
	d := &drainConn{Conn: sc}
	buf := make([]byte, 4)
	d.Read(buf)
	if d.drained() {
		t.Fatal("drained with six read-ahead bytes unread")
	}
	d.Read(buf)
	d.Read(buf)
	if !d.drained() {
		t.Fatal("not drained after the short read's bytes were all read")
	}
	d.Read(buf)
	if d.drained() {
		t.Fatal("drained after a read that filled the read-ahead")
	}
}

// An upstream connection idle in the pool must not look empty while its
// read-ahead holds bytes the kernel no longer does: they are a stray
// response, or the server's goodbye, and the connection is not reused.
func TestPeekIdleSeesReadAhead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer srv.Close()
	d := &drainConn{Conn: c}
	if got := peekIdle(d); got != idleEmpty {
		t.Fatalf("fresh connection: %v, want idleEmpty", got)
	}
	if _, err := srv.Write([]byte("HTTP/1.1 200 OK\r\n\r\nstray")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := d.Read(buf); err != nil {
		t.Fatal(err)
	}
	if !d.buffered() {
		t.Fatal("the read took no more than it was asked for: nothing to test")
	}
	if got := peekIdle(d); got != idleData {
		t.Fatalf("with read-ahead bytes unread: %v, want idleData", got)
	}
}
