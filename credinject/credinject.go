// Package credinject keeps real credentials out of the sandbox. The sandbox
// holds only a per-session placeholder for each secret; on the way out the
// proxy swaps the placeholder for the real value, but only on requests to
// the hosts the credential is bound to and only over verified TLS (or plain
// HTTP where the credential allows it). A placeholder or a real value headed
// anywhere else is refused. On the way back, real values are turned into
// placeholders again, and a sandboxed command's output has them masked.
//
// Everything here is pure and per request: the TLS layer calls Apply and
// wraps response bodies; cordon run wraps the command's output.
package credinject

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"

	"github.com/cordon-sandbox/cordon/internal/regular"
	"github.com/cordon-sandbox/cordon/policy"
)

// Set is the credentials loaded for one session, with their placeholders.
// It is read-only after Load and safe for concurrent use.
type Set struct {
	// creds is sorted by name; its indexes are those of secrets' needles.
	creds []*cred
	// secrets finds the real values, needle k being creds[k].secret.
	secrets *matcher
}

// cred is one loaded credential.
type cred struct {
	name        string
	secret      string
	placeholder string
	// prefix starts the placeholder (placeholder_prefix).
	prefix   string
	patterns []policy.Pattern
	// header and headerValue are the header name and its value template
	// (exactly one "{}"), for the header form.
	header, headerValue string
	// basicUser is the user name, for the basic_auth form.
	basicUser string
	// query is the parameter name, for the query form.
	query          string
	env            string
	allowPlaintext bool
	// files are shown to the sandbox masked (the credential's files key).
	files []string
}

// emptySet is what a nil *Set behaves as.
var emptySet = &Set{secrets: newMatcher(nil)}

func (s *Set) orEmpty() *Set {
	if s == nil {
		return emptySet
	}
	return s
}

// newSet indexes creds, which must be sorted by name.
func newSet(creds []*cred) *Set {
	needles := make([][]byte, len(creds))
	for k, c := range creds {
		needles[k] = []byte(c.secret)
	}
	return &Set{creds: creds, secrets: newMatcher(needles)}
}

// Names returns the loaded credentials' names, sorted.
func (s *Set) Names() []string {
	var names []string
	for _, c := range s.orEmpty().creds {
		names = append(names, c.name)
	}
	return names
}

// Env returns "VAR=placeholder" lines for the sandbox's environment, sorted.
func (s *Set) Env() []string {
	var env []string
	for _, c := range s.orEmpty().creds {
		env = append(env, c.env+"="+c.placeholder)
	}
	slices.Sort(env)
	return env
}

// Hosts returns the host patterns the loaded credentials add to the
// effective allowlist, canonical, sorted and without duplicates.
func (s *Set) Hosts() []string {
	var hosts []string
	for _, c := range s.orEmpty().creds {
		for _, p := range c.patterns {
			hosts = append(hosts, p.String())
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// replaceWithPlaceholder is the emit function turning secret k into its
// placeholder.
func (s *Set) replaceWithPlaceholder(dst []byte, k int) ([]byte, error) {
	return append(dst, s.creds[k].placeholder...), nil
}

// MaskBytes returns b with every real secret replaced by its placeholder,
// for showing a file such as an .npmrc to the sandbox.
func (s *Set) MaskBytes(b []byte) []byte {
	s = s.orEmpty()
	st := stream{m: s.secrets, emit: s.replaceWithPlaceholder}
	out, _, _ := st.scan(make([]byte, 0, len(b)), b, true)
	return out
}

// maxMaskedFile bounds a file shown masked; such files are small configs.
const maxMaskedFile = 1 << 20

// MaskedFiles reads every file the credentials list under files and
// returns it, by path, with every secret replaced by its placeholder.
func (s *Set) MaskedFiles() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, c := range s.orEmpty().creds {
		for _, path := range c.files {
			// A regular file: a named pipe would hold the read until a
			// writer came.
			f, _, err := regular.Open(path, os.O_RDONLY, 0)
			var nr *regular.NotRegular
			if errors.As(err, &nr) {
				return nil, fmt.Errorf("credential %q: files: read %s: not a regular file (%s)", c.name, path, nr.Type)
			}
			if err != nil {
				return nil, fmt.Errorf("credential %q: files: %w", c.name, err)
			}
			b, err := io.ReadAll(io.LimitReader(f, maxMaskedFile+1))
			f.Close()
			switch {
			case err != nil:
				return nil, fmt.Errorf("credential %q: files: read %s: %w", c.name, path, err)
			case len(b) > maxMaskedFile:
				return nil, fmt.Errorf("credential %q: files: %s is over %d bytes; list only small config files", c.name, path, maxMaskedFile)
			}
			out[path] = s.MaskBytes(b)
		}
	}
	return out, nil
}

// MaskString is MaskBytes for a string, such as a response header value.
func (s *Set) MaskString(v string) string {
	return string(s.MaskBytes([]byte(v)))
}

// MaskHeader replaces real secrets with placeholders in a response
// header's names and values, in place.
func (s *Set) MaskHeader(h http.Header) {
	for name, values := range h {
		for i, v := range values {
			values[i] = s.MaskString(v)
		}
		if masked := s.MaskString(name); masked != name {
			delete(h, name)
			h[masked] = append(h[masked], values...)
		}
	}
}

// MaskBody wraps a response body so that every real secret in it reaches
// the sandbox as its placeholder, whatever the chunking. It holds back
// fewer bytes than the longest secret. The body's length changes when a
// secret and its placeholder differ in length: drop Content-Length.
func (s *Set) MaskBody(body io.ReadCloser) io.ReadCloser {
	s = s.orEmpty()
	return newStreamReader(body, s.secrets, s.replaceWithPlaceholder)
}
