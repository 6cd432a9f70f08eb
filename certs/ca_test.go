package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDefaultDir(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		xdg     string
		home    string
		want    string
		wantErr string
	}{
		{name: "xdg", xdg: "/x/cfg", home: "/h", want: "/x/cfg/cordon/ca"},
		{name: "home", home: "/h", want: "/h/.config/cordon/ca"},
		{name: "relative xdg", xdg: "cfg", home: "/h", wantErr: "not an absolute path"},
		// A relative $HOME put the CA key in the directory cordon
		// started in: a run's workspace, which its box read. It counts
		// for none, as an unset one: the password database's home.
		{name: "relative home", home: "rel", want: filepath.Join(me.HomeDir, ".config", "cordon", "ca")},
		{name: "relative home, xdg", xdg: "/x/cfg", home: "rel", want: "/x/cfg/cordon/ca"},
		{name: "nothing", want: filepath.Join(me.HomeDir, ".config", "cordon", "ca")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			got, err := DefaultDir()
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("DefaultDir() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadOrCreateModesAndReuse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg", "ca")
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Dir(dir):                0o700,
		dir:                              0o700,
		filepath.Join(dir, keyFileName):  0o600,
		CertPath(dir):                    0o644,
		filepath.Join(dir, lockFileName): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
	}
	onDisk, err := os.ReadFile(CertPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, ca.CertPEM()) {
		t.Error("CertPEM() differs from the certificate on disk")
	}
	again, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Certificate().Equal(ca.Certificate()) {
		t.Error("second LoadOrCreate made a new CA instead of loading the first")
	}
}

func TestCAShape(t *testing.T) {
	persistent, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ephemeral, err := NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]*CA{"persistent": persistent, "ephemeral": ephemeral} {
		t.Run(name, func(t *testing.T) {
			c := ca.Certificate()
			if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
				t.Errorf("want CA:true pathlen 0, got IsCA=%v valid=%v MaxPathLen=%d zero=%v", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
			}
			if c.KeyUsage&x509.KeyUsageCertSign == 0 {
				t.Error("no certificate-signing key usage")
			}
			if len(c.PermittedDNSDomains)+len(c.ExcludedDNSDomains)+len(c.PermittedIPRanges)+len(c.ExcludedIPRanges) != 0 {
				t.Error("CA has name constraints")
			}
			pub, ok := c.PublicKey.(*ecdsa.PublicKey)
			if !ok || pub.Curve != elliptic.P256() {
				t.Errorf("CA key is %T, want ECDSA P-256", c.PublicKey)
			}
			if d := c.NotAfter.Sub(c.NotBefore); d > caLifetime+clockSkew {
				t.Errorf("CA valid for %v, want at most %v", d, caLifetime+clockSkew)
			}
			if !c.NotBefore.Before(time.Now()) {
				t.Errorf("NotBefore %v is not in the past", c.NotBefore)
			}
			if !strings.HasPrefix(c.Subject.CommonName, "cordon ") || len(c.Subject.CommonName) > maxCommonName {
				t.Errorf("subject CN %q should name cordon and fit %d bytes", c.Subject.CommonName, maxCommonName)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: poolOf(c)}); err != nil {
				t.Errorf("CA does not verify against itself: %v", err)
			}
		})
	}
}

func TestLoadChecks(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
	}{
		{"key group-readable", chmod(keyFileName, 0o640), "chmod 600"},
		{"key world-readable", chmod(keyFileName, 0o604), "chmod 600"},
		{"key world-writable", chmod(keyFileName, 0o602), "chmod 600"},
		{"key executable by group", chmod(keyFileName, 0o610), "chmod 600"},
		{"cert world-writable", chmod(certFileName, 0o646), "chmod 644"},
		{"dir group-writable", chmod(".", 0o770), "chmod 700"},
		{"dir world-writable", chmod(".", 0o757), "chmod 700"},
		{"dir world-readable", chmod(".", 0o755), ""},
		{"cert world-readable", chmod(certFileName, 0o444), ""},
		{"key read-only", chmod(keyFileName, 0o400), ""},
		{"key missing", remove(keyFileName), "has no key"},
		{"cert missing", remove(certFileName), "has no certificate"},
		{"key symlink", func(t *testing.T, dir string) {
			key := filepath.Join(dir, keyFileName)
			moved := filepath.Join(dir, "elsewhere.pem")
			must(t, os.Rename(key, moved))
			must(t, os.Symlink(moved, key))
		}, "symbolic link"},
		{"key from another CA", func(t *testing.T, dir string) {
			other := t.TempDir()
			if _, err := LoadOrCreate(other); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, keyFileName), filepath.Join(dir, keyFileName), 0o600)
		}, "does not belong"},
		{"key not PEM", write(keyFileName, "not a key", 0o600), "PRIVATE KEY"},
		{"cert not PEM", write(certFileName, "not a cert", 0o644), "CERTIFICATE"},
		{"cert is not a CA", func(t *testing.T, dir string) {
			ca, err := LoadOrCreate(dir)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := ca.mintLeaf("example.com", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			writeCA(t, dir, leaf.Leaf.Raw, leaf.PrivateKey.(*ecdsa.PrivateKey))
		}, "not a CA certificate"},
		{"CA expiring", func(t *testing.T, dir string) {
			old, err := newCA("CA", time.Now().Add(-caLifetime+time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			writeCA(t, dir, old.cert.Raw, old.key.(*ecdsa.PrivateKey))
		}, "too soon to sign"},
		{"CA from the future", func(t *testing.T, dir string) {
			future, err := newCA("CA", time.Now().Add(48*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			writeCA(t, dir, future.cert.Raw, future.key.(*ecdsa.PrivateKey))
		}, "clock"},
		{"owned by someone else", func(t *testing.T, dir string) {
			uid := os.Getuid() + 1
			currentUID = func() int { return uid }
			t.Cleanup(func() { currentUID = os.Getuid })
		}, "not by you"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ca")
			if _, err := LoadOrCreate(dir); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			_, err := LoadOrCreate(dir)
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestReadPrivateFileOwner(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	uid := os.Getuid() + 1
	currentUID = func() int { return uid }
	t.Cleanup(func() { currentUID = os.Getuid })
	_, err := readPrivateFile(filepath.Join(dir, keyFileName), "CA key", 0o077, "600")
	checkErr(t, err, "CA key "+filepath.Join(dir, keyFileName)+" is owned by uid")
}

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	old, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf, err := NewLeafCache(old, 0).Get("example.com")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Certificate().Equal(rotated.Certificate()) {
		t.Error("LoadOrCreate after Rotate does not return the rotated CA")
	}
	if old.Certificate().PublicKey.(*ecdsa.PublicKey).Equal(rotated.Certificate().PublicKey) {
		t.Error("Rotate kept the old key")
	}
	_, err = oldLeaf.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: poolOf(rotated.Certificate())})
	if err == nil {
		t.Error("a leaf of the old CA still verifies against the rotated CA")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, keyFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("rotated key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
}

func TestRotateRepairs(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(filepath.Join(dir, keyFileName)))
	if _, err := LoadOrCreate(dir); err == nil {
		t.Fatal("LoadOrCreate accepted a CA with no key")
	}
	if _, err := Rotate(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir); err != nil {
		t.Errorf("after Rotate: %v", err)
	}
}

func TestLoadOrCreateConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	const n = 8
	cas := make([]*CA, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cas[i], errs[i] = LoadOrCreate(dir)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !cas[i].Certificate().Equal(cas[0].Certificate()) {
			t.Errorf("caller %d got a different CA: two CAs were created", i)
		}
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdef", 3, "abc"},
		{"abé", 3, "ab"},
		{"日本語", 7, "日本"},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func chmod(name string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) { must(t, os.Chmod(filepath.Join(dir, name), mode)) }
}

func remove(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, name))) }
}

func write(name, content string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), mode))
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, data, mode))
}

// writeCA replaces the CA files in dir with the given certificate and key.
func writeCA(t *testing.T, dir string, certDER []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, keyFileName), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	must(t, os.WriteFile(CertPath(dir), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o644))
}
