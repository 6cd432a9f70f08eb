// Package certs owns cordon's certificate authority: creating, loading and
// rotating it, minting short-lived leaf certificates for the hosts whose TLS
// the proxy terminates, and the trust bundle handed to sandboxed clients.
//
// The CA is an ECDSA P-256 key and a self-signed certificate (CA:true,
// pathlen 0, no name constraints) valid for one year from its creation, with
// NotBefore one hour in the past to absorb clock skew. Its subject names
// cordon and the user@host it was made for, so that it can be recognised in
// a trust store. On disk it is two files in a directory only the user can
// write (created 0700): ca.pem (the certificate, 0644) and ca-key.pem (the
// PKCS #8 key, 0600).
//
// Leaves are ECDSA P-256 server certificates for one host each, valid for
// 72 hours from an hour in the past (never beyond the CA), and are replaced
// by fresh ones a day before they expire.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/internal/regular"
)

const (
	certFileName = "ca.pem"
	keyFileName  = "ca-key.pem"
	lockFileName = ".lock"

	// caLifetime is how long a new CA is valid.
	caLifetime = 365 * 24 * time.Hour
	// clockSkew is how far in the past every certificate's NotBefore lies,
	// so that a client whose clock is a little behind still accepts it.
	clockSkew = time.Hour
	// maxPEMFile bounds how much of a key or certificate file is read.
	maxPEMFile = 64 << 10
	// maxCommonName is the X.520 upper bound on a common name's length.
	maxCommonName = 64
)

// CA is a certificate authority cordon signs leaf certificates with. It is
// safe for concurrent use and never modified after creation.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// errNoCA reports that a CA directory holds neither a key nor a certificate.
var errNoCA = errors.New("no CA")

// currentUID is the uid that must own the CA's files; tests replace it.
var currentUID = os.Getuid

// DefaultDir is $XDG_CONFIG_HOME/cordon/ca, else ~/.config/cordon/ca;
// either must be absolute.
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_CONFIG_HOME")
	switch {
	case base != "" && !filepath.IsAbs(base):
		return "", fmt.Errorf("CA directory: $XDG_CONFIG_HOME=%q is not an absolute path: set it to one, or unset it to use ~/.config", base)
	case base == "":
		home, err := homedir.Dir()
		if err != nil {
			return "", fmt.Errorf("CA directory: no $XDG_CONFIG_HOME, and %w", err)
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "cordon", "ca"), nil
}

// CertPath is the path of the CA certificate kept in dir.
func CertPath(dir string) string { return filepath.Join(dir, certFileName) }

// LoadOrCreate loads the CA kept in dir, creating the directory (0700) and a
// new CA in it on first use. It refuses a key other users could read, files
// or a directory they could write, files owned by someone else, and a CA
// that has expired or will within a leaf's lifetime.
func LoadOrCreate(dir string) (*CA, error) {
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ca, err := load(dir, time.Now())
	if !errors.Is(err, errNoCA) {
		return ca, err
	}
	return create(dir)
}

// Rotate replaces the CA kept in dir (or creates one) with a new key and
// certificate. Leaves signed by the old CA no longer verify against it.
func Rotate(dir string) (*CA, error) {
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return create(dir)
}

// NewEphemeral returns a CA that lives only in memory, for one session.
func NewEphemeral() (*CA, error) {
	return newCA("session CA", time.Now())
}

// CertPEM returns the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Certificate returns the parsed CA certificate; callers must not modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// lockDir creates dir (0700) if needed, checks that only the user can write
// to it, and takes an exclusive lock on it against other cordon processes.
func lockDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create CA directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("CA directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("CA directory %s is not a directory: remove it or choose another directory", dir)
	}
	if err := checkPrivate(dir, "CA directory", fi, 0o022, "700"); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock CA directory: open %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock CA directory: flock %s: %w", lockPath, err)
	}
	return func() { _ = f.Close() }, nil
}

// checkPrivate refuses a file or directory not owned by the user or whose
// permission bits include any in loose; fixMode is the chmod that fixes it.
func checkPrivate(path, what string, fi fs.FileInfo, loose fs.FileMode, fixMode string) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != currentUID() {
		return fmt.Errorf("%s %s is owned by uid %d, not by you (uid %d): remove it, or use a directory you own", what, path, st.Uid, currentUID())
	}
	if perm := fi.Mode().Perm(); perm&loose != 0 {
		return fmt.Errorf("%s %s has mode %04o, which other users could use to read or replace it: fix with `chmod %s %s`", what, path, perm, fixMode, path)
	}
	return nil
}

// load reads and checks the CA kept in dir; errNoCA means there is none.
func load(dir string, now time.Time) (*CA, error) {
	certPath, keyPath := CertPath(dir), filepath.Join(dir, keyFileName)
	certPEM, certErr := readPrivateFile(certPath, "CA certificate", 0o022, "644")
	keyPEM, keyErr := readPrivateFile(keyPath, "CA key", 0o077, "600")
	certMissing, keyMissing := errors.Is(certErr, fs.ErrNotExist), errors.Is(keyErr, fs.ErrNotExist)
	switch {
	case certMissing && keyMissing:
		return nil, errNoCA
	case certMissing:
		return nil, fmt.Errorf("CA key %s has no certificate %s beside it: restore it, or run `cordon ca rotate` to make a new CA", keyPath, certPath)
	case keyMissing:
		return nil, fmt.Errorf("CA certificate %s has no key %s beside it: restore it, or run `cordon ca rotate` to make a new CA", certPath, keyPath)
	case keyErr != nil:
		return nil, keyErr
	case certErr != nil:
		return nil, certErr
	}
	ca, err := parseCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA from %s: %w; run `cordon ca rotate` to replace it", dir, err)
	}
	if ca.cert.NotAfter.Sub(now) < leafLifetime {
		return nil, fmt.Errorf("load CA from %s: it expires %s, too soon to sign certificates: run `cordon ca rotate` to replace it",
			dir, ca.cert.NotAfter.Format(time.RFC3339))
	}
	if now.Before(ca.cert.NotBefore) {
		return nil, fmt.Errorf("load CA from %s: it is not valid before %s; check this machine's clock, or run `cordon ca rotate`",
			dir, ca.cert.NotBefore.Format(time.RFC3339))
	}
	return ca, nil
}

// readPrivateFile reads a small regular file without following a symlink,
// after checking (on the open descriptor) that it is private to the user.
func readPrivateFile(path, what string, loose fs.FileMode, fixMode string) ([]byte, error) {
	f, fi, err := regular.Open(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	var nr *regular.NotRegular
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%s %s is not a regular file: remove it, or run `cordon ca rotate`", what, path)
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s %s is a symbolic link: replace it with the file itself", what, path)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("read %s %s: %w: make it yours again (`sudo chown $USER %s && chmod %s %s`), or run `cordon ca rotate` to make a new CA", what, path, err, path, fixMode, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	defer f.Close()
	if err := checkPrivate(path, what, fi, loose, fixMode); err != nil {
		return nil, err
	}
	data, err := readAtMost(f, maxPEMFile)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return data, nil
}

// parseCA checks that certPEM holds one CA certificate whose public key is
// that of the PKCS #8 private key in keyPEM.
func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, rest := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("the certificate file must hold exactly one PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the certificate is not a CA certificate (it needs CA:true and the certificate-signing key usage)")
	}
	kb, rest := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("the key file must hold exactly one PEM PRIVATE KEY (PKCS #8) block")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the key is a %T, which cannot sign", parsed)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the key does not belong to the certificate")
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(cb), key: key}, nil
}

// create makes a new CA and writes it to dir, key first; each file is
// written to a temporary name and renamed over the old one.
func create(dir string) (*CA, error) {
	ca, err := newCA("CA", time.Now())
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	keyTmp, err := writeTemp(dir, keyFileName, keyPEM, 0o600, true)
	if err != nil {
		return nil, err
	}
	certTmp, err := writeTemp(dir, certFileName, ca.certPEM, 0o644, true)
	if err != nil {
		_ = os.Remove(keyTmp)
		return nil, err
	}
	if err := os.Rename(keyTmp, filepath.Join(dir, keyFileName)); err != nil {
		_ = os.Remove(keyTmp)
		_ = os.Remove(certTmp)
		return nil, fmt.Errorf("save CA key in %s: %w", dir, err)
	}
	if err := os.Rename(certTmp, CertPath(dir)); err != nil {
		_ = os.Remove(certTmp)
		return nil, fmt.Errorf("save CA certificate in %s: %w", dir, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return ca, nil
}

// newCA generates a CA key and its self-signed certificate; kind ("CA",
// "session CA") goes into the common name.
func newCA(kind string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{
			Organization: []string{"cordon"},
			CommonName:   truncate("cordon "+kind+" "+userAtHost(), maxCommonName),
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// userAtHost names the user and machine a CA is made for.
func userAtHost() string {
	name := fmt.Sprintf("uid%d", os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

// truncate shortens s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// writeTemp writes data with mode perm to a new temporary file in dir named
// after name, synced to disk unless !durable, and returns its path.
func writeTemp(dir, name string, data []byte, perm fs.FileMode, durable bool) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s in %s: %w", name, dir, err)
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("write %s in %s: %w", name, dir, err)
	}
	return tmp, nil
}

// replaceFile replaces path with data (mode perm) by writing a temporary
// file beside it and renaming it into place, so a reader sees the old file
// or the new one, never part of one. It does not wait for the disk: it is
// for files made anew each session.
func replaceFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(filepath.Dir(path), filepath.Base(path), data, perm, false)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
