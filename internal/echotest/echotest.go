// Package echotest serves what the masking tests of tlsterm and egress
// need: a credential for 127.0.0.1, and an origin that sends the request's
// Authorization header (the injected secret) back in every place a
// response can carry it.
package echotest

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/policy"
)

// Creds loads one header credential, secret, for 127.0.0.1 on any port
// (plain HTTP allowed), and returns it with its placeholder.
func Creds(t testing.TB, secret string) (*credinject.Set, string) {
	t.Helper()
	creds, err := credinject.Load([]policy.Credential{
		{Name: "api", Source: policy.Source{Env: "API_SECRET"}, Hosts: []string{"127.0.0.1:*"},
			Header: "Authorization: Bearer {}", Env: "API_KEY", AllowPlaintext: true},
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

// Origin echoes the Authorization header in a 103's Link (/hints), in
// declared and undeclared trailers (/trailer), in a gzipped body sent
// unasked whose second line comes once next has a value or after 5 s
// (/gzip), and in a body marked br (/br).
func Origin(next <-chan struct{}) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css?k="+r.Header.Get("Authorization")+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "final")
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
	mux.HandleFunc("/br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		io.WriteString(w, "as if compressed: "+r.Header.Get("Authorization"))
	})
	return mux
}
