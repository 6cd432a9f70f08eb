package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCA runs `cordon ca ARGS...` in-process and returns stdout and stderr.
func runCA(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = execute(&out, &errOut, append([]string{"ca"}, args...)...)
	return out.String(), errOut.String(), err
}

// parsePEMCert parses a single PEM certificate.
func parsePEMCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("not one PEM certificate: %q", data)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCACommand(t *testing.T) {
	tests := []struct {
		name    string
		xdg     string // relative to the temp home; "" leaves it unset
		args    []string
		wantDir string // relative to the temp home
	}{
		{"xdg", "cfg", nil, "cfg/cordon/ca"},
		{"home", "", nil, ".config/cordon/ca"},
		{"explicit dir", "cfg", []string{"--dir", "{home}/elsewhere"}, "elsewhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", "")
			if tt.xdg != "" {
				t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, tt.xdg))
			}
			var extra []string
			for _, a := range tt.args {
				extra = append(extra, strings.ReplaceAll(a, "{home}", home))
			}
			wantPath := filepath.Join(home, tt.wantDir, "ca.pem")

			out, _, err := runCA(t, append([]string{"path"}, extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			if out != wantPath+"\n" {
				t.Fatalf("ca path printed %q, want %q", out, wantPath+"\n")
			}
			onDisk, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("ca path did not create the CA: %v", err)
			}
			first := parsePEMCert(t, onDisk)

			exported, _, err := runCA(t, append([]string{"export"}, extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			if exported != string(onDisk) {
				t.Errorf("ca export printed something other than %s", wantPath)
			}

			out, errOut, err := runCA(t, append([]string{"rotate"}, extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			if out != wantPath+"\n" {
				t.Errorf("ca rotate printed %q, want %q", out, wantPath+"\n")
			}
			if !strings.Contains(errOut, "new CA") {
				t.Errorf("ca rotate said nothing on stderr about the new CA: %q", errOut)
			}
			rotated, _, err := runCA(t, append([]string{"export"}, extra...)...)
			if err != nil {
				t.Fatal(err)
			}
			if second := parsePEMCert(t, []byte(rotated)); second.Equal(first) {
				t.Error("ca rotate kept the old certificate")
			}
		})
	}
}

func TestCACommandErrors(t *testing.T) {
	tests := []struct {
		name    string
		xdg     string
		args    []string
		wantErr string
	}{
		{"relative XDG_CONFIG_HOME", "relative/cfg", []string{"path"}, "not an absolute path"},
		{"unknown subcommand", "", []string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{"extra argument", "", []string{"path", "x"}, `takes no arguments, got "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			_, _, err := runCA(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCACommandRefusesLooseKey(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runCA(t, "path", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "ca-key.pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCA(t, "export", "--dir", dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("err = %v, want a refusal saying chmod 600", err)
	}
}

func TestCACommandHelp(t *testing.T) {
	out, _, err := runCA(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"path", "export", "rotate"} {
		if !strings.Contains(out, sub) {
			t.Errorf("`cordon ca` help does not mention %s", sub)
		}
	}
}

func TestCACommandRelativeDir(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	out, _, err := runCA(t, "path", "--dir", "myca")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "myca", "ca.pem") + "\n"; out != want {
		t.Errorf("ca path --dir myca printed %q, want the absolute %q", out, want)
	}
}
