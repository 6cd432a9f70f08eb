package egress

import (
	"bufio"
	"io"
	"net"
	"testing"
)

// TestReaderConn reads, in reads of every small size, what a bufio.Reader
// had taken from a connection and then the connection's own bytes.
func TestReaderConn(t *testing.T) {
	for _, size := range []int{1, 2, 5, 64} {
		client, server := net.Pipe()
		go func() {
			io.WriteString(client, "CONNECT a:443 HTTP/1.1\r\n\r\nhello, ")
			io.WriteString(client, "world")
			client.Close()
		}()
		br := bufio.NewReader(server)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		br.Peek(len("\r\nhello, ")) // taken from the connection, not yet read
		c := readerConn(server, br)
		got, err := io.ReadAll(sizedReader{c, size})
		if err != nil || string(got) != "\r\nhello, world" {
			t.Errorf("reads of %d: %q, %v; want %q", size, got, err, "\r\nhello, world")
		}
	}
}

// sizedReader reads at most n bytes at a time.
type sizedReader struct {
	r io.Reader
	n int
}

func (s sizedReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }
