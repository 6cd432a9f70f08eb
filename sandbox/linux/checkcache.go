//go:build linux

package linux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// memoTTL is how long a passing probe is reused by cordon run.
const memoTTL = 10 * time.Minute

// memo keeps the passing results of Check's probes (each starts a real
// sandbox) for memoTTL, keyed by everything they depend on: cordon's and
// the helpers' binaries, the kernel, the user and the policy. It lives in
// the user's cache directory, in files only the user can write; the
// sandbox cannot reach it (its HOME is empty). cordon doctor passes
// sandbox.Fresh and always probes anew. Cheap checks (binaries present,
// /dev/net/tun, kernel settings) are never memoised, and a machine that
// changes within the TTL still fails closed: the run's own launch is the
// same box, and it refuses to start without its parts.
type memo struct {
	Key     string                 `json:"key"`
	Time    time.Time              `json:"time"`
	Caps    []sandbox.Capability   `json:"caps"`
	Results map[string]probeResult `json:"results"`
}

// memoKey hashes what a probe's verdict depends on; "" if it cannot.
func memoKey(kind string, files []string, extra []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "cordon probe %s v1\nuid %d gid %d\n", kind, os.Getuid(), os.Getgid())
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		fmt.Fprintf(h, "kernel %s\n", unix.ByteSliceToString(u.Release[:]))
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
	}
	h.Write(extra)
	return hex.EncodeToString(h.Sum(nil))
}

// memoised returns the probe's recorded capabilities and results, running
// probe (which reports through add) when there is no fresh record; only a
// run with nothing BLOCKED is recorded.
func memoised(ctx context.Context, key string, add func(sandbox.Capability),
	probe func(add func(sandbox.Capability)) map[string]probeResult) map[string]probeResult {
	path := memoPath(key)
	if path != "" && !sandbox.IsFresh(ctx) {
		if m, ok := readMemo(path, key); ok {
			for _, c := range m.Caps {
				add(c)
			}
			return m.Results
		}
	}
	var caps []sandbox.Capability
	results := probe(func(c sandbox.Capability) { caps = append(caps, c); add(c) })
	for _, c := range caps {
		if c.Status == sandbox.Blocked {
			return results
		}
	}
	if path != "" {
		writeMemo(path, memo{Key: key, Time: time.Now(), Caps: caps, Results: results})
	}
	return results
}

// memoBox is checkBox, memoised per policy.
func (b *Backend) memoBox(ctx context.Context, p *policy.Policy, add func(sandbox.Capability)) map[string]probeResult {
	self, err1 := b.self()
	bw, err2 := b.bwrap()
	pol, err3 := json.Marshal(p)
	key := ""
	if err1 == nil && err2 == nil && err3 == nil {
		key = memoKey("box", []string{self, bw}, pol)
	}
	return memoised(ctx, key, add, func(add func(sandbox.Capability)) map[string]probeResult {
		return b.checkBox(ctx, p, add)
	})
}

func memoPath(key string) string {
	if key == "" {
		return ""
	}
	base := sandbox.CacheDir()
	if base == "" {
		return ""
	}
	dir := filepath.Join(base, "probes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return filepath.Join(dir, key[:32]+".json")
}

// readMemo trusts only a fresh, regular file of the user's own that nobody
// else can write, holding this very key.
func readMemo(path, key string) (memo, bool) {
	var m memo
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return m, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return m, false
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &m) != nil || m.Key != key {
		return m, false
	}
	if age := time.Since(m.Time); age < 0 || age > memoTTL {
		return m, false
	}
	return m, true
}

// writeMemo records m at path and removes records past their TTL (each
// new cordon binary or policy leaves one behind).
func writeMemo(path string, m memo) {
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	dir := filepath.Dir(path)
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > memoTTL {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if os.WriteFile(tmp, data, 0o600) == nil {
		os.Rename(tmp, path)
	}
}
