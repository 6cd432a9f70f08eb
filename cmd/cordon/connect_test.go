package main

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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

// connect speaks plain HTTP to its proxy, so a proxy URL of another
// scheme is refused before anything is sent: an https:// proxy's password
// (a corporate proxy's, in $HTTPS_PROXY) went out in clear, in a CONNECT
// to wherever that proxy listened, as did a SOCKS proxy's. Neither is
// printed.
func TestConnectRefusesOtherProxySchemes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		head, _ := http.ReadRequest(bufio.NewReader(c))
		req := "an unreadable request"
		if head != nil {
			req = head.Method + " " + head.Host + " with Proxy-Authorization " + head.Header.Get("Proxy-Authorization")
		}
		sent <- req // before the close, which ends the command
		c.Close()
	}()
	for _, scheme := range []string{"https", "socks5", "socks5h"} {
		t.Setenv("HTTPS_PROXY", scheme+"://alice:s3cret@"+ln.Addr().String())
		out, err := runCordon(t, "connect", "example.com", "22")
		if err == nil || !strings.Contains(err.Error(), "takes only an http:// proxy URL") {
			t.Fatalf("%s proxy: %v\n%s", scheme, err, out)
		}
		if strings.Contains(err.Error()+out, "s3cret") {
			t.Fatalf("%s proxy: the password is printed: %v\n%s", scheme, err, out)
		}
		select {
		case req := <-sent:
			t.Fatalf("%s proxy: cordon connect sent it, in clear: %s", scheme, req)
		default:
		}
	}
	if _, err := proxyURL("HTTP://cordon:t@127.0.0.1:3128"); err != nil {
		t.Fatalf("an http:// proxy URL (in capitals) is refused: %v", err)
	}
	if _, err := proxyURL("http//cordon:s3cret@127.0.0.1:3128"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a URL that does not parse: %v", err)
	}
}
