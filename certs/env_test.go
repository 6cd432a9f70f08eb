package certs

import (
	"strings"
	"testing"
)

func TestBundleEnv(t *testing.T) {
	const path = "/run/cordon/bundle.pem"
	env := BundleEnv(path)
	set := make(map[string]string)
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			t.Fatalf("entry %q is not NAME=value", kv)
		}
		if _, dup := set[name]; dup {
			t.Errorf("%s set twice", name)
		}
		set[name] = value
	}
	for _, name := range []string{
		"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
		"GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "DENO_CERT",
		"npm_config_cafile", "HEX_CACERTS_PATH", "BUNDLE_SSL_CA_CERT", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
	} {
		if set[name] != path {
			t.Errorf("%s = %q, want %q", name, set[name], path)
		}
	}
	vars := BundleVars()
	if len(vars) != len(env) {
		t.Errorf("BundleVars has %d rows, BundleEnv %d entries", len(vars), len(env))
	}
	for _, v := range vars {
		if v.ReadBy == "" {
			t.Errorf("%s: no reader documented", v.Name)
		}
	}
	vars[0].Name = "CHANGED"
	if BundleVars()[0].Name == "CHANGED" {
		t.Error("BundleVars returns the table itself, not a copy")
	}
}
