package certs

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

const (
	// DefaultLeafCacheSize is how many leaves a LeafCache keeps when asked
	// for a size of zero or less.
	DefaultLeafCacheSize = 1024

	// leafLifetime is a leaf's whole validity window, NotBefore to NotAfter.
	leafLifetime = 72 * time.Hour
	// leafRenewBefore is how long before its NotAfter a cached leaf is
	// replaced by a fresh one.
	leafRenewBefore = 24 * time.Hour
	// maxHostLen is the longest DNS name, without a trailing dot.
	maxHostLen = 253
)

// errMintAborted is what callers waiting on a mint see if it panicked.
var errMintAborted = errors.New("mint leaf certificate: aborted by a panic")

// LeafCache mints leaf certificates signed by a CA, one per host, and keeps
// the most recently used ones. Concurrent requests for one host share a
// single mint. It is safe for concurrent use.
type LeafCache struct {
	mint func(host string, now time.Time) (*tls.Certificate, error)
	now  func() time.Time
	size int

	mu       sync.Mutex
	lru      list.List // of *leafEntry, most recently used first
	byHost   map[string]*list.Element
	inflight map[string]*flight
}

// leafEntry is one cached leaf.
type leafEntry struct {
	host    string
	cert    *tls.Certificate
	renewAt time.Time
}

// flight is one mint in progress; done is closed when cert and err are set.
type flight struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// NewLeafCache returns a cache of at most size leaves (DefaultLeafCacheSize
// if size <= 0) signed by ca.
func NewLeafCache(ca *CA, size int) *LeafCache {
	if size <= 0 {
		size = DefaultLeafCacheSize
	}
	return &LeafCache{
		mint:     ca.mintLeaf,
		now:      time.Now,
		size:     size,
		byHost:   make(map[string]*list.Element, size),
		inflight: make(map[string]*flight),
	}
}

// Get returns the leaf for host, an already normalised name or IP literal
// (see policy.NormalizeHost), minting it if it is missing or near expiry.
// The result has Leaf set and must not be modified.
func (c *LeafCache) Get(host string) (*tls.Certificate, error) {
	now := c.now()
	c.mu.Lock()
	if el, ok := c.byHost[host]; ok {
		e := el.Value.(*leafEntry)
		if now.Before(e.renewAt) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			return e.cert, nil
		}
	}
	if f, ok := c.inflight[host]; ok {
		c.mu.Unlock()
		<-f.done
		return f.cert, f.err
	}
	f := &flight{done: make(chan struct{}), err: errMintAborted}
	c.inflight[host] = f
	c.mu.Unlock()
	c.fill(host, f, now)
	return f.cert, f.err
}

// Len returns the number of leaves in the cache.
func (c *LeafCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// fill runs the mint for f and publishes its result, even if it panics.
func (c *LeafCache) fill(host string, f *flight, now time.Time) {
	defer func() {
		c.mu.Lock()
		delete(c.inflight, host)
		if f.err == nil {
			c.store(host, f.cert)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.cert, f.err = c.mint(host, now)
}

// store caches cert for host as the most recently used leaf, evicting the
// least recently used ones beyond the cache's size. c.mu must be held.
func (c *LeafCache) store(host string, cert *tls.Certificate) {
	e := &leafEntry{host: host, cert: cert, renewAt: cert.Leaf.NotAfter.Add(-leafRenewBefore)}
	if el, ok := c.byHost[host]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.byHost[host] = c.lru.PushFront(e)
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byHost, oldest.Value.(*leafEntry).host)
	}
}

// mintLeaf signs a new server certificate for host, valid for leafLifetime
// from clockSkew before now (or until the CA expires, if sooner).
func (ca *CA) mintLeaf(host string, now time.Time) (*tls.Certificate, error) {
	addr, err := checkHost(host)
	if err != nil {
		return nil, err
	}
	notBefore := now.Add(-clockSkew)
	notAfter := notBefore.Add(leafLifetime)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	if notAfter.Sub(now) <= leafRenewBefore {
		return nil, fmt.Errorf("mint certificate for %s: cordon's CA expires %s, too soon to sign with: run `cordon ca rotate`",
			host, ca.cert.NotAfter.Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: generate key: %w", host, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"cordon"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if len(host) <= maxCommonName {
		tmpl.Subject.CommonName = host
	}
	if addr.IsValid() {
		tmpl.IPAddresses = []net.IP{addr.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: sign: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: parse: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// checkHost accepts a normalised host: an IP literal without zone or
// brackets (returned), or a lower-case ASCII name (zero Addr returned).
func checkHost(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" || a.Is4In6() {
			return netip.Addr{}, fmt.Errorf("mint certificate for %q: the address is not normalised (no zone, IPv4 not mapped into IPv6): normalise it with policy.NormalizeHost", host)
		}
		return a, nil
	}
	if host == "" || len(host) > maxHostLen {
		return netip.Addr{}, fmt.Errorf("mint certificate for %q: a host name has 1 to %d characters", host, maxHostLen)
	}
	prev := byte('.')
	for i := 0; i < len(host); i++ {
		b := host[i]
		ok := b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' && prev != '.'
		if !ok {
			return netip.Addr{}, fmt.Errorf("mint certificate for %q: not a normalised host name (lower-case ASCII letters, digits, '-', '_', non-empty labels between dots): normalise it with policy.NormalizeHost", host)
		}
		prev = b
	}
	if prev == '.' {
		return netip.Addr{}, fmt.Errorf("mint certificate for %q: a normalised host name does not end in '.': normalise it with policy.NormalizeHost", host)
	}
	return netip.Addr{}, nil
}
