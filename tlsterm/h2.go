package tlsterm

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// serveH2 serves one client connection that negotiated h2 until it
// closes, with net/http's HTTP/2 server, and returns once every request's
// handler has. A handler the server started as the connection closed, and
// which began only after serving stopped, does nothing: its stream is
// gone, and counting it in then would race with the wait.
func serveH2(c *tls.Conn, h http.Handler) {
	var (
		mu       sync.Mutex
		stopped  bool
		inflight sync.WaitGroup
	)
	l := &oneConnListener{conn: c, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			inflight.Add(1)
			mu.Unlock()
			defer inflight.Done()
			h.ServeHTTP(w, r)
		}),
		// An OPTIONS * is the handler's to judge, log and forward, as
		// on the HTTP/1.x path: net/http answered it itself, unlogged.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            headerTimeout,
		IdleTimeout:                  idleTimeout,
		MaxHeaderBytes:               MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{MaxReadFrameSize: maxFrameSize, MaxConcurrentStreams: maxClientStreams,
			MaxReceiveBufferPerConnection: maxUploadBuffer, MaxReceiveBufferPerStream: maxUploadBuffer},
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.close()
			}
		},
	}
	srv.Serve(l)
	mu.Lock()
	stopped = true
	mu.Unlock()
	inflight.Wait()
}

// oneConnListener hands out one connection, then blocks until it is done.
type oneConnListener struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	used bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.used {
		l.used = true
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) close()         { l.once.Do(func() { close(l.done) }) }
func (l *oneConnListener) Close() error   { l.close(); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// The limits both HTTP versions share with net/http's server defaults.
const (
	// headerTimeout bounds reading one request's header.
	headerTimeout = 30 * time.Second
	// idleTimeout bounds the wait for a kept-alive connection's next
	// request.
	idleTimeout = 2 * time.Minute
	// maxFrameSize is the largest HTTP/2 frame a client may send: the
	// protocol's default, which every client speaks (RFC 9113, 4.2), where
	// net/http advertises 1 MiB. The server reads each frame whole into a
	// buffer its connection keeps, so one frame of 1 MiB (of any type,
	// flow control or not) made cordon, outside the box's limits, hold
	// 1 MiB per terminated connection for as long as it lasted. A larger
	// frame ends the connection with FRAME_SIZE_ERROR.
	maxFrameSize = 16 << 10
	// maxUploadBuffer is the flow-control window an HTTP/2 client's
	// request bodies get, per connection and per stream, where net/http's
	// default is 1 MiB. The server holds what the client sent until the
	// request's handler reads it, and a handler waiting on a slow
	// upstream reads nothing, so each terminated connection could make
	// cordon, outside the box's limits, hold a window's worth: 1,000
	// connections each sending 1 MiB took cordon to 850 MB. The client
	// is on this machine, so a smaller window costs little: an upload ran
	// at 38 MB/s where it ran at 45 (at 64 KiB, 25).
	maxUploadBuffer = 256 << 10
	// maxClientStreams is the HTTP/2 streams a client may have open at
	// once on one connection, where net/http's default is 250: curl,
	// nginx and gRPC use 100. net/http runs a handler per open stream
	// and, for streams the client reset before theirs ran, queues up to
	// four times as many, each with its request's state, so it bounds
	// what one connection holds (see defaultMaxHTTP2Conns).
	maxClientStreams = 100
)
