//go:build linux && soak

package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The soak's shape: soakNames distinct names, soakPerName requests each,
// by soakWorkers clients at once.
const (
	soakNames   = 10000
	soakPerName = 10
	soakTotal   = soakNames * soakPerName
	soakWorkers = 32
	// soakFreshEvery: every soakFreshEvery-th request of a name goes on a
	// new connection; the others reuse the worker's keep-alive one.
	soakFreshEvery = 5
	// soakIdleNames is how many names' connections a worker keeps idle
	// before it closes them all, so at most about soakWorkers ×
	// (soakIdleNames+1) tunnels are open at once.
	soakIdleNames = 8
	// soakTimeBound is how long the requests may take in all.
	soakTimeBound = 8 * time.Minute
	// soakSuffix is the zone every soak name lives in.
	soakSuffix = ".soak.cordon.test"
)

// Bounds on cordon's own resources, from /proc.
const (
	// soakPeakRSSKB bounds cordon's peak RSS. What it holds at most: the
	// Go runtime, binary and idle proxy (~16 MiB before the first
	// request); the leaf cache (1,024 leaves, a few KiB each: ~4 MiB);
	// about 300 open terminated tunnels, each two TLS connections with
	// their record buffers, an HTTP/1.1 or HTTP/2 server connection and
	// the stream's own upstream transports (~200 KiB each: ~60 MiB, half
	// of it garbage awaiting the collector at GOGC=100). That is ~80 MiB;
	// the measured peak is ~70 MiB. Twice that leaves room for another
	// machine's scheduling and still catches state kept per request
	// (100,000 × 1 KiB) or per name beyond the cache.
	soakPeakRSSKB = 160 << 10
	// soakEndRSSRatio bounds RSS at the end against RSS after the first
	// 10% of the requests, when the leaf cache is already full.
	soakEndRSSRatio = 1.5
	// soakFDSlack is how many more descriptors cordon may hold after the
	// settle than before the first request (a lazily opened resolver or
	// random source).
	soakFDSlack = 4
	// soakMaxThreads bounds cordon's OS threads: Go runs GOMAXPROCS of
	// them plus those blocked in system calls (the audit writes are one
	// at a time under a lock), sysmon and a few spares. A thread per
	// connection would show as hundreds.
	soakMaxThreads = 64
	// soakSettle is how long cordon gets to close everything once the
	// clients have gone.
	soakSettle = 30 * time.Second
)

// soakUsage is one reading of cordon's resources.
type soakUsage struct {
	rssKB, fds, threads int64
}

// readUsage reads a process's RSS, threads and descriptors. It reports
// errors rather than failing the test, so the clients' goroutines use it.
func readUsage(pid int) (soakUsage, error) {
	var u soakUsage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read cordon's status: %w", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		name, v, _ := strings.Cut(l, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			u.rssKB = n
		case "Threads":
			u.threads = n
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, fmt.Errorf("count cordon's descriptors: %w", err)
	}
	u.fds = int64(len(fds))
	return u, nil
}

// TestSoak sends 100,000 requests for 10,000 distinct names through
// `cordon proxy`'s TLS termination, over keep-alive connections (HTTP/1.1
// and HTTP/2) and fresh ones, and checks cordon's memory, descriptors and
// threads stay bounded and come back down, and every request is logged.
// It runs under `make soak` only (build tag soak).
func TestSoak(t *testing.T) {
	o := newLocalOrigin(t, "*"+soakSuffix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Host)
	}))
	p := startProxy(t, append(o.proxyArgs("*"+soakSuffix), "--ephemeral-ca")...)
	pid := p.cmd.Process.Pid
	pool := rootsOf(mustRead(t, p.env["SSL_CERT_FILE"]))
	pu, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	before, err := readUsage(pid)
	if err != nil {
		t.Fatal(err)
	}

	var (
		next, done, failed atomic.Int64
		h1, h2             atomic.Int64
		mu                 sync.Mutex
		firstErrs          []string
		atTenth            soakUsage
		peak               soakUsage
	)
	fail := func(format string, args ...any) {
		if failed.Add(1) <= 5 {
			mu.Lock()
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	}
	sample := func() soakUsage {
		u, err := readUsage(pid)
		if err != nil {
			fail("%v", err)
			return u
		}
		mu.Lock()
		peak.rssKB, peak.fds, peak.threads = max(peak.rssKB, u.rssKB), max(peak.fds, u.fds), max(peak.threads, u.threads)
		mu.Unlock()
		return u
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				sample()
			}
		}
	}()

	get := func(c *http.Client, authority string, i int) {
		resp, err := c.Get(fmt.Sprintf("https://%s/soak/%d", authority, i))
		if err != nil {
			fail("%s request %d: %v", authority, i, err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor == 2 {
			h2.Add(1)
		} else {
			h1.Add(1)
		}
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != authority {
			fail("%s request %d: %d %q %v", authority, i, resp.StatusCode, body, err)
		}
	}
	start := time.Now()
	deadline := start.Add(soakTimeBound)
	var wg sync.WaitGroup
	for w := 0; w < soakWorkers; w++ {
		keepTr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool},
			MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute, ForceAttemptHTTP2: w%2 == 0}
		if w%2 != 0 {
			keepTr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		freshTr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool},
			DisableKeepAlives: true, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		keep := &http.Client{Transport: keepTr, Timeout: 30 * time.Second}
		fresh := &http.Client{Transport: freshTr, Timeout: 30 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer keepTr.CloseIdleConnections()
			for names := 1; ; names++ {
				n := next.Add(1) - 1
				if n >= soakNames || time.Now().After(deadline) {
					return
				}
				authority := fmt.Sprintf("n%d%s:%d", n, soakSuffix, o.port)
				for i := 0; i < soakPerName; i++ {
					c := keep
					if i%soakFreshEvery == soakFreshEvery-1 {
						c = fresh
					}
					get(c, authority, i)
					if done.Add(1) == soakTotal/10 {
						u := sample()
						mu.Lock()
						atTenth = u
						mu.Unlock()
					}
				}
				if names%soakIdleNames == 0 {
					keepTr.CloseIdleConnections()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if n := done.Load(); n < soakTotal {
		t.Fatalf("only %d of %d requests within %s", n, soakTotal, soakTimeBound)
	}
	t.Logf("%d requests for %d names in %s (%.0f/s), %d over HTTP/1.1 and %d over HTTP/2 on the client leg",
		soakTotal, soakNames, elapsed.Round(time.Second), float64(soakTotal)/elapsed.Seconds(), h1.Load(), h2.Load())
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed; first:\n%s", n, soakTotal, strings.Join(firstErrs, "\n"))
	}

	// Settle: every client connection is closed; cordon must let go of
	// everything it held for them.
	var after soakUsage
	settled := eventually(soakSettle, func() bool {
		after, err = readUsage(pid)
		return err != nil || after.fds <= before.fds+soakFDSlack
	})
	if err != nil {
		t.Fatal(err)
	}
	hwm := vmHWM(t, pid)
	t.Logf("cordon before: %+v; after %d requests: %+v; at the end: %+v; peak: %+v, VmHWM %d KiB", before, soakTotal/10, atTenth, after, peak, hwm)
	if !settled {
		t.Errorf("cordon holds %d descriptors %s after the clients left, %d before the first request", after.fds, soakSettle, before.fds)
	}
	if hwm > soakPeakRSSKB {
		t.Errorf("cordon's peak RSS is %d KiB, over the bound of %d KiB", hwm, soakPeakRSSKB)
	}
	if float64(after.rssKB) > soakEndRSSRatio*float64(atTenth.rssKB) {
		t.Errorf("cordon's RSS grew from %d KiB after %d requests to %d KiB at the end", atTenth.rssKB, soakTotal/10, after.rssKB)
	}
	if peak.threads > soakMaxThreads {
		t.Errorf("cordon ran %d threads at its peak, over the bound of %d", peak.threads, soakMaxThreads)
	}
	if h1.Load() == 0 || h2.Load() == 0 {
		t.Errorf("the clients did not mix HTTP/1.1 (%d) and HTTP/2 (%d)", h1.Load(), h2.Load())
	}
	// Each name takes one keep-alive tunnel and a fresh one for every
	// soakFreshEvery-th request.
	c := countSoakDecisions(t, p.audit)
	t.Logf("audit: %+v", c)
	if c.allowed != soakTotal || c.other != 0 {
		t.Errorf("the audit log holds %d allowed requests and %d others, want %d and 0", c.allowed, c.other, soakTotal)
	}
	if minTunnels := soakNames * (1 + soakPerName/soakFreshEvery); c.tunnels < minTunnels {
		t.Errorf("%d tunnels for %d names, want at least %d: the fresh connections did not happen", c.tunnels, soakNames, minTunnels)
	}
}

// soakDecisions counts a soak's decision lines.
type soakDecisions struct {
	// tunnels are allowed CONNECTs; allowed and other are the requests
	// inside them, allowed or not.
	tunnels, allowed, other int
}

// countSoakDecisions counts the soak's decision lines in an audit log.
func countSoakDecisions(t *testing.T, path string) soakDecisions {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c soakDecisions
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r struct{ Type, Host, Path, Decision string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		switch {
		case r.Type != "decision" || !strings.HasSuffix(r.Host, soakSuffix):
		case r.Path == "" && r.Decision == "allow":
			c.tunnels++
		case strings.HasPrefix(r.Path, "/soak/") && r.Decision == "allow":
			c.allowed++
		default:
			c.other++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}
