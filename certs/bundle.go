package certs

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cordon-sandbox/cordon/internal/regular"
)

// systemBundlePaths are where systems keep their PEM bundle of trusted
// roots, in the order tried; $SSL_CERT_FILE, when set, replaces them all.
var systemBundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Arch, Gentoo
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // Fedora, RHEL 7+, CentOS
	"/etc/pki/tls/certs/ca-bundle.crt",                  // older Fedora and RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/ssl/cert.pem",                                 // Alpine, macOS, FreeBSD
}

// maxBundleFile bounds how much of one certificate file is read.
const maxBundleFile = 16 << 20

// Bundle returns the trust bundle for sandboxed clients: the system's
// roots, the certificates in extraCAFiles, and ca's certificate, each
// once, as PEM CERTIFICATE blocks and nothing else. With cacheDir set, a
// bundle built before from the same inputs is reused from there (see
// cachedBundle).
func Bundle(ca *CA, extraCAFiles []string, cacheDir string) ([]byte, error) {
	data, err := cachedBundle(cacheDir, ca, extraCAFiles)
	if err != nil {
		return nil, fmt.Errorf("trust bundle: %w", err)
	}
	return data, nil
}

// WriteBundle writes Bundle to path (mode 0644) and returns it.
func WriteBundle(path string, ca *CA, extraCAFiles []string, cacheDir string) ([]byte, error) {
	data, err := Bundle(ca, extraCAFiles, cacheDir)
	if err != nil {
		return nil, err // nothing was written: the inputs are at fault
	}
	if err := replaceFile(path, data, 0o644); err != nil {
		return nil, err
	}
	return data, nil
}

// buildBundle builds the bundle Bundle returns.
func buildBundle(ca *CA, extraCAFiles []string) ([]byte, error) {
	// The system's certificates are copied, not parsed (parsing them all
	// takes longer than the rest of a session's start): their readers
	// parse them.
	sys, err := systemBundleDER()
	if err != nil {
		return nil, err
	}
	extra, err := readExtraCAs(extraCAFiles)
	if err != nil {
		return nil, err
	}
	for _, c := range extra {
		sys = append(sys, c.Raw)
	}
	ders := append(sys, ca.cert.Raw)
	// A session's start is mostly page faults: the buffer is sized once,
	// and certificates are told apart by digest, not by copies.
	size := 0
	for _, der := range ders {
		size += pemSize(len(der))
	}
	buf := make([]byte, 0, size)
	seen := make(map[[sha256.Size]byte]bool, len(ders))
	for _, der := range ders {
		sum := sha256.Sum256(der)
		if seen[sum] || !wellFormed(der) {
			continue
		}
		seen[sum] = true
		buf = appendPEM(buf, der)
	}
	return buf, nil
}

// UpstreamPool returns the roots that upstream servers' certificates are
// verified against: the system bundle the sandbox is given too (see
// WriteBundle), the certificates in the directories $SSL_CERT_DIR names
// (as Go's and OpenSSL's defaults do), and the certificates in
// extraCAFiles.
func UpstreamPool(extraCAFiles []string) (*x509.CertPool, error) {
	sys, err := systemRoots()
	if err != nil {
		return nil, fmt.Errorf("upstream roots: %w", err)
	}
	extra, err := readExtraCAs(extraCAFiles)
	if err != nil {
		return nil, fmt.Errorf("upstream roots: %w", err)
	}
	pool := x509.NewCertPool()
	seen := make(map[string]bool, len(sys))
	for _, c := range slices.Concat(sys, extra) {
		seen[string(c.Raw)] = true
		pool.AddCert(c)
	}
	if dirs := os.Getenv("SSL_CERT_DIR"); dirs != "" {
		for _, c := range dirRoots(filepath.SplitList(dirs), seen) {
			pool.AddCert(c)
		}
	}
	return pool, nil
}

// dirRoots reads the certificates in the files of dirs that are not in
// seen (DER), which it updates. Like Go's own system pool it skips what it
// cannot read or parse; unlike it, a certificate already known (a stock
// /etc/ssl/certs holds the system bundle's, twice over) is not parsed
// again, which is most of that pool's 30 ms.
func dirRoots(dirs []string, seen map[string]bool) []*x509.Certificate {
	var out []*x509.Certificate
	// Files are told apart by device and inode: a stock directory names
	// each certificate twice (by name and by hash), and the bundle itself.
	type fileID struct{ dev, ino uint64 }
	read := map[fileID]bool{}
	if path, err := systemBundlePath(); err == nil {
		if fi, err := os.Stat(path); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				read[fileID{uint64(st.Dev), st.Ino}] = true
			}
		}
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				id := fileID{uint64(st.Dev), st.Ino}
				if read[id] {
					continue
				}
				read[id] = true
			}
			data, err := readBounded(path)
			if err != nil {
				continue
			}
			for {
				var b *pem.Block
				if b, data = pem.Decode(data); b == nil {
					break
				}
				if b.Type != "CERTIFICATE" || seen[string(b.Bytes)] {
					continue
				}
				seen[string(b.Bytes)] = true
				if c, err := x509.ParseCertificate(b.Bytes); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// systemRoots parses the system's PEM bundle of trusted roots; a
// certificate Go cannot parse is left out, as Go's own system pool does.
func systemRoots() ([]*x509.Certificate, error) {
	ders, err := systemBundleDER()
	if err != nil {
		return nil, err
	}
	certs, _ := parseDERs(ders)
	return certs, nil
}

// wellFormed reports whether der has the outer shape of a certificate (a
// SEQUENCE of a SEQUENCE, a SEQUENCE and a BIT STRING, and nothing after
// it): enough to keep a corrupt block out of the sandbox's bundle, where
// it could make a client refuse the whole file, without parsing it all.
func wellFormed(der []byte) bool {
	var c struct {
		TBS, Algorithm asn1.RawValue
		Signature      asn1.BitString
	}
	rest, err := asn1.Unmarshal(der, &c)
	return err == nil && len(rest) == 0 &&
		c.TBS.Tag == asn1.TagSequence && c.TBS.IsCompound && c.Algorithm.Tag == asn1.TagSequence && c.Algorithm.IsCompound
}

// systemBundleDER reads the system bundle's certificates without parsing
// them.
func systemBundleDER() ([][]byte, error) {
	path, err := systemBundlePath()
	if err != nil {
		return nil, err
	}
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("system roots: %w (point SSL_CERT_FILE at a readable PEM bundle)", err)
	}
	ders, err := certBlocks(data)
	if err != nil {
		return nil, fmt.Errorf("system roots %s: %w", path, err)
	}
	if len(ders) == 0 {
		return nil, fmt.Errorf("system roots %s: no certificates in it: reinstall your system's CA certificates, or set SSL_CERT_FILE to a PEM bundle", path)
	}
	return ders, nil
}

// systemBundlePath is $SSL_CERT_FILE if set, else the first system bundle
// that exists.
func systemBundlePath() (string, error) {
	if p := os.Getenv("SSL_CERT_FILE"); p != "" {
		return p, nil
	}
	for _, p := range systemBundlePaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no system CA bundle found (looked at %s): install your system's CA certificates package (ca-certificates), or set SSL_CERT_FILE to a PEM bundle",
		strings.Join(systemBundlePaths, ", "))
}

// CheckExtraCAs reads the site CA files given with --extra-ca, as a
// session's bundle does, and says what is wrong with them; cordon run
// --dry-run checks them so.
func CheckExtraCAs(files []string) error {
	_, err := readExtraCAs(files)
	return err
}

// readExtraCAs reads the site CA files given with --extra-ca. Each must hold
// at least one certificate and nothing but certificates.
func readExtraCAs(files []string) ([]*x509.Certificate, error) {
	var all []*x509.Certificate
	for _, f := range files {
		data, err := readBounded(f)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("extra CA %s: no such file; name the PEM file of the CA to trust (--extra-ca or extra_ca), or leave it out", f)
		}
		if err != nil {
			return nil, fmt.Errorf("extra CA: %w", err)
		}
		certs, bad, err := parseCerts(data)
		switch {
		case err != nil:
			return nil, fmt.Errorf("extra CA %s: %w", f, err)
		case len(bad) > 0:
			return nil, fmt.Errorf("extra CA %s: %w", f, bad[0])
		case len(certs) == 0:
			return nil, fmt.Errorf("extra CA %s: no PEM certificate in it (if it is DER, convert it with `openssl x509 -inform der -in %s -out ca.pem`)", f, f)
		}
		all = append(all, certs...)
	}
	return all, nil
}

// readBounded reads a certificate file of at most maxBundleFile bytes. It
// must be a regular file: a named pipe would hold the read until a writer
// came (the open does not wait for one).
func readBounded(path string) ([]byte, error) {
	f, _, err := regular.Open(path, os.O_RDONLY, 0)
	var nr *regular.NotRegular
	if errors.As(err, &nr) {
		err = fmt.Errorf("%s, not a regular file; a certificate file is a PEM file", nr.Kind())
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := readAtMost(f, maxBundleFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// appendPEM appends der as a CERTIFICATE PEM block, as pem.Encode writes
// it, without pem.Encode's allocations.
func appendPEM(dst, der []byte) []byte {
	const line = 48 // bytes of DER per 64-character line
	dst = append(dst, "-----BEGIN CERTIFICATE-----\n"...)
	for len(der) > 0 {
		n := min(line, len(der))
		dst = base64.StdEncoding.AppendEncode(dst, der[:n])
		dst = append(dst, '\n')
		der = der[n:]
	}
	return append(dst, "-----END CERTIFICATE-----\n"...)
}

// pemSize is the length of a CERTIFICATE PEM block of n bytes of DER.
func pemSize(n int) int {
	b64 := (n + 2) / 3 * 4
	return len("-----BEGIN CERTIFICATE-----\n") + b64 + (b64+63)/64 + len("-----END CERTIFICATE-----\n")
}

// readAtMost reads all of f, refusing more than limit bytes, into a
// buffer sized from f's length.
func readAtMost(f *os.File, limit int64) ([]byte, error) {
	size := int64(512)
	if fi, err := f.Stat(); err == nil && fi.Size() < limit {
		size = fi.Size() + 1 // +1 to see the end without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("larger than %d bytes, too large for a certificate file", limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseCerts decodes every PEM block in data. A block that is not a
// CERTIFICATE is an error (err); a CERTIFICATE that does not parse is
// reported in bad and left out. Text between blocks is ignored.
func parseCerts(data []byte) (certs []*x509.Certificate, bad []error, err error) {
	ders, err := certBlocks(data)
	if err != nil {
		return nil, nil, err
	}
	certs, bad = parseDERs(ders)
	return certs, bad, nil
}

// parseDERs parses each certificate, leaving out (and reporting in bad,
// by PEM block number) those that do not parse.
func parseDERs(ders [][]byte) (certs []*x509.Certificate, bad []error) {
	for n, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			bad = append(bad, fmt.Errorf("PEM block %d: %w", n+1, err))
			continue
		}
		certs = append(certs, c)
	}
	return certs, bad
}

// certBlocks returns the DER of each PEM block in data, refusing any block
// that is not a CERTIFICATE.
func certBlocks(data []byte) ([][]byte, error) {
	var out [][]byte
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out, nil
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE: a trust file must hold certificates only (never a private key)", n, b.Type)
		}
		out = append(out, b.Bytes)
	}
}
