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

// serveHTTP1 serves HTTP/1.1 on one connection until it closes, and waits
// for handlers that took the connection over (WebSockets) to finish.
func serveHTTP1(c net.Conn, h http.Handler) {
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
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.close()
			}
		},
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
