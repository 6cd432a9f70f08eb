package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pemOf encodes certificates as PEM CERTIFICATE blocks.
func pemOf(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// writeTestFile writes content to name in dir and returns its path.
func writeTestFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, content, 0o644))
	return p
}

// readBundle parses a bundle written by WriteBundle, failing on any block
// that is not a certificate or has headers.
func readBundle(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" || len(b.Headers) != 0 {
			t.Fatalf("bundle holds a %q block with headers %v", b.Type, b.Headers)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		must(t, err)
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(data)) != 0 {
		t.Fatalf("bundle has text after its last certificate: %q", data)
	}
	return certs
}

// writeBundle is WriteBundle for a test that only needs its error.
func writeBundle(path string, ca *CA, extraCAFiles []string, cacheDir string) error {
	_, err := WriteBundle(path, ca, extraCAFiles, cacheDir)
	return err
}

func hasCert(certs []*x509.Certificate, want *x509.Certificate) bool {
	return slices.ContainsFunc(certs, want.Equal)
}

func TestWriteBundle(t *testing.T) {
	dir := t.TempDir()
	sysA, sysB, site, ca := testCA(t), testCA(t), testCA(t), testCA(t)
	garbage := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	system := slices.Concat([]byte("# a comment the RHEL bundle has\n"), pemOf(sysA.cert), garbage, []byte("# another\n"), pemOf(sysB.cert))
	t.Setenv("SSL_CERT_FILE", writeTestFile(t, dir, "system.pem", system))
	extra := writeTestFile(t, dir, "site.pem", pemOf(site.cert, sysA.cert))
	again := writeTestFile(t, dir, "cordon.pem", pemOf(ca.cert))

	out := filepath.Join(dir, "bundle.pem")
	must(t, os.WriteFile(out, []byte("stale"), 0o600))
	if err := writeBundle(out, ca, []string{extra, again}, ""); err != nil {
		t.Fatal(err)
	}
	got := readBundle(t, out)
	for name, want := range map[string]*CA{"system A": sysA, "system B": sysB, "site CA": site, "cordon CA": ca} {
		if !hasCert(got, want.cert) {
			t.Errorf("bundle lacks the %s", name)
		}
	}
	if len(got) != 4 {
		t.Errorf("bundle has %d certificates, want 4 (duplicates once, the unparseable system one left out)", len(got))
	}
	fi, err := os.Stat(out)
	must(t, err)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("bundle mode %04o, want 0644", fi.Mode().Perm())
	}

	leaf, err := NewLeafCache(ca, 0).Get("example.com")
	must(t, err)
	pool := x509.NewCertPool()
	data, err := os.ReadFile(out)
	must(t, err)
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("crypto/x509 reads no certificate from the bundle")
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: pool}); err != nil {
		t.Errorf("a leaf does not verify against the bundle: %v", err)
	}
}

func TestWriteBundleErrors(t *testing.T) {
	dir := t.TempDir()
	ca, other := testCA(t), testCA(t)
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})
	goodSystem := writeTestFile(t, dir, "system.pem", pemOf(other.cert))
	badDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	tests := []struct {
		name    string
		system  string
		extra   []byte
		wantErr string
	}{
		{"key in extra", goodSystem, slices.Concat(pemOf(other.cert), key), `site.pem: PEM block 2 is a "PRIVATE KEY"`},
		{"only a key in extra", goodSystem, key, "site.pem: PEM block 1"},
		{"trusted certificate form", goodSystem, pem.EncodeToMemory(&pem.Block{Type: "TRUSTED CERTIFICATE", Bytes: other.cert.Raw}), "not a CERTIFICATE"},
		{"extra empty", goodSystem, []byte{}, "no PEM certificate"},
		{"extra DER", goodSystem, other.cert.Raw, "openssl x509 -inform der"},
		{"extra unparseable", goodSystem, badDER, "site.pem: PEM block 1:"},
		{"system missing", filepath.Join(dir, "absent.pem"), pemOf(other.cert), "system roots"},
		{"system empty", writeTestFile(t, dir, "empty.pem", nil), pemOf(other.cert), "no certificates"},
		{"system has a key", writeTestFile(t, dir, "keyed.pem", key), pemOf(other.cert), "keyed.pem: PEM block 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SSL_CERT_FILE", tt.system)
			extra := writeTestFile(t, t.TempDir(), "site.pem", tt.extra)
			out := filepath.Join(t.TempDir(), "bundle.pem")
			checkErr(t, writeBundle(out, ca, []string{extra}, ""), tt.wantErr)
			if _, err := os.Stat(out); err == nil {
				t.Error("a bundle was written despite the error")
			}
		})
	}
	t.Run("extra missing", func(t *testing.T) {
		t.Setenv("SSL_CERT_FILE", goodSystem)
		out, nope := filepath.Join(dir, "b.pem"), filepath.Join(dir, "nope.pem")
		// Named, with what to do, and not as a write of the bundle
		// that failed.
		err := writeBundle(out, ca, []string{nope}, "")
		want := "trust bundle: extra CA " + nope + ": no such file; name the PEM file of the CA to trust (--extra-ca or extra_ca), or leave it out"
		if err == nil || err.Error() != want {
			t.Fatalf("%v, want %q", err, want)
		}
	})
	t.Run("extra too large", func(t *testing.T) {
		t.Setenv("SSL_CERT_FILE", goodSystem)
		huge := filepath.Join(dir, "huge.pem")
		must(t, os.WriteFile(huge, nil, 0o644))
		must(t, os.Truncate(huge, maxBundleFile+1))
		checkErr(t, writeBundle(filepath.Join(dir, "b.pem"), ca, []string{huge}, ""), "too large")
	})
}

func TestSystemBundlePath(t *testing.T) {
	t.Setenv("SSL_CERT_FILE", "/some/where.pem")
	if p, err := systemBundlePath(); err != nil || p != "/some/where.pem" {
		t.Errorf("with SSL_CERT_FILE: %q, %v", p, err)
	}
	t.Setenv("SSL_CERT_FILE", "")
	p, err := systemBundlePath()
	if err != nil {
		t.Fatalf("this machine needs a system CA bundle (install ca-certificates): %v", err)
	}
	if !slices.Contains(systemBundlePaths, p) {
		t.Errorf("systemBundlePath() = %q, not one of the known locations", p)
	}
}

func TestUpstreamPool(t *testing.T) {
	dir := t.TempDir()
	site := testCA(t)
	leaf, err := site.mintLeaf("internal.example", time.Now())
	must(t, err)
	opts := x509.VerifyOptions{DNSName: "internal.example"}

	withoutExtra, err := UpstreamPool(nil)
	must(t, err)
	opts.Roots = withoutExtra
	if _, err := leaf.Leaf.Verify(opts); err == nil {
		t.Error("a site CA's leaf verifies without the site CA")
	}

	pool, err := UpstreamPool([]string{writeTestFile(t, dir, "site.pem", pemOf(site.cert))})
	must(t, err)
	opts.Roots = pool
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Errorf("with the site CA: %v", err)
	}

	keyed := writeTestFile(t, dir, "keyed.pem", slices.Concat(pemOf(site.cert), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("k")})))
	_, err = UpstreamPool([]string{keyed})
	checkErr(t, err, "keyed.pem: PEM block 2")
}

func FuzzParseCerts(f *testing.F) {
	ca, err := NewEphemeral()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.CertPEM())
	f.Add(slices.Concat([]byte("# comment\n"), ca.CertPEM(), ca.CertPEM()))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{0x30, 0}}))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"))
	f.Add(ca.cert.Raw)
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, bad, err := parseCerts(data)
		if err != nil && (certs != nil || bad != nil) {
			t.Fatalf("error %v returned with results", err)
		}
		for _, c := range certs {
			if _, perr := x509.ParseCertificate(c.Raw); perr != nil {
				t.Fatalf("returned a certificate that does not parse: %v", perr)
			}
		}
	})
}

// The upstream pool is the system bundle ($SSL_CERT_FILE here), the same
// file the sandbox's bundle starts from; a rewritten bundle is read anew.
func TestUpstreamPoolIsTheSystemBundle(t *testing.T) {
	dir := t.TempDir()
	site, other := testCA(t), testCA(t)
	leaf, err := site.mintLeaf("internal.example", time.Now())
	must(t, err)
	bundle := writeTestFile(t, dir, "roots.pem", pemOf(site.cert))
	t.Setenv("SSL_CERT_FILE", bundle)
	t.Setenv("SSL_CERT_DIR", "")
	opts := x509.VerifyOptions{DNSName: "internal.example"}

	pool, err := UpstreamPool(nil)
	must(t, err)
	opts.Roots = pool
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Fatalf("a root in $SSL_CERT_FILE is not trusted upstream: %v", err)
	}

	// Same path, new contents (and a later modification time).
	must(t, os.WriteFile(bundle, pemOf(other.cert), 0o644))
	later := time.Now().Add(time.Minute)
	must(t, os.Chtimes(bundle, later, later))
	pool, err = UpstreamPool(nil)
	must(t, err)
	opts.Roots = pool
	if _, err := leaf.Leaf.Verify(opts); err == nil {
		t.Fatal("a root removed from the bundle is still trusted")
	}

	// A root only in $SSL_CERT_DIR is trusted too; other files there
	// (a directory, a FIFO, a key, junk) are skipped.
	certDir := filepath.Join(dir, "certs")
	must(t, os.MkdirAll(filepath.Join(certDir, "sub"), 0o755))
	writeTestFile(t, certDir, "site.pem", pemOf(site.cert, other.cert))
	writeTestFile(t, certDir, "junk.pem", []byte("not a certificate"))
	writeTestFile(t, certDir, "key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("k")}))
	must(t, syscall.Mkfifo(filepath.Join(certDir, "fifo"), 0o644))
	t.Setenv("SSL_CERT_DIR", filepath.Join(dir, "missing")+string(filepath.ListSeparator)+certDir)
	pool, err = UpstreamPool(nil)
	must(t, err)
	opts.Roots = pool
	if _, err := leaf.Leaf.Verify(opts); err != nil {
		t.Fatalf("a root in $SSL_CERT_DIR is not trusted upstream: %v", err)
	}
}

// TestAppendPEMMatchesEncode: the bundle's own PEM writer gives what
// encoding/pem gives, and pemSize its length, for every length of DER
// around the line and padding boundaries.
func TestAppendPEMMatchesEncode(t *testing.T) {
	for n := 0; n < 400; n++ {
		der := make([]byte, n)
		for i := range der {
			der[i] = byte(i*7 + n)
		}
		want := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if got := appendPEM([]byte("x"), der); !bytes.Equal(got[1:], want) {
			t.Fatalf("%d bytes of DER: appendPEM gives\n%s\nwant\n%s", n, got[1:], want)
		}
		if pemSize(n) != len(want) {
			t.Fatalf("%d bytes of DER: pemSize %d, want %d", n, pemSize(n), len(want))
		}
	}
}

// TestNamedPipesRefused: an extra CA file and the CA's own files must be
// regular files; a named pipe is refused at once, where reading it would
// wait for a writer, and with it every session.
func TestNamedPipesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ca.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-key.pem"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		f    func() error
	}{
		{"an extra CA", func() error { _, err := UpstreamPool([]string{fifo}); return err }},
		{"the CA's certificate", func() error { _, err := LoadOrCreate(dir); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- c.f() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s that is a named pipe: %v; want a refusal", c.what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s that is a named pipe: still waiting after 5s", c.what)
		}
	}
}
