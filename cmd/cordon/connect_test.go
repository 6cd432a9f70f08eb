package main

import (
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/policy"
)

// connect's HOST and PORT are read apart, and a bad one is named with
// what to write.
func TestConnectTarget(t *testing.T) {
	for _, tc := range []struct {
		host, port string
		want       string // the target, or the start of the error
	}{
		{"github.com", "22", "github.com:22"},
		{"GitHub.com.", "22", "github.com:22"},
		{"2001:db8::1", "22", "[2001:db8::1]:22"},
		{"[2001:db8::1]", "443", "[2001:db8::1]:443"},
		{"https://github.com/x/y", "22", `HOST "https://github.com/x/y" is a URL; give the host alone; for example: cordon connect github.com 22`},
		{"ssh://git@example.com", "22", `HOST "ssh://git@example.com" is a URL`},
		{"github.com:22", "22", `HOST "github.com:22": host "github.com:22": not a valid name or IP address (a port belongs outside the host); for example: cordon connect github.com 22`},
		{"", "22", `HOST "": empty host; for example`},
		{"exa mple.com", "22", `HOST "exa mple.com": host "exa mple.com": label`},
		{"github.com", "0", `PORT: port "0" is not a number from 1 to 65535; for example: cordon connect github.com 22`},
		{"github.com", "65536", `PORT: port "65536" is not a number`},
		{"github.com", "ssh", `PORT: port "ssh" is not a number`},
		{"github.com", "", `PORT: port "" is not a number`},
	} {
		got, err := connectTarget(tc.host, tc.port)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("connectTarget(%q, %q) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
}

// Whatever ssh passes as %h and %p, connectTarget returns an error or an
// authority that reads back as that host and port.
func FuzzConnectTarget(f *testing.F) {
	for _, s := range [][2]string{{"github.com", "22"}, {"https://h/x", "1"}, {"[::1]", "443"}, {"h:22", "22"}, {"", ""}, {"127.1", "0080"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, host, port string) {
		target, err := connectTarget(host, port)
		if err != nil {
			return
		}
		h, p, err := policy.SplitHostPort(target, 0)
		if err != nil || p < 1 || p > 65535 || policy.JoinHostPort(h, p) != target {
			t.Fatalf("connectTarget(%q, %q) = %q, which reads back as %q, %d, %v", host, port, target, h, p, err)
		}
	})
}
