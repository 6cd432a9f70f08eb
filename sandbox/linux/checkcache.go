//go:build linux

package linux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
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
	Key     string
	Time    time.Time
	Caps    []sandbox.Capability
	Results map[string]probeResult
}

// memoHeader starts a memo file. The format is lines of quoted fields,
// written and read without reflection: every cordon run reads two memos,
// and encoding/json's first use would cost it about a millisecond here.
const memoHeader = "cordon probe memo v2\n"

// appendMemo renders m: the header, then "key", "time" (Unix
// nanoseconds), one "cap" line per capability and one "result" line per
// probe result, in name order.
func appendMemo(b []byte, m memo) []byte {
	b = append(b, memoHeader...)
	b = fmt.Appendf(b, "key %q\ntime %d\n", m.Key, m.Time.UnixNano())
	for _, c := range m.Caps {
		b = fmt.Appendf(b, "cap %q %q %q %q\n", c.Name, c.Status, c.Reason, c.Fix)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Results)) {
		r := m.Results[name]
		b = fmt.Appendf(b, "result %q %t %q\n", name, r.OK, r.Detail)
	}
	return b
}

// parseMemo reads what appendMemo wrote; anything else is refused.
func parseMemo(data []byte) (memo, bool) {
	var m memo
	rest, ok := bytes.CutPrefix(data, []byte(memoHeader))
	if !ok {
		return m, false
	}
	seenKey, seenTime := false, false
	for len(rest) > 0 {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		if !found {
			return m, false
		}
		rest = after
		kind, fields, ok := sandbox.LineFields(string(line))
		if !ok {
			return m, false
		}
		switch {
		case kind == "key" && len(fields) == 1 && !seenKey:
			m.Key, seenKey = fields[0], true
		case kind == "time" && len(fields) == 1 && !seenTime:
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return m, false
			}
			m.Time, seenTime = time.Unix(0, n), true
		case kind == "cap" && len(fields) == 4:
			m.Caps = append(m.Caps, sandbox.Capability{Name: fields[0], Status: sandbox.Status(fields[1]), Reason: fields[2], Fix: fields[3]})
		case kind == "result" && len(fields) == 3:
			ok, err := strconv.ParseBool(fields[1])
			if err != nil {
				return m, false
			}
			if m.Results == nil {
				m.Results = map[string]probeResult{}
			}
			m.Results[fields[0]] = probeResult{Name: fields[0], OK: ok, Detail: fields[2]}
		default:
			return m, false
		}
	}
	return m, seenKey && seenTime
}

// memoKey hashes what a probe's verdict depends on; "" if it cannot.
func memoKey(kind string, files []string, extra []byte) string {
	b := append([]byte("cordon probe "), kind...)
	b = append(b, " v2\nuid "...)
	b = strconv.AppendInt(b, int64(os.Getuid()), 10)
	b = append(b, " gid "...)
	b = strconv.AppendInt(b, int64(os.Getgid()), 10)
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		b = append(b, "\nkernel "...)
		b = append(b, unix.ByteSliceToString(u.Release[:])...)
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return ""
		}
		b = append(b, '\n')
		b = strconv.AppendQuote(b, f)
		b = append(b, ' ')
		b = strconv.AppendInt(b, fi.Size(), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 10)
	}
	b = append(b, '\n')
	sum := sha256.Sum256(append(b, extra...))
	return hex.EncodeToString(sum[:])
}

// appendKey renders v, a policy or part of one, for a memo key: every
// field in order, strings quoted, lists bracketed, each value closed by a
// semicolon, so different values render differently. It is false for a kind a policy
// does not hold (a map's order, a pointer's address would not do).
func appendKey(b []byte, v reflect.Value) ([]byte, bool) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			var ok bool
			if b, ok = appendKey(b, v.Field(i)); !ok {
				return b, false
			}
		}
	case reflect.Slice:
		b = append(b, '[')
		for i := range v.Len() {
			var ok bool
			if b, ok = appendKey(append(b, ' '), v.Index(i)); !ok {
				return b, false
			}
		}
		b = append(b, ']')
	case reflect.String:
		b = strconv.AppendQuote(b, v.String())
	case reflect.Bool:
		b = strconv.AppendBool(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b = strconv.AppendInt(b, v.Int(), 10)
	default:
		return b, false
	}
	return append(b, ';'), true
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
	pol, ok := appendKey(nil, reflect.ValueOf(*p))
	key := ""
	if err1 == nil && err2 == nil && ok {
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
	return filepath.Join(dir, key[:32]+".memo")
}

// readMemo trusts only a fresh, private record (sandbox.ReadPrivate)
// holding this very key.
func readMemo(path, key string) (memo, bool) {
	var m memo
	data, ok := sandbox.ReadPrivate(path)
	if !ok {
		return m, false
	}
	m, ok = parseMemo(data)
	if !ok || m.Key != key {
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
	data := appendMemo(nil, m)
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
