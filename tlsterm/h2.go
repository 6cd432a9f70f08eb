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

// serveConn serves one client connection until it closes, and waits for
// handlers that took it over (WebSockets) to finish. A *tls.Conn that
// negotiated h2 is served as HTTP/2 by net/http; anything else is served
// as HTTP/1.x only.
func serveConn(c net.Conn, h http.Handler) {
	var inflight sync.WaitGroup
	l := &oneConnListener{conn: c, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Done()
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.close()
			}
		},
	}
	if tc, ok := c.(*tls.Conn); !ok || tc.ConnectionState().NegotiatedProtocol != "h2" {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	srv.Serve(l)
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
