package tlsterm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/credinject"
)

// rig is a terminating front on 127.0.0.1 for one origin: every
// connection to Addr is a tunnel already allowed to the origin, terminated
// as egress would hand it over.
type rig struct {
	Origin *httptest.Server
	// Addr is where clients connect, as if through CONNECT.
	Addr string
	// Host and Port are the origin's authority.
	Host string
	Port int
	// ClientRoots trust the leaves the terminator presents.
	ClientRoots *x509.CertPool
	AuditPath   string
	T           *Terminator
	ln          net.Listener
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
}

// rigOptions shape a rig.
type rigOptions struct {
	// h1Only keeps the origin to HTTP/1.1.
	h1Only bool
	// plaintext serves the origin without TLS and the streams as Plaintext.
	plaintext bool
	creds     *credinject.Set
	// maxRequests is the Terminator's MaxRequests; zero means its default.
	maxRequests int
	// maxHTTP2Conns is the Terminator's MaxHTTP2Conns; zero means its
	// default.
	maxHTTP2Conns int
	// opaque relays connections untouched (the tunnel baseline).
	opaque bool
	// idle is the origin's idle timeout; zero means net/http's default.
	idle time.Duration
	// linger closes the origin's connections as Apache's httpd does: the
	// write side first, then what still comes is read and dropped for a
	// while before the close, so a request sent meanwhile draws no reset.
	linger bool
	// connState is the origin's http.Server.ConnState, set before it
	// starts.
	connState func(net.Conn, http.ConnState)
}

// lingerListener gives its connections a lingering Close (rigOptions.linger).
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

type lingerConn struct {
	net.Conn
	once sync.Once
}

func (c *lingerConn) Close() error {
	c.once.Do(func() {
		c.Conn.(*net.TCPConn).CloseWrite()
		go func() {
			c.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			io.Copy(io.Discard, c.Conn)
			c.Conn.Close()
		}()
	})
	return nil
}

// newRig starts the origin (handler h) and the front; both stop at the
// test's end.
func newRig(tb testing.TB, h http.Handler, o rigOptions) *rig {
	tb.Helper()
	origin := httptest.NewUnstartedServer(h)
	origin.Config.ErrorLog = discardLog
	origin.Config.IdleTimeout = o.idle
	origin.Config.ConnState = o.connState
	origin.Config.DisableGeneralOptionsHandler = true // an OPTIONS * is h's to answer
	if o.linger {
		origin.Listener = lingerListener{origin.Listener}
	}
	if o.plaintext {
		origin.Start()
	} else {
		origin.EnableHTTP2 = !o.h1Only
		origin.StartTLS()
	}
	tb.Cleanup(origin.Close)
	host, port, err := net.SplitHostPort(origin.Listener.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	r := &rig{Origin: origin, Host: host, AuditPath: filepath.Join(tb.TempDir(), "audit.jsonl")}
	r.Port, _ = strconv.Atoi(port)
	ca, err := certs.NewEphemeral()
	if err != nil {
		tb.Fatal(err)
	}
	r.ClientRoots = x509.NewCertPool()
	r.ClientRoots.AddCert(ca.Certificate())
	aw, err := audit.Open(r.AuditPath, "test")
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !o.plaintext {
		roots.AddCert(origin.Certificate())
	}
	r.T, err = New(Config{Leaves: certs.NewLeafCache(ca, 16), Roots: func() (*x509.CertPool, error) { return roots, nil }, Audit: aw, Creds: o.creds,
		MaxRequests: o.maxRequests, MaxHTTP2Conns: o.maxHTTP2Conns})
	if err != nil {
		tb.Fatal(err)
	}
	r.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r.Addr = r.ln.Addr().String()
	r.wg.Add(1)
	go r.accept(o)
	tb.Cleanup(func() {
		r.ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
		aw.Close()
	})
	return r
}

func (r *rig) accept(o rigOptions) {
	defer r.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.Origin.Listener.Addr().String())
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		conns.Add(1)
		if o.opaque {
			go func() {
				defer conns.Done()
				relay(c, up)
			}()
			continue
		}
		if !r.T.TryAcquire() {
			c.Close()
			up.Close()
			conns.Done()
			continue
		}
		go func() {
			defer conns.Done()
			r.T.Serve(&Stream{ID: 1, Kind: audit.KindConnect, Client: c, Host: r.Host, Port: r.Port,
				Plaintext: o.plaintext, Upstream: up, Addr: up.RemoteAddr().String(),
				Redial: func(ctx context.Context) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", r.Origin.Listener.Addr().String())
				}})
		}()
	}
}

// relay copies both ways, as an opaque tunnel does.
func relay(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(b, a)
		b.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(a, b)
	a.(*net.TCPConn).CloseWrite()
	<-done
	a.Close()
	b.Close()
}

// client is an HTTP client whose every connection goes through the rig,
// speaking HTTP/2 when h2 is set, HTTP/1.1 otherwise.
func (r *rig) client(roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:    &tls.Config{RootCAs: roots},
		DisableCompression: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", r.Addr)
		},
		MaxConnsPerHost: 1,
	}
	if h2 {
		tr.ForceAttemptHTTP2 = true
	} else {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// url is the origin's URL for path.
func (r *rig) url(path string) string { return r.Origin.URL + path }
