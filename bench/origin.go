package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// smallBody is what every small GET returns.
var smallBody = []byte("cordon bench: a small response body of sixty-four bytes, ok.\n\n\n")

// originName is a name the origin's certificate covers besides 127.0.0.1
// and localhost: the sandbox section pins it to 127.0.0.1, so the sandbox
// can resolve it (to a fake address) and cordon verifies it upstream.
const originName = "bench.cordon.test"

// bulkChunk is the piece a bulk response repeats.
const bulkChunk = 1 << 20

// origin is a throwaway CA and the HTTPS and plain HTTP servers it vouches
// for, both on 127.0.0.1.
type origin struct {
	// CAFile is the CA certificate as a PEM file (cordon's extra CA).
	CAFile string
	// Roots trusts the CA.
	Roots *x509.CertPool
	// TLSAddr and PlainAddr are host:port of the two servers.
	TLSAddr, PlainAddr string
	// BulkSize is the length of /bulk.
	BulkSize int64
	// H2 says whether the HTTPS server offers HTTP/2.
	H2 bool
	// Leaf is the HTTPS server's certificate and key.
	Leaf    tls.Certificate
	servers []*http.Server
}

// startOrigin writes the CA into dir and starts both servers; /bulk is
// bulkSize bytes, and the HTTPS server offers h2 if h2 is set.
func startOrigin(dir string, bulkSize int64, h2 bool) (*origin, error) {
	leaf, caPEM, err := newOriginCerts()
	if err != nil {
		return nil, err
	}
	o := &origin{CAFile: filepath.Join(dir, "origin-ca.pem"), Roots: x509.NewCertPool(), BulkSize: bulkSize, H2: h2, Leaf: leaf}
	if err := os.WriteFile(o.CAFile, caPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write origin CA: %w", err)
	}
	o.Roots.AppendCertsFromPEM(caPEM)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(smallBody)))
		w.Write(smallBody)
	})
	chunk := make([]byte, bulkChunk)
	rand.Read(chunk)
	mux.HandleFunc("/bulk", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(bulkSize, 10))
		for left := bulkSize; left > 0; {
			n := min(left, int64(len(chunk)))
			if _, err := w.Write(chunk[:n]); err != nil {
				return
			}
			left -= n
		}
	})
	newServer := func() *http.Server {
		s := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Minute,
			ErrorLog: log.New(io.Discard, "", 0)}
		o.servers = append(o.servers, s)
		return s
	}
	tlsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("origin listen: %w", err)
	}
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tlsLn.Close()
		return nil, fmt.Errorf("origin listen: %w", err)
	}
	o.TLSAddr, o.PlainAddr = tlsLn.Addr().String(), plainLn.Addr().String()
	ts := newServer()
	ts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{leaf}}
	if !h2 {
		ts.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	go ts.ServeTLS(tlsLn, "", "")
	go newServer().Serve(plainLn)
	return o, nil
}

// Close stops both servers.
func (o *origin) Close() {
	for _, s := range o.servers {
		s.Close()
	}
}

// newOriginCerts makes a CA and a leaf for 127.0.0.1, localhost and
// originName.
func newOriginCerts() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cordon bench origin CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin leaf key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost", originName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin leaf: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caPEM, nil
}
