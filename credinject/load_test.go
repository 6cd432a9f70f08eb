package credinject

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/policy"
)

const openaiSecret = "sk-real-openai-0123456789abcdef"

func validCred() policy.Credential {
	return policy.Credential{
		Name:              "openai",
		Source:            policy.Source{Env: "REAL_OPENAI"},
		Hosts:             []string{"api.openai.com"},
		Header:            "Authorization: Bearer {}",
		Env:               "OPENAI_API_KEY",
		PlaceholderPrefix: "sk-",
	}
}

// envOf returns an env lookup over a fixed map.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

var testEnv = envOf(map[string]string{
	"REAL_OPENAI": openaiSecret + "\n",
	"REAL_OTHER":  "another-secret-value-42",
	"SHORT":       "abc",
	"MULTILINE":   "line-one-secret\nline-two",
	"SEMICOLON":   "cookie-secret;value",
	"NAMEHOLDER":  "openai-x",
})

func TestLoadValid(t *testing.T) {
	set, err := Load([]policy.Credential{validCred()}, []string{"openai", "openai"}, Options{Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"openai"}) {
		t.Errorf("Names = %q", got)
	}
	c := set.creds[0]
	if c.secret != openaiSecret {
		t.Errorf("secret not trimmed: %d bytes", len(c.secret))
	}
	if !regexp.MustCompile(`^sk-cordon[0-9a-f]{32,}$`).MatchString(c.placeholder) {
		t.Errorf("placeholder %q has the wrong shape", c.placeholder)
	}
	if len(c.placeholder) < len(c.secret) {
		t.Errorf("placeholder is %d bytes, shorter than the %d-byte secret", len(c.placeholder), len(c.secret))
	}
	if env := set.Env(); !slices.Equal(env, []string{"OPENAI_API_KEY=" + c.placeholder}) {
		t.Errorf("Env = %q", env)
	}
	again, err := Load([]policy.Credential{validCred()}, []string{"openai"}, Options{Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if again.creds[0].placeholder == c.placeholder {
		t.Error("two sessions got the same placeholder")
	}
}

func TestLoadNothingSelected(t *testing.T) {
	bad := validCred()
	bad.Hosts = nil
	set, err := Load([]policy.Credential{bad}, nil, Options{Env: testEnv})
	if err != nil {
		t.Fatalf("an unselected credential was checked: %v", err)
	}
	if len(set.Names()) != 0 || len(set.Env()) != 0 || len(set.Hosts()) != 0 {
		t.Errorf("empty selection loaded %q", set.Names())
	}
}

func TestLoadHostsAndOrder(t *testing.T) {
	a := validCred()
	a.Hosts = []string{"API.openai.com", "*.openai.com:443", "api.openai.com"}
	b := validCred()
	b.Name, b.Env, b.Source.Env, b.Hosts = "anthropic", "ANTHROPIC_API_KEY", "REAL_OTHER", []string{"api.anthropic.com"}
	set, err := Load([]policy.Credential{a, b}, []string{"openai", "anthropic"}, Options{Env: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set.Hosts(), []string{"*.openai.com:443", "api.anthropic.com", "api.openai.com"}; !slices.Equal(got, want) {
		t.Errorf("Hosts = %q, want %q", got, want)
	}
	if got, want := set.Names(), []string{"anthropic", "openai"}; !slices.Equal(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	env := set.Env()
	if len(env) != 2 || !strings.HasPrefix(env[0], "ANTHROPIC_API_KEY=") || !strings.HasPrefix(env[1], "OPENAI_API_KEY=") {
		t.Errorf("Env = %q", env)
	}
}

func TestLoadSources(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "key"), []byte("file-secret-value\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		src  policy.Source
		want string
	}{
		{"env trimmed", policy.Source{Env: "REAL_OPENAI"}, openaiSecret},
		{"file under home", policy.Source{File: "~/key"}, "file-secret-value"},
		{"absolute file", policy.Source{File: filepath.Join(home, "key")}, "file-secret-value"},
		{"command", policy.Source{Command: "printf 'cmd-secret-value\\n'"}, "cmd-secret-value"},
		{"command with stderr noise", policy.Source{Command: "echo warming up >&2; echo cmd-secret-value"}, "cmd-secret-value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCred()
			c.Source = tt.src
			set, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv})
			if err != nil {
				t.Fatal(err)
			}
			if set.creds[0].secret != tt.want {
				t.Errorf("secret is %d bytes, want %d", len(set.creds[0].secret), len(tt.want))
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, maxSecretSource+1), 0o600); err != nil {
		t.Fatal(err)
	}
	other := func(edit func(*policy.Credential)) policy.Credential {
		c := validCred()
		c.Name, c.Env, c.Source.Env, c.Hosts = "other", "OTHER_KEY", "REAL_OTHER", []string{"other.example.com"}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	tests := []struct {
		name     string
		edit     func(*policy.Credential)
		extra    []policy.Credential
		selected []string
		want     string
	}{
		{"empty name", func(c *policy.Credential) { c.Name = "" }, nil, []string{""}, `credentials[0]: name is empty`},
		{"bad name", func(c *policy.Credential) { c.Name = "open ai" }, nil, []string{"open ai"}, `credential "open ai": the name may hold only letters`},
		{"no source", func(c *policy.Credential) { c.Source = policy.Source{} }, nil, nil, `credential "openai": source sets 0 of env, file and command; set exactly one`},
		{"two sources", func(c *policy.Credential) { c.Source.File = "/x" }, nil, nil, `source sets 2 of env, file and command`},
		{"bad source env", func(c *policy.Credential) { c.Source.Env = "1X" }, nil, nil, `credential "openai": source.env "1X" is not a variable name`},
		{"no hosts", func(c *policy.Credential) { c.Hosts = nil }, nil, nil, `credential "openai": hosts is empty; list the hosts`},
		{"bad host", func(c *policy.Credential) { c.Hosts = []string{"api.*.com"} }, nil, nil, `credential "openai": hosts: pattern "api.*.com": '*' is only allowed`},
		{"no injection", func(c *policy.Credential) { c.Header = "" }, nil, nil, `credential "openai": sets 0 of header, basic_auth, query and path; set exactly one`},
		{"two injections", func(c *policy.Credential) { c.Query = "key" }, nil, nil, `sets 2 of header, basic_auth, query and path`},
		{"path and header", func(c *policy.Credential) { c.Path = "/bot{}/" }, nil, nil, `sets 2 of header, basic_auth, query and path; set exactly one`},
		{"path without {}", func(c *policy.Credential) { c.Header, c.Path = "", "/bot/" }, nil, nil, `path "/bot/" must hold exactly one {} where the secret goes, e.g. path: "/bot{}/"`},
		{"path with two {}", func(c *policy.Credential) { c.Header, c.Path = "", "/{}/{}" }, nil, nil, `path "/{}/{}" must hold exactly one {}`},
		{"path not from the start", func(c *policy.Credential) { c.Header, c.Path = "", "bot{}/" }, nil, nil, `path "bot{}/" must start with '/'`},
		{"path with a query", func(c *policy.Credential) { c.Header, c.Path = "", "/bot{}/?x=1" }, nil, nil, `may hold only letters, digits, '/', '-', '.', '_' and '~' around the {}`},
		{"path with an escape", func(c *policy.Credential) { c.Header, c.Path = "", "/b%6Ft{}/" }, nil, nil, `may hold only letters`},
		{"header without colon", func(c *policy.Credential) { c.Header = "Authorization Bearer {}" }, nil, nil, `has no ':'; write it as "Name: value"`},
		{"header without {}", func(c *policy.Credential) { c.Header = "Authorization: Bearer" }, nil, nil, `the value must hold exactly one {}`},
		{"header with two {}", func(c *policy.Credential) { c.Header = "Authorization: {} {}" }, nil, nil, `the value must hold exactly one {}`},
		{"header bad name", func(c *policy.Credential) { c.Header = "X Key: {}" }, nil, nil, `"X Key" is not a header name`},
		{"header reserved", func(c *policy.Credential) { c.Header = "host: {}" }, nil, nil, `Host is managed by the HTTP layer`},
		{"header control", func(c *policy.Credential) { c.Header = "X-Key: {}\r\nX-Other: 1" }, nil, nil, `holds a control character`},
		{"basic user with colon", func(c *policy.Credential) { c.Header, c.BasicAuth = "", "a:b" }, nil, nil, `basic_auth user "a:b" may not hold ':'`},
		{"bad query name", func(c *policy.Credential) { c.Header, c.Query = "", "a&b" }, nil, nil, `query "a&b" is not a parameter name`},
		{"no env", func(c *policy.Credential) { c.Env = "" }, nil, nil, `credential "openai": env "" is not a variable name; set env`},
		{"bad env", func(c *policy.Credential) { c.Env = "OPENAI-KEY" }, nil, nil, `env "OPENAI-KEY" is not a variable name`},
		{"bad prefix", func(c *policy.Credential) { c.PlaceholderPrefix = "sk ant" }, nil, nil, `placeholder_prefix "sk ant" may hold only`},
		{"unknown selection", nil, nil, []string{"nope"}, `unknown credential "nope"; configured credentials: openai`},
		{"configured twice", nil, []policy.Credential{validCred()}, nil, `credential "openai" is configured twice`},
		{"same env", nil, []policy.Credential{other(func(c *policy.Credential) { c.Env = "OPENAI_API_KEY" })}, []string{"openai", "other"}, `credentials "openai" and "other" both set env OPENAI_API_KEY`},
		{"same secret", nil, []policy.Credential{other(func(c *policy.Credential) { c.Source.Env = "REAL_OPENAI" })}, []string{"openai", "other"}, `credentials "openai" and "other" have the same secret value`},
		{"unset env source", func(c *policy.Credential) { c.Source.Env = "UNSET" }, nil, nil, `credential "openai": source.env UNSET is empty or unset`},
		{"short secret", func(c *policy.Credential) { c.Source.Env = "SHORT" }, nil, nil, `the secret is only 3 bytes, fewer than 8`},
		{"multi-line secret", func(c *policy.Credential) { c.Source.Env = "MULTILINE" }, nil, nil, `holds a line break or another control character`},
		{"a ';' for a Cookie header", func(c *policy.Credential) { c.Source.Env, c.Header = "SEMICOLON", "cookie: s={}" }, nil, nil, `the secret holds a ';', which ends a cookie`},
		{"name holds secret", func(c *policy.Credential) { c.Source.Env = "NAMEHOLDER"; c.Name = "openai-x" }, nil, []string{"openai-x"}, `its name holds a secret value`},
		{"relative file", func(c *policy.Credential) { c.Source = policy.Source{File: "key.txt"} }, nil, nil, `source.file key.txt is relative`},
		{"missing file", func(c *policy.Credential) { c.Source = policy.Source{File: filepath.Join(dir, "nope")} }, nil, nil, `no such file or directory`},
		{"empty file", func(c *policy.Credential) { c.Source = policy.Source{File: empty} }, nil, nil, `is empty; put the secret in it`},
		{"big file", func(c *policy.Credential) { c.Source = policy.Source{File: big} }, nil, nil, `is larger than 64 KiB`},
		{"command fails", func(c *policy.Credential) { c.Source = policy.Source{Command: "echo oops >&2; exit 3"} }, nil, nil, `source.command failed (exit status 3; run it in a shell to see why): oops`},
		{"command prints nothing", func(c *policy.Credential) { c.Source = policy.Source{Command: "true"} }, nil, nil, `source.command printed nothing on stdout`},
		{"command times out", func(c *policy.Credential) { c.Source = policy.Source{Command: "exec sleep 10"} }, nil, nil, `did not finish within 200ms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCred()
			if tt.edit != nil {
				tt.edit(&c)
			}
			creds := append([]policy.Credential{c}, tt.extra...)
			selected := tt.selected
			if selected == nil {
				selected = []string{"openai"}
			}
			set, err := Load(creds, selected, Options{Env: testEnv, CommandTimeout: 200 * time.Millisecond})
			if err == nil {
				t.Fatalf("loaded %q, want an error", set.Names())
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
			for _, secret := range []string{openaiSecret, "another-secret-value-42", "line-one-secret", "openai-x", "cookie-secret"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error holds a secret: %q", err)
				}
			}
		})
	}
}

func TestLoadNoCredentialsConfigured(t *testing.T) {
	_, err := Load(nil, []string{"openai"}, Options{Env: testEnv})
	if err == nil || !strings.Contains(err.Error(), `unknown credential "openai": no credentials are configured`) {
		t.Fatalf("err = %v", err)
	}
}

// TestLoadCommandErrorMasksSecret: a failing command that echoes its
// secret to stderr does not put the secret in the error.
func TestLoadCommandErrorMasksSecret(t *testing.T) {
	c := validCred()
	c.Source = policy.Source{Command: "echo leaked-secret-123; echo 'cannot finish: leaked-secret-123' >&2; exit 1"}
	_, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv})
	if err == nil {
		t.Fatal("loaded a failing command")
	}
	if strings.Contains(err.Error(), "leaked-secret-123") {
		t.Fatalf("error holds the secret: %q", err)
	}
	if !strings.Contains(err.Error(), "cannot finish: [masked]") {
		t.Errorf("error %q does not quote the masked stderr", err)
	}
}

func TestPlaceholderDistinct(t *testing.T) {
	for range 200 {
		p := newPlaceholder("abc", "pre-")
		if !strings.HasPrefix(p, "pre-cordon") || len(p) != len("pre-cordon")+minPlaceholderRandom {
			t.Fatalf("placeholder %q", p)
		}
	}
	long := strings.Repeat("x", 300)
	if p := newPlaceholder(long, "sk-"); len(p) != len(long) {
		t.Errorf("placeholder for a %d-byte secret is %d bytes, want the same", len(long), len(p))
	}
	creds := []*cred{{secret: "cordon00"}, {secret: "zzzzzzzz"}}
	if placeholderDistinct("sk-cordon00ff", creds, 0) {
		t.Error("a placeholder holding a secret was accepted")
	}
	creds[0].placeholder = "sk-cordonabcd"
	if placeholderDistinct("sk-cordonabcd", creds, 1) {
		t.Error("a repeated placeholder was accepted")
	}
}

// TestMaskedFilesGitCredentials: a password git stored in
// ~/.git-credentials, listed under the credential's files, reaches the box
// as the placeholder. git percent-encodes every byte but letters, digits
// and "-._~", in lower case (%2f, %20), which neither of Go's escapings
// matches: the box read the password whole, one decoding away.
func TestMaskedFilesGitCredentials(t *testing.T) {
	file := t.TempDir() + "/.git-credentials"
	const secret = "pa55 w0rd/with+odd=chars:@"
	cmd := exec.Command("git", "credential-store", "--file", file, "store")
	cmd.Stdin = strings.NewReader("protocol=https\nhost=git.example.com\nusername=bob\npassword=" + secret + "\n\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git credential-store (this test needs git): %v: %s", err, out)
	}
	s := loadOne(t, policy.Credential{Name: "git", Source: policy.Source{Env: "GIT_REAL"}, Hosts: []string{"git.example.com"},
		BasicAuth: "bob", Env: "GIT_PASSWORD", Files: []string{file}}, secret)
	files, err := s.MaskedFiles()
	if err != nil {
		t.Fatal(err)
	}
	ph := strings.TrimPrefix(s.Env()[0], "GIT_PASSWORD=")
	if got, want := string(files[file]), "https://bob:"+ph+"@git.example.com\n"; got != want {
		t.Fatalf("masked ~/.git-credentials %q, want %q", got, want)
	}
	// The same encoding in capitals, as Python's quote(safe="") writes it.
	upper := "pa55%20w0rd%2Fwith%2Bodd%3Dchars%3A%40"
	if got := string(s.MaskBytes([]byte("p=" + upper + "\n"))); got != "p="+ph+"\n" {
		t.Errorf("MaskBytes(%q) = %q", upper, got)
	}
}

// TestMaskedFilesEscapedSecretRefused: a file listed under files holding
// the secret in its format's own escaping that masking does not follow
// (XML references of several escapers mixed, JSON writers' \u0026 or \/, a URL's percent-encoding in mixed
// case; \uXXXX in capitals, a pair of them for a character past U+FFFF,
// which masking does not follow) is refused, naming the file and no
// spelling of the secret: masked in the spellings cordon knows, the box
// read it one decoding away.
func TestMaskedFilesEscapedSecretRefused(t *testing.T) {
	const secret = "pa&ss<w/rd>-123+x"
	dir := t.TempDir()
	for _, tc := range []struct{ name, secret, content string }{
		// &amp;, &lt; and numeric references are spellings masking
		// knows (htmlStyles), each escaper's own: a mix of them is not.
		{"settings.xml", secret, "<server><password>pa&#38;ss&lt;w/rd&#x3E;-123+x</password></server>\n"},
		{"auth.json", secret, `{"password": "pa\u0026ss\u003cw\/rd\u003e-123+x"}` + "\n"},
		{"url", secret, "https://bob:pa%26ss%3Cw%2frd%3E-123%2Bx@repo.example.com\n"},
		{"capitals.json", "pa\U0001F511ss-123", `{"password": "pa\uD83D\uDD11ss-123"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name)
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			s := loadOne(t, policy.Credential{Name: "repo", Source: policy.Source{Env: "REPO_REAL"}, Hosts: []string{"repo.example.com"},
				BasicAuth: "bob", Env: "REPO_PASSWORD", Files: []string{file}}, tc.secret)
			files, err := s.MaskedFiles()
			if err == nil {
				t.Fatalf("shown to the box as %q", files[file])
			}
			// "-123", not "123", which the test's temporary directory's
			// random name may hold.
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), `"repo"`) || strings.Contains(err.Error(), "-123") {
				t.Errorf("error %q: want the file and credential named, no part of the secret", err)
			}
		})
	}
}

// FuzzUnescape: the decoders heldEscaped reads a masked file through
// never panic, leave text without their escape byte as it is, and read
// back text escaped whole: by a JSON encoder that writes every character
// as \uXXXX (Python's json.dumps writes all but ASCII so, a character
// past U+FFFF as a surrogate pair), and by percent-encoding every byte.
func FuzzUnescape(f *testing.F) {
	for _, seed := range []string{`a\u0026b\/c\"`, "%2f%2F%zz%", `\u12`, `\`, "&amp;", "sk-\U0001F511-x", `\ud83d\ude00\ud83d`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got := unescapeJSON(text); !strings.Contains(text, `\`) && got != text {
			t.Errorf("unescapeJSON(%q) = %q", text, got)
		}
		if got := unescapePercent(text); !strings.Contains(text, "%") && got != text {
			t.Errorf("unescapePercent(%q) = %q", text, got)
		}
		var js, pct strings.Builder
		for _, u := range utf16.Encode([]rune(text)) {
			fmt.Fprintf(&js, `\u%04x`, u)
		}
		for i := range len(text) {
			fmt.Fprintf(&pct, "%%%02X", text[i])
		}
		if got := unescapeJSON(js.String()); utf8.ValidString(text) && got != text {
			t.Errorf("unescapeJSON(%q) = %q, want %q", js.String(), got, text)
		}
		if got := unescapePercent(pct.String()); got != text {
			t.Errorf("unescapePercent(%q) = %q, want %q", pct.String(), got, text)
		}
	})
}

// loadOne loads the credential c alone, its source yielding secret.
func loadOne(t *testing.T, c policy.Credential, secret string) *Set {
	t.Helper()
	s, err := Load([]policy.Credential{c}, []string{c.Name}, Options{Env: func(string) string { return secret }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMaskedFiles(t *testing.T) {
	dir := t.TempDir()
	npmrc := dir + "/.npmrc"
	const secret = "npm_0123456789abcdefSECRET"
	os.WriteFile(npmrc, []byte("//registry.npmjs.org/:_authToken="+secret+"\nalways-auth=true\n"), 0o600)
	s := loadOne(t, policy.Credential{Name: "npm", Source: policy.Source{Env: "NPM_REAL"}, Hosts: []string{"registry.npmjs.org"},
		Header: "Authorization: Bearer {}", Env: "NPM_TOKEN", Files: []string{npmrc}}, secret)
	files, err := s.MaskedFiles()
	if err != nil {
		t.Fatal(err)
	}
	got := string(files[npmrc])
	ph := strings.TrimPrefix(s.Env()[0], "NPM_TOKEN=")
	if strings.Contains(got, secret) || !strings.Contains(got, "_authToken="+ph+"\n") || !strings.Contains(got, "always-auth=true") {
		t.Fatalf("masked file:\n%s", got)
	}
	// In base64, as an .npmrc's _auth and _password or a Docker config's
	// auth hold it, with any user: re-encoded around the placeholder.
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct{ in, want string }{
		{"_auth=" + b64([]byte("bob:"+secret)) + "\n", "_auth=" + b64([]byte("bob:"+ph)) + "\n"},
		{"_auth=" + b64([]byte("alice1:"+secret)) + "\n", "_auth=" + b64([]byte("alice1:"+ph)) + "\n"},
		{"_password=" + b64([]byte(secret)) + "\n", "_password=" + b64([]byte(ph)) + "\n"},
		{`{"auths":{"r.example":{"auth":"` + base64.RawStdEncoding.EncodeToString([]byte("u:"+secret)) + `"}}}`,
			`{"auths":{"r.example":{"auth":"` + base64.RawStdEncoding.EncodeToString([]byte("u:"+ph)) + `"}}}`},
		{"token=" + b64([]byte("bob:not-the-secret")) + "\n", "token=" + b64([]byte("bob:not-the-secret")) + "\n"},
	} {
		if got := string(s.MaskBytes([]byte(tc.in))); got != tc.want {
			t.Errorf("MaskBytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	s2 := loadOne(t, policy.Credential{Name: "npm", Source: policy.Source{Env: "NPM_REAL"}, Hosts: []string{"registry.npmjs.org"},
		Header: "Authorization: Bearer {}", Env: "NPM_TOKEN", Files: []string{dir + "/missing"}}, secret)
	if _, err := s2.MaskedFiles(); err == nil || !strings.Contains(err.Error(), "missing") || strings.Contains(err.Error(), secret) {
		t.Fatalf("missing file: %v", err)
	}
	// A named pipe is refused at once, not read until a writer comes.
	fifo := dir + "/fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	s3 := loadOne(t, policy.Credential{Name: "npm", Source: policy.Source{Env: "NPM_REAL"}, Hosts: []string{"registry.npmjs.org"},
		Header: "Authorization: Bearer {}", Env: "NPM_TOKEN", Files: []string{fifo}}, secret)
	done := make(chan error, 1)
	go func() { _, err := s3.MaskedFiles(); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a named pipe: %v; want a refusal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("MaskedFiles still waits on a named pipe after 5s")
	}
}

// A command source runs on the host before the box exists, so it must not
// run from cordon's working directory, the workspace, which the sandboxed
// side writes: it runs from the home directory. Each case plants, in the
// workspace, something a command looking in its working directory would
// run, and checks the home directory's counterpart ran instead.
func TestLoadCommandRunsFromHome(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(ws)
	for dir, value := range map[string]string{ws: "planted-by-the-box", home: "value-from-home"} {
		for _, name := range []string{"tool", "secret.txt"} {
			body := "#!/bin/sh\necho " + value + "\n"
			if name == "secret.txt" {
				body = value + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct{ name, command, want string }{
		{"working directory", "pwd", home},
		{"relative script", "./tool", "value-from-home"},
		{"empty PATH entry", "PATH=:/usr/bin:/bin tool", "value-from-home"},
		{"dot PATH entry", "PATH=.:/usr/bin:/bin tool", "value-from-home"},
		{"relative file", "cat secret.txt", "value-from-home"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCred()
			c.Source = policy.Source{Command: tt.command}
			set, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv})
			if err != nil {
				t.Fatal(err)
			}
			if got := set.creds[0].secret; got != tt.want {
				t.Errorf("%q read %q, want %q (the workspace is %s)", tt.command, got, tt.want, ws)
			}
		})
	}
	t.Run("no home", func(t *testing.T) {
		t.Setenv("HOME", filepath.Join(home, "missing"))
		c := validCred()
		c.Source = policy.Source{Command: `echo "ran-in-$(pwd)"`}
		set, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv})
		if err != nil {
			t.Fatal(err)
		}
		if got := set.creds[0].secret; got != "ran-in-/" {
			t.Errorf("without a home directory the command ran in %q, want /", got)
		}
	})
}

// FuzzMaskBytes: a masked file or header holds the secret in none of the
// spellings Apply sends, nor inside any base64 token.
func FuzzMaskBytes(f *testing.F) {
	const secret = "npm_0123456789abcdefSECRET"
	set := secretSet(secret)
	b64 := base64.StdEncoding.EncodeToString
	f.Add([]byte("_auth=" + b64([]byte("bob:"+secret)) + "\n"))
	f.Add([]byte("x " + secret + " " + b64([]byte(secret))))
	f.Add([]byte(`{"auth":"` + base64.RawStdEncoding.EncodeToString([]byte("u:"+secret)) + `"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := set.MaskBytes(in)
		needles, _, _ := spelt(set)
		for _, n := range needles {
			if bytes.Contains(out, []byte(n)) {
				t.Fatalf("MaskBytes(%q) = %q, which holds %q", in, out, n)
			}
		}
		for i := 0; i < len(out); {
			if !isBase64(out[i]) {
				i++
				continue
			}
			j := i
			for j < len(out) && (isBase64(out[j]) || out[j] == '=') {
				j++
			}
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
				tok := out[i:j]
				if enc == base64.RawStdEncoding {
					tok = bytes.TrimRight(tok, "=")
				}
				if raw, err := enc.DecodeString(string(tok)); err == nil && bytes.Contains(raw, []byte(secret)) {
					t.Fatalf("MaskBytes(%q) = %q, whose token %q decodes to the secret", in, out, out[i:j])
				}
			}
			i = j
		}
	})
}

// A command source runs with a PATH that leaves out the directories a
// sandboxed command may write (Options.Writable): an activated
// virtualenv's bin in the workspace may hold a program of the source's
// name that a box planted, which would run on the host with the user's
// rights. A tool elsewhere on PATH runs; one found only in the workspace
// does not, and the error says why.
func TestLoadCommandPathLeavesOutWritable(t *testing.T) {
	base := t.TempDir()
	ws, tools, linked := filepath.Join(base, "ws"), filepath.Join(base, "tools"), filepath.Join(base, "linked-bin")
	venv := filepath.Join(ws, ".venv", "bin")
	for dir, value := range map[string]string{venv: "planted-by-the-box", tools: "value-from-tools"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho "+value+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(venv, "only-here"), []byte("#!/bin/sh\necho planted-only-here\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(venv, linked); err != nil { // a PATH entry that leads into the workspace
		t.Fatal(err)
	}
	t.Setenv("HOME", base)
	for _, path := range []string{venv + ":" + tools + ":/usr/bin:/bin", linked + ":" + tools + ":/usr/bin:/bin"} {
		t.Setenv("PATH", path)
		c := validCred()
		c.Source = policy.Source{Command: "tool"}
		set, err := Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv, Writable: []string{ws}})
		if err != nil {
			t.Fatal(err)
		}
		if got := set.creds[0].secret; got != "value-from-tools" {
			t.Errorf("with PATH %s, the command read %q, want value-from-tools", path, got)
		}
		c.Source = policy.Source{Command: "only-here"}
		_, err = Load([]policy.Credential{c}, []string{"openai"}, Options{Env: testEnv, Writable: []string{ws}})
		if err == nil || !strings.Contains(err.Error(), "without the PATH entries the sandboxed command may write") {
			t.Errorf("with PATH %s, a program found only in the workspace: %v, want a refusal saying why", path, err)
		}
	}
}

// FuzzScrub: what Scrub leaves holds no secret or placeholder in any
// spelling and any case.
func FuzzScrub(f *testing.F) {
	const secret = "npm_0123456789abcdefSECRET"
	set := secretSet(secret)
	f.Add("host " + strings.ToLower(secret) + ".example")
	f.Add("x " + url.QueryEscape(secret) + " <0> " + strings.ToUpper(secret))
	f.Fuzz(func(t *testing.T, in string) {
		out := strings.ToLower(set.Scrub(in))
		needles, placeholders, _ := spelt(set)
		for _, n := range append(needles, placeholders...) {
			if strings.Contains(out, strings.ToLower(n)) {
				t.Fatalf("Scrub(%q) holds %q in some case", in, n)
			}
		}
	})
}
