package certs

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Building a bundle reads, decodes and re-encodes every system root: in a
// fresh process that is some 700 KiB of first-touched memory, about 10 ms
// of a restricted run's start on a small virtual machine. The bundle only
// changes when its inputs do, so it is kept.

// bundleCacheSize bounds how many bundles a cache directory keeps (CA
// rotations, system updates and projects with their own extra CAs each
// make another).
const bundleCacheSize = 8

// staleTemp is the age past which a bundle's temporary file is a killed
// writer's.
const staleTemp = time.Minute

// cachedBundle returns the bundle for ca and extraCAFiles: from dir when
// one was built there from the same inputs, else built anew and, with dir
// set, kept there. The inputs are told apart by ca's certificate and, for
// the system bundle and each extra file, by path, size, inode and
// modification and change times: a file that changes in any way gives
// another bundle. A cache that cannot be read or written is passed over.
func cachedBundle(dir string, ca *CA, extraCAFiles []string) ([]byte, error) {
	if dir == "" {
		return buildBundle(ca, extraCAFiles)
	}
	key, ok := bundleKey(ca, extraCAFiles)
	if !ok {
		return buildBundle(ca, extraCAFiles)
	}
	path := filepath.Join(dir, key+".pem")
	if data, err := readKept(path); err == nil {
		return data, nil
	}
	data, err := buildBundle(ca, extraCAFiles)
	if err != nil {
		return nil, err
	}
	if os.MkdirAll(dir, 0o700) == nil && replaceFile(path, data, 0o600) == nil {
		pruneBundles(dir, path)
	}
	return data, nil
}

// bundleKey names the inputs of a bundle; false when a file cannot be
// stamped (building will say why).
func bundleKey(ca *CA, extraCAFiles []string) (string, bool) {
	sys, err := systemBundlePath()
	if err != nil {
		return "", false
	}
	h := sha256.New()
	io.WriteString(h, "cordon trust bundle v1\n")
	for _, f := range append([]string{sys}, extraCAFiles...) {
		fi, err := os.Stat(f)
		if err != nil {
			return "", false
		}
		fmt.Fprintf(h, "%q %d %d %s\n", f, fi.Size(), fi.ModTime().UnixNano(), fileStamp(fi))
	}
	h.Write(ca.cert.Raw)
	return hex.EncodeToString(h.Sum(nil)), true
}

// readKept reads a kept bundle, refusing anything that is not one, or
// that someone else could have written.
func readKept(path string) ([]byte, error) {
	if fi, err := os.Lstat(path); err != nil || !privateToMe(fi) {
		return nil, fmt.Errorf("%s is not a kept bundle of this user's", path)
	}
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte("-----BEGIN CERTIFICATE-----\n")) || !bytes.HasSuffix(data, []byte("-----END CERTIFICATE-----\n")) {
		return nil, fmt.Errorf("%s is not a kept bundle", path)
	}
	return data, nil
}

// pruneBundles removes the oldest kept bundles beyond bundleCacheSize, but
// never keep, the one just written, and the temporary files of bundles
// whose writer was killed before it renamed them into place (older than
// staleTemp: a live cordon's is written in milliseconds).
func pruneBundles(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type kept struct {
		path string
		mod  int64
	}
	var all []kept
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".pem.tmp-") {
			if fi, err := e.Info(); err == nil && e.Type().IsRegular() && time.Since(fi.ModTime()) > staleTemp {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), ".pem") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			all = append(all, kept{filepath.Join(dir, e.Name()), fi.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(all, func(a, b kept) int { return cmp.Compare(b.mod, a.mod) })
	for i, k := range all {
		if i >= bundleCacheSize && k.path != keep {
			os.Remove(k.path)
		}
	}
}
