package egress

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestCheckAuth(t *testing.T) {
	basic := func(userPass string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass)) }
	for _, c := range []struct {
		header string
		want   authResult
	}{
		{"", authMissing},
		{basic("cordon:" + testToken), authOK},
		{basic("anyone:" + testToken), authOK},
		{"basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+testToken)), authOK},
		{basic(":" + testToken), authOK},
		{basic("cordon:" + testToken + "x"), authWrong},
		{basic("cordon:" + testToken[:63]), authWrong},
		{basic(testToken), authWrong}, // no user:password pair
		{basic("cordon:"), authWrong},
		{"Bearer " + testToken, authWrong},
		{"Basic", authWrong},
		{"Basic !!!", authWrong},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Proxy-Authorization", c.header)
		}
		if got := checkAuth(h, testToken); got != c.want {
			t.Errorf("checkAuth(%q) = %d, want %d", c.header, got, c.want)
		}
	}
}

// FuzzCheckAuth: the Proxy-Authorization header comes from the sandboxed
// process. Whatever it holds, it passes only when it is Basic credentials
// whose password is the session token.
func FuzzCheckAuth(f *testing.F) {
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+testToken)))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:wrong")))
	f.Add("Basic =====")
	f.Add("basic  Y29yZG9uOg==")
	f.Fuzz(func(t *testing.T, header string) {
		h := http.Header{"Proxy-Authorization": {header}}
		if checkAuth(h, testToken) != authOK {
			return
		}
		scheme, cred, _ := strings.Cut(header, " ")
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		_, pass, _ := strings.Cut(string(raw), ":")
		if !strings.EqualFold(scheme, "Basic") || err != nil || pass != testToken {
			t.Errorf("checkAuth let %q through", header)
		}
	})
}
