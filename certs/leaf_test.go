package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testCA(t testing.TB) *CA {
	t.Helper()
	ca, err := NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestLeafVerifies(t *testing.T) {
	ca := testCA(t)
	cache := NewLeafCache(ca, 0)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + ".example.com"
	tests := []struct {
		host   string
		wantIP bool
	}{
		{"example.com", false},
		{"api.github.com", false},
		{"under_score.example", false},
		{"localhost", false},
		{long, false},
		{"127.0.0.1", true},
		{"10.0.2.2", true},
		{"::1", true},
		{"2001:db8::1", true},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			before := time.Now()
			cert, err := cache.Get(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			leaf := cert.Leaf
			if leaf == nil {
				t.Fatal("Leaf is not set")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{
				DNSName:   tt.host,
				Roots:     poolOf(ca.Certificate()),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}); err != nil {
				t.Fatalf("leaf does not verify: %v", err)
			}
			if tt.wantIP != (len(leaf.IPAddresses) == 1 && len(leaf.DNSNames) == 0) {
				t.Errorf("SANs: DNS %v, IP %v; want only an IP SAN: %v", leaf.DNSNames, leaf.IPAddresses, tt.wantIP)
			}
			if d := leaf.NotAfter.Sub(leaf.NotBefore); d > 72*time.Hour {
				t.Errorf("leaf valid for %v, more than 72h", d)
			}
			if !leaf.NotBefore.Before(before) {
				t.Errorf("NotBefore %v is not in the past", leaf.NotBefore)
			}
			if leaf.IsCA {
				t.Error("leaf is a CA")
			}
		})
	}
}

func TestLeafHandshake(t *testing.T) {
	ca := testCA(t)
	cache := NewLeafCache(ca, 0)
	for _, host := range []string{"example.com", "127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			srv := tls.Server(server, &tls.Config{
				GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
					return cache.Get(host)
				},
			})
			done := make(chan error, 1)
			go func() {
				defer server.Close()
				err := srv.Handshake()
				if err == nil {
					_, err = srv.Write([]byte("ok"))
				}
				done <- err
			}()
			cli := tls.Client(client, &tls.Config{ServerName: host, RootCAs: poolOf(ca.Certificate())})
			must(t, client.SetDeadline(time.Now().Add(10*time.Second)))
			got, err := io.ReadAll(cli)
			if err != nil && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("client: %v", err)
			}
			if string(got) != "ok" {
				t.Errorf("client read %q, want ok", got)
			}
			if err := <-done; err != nil {
				t.Fatalf("server: %v", err)
			}
		})
	}
}

func TestLeafRejectsUnnormalisedHosts(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	tests := []struct{ host, wantErr string }{
		{"", "1 to 253"},
		{strings.Repeat("a.", 127) + "a", "1 to 253"},
		{"Example.com", "normalised host name"},
		{"[::1]", "normalised host name"},
		{"example.com:443", "normalised host name"},
		{"a..b", "normalised host name"},
		{".a", "normalised host name"},
		{"a.", "does not end in '.'"},
		{"bücher.de", "normalised host name"},
		{"a b", "normalised host name"},
		{"::ffff:1.2.3.4", "not normalised"},
		{"fe80::1%eth0", "not normalised"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			_, err := cache.Get(tt.host)
			checkErr(t, err, tt.wantErr)
			if cache.Len() != 0 {
				t.Errorf("a refused host was cached")
			}
		})
	}
}

// countMints wraps c's mint to count calls, and returns the counter.
func countMints(c *LeafCache) *atomic.Int64 {
	var n atomic.Int64
	mint := c.mint
	c.mint = func(host string, now time.Time) (*tls.Certificate, error) {
		n.Add(1)
		return mint(host, now)
	}
	return &n
}

func TestLeafCacheHit(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	mints := countMints(cache)
	first, err := cache.Get("example.com")
	if err != nil {
		t.Fatal(err)
	}
	second, err := cache.Get("example.com")
	if err != nil {
		t.Fatal(err)
	}
	if first != second || mints.Load() != 1 {
		t.Errorf("second Get: same cert %v, mints %d; want the cached cert and 1 mint", first == second, mints.Load())
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := cache.Get("example.com"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", allocs)
	}
}

func TestLeafCacheBounded(t *testing.T) {
	ca := testCA(t)
	shared, err := ca.mintLeaf("shared.example", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ size, want int }{
		{0, DefaultLeafCacheSize},
		{-5, DefaultLeafCacheSize},
		{1, 1},
		{100, 100},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.size), func(t *testing.T) {
			cache := NewLeafCache(ca, tt.size)
			cache.mint = func(string, time.Time) (*tls.Certificate, error) { return shared, nil }
			for i := range 10_000 {
				if _, err := cache.Get(fmt.Sprintf("h%d.example", i)); err != nil {
					t.Fatal(err)
				}
				if cache.Len() > tt.want {
					t.Fatalf("after %d hosts Len() = %d, more than %d", i+1, cache.Len(), tt.want)
				}
			}
			if cache.Len() != tt.want {
				t.Errorf("Len() = %d, want %d", cache.Len(), tt.want)
			}
			if len(cache.byHost) != cache.lru.Len() {
				t.Errorf("index has %d hosts, list %d", len(cache.byHost), cache.lru.Len())
			}
		})
	}
}

func TestLeafCacheEvictsLeastRecentlyUsed(t *testing.T) {
	cache := NewLeafCache(testCA(t), 2)
	mints := countMints(cache)
	for _, h := range []string{"a.example", "b.example", "a.example", "c.example", "a.example"} {
		if _, err := cache.Get(h); err != nil {
			t.Fatal(err)
		}
	}
	if mints.Load() != 3 {
		t.Errorf("%d mints, want 3 (a, b, c): a was used last and must have stayed", mints.Load())
	}
	if _, err := cache.Get("b.example"); err != nil {
		t.Fatal(err)
	}
	if mints.Load() != 4 {
		t.Errorf("%d mints, want 4: b was least recently used and must have been evicted", mints.Load())
	}
}

func TestLeafCacheSingleFlight(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	mints := countMints(cache)
	const n = 50
	start := make(chan struct{})
	got := make([]*tls.Certificate, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i], errs[i] = cache.Get("same.example")
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] {
			t.Errorf("goroutine %d got a different certificate", i)
		}
	}
	if mints.Load() != 1 {
		t.Errorf("%d mints for one host, want 1", mints.Load())
	}
}

func TestLeafCacheRenews(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	mints := countMints(cache)
	now := time.Now()
	cache.now = func() time.Time { return now }
	first, err := cache.Get("example.com")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		advance   time.Duration
		wantMints int64
	}{
		{"fresh", time.Hour, 1},
		{"a day old", 24 * time.Hour, 1},
		{"nearly expired", leafLifetime - clockSkew - leafRenewBefore, 2},
		{"just renewed", time.Hour, 2},
	}
	for _, tt := range tests {
		now = now.Add(tt.advance)
		got, err := cache.Get("example.com")
		if err != nil {
			t.Fatal(err)
		}
		if mints.Load() != tt.wantMints {
			t.Errorf("%s: %d mints, want %d", tt.name, mints.Load(), tt.wantMints)
		}
		if got.Leaf.NotAfter.Sub(now) <= leafRenewBefore {
			t.Errorf("%s: served a leaf expiring %v, within %v of now", tt.name, got.Leaf.NotAfter, leafRenewBefore)
		}
	}
	if cache.Len() != 1 {
		t.Errorf("Len() = %d after renewing one host, want 1", cache.Len())
	}
	if second, _ := cache.Get("example.com"); second == first {
		t.Error("the renewed leaf is the first one")
	}
}

func TestLeafCacheDoesNotCacheErrors(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	mint := cache.mint
	fail := true
	cache.mint = func(host string, now time.Time) (*tls.Certificate, error) {
		if fail {
			return nil, errors.New("transient")
		}
		return mint(host, now)
	}
	if _, err := cache.Get("example.com"); err == nil {
		t.Fatal("want the mint's error")
	}
	fail = false
	if _, err := cache.Get("example.com"); err != nil {
		t.Fatalf("after a failed mint: %v", err)
	}
}

func TestLeafCacheSurvivesPanickingMint(t *testing.T) {
	cache := NewLeafCache(testCA(t), 0)
	mint := cache.mint
	cache.mint = func(string, time.Time) (*tls.Certificate, error) { panic("boom") }
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the mint's panic did not reach the caller")
			}
		}()
		_, _ = cache.Get("example.com")
	}()
	if len(cache.inflight) != 0 {
		t.Fatal("a panicking mint left its flight behind: later callers would wait forever")
	}
	cache.mint = mint
	if _, err := cache.Get("example.com"); err != nil {
		t.Fatalf("after a panicking mint: %v", err)
	}
}

func TestLeafNearCAExpiry(t *testing.T) {
	ca := testCA(t)
	caEnd := ca.Certificate().NotAfter
	tests := []struct {
		name    string
		now     time.Time
		wantErr string
	}{
		{"clamped to the CA", caEnd.Add(-48 * time.Hour), ""},
		{"too close", caEnd.Add(-leafRenewBefore), "cordon ca rotate"},
		{"after", caEnd.Add(time.Hour), "cordon ca rotate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf, err := ca.mintLeaf("example.com", tt.now)
			checkErr(t, err, tt.wantErr)
			if err == nil && leaf.Leaf.NotAfter.After(caEnd) {
				t.Errorf("leaf outlives its CA: %v > %v", leaf.Leaf.NotAfter, caEnd)
			}
		})
	}
}

func BenchmarkLeafMint(b *testing.B) {
	ca := testCA(b)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ca.mintLeaf("bench.example.com", now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafCacheHit(b *testing.B) {
	cache := NewLeafCache(testCA(b), 0)
	if _, err := cache.Get("bench.example.com"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cache.Get("bench.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafCacheHitParallel(b *testing.B) {
	cache := NewLeafCache(testCA(b), 0)
	hosts := make([]string, 64)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example.com", i)
		if _, err := cache.Get(hosts[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := cache.Get(hosts[i%len(hosts)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
