package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/termtext"
)

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		nonlocal bool
		want     string // the address to listen on, or
		err      string // what the refusal says
	}{
		{"127.0.0.1:0", false, "127.0.0.1:0", ""},
		{"127.0.0.2:3128", false, "127.0.0.2:3128", ""},
		{"[::1]:8080", false, "[::1]:8080", ""},
		{"localhost:3128", false, "127.0.0.1:3128", ""},
		{"[::ffff:127.0.0.1]:0", false, "[::ffff:127.0.0.1]:0", ""},
		{"0.0.0.0:3128", false, "", "not a loopback address"},
		{":3128", false, "", "--listen-nonlocal"},
		{"[::]:0", false, "", "not a loopback address"},
		{"192.168.1.5:3128", false, "", "token in clear"},
		{"[fe80::1%eth0]:0", false, "", "not a loopback address"},
		{"0.0.0.0:3128", true, "0.0.0.0:3128", ""},
		{":3128", true, ":3128", ""},
		{"192.168.1.5:3128", true, "192.168.1.5:3128", ""},
		{"999.1.1.1:80", false, "", `"999.1.1.1" is not an IP address`},
		{"example.com:80", true, "", "not a name"},
		{"127.0.0.1", false, "", "write an address and a port"},
		{"127.0.0.1:99999", false, "", "not a number from 0 to 65535"},
		{"127.0.0.1:http", false, "", "not a number"},
		{"127.0.0.1:-1", false, "", "not a number"},
	} {
		got, err := listenAddr(tc.addr, tc.nonlocal)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("listenAddr(%q, %v) = %q, %v; want %q", tc.addr, tc.nonlocal, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("listenAddr(%q, %v) = %q, %v; want an error saying %q", tc.addr, tc.nonlocal, got, err, tc.err)
		}
	}
}

// A refused --listen starts nothing: no proxy, no audit line.
func TestProxyRefusesNonlocalListen(t *testing.T) {
	log := t.TempDir() + "/audit.jsonl"
	t.Setenv("CORDON_AUDIT", log)
	out, err := runCordon(t, "proxy", "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "--listen-nonlocal") {
		t.Fatalf("cordon proxy --listen 0.0.0.0:0: %v, want a refusal naming --listen-nonlocal", err)
	}
	if out != "" {
		t.Fatalf("a refused proxy printed %q", out)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Fatalf("a refused proxy touched its audit log: %v", err)
	}
}

// shellQuote's output, pasted into bash, is the string again; one holding
// what a terminal acts on (escape sequences, bytes that are no UTF-8) is
// written with none of it raw.
func TestShellQuote(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash, to read the quoted strings back: %v", err)
	}
	for _, s := range []string{"plain", "it's", "", "a b\\c", "/ws/v\x1b[2J\x1b]52;c;ZWNobw==\a", "line\nbreak", "bad\xff\xfe", "it's\x1b\\", "é\u202e", "w\u3164x\u034f"} {
		q := shellQuote(s)
		if strings.ContainsFunc(q, func(r rune) bool { return !termtext.Shows(r) }) || !utf8.ValidString(q) {
			t.Errorf("shellQuote(%q) = %q: not printable", s, q)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s, which bash reads as %q (%v)", s, q, out, err)
		}
	}
}
