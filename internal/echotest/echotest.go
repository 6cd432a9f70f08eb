// Package echotest serves what the masking tests of tlsterm and egress
// need: a credential for 127.0.0.1, and an origin that sends the request's
// Authorization header (the injected secret) back in every place a
// response can carry it.
package echotest

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/wsframe"
	"github.com/cordon-sandbox/cordon/policy"
)

// Creds loads one header credential, secret, for 127.0.0.1 on any port
// (plain HTTP allowed), and returns it with its placeholder.
func Creds(t testing.TB, secret string) (*credinject.Set, string) {
	t.Helper()
	return HeaderCreds(t, secret, "Authorization: Bearer {}")
}

// HeaderCreds is Creds with the credential's header template.
func HeaderCreds(t testing.TB, secret, header string) (*credinject.Set, string) {
	t.Helper()
	creds, err := credinject.Load([]policy.Credential{
		{Name: "api", Source: policy.Source{Env: "API_SECRET"}, Hosts: []string{"127.0.0.1:*"},
			Header: header, Env: "API_KEY", AllowPlaintext: true},
	}, []string{"api"}, credinject.Options{Env: func(string) string { return secret }})
	if err != nil {
		t.Fatal(err)
	}
	placeholder, ok := strings.CutPrefix(creds.Env()[0], "API_KEY=")
	if !ok {
		t.Fatalf("no placeholder in %v", creds.Env())
	}
	return creds, placeholder
}

// Origin echoes the Authorization header in a 103's Link (/hints), its
// token in the names of a header and of declared and undeclared trailers
// (/name), in
// declared and undeclared trailers (/trailer), in a gzipped body sent
// unasked whose second line comes once next has a value or after 5 s
// (/gzip), in a body that pauses in the middle of the header's value
// until next has a value or 5 s have passed (/pause), in a body marked br
// (/br), and in a WebSocket message
// (/websocket): compressed with permessage-deflate when the client offers
// it (with ?unasked, whether or not it does; with ?compressed, whatever
// the 101 says), or split (?fragmented) across two frames that cut the
// header's value, with a ping echoing it whole between; with ?listen it
// then reads what the client sends until the connection ends.
func Origin(next <-chan struct{}) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css?k="+r.Header.Get("Authorization")+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "final")
	})
	mux.HandleFunc("/name", func(w http.ResponseWriter, r *http.Request) {
		_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		w.Header().Set("X-Key-"+token, "1")
		w.Header().Set("Trailer", "X-Trailer-"+token)
		io.WriteString(w, "body")
		w.Header().Set("X-Trailer-"+token, "2")
		w.Header().Set(http.TrailerPrefix+"X-Late-"+token, "3")
	})
	mux.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Echo")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set(http.TrailerPrefix+"X-Late", r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprintf(zw, "first %s\n", r.Header.Get("Authorization"))
		zw.Flush()
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprintf(zw, "second %s\n", r.Header.Get("Authorization"))
		zw.Close()
	})
	mux.HandleFunc("/pause", func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		cut := len(auth) - len(auth)/3
		fmt.Fprintf(w, "key %s", auth[:cut])
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprintf(w, "%s\n", auth[cut:])
	})
	mux.HandleFunc("/br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		io.WriteString(w, "as if compressed: "+r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/websocket", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		deflate := strings.Contains(r.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") || q.Has("unasked")
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		accept := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		ext := ""
		if deflate {
			ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
		}
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
			base64.StdEncoding.EncodeToString(accept[:]), ext)
		text := "key " + r.Header.Get("Authorization")
		switch {
		case q.Has("fragmented"):
			// Split in the middle of the header's value, a ping between.
			cut := len(text) - len(r.Header.Get("Authorization"))/2
			c.Write(WebSocketFrame(0x01, []byte(text[:cut])))
			c.Write(WebSocketFrame(0x89, []byte(r.Header.Get("Authorization"))))
			c.Write(WebSocketFrame(0x80, []byte(text[cut:])))
		case q.Has("compressed"):
			c.Write(WebSocketText(text, true)) // whatever was negotiated
		default:
			c.Write(WebSocketText(text, deflate))
		}
		if q.Has("listen") {
			// Read on, until the client or cordon ends the connection.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, c)
		}
	})
	return mux
}

// WebSocketRequest is the handshake of a WebSocket client that offers
// permessage-deflate, as browsers and most libraries do: target as the
// request line has it, host for the Host header, then the header lines
// given ("Name: value").
func WebSocketRequest(target, host string, header ...string) string {
	req := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
	for _, line := range header {
		req += line + "\r\n"
	}
	return req + "\r\n"
}

// WebSocketText is one unfragmented text frame from a server holding
// text, its payload compressed as permessage-deflate sends it (RSV1 set)
// when deflate is set.
func WebSocketText(text string, deflate bool) []byte {
	if !deflate {
		return WebSocketFrame(0x81, []byte(text)) // FIN, text
	}
	var b bytes.Buffer
	zw, _ := flate.NewWriter(&b, flate.BestCompression)
	io.WriteString(zw, text)
	zw.Flush()
	return WebSocketFrame(0xc1, bytes.TrimSuffix(b.Bytes(), []byte{0, 0, 0xff, 0xff}))
}

// WebSocketFrame is an unmasked frame, first being its FIN and RSV bits
// and opcode.
func WebSocketFrame(first byte, payload []byte) []byte {
	return wsframe.Append(nil, first, payload, nil)
}

// WebSocketClientFrame is a frame as a client sends it, its payload
// masked with key; first is its FIN and RSV bits and opcode.
func WebSocketClientFrame(first byte, payload []byte, key [4]byte) []byte {
	return wsframe.Append(nil, first, payload, &key)
}

// ReadWebSocketMessage reads unmasked frames up to the end of a data
// message, as a client does: it puts the message's fragments together,
// passes over control frames, and decompresses the message if its first
// frame's RSV1 marks it compressed. It returns the message and the
// payloads of the control frames met.
func ReadWebSocketMessage(br *bufio.Reader) (string, []string, error) {
	var msg []byte
	var control []string
	compressed, begun := false, false
	for {
		var head [2]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return "", control, err
		}
		if head[1]&0x80 != 0 {
			return "", control, fmt.Errorf("a masked frame from the server: %x", head)
		}
		n := uint64(head[1])
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return "", control, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return "", control, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return "", control, err
		}
		if op := head[0] & 0x0f; op >= 0x8 {
			control = append(control, string(payload))
			continue
		} else if (op == 0) != begun {
			return "", control, fmt.Errorf("frame %x out of order", head)
		}
		if !begun {
			begun, compressed = true, head[0]&0x40 != 0
		}
		msg = append(msg, payload...)
		if head[0]&0x80 != 0 {
			break
		}
	}
	if !compressed {
		return string(msg), control, nil
	}
	text, err := io.ReadAll(flate.NewReader(io.MultiReader(bytes.NewReader(msg), bytes.NewReader([]byte{0, 0, 0xff, 0xff}))))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // the sync flush ends the message, not the stream
	}
	return string(text), control, err
}
