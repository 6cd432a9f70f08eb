package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/session"
)

// The paths, by the names the report uses.
const (
	pDirect        = "direct"
	pGoproxyTunnel = "goproxy tunnel"
	pCordonTunnel  = "cordon tunnel"
	pCordonMITM    = "cordon MITM"
	pGoproxyMITM   = "goproxy MITM"
	pTLSRelay      = "TLS relay"
	pDirectPlain   = "direct (http)"
	pGoproxyPlain  = "goproxy (http)"
	pCordonPlain   = "cordon (http)"
)

// path is one way from a client to the origin, with the clients that
// measure it.
type path struct {
	name string
	// url is the origin's base URL.
	url string
	// h2 says whether the path can carry HTTP/2 end to end.
	h2 bool
	// keep holds one keep-alive HTTP/1.1 connection; fresh dials for every
	// request; wide keeps up to 32; h2c holds one HTTP/2 connection.
	keep, fresh, wide, h2c *http.Client
}

// env is the origin and every path to it, and what must be closed after.
type env struct {
	origin  *origin
	paths   []*path
	closers []func()
}

// Close stops every proxy and server.
func (e *env) Close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// newEnv starts the origin (see startOrigin), the two goproxy servers and
// the two cordon proxies, writing CA files and audit logs into dir.
func newEnv(ctx context.Context, dir string, bulkSize int64, originH2 bool) (*env, error) {
	o, err := startOrigin(dir, bulkSize, originH2)
	if err != nil {
		return nil, err
	}
	e := &env{origin: o, closers: []func(){o.Close}}
	fail := func(err error) (*env, error) {
		e.Close()
		return nil, err
	}
	tlsURL, plainURL := "https://"+o.TLSAddr, "http://"+o.PlainAddr

	bare := goproxy.NewProxyHttpServer()
	bare.Logger = log.New(io.Discard, "", 0)
	bareURL, err := e.serveGoproxy(bare)
	if err != nil {
		return fail(err)
	}

	mitm := goproxy.NewProxyHttpServer()
	mitm.Logger = log.New(io.Discard, "", 0)
	mitm.OnRequest().HandleConnect(goproxy.AlwaysMitm)
	mitm.Tr = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.Roots}}
	mitmURL, err := e.serveGoproxy(mitm)
	if err != nil {
		return fail(err)
	}
	goproxyRoots, err := goproxyCAPool()
	if err != nil {
		return fail(err)
	}

	tunnel, err := e.startCordon(ctx, dir, "tunnel", "none")
	if err != nil {
		return fail(err)
	}
	term, err := e.startCordon(ctx, dir, "mitm", "all")
	if err != nil {
		return fail(err)
	}
	bundle, err := os.ReadFile(term.Bundle)
	if err != nil {
		return fail(fmt.Errorf("read cordon's trust bundle: %w", err))
	}
	cordonRoots := x509.NewCertPool()
	if !cordonRoots.AppendCertsFromPEM(bundle) {
		return fail(fmt.Errorf("cordon's trust bundle %s holds no certificate", term.Bundle))
	}

	relayURL, err := e.startRelay(o.Leaf, o.Roots)
	if err != nil {
		return fail(err)
	}

	// goproxy's MITM offers only HTTP/1.1 to clients unless AllowHTTP2
	// is set, which its defaults leave off.
	for _, a := range []struct {
		name, base, proxy string
		roots             *x509.CertPool
		h2                bool
	}{
		{pDirect, tlsURL, "", o.Roots, true},
		{pGoproxyTunnel, tlsURL, bareURL, o.Roots, true},
		{pCordonTunnel, tlsURL, tunnel.URL(), o.Roots, true},
		{pCordonMITM, tlsURL, term.URL(), cordonRoots, true},
		{pGoproxyMITM, tlsURL, mitmURL, goproxyRoots, false},
		{pTLSRelay, tlsURL, relayURL, o.Roots, false},
		{pDirectPlain, plainURL, "", nil, false},
		{pGoproxyPlain, plainURL, bareURL, nil, false},
		{pCordonPlain, plainURL, tunnel.URL(), nil, false},
	} {
		var proxy func(*http.Request) (*url.URL, error)
		if a.proxy != "" {
			pu, err := url.Parse(a.proxy)
			if err != nil {
				return fail(fmt.Errorf("%s: proxy URL: %w", a.name, err))
			}
			proxy = http.ProxyURL(pu)
		}
		p := newPath(a.name, a.base, proxy, a.roots, a.h2 && o.H2)
		e.paths = append(e.paths, p)
		e.closers = append(e.closers, p.closeIdle)
	}
	return e, nil
}

// serveGoproxy serves p on a fresh loopback port and returns its URL.
func (e *env) serveGoproxy(p *goproxy.ProxyHttpServer) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("goproxy listen: %w", err)
	}
	s := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go s.Serve(ln)
	e.closers = append(e.closers, func() { s.Close() })
	return "http://" + ln.Addr().String(), nil
}

// startCordon starts cordon's real proxy allowing both origin servers,
// with an ephemeral CA, the origin's CA trusted upstream, and its audit log
// in dir.
func (e *env) startCordon(ctx context.Context, dir, name, terminate string) (*session.Proxy, error) {
	px, err := session.StartProxy(ctx, session.Options{
		Policy: &policy.Policy{
			Allow:     []string{e.origin.TLSAddr, e.origin.PlainAddr},
			Terminate: terminate,
			ExtraCA:   []string{e.origin.CAFile},
		},
		AuditPath:   filepath.Join(dir, "audit-"+name+".jsonl"),
		EphemeralCA: true,
		BundlePath:  filepath.Join(dir, "bundle-"+name+".pem"),
	})
	if err != nil {
		return nil, fmt.Errorf("start cordon %s proxy: %w", name, err)
	}
	e.closers = append(e.closers, func() { px.Close() })
	return px, nil
}

// goproxyCAPool trusts goproxy's built-in CA.
func goproxyCAPool() (*x509.CertPool, error) {
	if len(goproxy.GoproxyCa.Certificate) == 0 {
		return nil, errors.New("goproxy's built-in CA is empty")
	}
	c, err := x509.ParseCertificate(goproxy.GoproxyCa.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("goproxy's built-in CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool, nil
}

// newPath builds a path's clients, which take their proxy from proxy (nil:
// none). Every client but h2c (made only where h2 is set) speaks HTTP/1.1
// only; none compresses.
func newPath(name, base string, proxy func(*http.Request) (*url.URL, error), roots *x509.CertPool, h2 bool) *path {
	tr := func(tweak func(*http.Transport)) *http.Client {
		t := &http.Transport{
			TLSClientConfig:    &tls.Config{RootCAs: roots},
			TLSNextProto:       map[string]func(string, *tls.Conn) http.RoundTripper{},
			DisableCompression: true,
			IdleConnTimeout:    30 * time.Minute,
			Proxy:              proxy,
		}
		tweak(t)
		return &http.Client{Transport: t, Timeout: 2 * time.Minute}
	}
	p := &path{name: name, url: base, h2: h2}
	p.keep = tr(func(t *http.Transport) { t.MaxConnsPerHost, t.MaxIdleConnsPerHost = 1, 1 })
	p.fresh = tr(func(t *http.Transport) { t.DisableKeepAlives = true })
	p.wide = tr(func(t *http.Transport) { t.MaxConnsPerHost, t.MaxIdleConnsPerHost = wideWorkers, wideWorkers })
	if p.h2 {
		p.h2c = tr(func(t *http.Transport) {
			t.TLSNextProto = nil
			t.ForceAttemptHTTP2 = true
			t.MaxConnsPerHost, t.MaxIdleConnsPerHost = 1, 1
		})
	}
	return p
}

// closeIdle drops the clients' idle connections.
func (p *path) closeIdle() {
	for _, c := range []*http.Client{p.keep, p.fresh, p.wide, p.h2c} {
		if c != nil {
			c.CloseIdleConnections()
		}
	}
}
