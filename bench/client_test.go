package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunClient has the client measure every figure it knows against the
// origin, then be asked for one it does not measure and one that does not
// exist: a ready line, a number each, then two errors.
func TestRunClient(t *testing.T) {
	o, err := startOrigin(t.TempDir(), 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	t.Setenv("SSL_CERT_FILE", o.CAFile)
	asked := append(append([]string{}, clientFigures...), fH2, "nonsense")
	var out bytes.Buffer
	in := strings.NewReader(strings.Join(asked, "\n") + "\n")
	if err := runClient(modeTransparent, "https://"+o.TLSAddr, 50*time.Millisecond, o.BulkSize, in, &out); err != nil {
		t.Fatal(err)
	}
	var got []clientResult
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r clientResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decode the client's output: %v", err)
		}
		got = append(got, r)
	}
	if len(got) != 1+len(asked) {
		t.Fatalf("%d lines, want the ready line and %d results: %+v", len(got), len(asked), got)
	}
	if got[0] != (clientResult{}) {
		t.Errorf("ready line %+v, want an empty object", got[0])
	}
	for i, name := range asked {
		r := got[i+1]
		wantErr := i >= len(clientFigures)
		switch {
		case wantErr && !strings.Contains(r.Error, "no figure"):
			t.Errorf("%s: %+v, want a no figure error", name, r)
		case !wantErr && (r.Error != "" || r.Value <= 0):
			t.Errorf("%s: %+v, want a positive value", name, r)
		}
	}
}

func TestRunClientRefuses(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mode, url, bundle, want string
	}{
		{"unknown mode", "socks", "https://127.0.0.1:1", notPEM, `-client "socks"`},
		{"no URL", modeProxyEnv, "", notPEM, "want the origin's base URL"},
		{"URL without scheme", modeProxyEnv, "127.0.0.1:8443", notPEM, "want the origin's base URL"},
		{"no bundle variable", modeTransparent, "https://127.0.0.1:1", "", "SSL_CERT_FILE is not set"},
		{"missing bundle", modeTransparent, "https://127.0.0.1:1", filepath.Join(dir, "missing.pem"), "read the trust bundle"},
		{"bundle without certificates", modeTransparent, "https://127.0.0.1:1", notPEM, "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSL_CERT_FILE", tc.bundle)
			err := runClient(tc.mode, tc.url, time.Millisecond, 1, strings.NewReader(""), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runClient = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
