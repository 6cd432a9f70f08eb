package egress

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// TestPlainSendsTheJudgedAuthority: a plain-HTTP proxy request goes
// upstream with the Host cordon judged and logged, whatever spelling of it
// the request's URI used. Forwarded as written, a spelling cordon maps to
// an allowed name under UTS #46 (full-width letters, an ideographic full
// stop, a soft hyphen) reached the server as a name it never judged:
// net/http's Transport punycodes a non-ASCII host without that mapping,
// so "evil。x.wild.test" (judged evil.x.wild.test under *.wild.test)
// arrived as Host xn--evilx-bu3d.wild.test, and under a wildcard on a
// shared front end "evil。example.com" would arrive as another
// registrable domain's Host. A fake address arrived as itself, not as the
// name it was handed out for.
func TestPlainSendsTheJudgedAuthority(t *testing.T) {
	hosts := make(chan string, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
	}))
	t.Cleanup(origin.Close)
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	loop := netip.MustParseAddr("127.0.0.1")
	fake := netip.MustParseAddr("198.18.0.9")
	rules, err := policy.Compile([]string{
		fmt.Sprintf("origin.test:%d", port), fmt.Sprintf("*.wild.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	aw, err := audit.Open(logPath, "test")
	if err != nil {
		t.Fatal(err)
	}
	token := NewToken()
	s, err := New(Config{Rules: rules, Audit: aw, Token: token,
		Dialer:    &Dialer{Rules: rules, Static: map[string][]netip.Addr{"origin.test": {loop}, "*.wild.test": {loop}}},
		FakeRange: netip.MustParsePrefix("198.18.0.0/15"),
		FakeName: func(a netip.Addr) (string, bool) {
			return "origin.test", a == fake
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy := serveOnLoopback(t, s, aw)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+token))

	for i, tc := range []struct {
		name, host, want string
	}{
		{"as judged", "origin.test", "origin.test"},
		{"capitals and a trailing dot", "ORIGIN.Test.", "origin.test"},
		{"full-width letters and an ideographic full stop", "ｏｒｉｇｉｎ。test", "origin.test"},
		{"an ideographic full stop under a wildcard", "evil。x.wild.test", "evil.x.wild.test"},
		{"a soft hyphen under a wildcard", "evi\u00adl.wild.test", "evil.wild.test"},
		{"a full-width letter under a wildcard", "ａ.wild.test", "a.wild.test"},
		{"an inet_aton address", "0x7f.1", "127.0.0.1"},
		{"an IPv4-mapped address", "[::ffff:127.0.0.1]", "127.0.0.1"},
		{"a fake address", fake.String(), "origin.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fmt.Sprintf("/spelling/%d", i)
			req := fmt.Sprintf("GET http://%s:%d%s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: %s\r\nConnection: close\r\n\r\n", tc.host, port, path, auth)
			resp, err := sendRaw(t, proxy, req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"))
			}
			want := policy.JoinHostPort(tc.want, port)
			if got := <-hosts; got != want {
				t.Errorf("the origin got Host %q, want the judged %q", got, want)
			}
			allow := findRecord(t, logPath, func(r audit.Record) bool { return r.Type == audit.TypeDecision && r.Path == path })
			if allow.Host != tc.want || allow.Decision != audit.Allow {
				t.Errorf("the allow line is %+v, want host %s allowed", allow, tc.want)
			}
		})
	}
}

// findRecord returns the first line of the log at logPath that match
// accepts, failing the test if there is none.
func findRecord(t *testing.T, logPath string, match func(audit.Record) bool) audit.Record {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for ar := audit.NewReader(f, nil); ar.Next(); {
		if match(ar.Record()) {
			return ar.Record()
		}
	}
	t.Fatalf("no line in %s matches", logPath)
	return audit.Record{}
}
