package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// startRelay serves the least any TLS-terminating proxy does, for
// comparison with cordon's MITM: it answers a CONNECT, ends the client's
// TLS with leaf (the origin's own certificate, so no leaf is minted), opens
// TLS to the CONNECT target trusting roots, and copies the bytes both ways
// with crypto/tls on either side. It parses no HTTP, checks nothing and
// logs nothing; both legs speak HTTP/1.1 only.
func (e *env) startRelay(leaf tls.Certificate, roots *x509.CertPool) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("TLS relay listen: %w", err)
	}
	e.closers = append(e.closers, func() { ln.Close() })
	server := &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayOne(c, server, roots)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// relayOne serves one client connection of startRelay's.
func relayOne(c net.Conn, server *tls.Config, roots *x509.CertPool) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect || br.Buffered() > 0 {
		return
	}
	host, _, err := net.SplitHostPort(req.Host)
	if err != nil {
		return
	}
	up, err := tls.Dial("tcp", req.Host, &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	client := tls.Server(c, server)
	if err := client.Handshake(); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		relayCopy(up, client)
		up.CloseWrite()
	}()
	relayCopy(client, up)
	client.CloseWrite()
	<-done
}

// relayCopy copies src to dst through a 64 KiB buffer until src ends.
func relayCopy(dst, src io.ReadWriter) {
	io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
}
