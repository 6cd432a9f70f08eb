package main

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"
)

// The client modes of the sandbox section: how the client finds the way
// out. Both trust the bundle SSL_CERT_FILE names.
const (
	// modeProxyEnv takes the proxy from HTTPS_PROXY and NO_PROXY (Go's
	// http.ProxyFromEnvironment).
	modeProxyEnv = "proxy-env"
	// modeTransparent uses no proxy: it dials the name it resolved.
	modeTransparent = "transparent"
)

// clientFigures are the figures the sandbox section measures.
var clientFigures = []string{fKeep, fFresh, fBulk, fWide}

// clientResult is one line the client writes: after its warm-up a line
// with neither field, then one per figure asked for, with the figure in
// its unit or why there is none.
type clientResult struct {
	Value float64 `json:"value,omitempty"`
	Error string  `json:"error,omitempty"`
}

// runClient is `bench -client MODE -url BASE`: it builds its clients for
// mode, warms every figure in clientFigures up against base (whose /bulk
// is bulkSize bytes) and writes the ready line; then, for each figure name
// read as one line from in, it measures that figure for up to d (or its
// request cap) and writes the result, until in ends. A figure whose
// warm-up failed answers with that error.
func runClient(mode, base string, d time.Duration, bulkSize int64, in io.Reader, out io.Writer) error {
	var proxy func(*http.Request) (*url.URL, error)
	switch mode {
	case modeProxyEnv:
		proxy = http.ProxyFromEnvironment
	case modeTransparent:
	default:
		return fmt.Errorf("-client %q: want %s or %s", mode, modeProxyEnv, modeTransparent)
	}
	if u, err := url.Parse(base); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("-url %q: want the origin's base URL, as in https://%s:8443", base, originName)
	}
	roots, err := bundleRoots()
	if err != nil {
		return err
	}
	p := newPath(mode, base, proxy, roots, false)
	defer p.closeIdle()
	ops := map[string]func() error{}
	warm := map[string]error{}
	for _, f := range figures {
		if !slices.Contains(clientFigures, f.name) {
			continue
		}
		ops[f.name] = f.op(bulkSize, p)
		if _, err := loop(f.workers, max(f.workers*2, 4), d/4, ops[f.name]); err != nil {
			warm[f.name] = fmt.Errorf("warm-up: %w", err)
		}
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(clientResult{}); err != nil {
		return fmt.Errorf("write the ready line: %w", err)
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var r clientResult
		if f, ok := figureNamed(sc.Text()); !ok || ops[f.name] == nil {
			r.Error = fmt.Sprintf("no figure %q here; want one of %q", sc.Text(), clientFigures)
		} else if err := warm[f.name]; err != nil {
			r.Error = err.Error()
		} else if rate, err := loop(f.workers, f.maxOps, d, ops[f.name]); err != nil {
			r.Error = err.Error()
		} else {
			r.Value = rate * f.perOp(bulkSize)
		}
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write a result: %w", err)
		}
	}
	return sc.Err()
}

// figureNamed finds a figure by name.
func figureNamed(name string) (figure, bool) {
	i := slices.IndexFunc(figures, func(f figure) bool { return f.name == name })
	if i < 0 {
		return figure{}, false
	}
	return figures[i], true
}

// bundleRoots trusts the certificates in the file SSL_CERT_FILE names
// (cordon's session bundle, inside the sandbox and out).
func bundleRoots() (*x509.CertPool, error) {
	name := os.Getenv("SSL_CERT_FILE")
	if name == "" {
		return nil, errors.New("SSL_CERT_FILE is not set: point it at cordon's trust bundle")
	}
	pem, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read the trust bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("SSL_CERT_FILE %s holds no PEM certificate", name)
	}
	return pool, nil
}
