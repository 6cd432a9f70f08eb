package egress

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
)

// NewToken returns a fresh 256-bit session token, hex-encoded so it is safe
// in URLs and shell lines.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("egress: no randomness for the session token: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// authResult is what a Proxy-Authorization header proved.
type authResult int

const (
	authOK authResult = iota
	authMissing
	authWrong
)

// checkAuth compares the Basic password (any user name) with the token in
// constant time; hashing first hides the token's length as well.
func checkAuth(h http.Header, token string) authResult {
	v := h.Get("Proxy-Authorization")
	if v == "" {
		return authMissing
	}
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return authWrong
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return authWrong
	}
	_, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return authWrong
	}
	got, want := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return authWrong
	}
	return authOK
}
