//go:build linux

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTLSManyHostsStayBounded terminates 10,000 distinct host names in a
// row and checks cordon's memory stays bounded: leaves live in a bounded
// cache, so the 10,000th name costs what the first did.
func TestTLSManyHostsStayBounded(t *testing.T) {
	testOrigin(t)
	p := startProxy(t, "--allow", "*.many.cordon.test:8443", "--resolve=*.many.cordon.test="+originAddr, "--ephemeral-ca")
	// One pool for every handshake: parsing the 225 KB bundle anew for
	// each (6.5 ms of CPU here) took most of the test's time, and under
	// load it ran past its time bound.
	roots := rootsOf(mustRead(t, p.env["SSL_CERT_FILE"]))
	const total, workers = 10000, 8
	deadline := time.Now().Add(4 * time.Minute)
	var next, failed atomic.Int64
	handshake := func(i int64) error {
		name := fmt.Sprintf("h%d.many.cordon.test", i)
		tc, err := tlsThroughProxy(p, roots, name+":8443", name)
		if tc != nil {
			tc.Close()
		}
		return err
	}
	rssAt := map[int64]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total || time.Now().After(deadline) {
					return
				}
				if err := handshake(i); err != nil {
					if failed.Add(1) < 5 {
						t.Errorf("host %d: %v", i, err)
					}
				}
				if i == 1000 || i == total {
					mu.Lock()
					rssAt[i] = vmRSS(t, p.cmd.Process.Pid)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if done := next.Load() - workers; done < total {
		t.Fatalf("only %d of %d names in the time bound", done, total)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d handshakes failed", failed.Load())
	}
	hwm := vmHWM(t, p.cmd.Process.Pid)
	t.Logf("cordon RSS after 1,000 names %d KiB, after %d %d KiB, peak %d KiB", rssAt[1000], total, rssAt[total], hwm)
	if hwm > 200<<10 {
		t.Fatalf("cordon's peak RSS is %d KiB after %d names; the leaf cache should keep it bounded", hwm, total)
	}
	if rssAt[total] > 2*rssAt[1000]+32<<10 {
		t.Fatalf("RSS grew from %d KiB (1,000 names) to %d KiB (%d names)", rssAt[1000], rssAt[total], total)
	}
}

func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func vmRSS(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmRSS") }
func vmHWM(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmHWM") }
