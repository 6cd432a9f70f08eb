package tlsterm

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// serveH2 serves one client connection that negotiated h2 until it
// closes, with net/http's HTTP/2 server, and returns once every request's
// handler has. A handler the server started as the connection closed, and
// which began only after serving stopped, does nothing: its stream is
// gone, and counting it in then would race with the wait. countError
// (nil for none) is told each protocol error the server refuses a
// stream or the connection for (http.HTTP2Config.CountError).
func serveH2(c *tls.Conn, h http.Handler, countError func(errType string)) {
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
			MaxReceiveBufferPerConnection: maxUploadBuffer, MaxReceiveBufferPerStream: maxUploadBuffer,
			CountError: countError},
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

// protocolRefusals logs what net/http's HTTP/2 server refuses itself as a
// protocol error on one connection, which no handler of cordon's sees: a
// stream it resets (RST_STREAM) before handing its request over (a
// :protocol while extended CONNECT is off, userinfo in :authority, no
// :path, a :path that is no path, past the streams the connection may
// open), or while it is under way (more body than its content-length),
// and a connection it ends (GOAWAY) for a frame that breaks the
// protocol. Each line is a deny, reason bad_request, its detail naming
// net/http's error type. A client decides how many such streams it sends,
// so each type is logged the first time, as it happens, and how many more
// there were once, at the connection's end (end): net/http's error types
// are a fixed set of names, so a connection writes a bounded number of
// lines however many bad streams it carries.
//
// net/http counts only some of its refusals. It answers a request with a
// connection-specific field (connection, upgrade, transfer-encoding...)
// or a te other than trailers (400), or a header list past MaxHeaderBytes
// (431), itself, and resets a stream whose header block its frame reader
// rejects (a field name in upper case, a value holding a NUL, CR or LF,
// an unknown or misplaced pseudo-header) or ends a connection whose
// block it cannot decode, uncounted: nothing tells cordon of those.
type protocolRefusals struct {
	record func(...audit.Record) error
	mu     sync.Mutex
	counts map[string]int
	ended  bool
}

// h2Noise is the one error type net/http's HTTP/2 server counts that a
// client keeping to the protocol causes: DATA already on its way when its
// stream ended, as when a handler answers (or refuses) a request without
// reading its whole body. It refuses nothing, and is not logged.
const h2Noise = "stream_STREAM_CLOSED_closed"

// count is http.HTTP2Config.CountError. net/http calls it on the
// connection's serving goroutine, and on its frame reader's for a frame
// that cannot be parsed.
func (p *protocolRefusals) count(errType string) {
	if errType == h2Noise {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[errType]++
	if p.counts[errType] == 1 {
		p.record(protocolRefusal(errType, ""))
	}
}

// end logs how many more of each type were refused, and stops counting:
// the connection has been served.
func (p *protocolRefusals) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	var more []audit.Record
	for _, t := range slices.Sorted(maps.Keys(p.counts)) {
		if n := p.counts[t] - 1; n > 0 {
			more = append(more, protocolRefusal(t, fmt.Sprintf(" (%d more times on this connection)", n)))
		}
	}
	if len(more) > 0 {
		p.record(more...)
	}
}

// protocolRefusal is the deny line of an HTTP/2 protocol error of
// errType, its detail ending with more.
func protocolRefusal(errType, more string) audit.Record {
	return audit.Record{Type: audit.TypeDecision, Decision: audit.Deny, Reason: string(ReasonBadRequest),
		Detail: "refused by Go's HTTP/2 server as a protocol error: " + errType + more}
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
