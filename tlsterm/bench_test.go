package tlsterm

import (
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"strconv"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/echotest"
)

var discardLog = log.New(io.Discard, "", 0)

var smallBody = []byte("a small response body of about sixty-four bytes, like the bench\n")

// benchOrigin answers /small with smallBody and /bulk?n=N with N bytes.
var benchOrigin = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/bulk" {
		w.Header().Set("Content-Length", strconv.Itoa(len(smallBody)))
		w.Write(smallBody)
		return
	}
	n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
})

// benchPaths are the opaque relay (the baseline), the terminator, and the
// terminator with a credential for the origin (filled in on every
// request, every response masked).
func benchPaths(b *testing.B, h2 bool) (name []string, clients []*http.Client, r []*rig) {
	opaque := newRig(b, benchOrigin, rigOptions{opaque: true})
	pool := x509.NewCertPool()
	pool.AddCert(opaque.Origin.Certificate())
	term := newRig(b, benchOrigin, rigOptions{})
	creds, _ := echotest.Creds(b, "s3cr3t-value-for-the-benchmarks")
	cred := newRig(b, benchOrigin, rigOptions{creds: creds})
	return []string{"tunnel", "mitm", "mitm-credential"},
		[]*http.Client{opaque.client(pool, h2), term.client(term.ClientRoots, h2), cred.client(cred.ClientRoots, h2)},
		[]*rig{opaque, term, cred}
}

func get(b *testing.B, c *http.Client, u string) int64 {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %v", u, resp.StatusCode, err)
	}
	return n
}

func benchKeepAlive(b *testing.B, h2 bool) {
	names, clients, rigs := benchPaths(b, h2)
	for i, name := range names {
		b.Run(name, func(b *testing.B) {
			u := rigs[i].url("/small")
			get(b, clients[i], u)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				get(b, clients[i], u)
			}
		})
	}
}

// BenchmarkKeepAlive is sequential small GETs on one HTTP/1.1 connection.
func BenchmarkKeepAlive(b *testing.B) { benchKeepAlive(b, false) }

// BenchmarkKeepAliveH2 is sequential small GETs on one HTTP/2 connection.
func BenchmarkKeepAliveH2(b *testing.B) { benchKeepAlive(b, true) }

// BenchmarkBulk downloads 16 MiB per operation over HTTP/1.1.
func BenchmarkBulk(b *testing.B) {
	const size = 16 << 20
	names, clients, rigs := benchPaths(b, false)
	for i, name := range names {
		b.Run(name, func(b *testing.B) {
			u := rigs[i].url("/bulk?n=" + strconv.Itoa(size))
			get(b, clients[i], u)
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				get(b, clients[i], u)
			}
		})
	}
}
