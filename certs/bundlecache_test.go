package certs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// kept lists the bundles a cache directory holds.
func kept(t *testing.T, dir string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "*.pem"))
	must(t, err)
	return got
}

func TestBundleCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	sysA, sysB, site, ca, other := testCA(t), testCA(t), testCA(t), testCA(t), testCA(t)
	system := writeTestFile(t, dir, "system.pem", pemOf(sysA.cert))
	t.Setenv("SSL_CERT_FILE", system)
	extra := writeTestFile(t, dir, "site.pem", pemOf(site.cert))
	out := filepath.Join(dir, "bundle.pem")
	write := func(ca *CA) []byte {
		t.Helper()
		got, err := WriteBundle(out, ca, []string{extra}, cache)
		must(t, err)
		data, err := os.ReadFile(out)
		must(t, err)
		if !bytes.Equal(got, data) {
			t.Fatal("WriteBundle returned other bytes than it wrote")
		}
		return data
	}
	marker := pemOf(other.cert)
	// tamper replaces every kept bundle with marker: a write that returns
	// marker took its bundle from the cache.
	tamper := func() {
		for _, p := range kept(t, cache) {
			must(t, os.WriteFile(p, marker, 0o600))
		}
	}

	first := write(ca)
	if got := readBundle(t, out); len(got) != 3 || !hasCert(got, sysA.cert) || !hasCert(got, site.cert) || !hasCert(got, ca.cert) {
		t.Fatalf("bundle has %d certificates, want the system's, the site's and the CA's", len(got))
	}
	files := kept(t, cache)
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one bundle", files)
	}
	for p, want := range map[string]os.FileMode{cache: 0o700, files[0]: 0o600} {
		fi, err := os.Stat(p)
		must(t, err)
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
	}
	if got := write(ca); !bytes.Equal(got, first) {
		t.Error("the same inputs gave another bundle")
	}
	tamper()
	if got := write(ca); !bytes.Equal(got, marker) {
		t.Fatal("the same inputs did not reuse the kept bundle")
	}

	// Any change of an input builds anew.
	must(t, os.WriteFile(system, pemOf(sysB.cert), 0o644))
	write(ca)
	if got := readBundle(t, out); !hasCert(got, sysB.cert) || hasCert(got, sysA.cert) || hasCert(got, other.cert) {
		t.Error("a changed system bundle did not give a new bundle")
	}
	tamper()
	must(t, os.Chmod(extra, 0o600)) // the change time alone
	if got := write(ca); bytes.Equal(got, marker) {
		t.Error("an extra CA file whose inode changed reused the kept bundle")
	}
	tamper()
	if got := readBundle(t, out); len(got) != 3 {
		t.Fatalf("bundle has %d certificates", len(got))
	}
	write(other)
	if got := readBundle(t, out); !hasCert(got, other.cert) || hasCert(got, ca.cert) {
		t.Error("another CA did not give a new bundle")
	}

	// A kept file that is not a bundle is built again, and replaced.
	for _, p := range kept(t, cache) {
		must(t, os.WriteFile(p, []byte("junk"), 0o600))
	}
	if got := write(other); !bytes.Contains(got, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("a junk kept file was returned: %q", got)
	}

	// A kept file others could have written is built again.
	tamper()
	for _, p := range kept(t, cache) {
		must(t, os.Chmod(p, 0o622))
	}
	if got := write(other); bytes.Equal(got, marker) {
		t.Error("a group-writable kept bundle was reused")
	}

	// A cache that cannot be made is passed over.
	blocked := filepath.Join(dir, "blocked")
	must(t, os.WriteFile(blocked, nil, 0o600))
	must(t, writeBundle(out, ca, []string{extra}, filepath.Join(blocked, "cache")))
	if got := readBundle(t, out); len(got) != 3 || !hasCert(got, ca.cert) {
		t.Error("an unusable cache directory changed the bundle")
	}
}

func TestPruneBundles(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	var paths []string
	for i := range bundleCacheSize + 3 {
		p := writeTestFile(t, dir, fmt.Sprintf("%02d.pem", i), []byte("x"))
		must(t, os.Chtimes(p, base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute)))
		paths = append(paths, p)
	}
	other := writeTestFile(t, dir, "notes.txt", []byte("x"))
	// A cordon killed while it wrote a bundle leaves its temporary file
	// (replaceFile's); one a live cordon is writing now is fresh.
	killed := writeTestFile(t, dir, ".0123.pem.tmp-41", []byte("x"))
	must(t, os.Chtimes(killed, base, base))
	writing := writeTestFile(t, dir, ".4567.pem.tmp-42", []byte("x"))
	pruneBundles(dir, paths[0]) // the oldest, but the one just written
	for i, p := range paths {
		_, err := os.Stat(p)
		want := i == 0 || i >= len(paths)-bundleCacheSize // the newest, and keep
		if (err == nil) != want {
			t.Errorf("%s kept = %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("a file that is not a bundle was removed")
	}
	if _, err := os.Stat(killed); err == nil {
		t.Error("an hour-old temporary bundle, a killed cordon's, was left")
	}
	if _, err := os.Stat(writing); err != nil {
		t.Error("a temporary bundle being written now was removed")
	}
}
