package credinject

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/internal/homedir"
	"github.com/cordon-sandbox/cordon/policy"
)

// DefaultCommandTimeout bounds a command source when Options sets none.
const DefaultCommandTimeout = 30 * time.Second

// MinSecretLen is the shortest secret accepted: anything shorter would be
// found in ordinary text, masking output and refusing requests at random.
const MinSecretLen = 8

// maxSecretSource is the most a file or command source may yield.
const maxSecretSource = 64 << 10

// maxStderr is how much of a failing command's stderr an error quotes.
const maxStderr = 1 << 10

// placeholderMarker follows the prefix in every placeholder.
const placeholderMarker = "cordon"

// minPlaceholderRandom is the fewest random hex digits in a placeholder
// (128 bits); maxPlaceholderRandom caps the padding to a long secret's length.
const (
	minPlaceholderRandom = 32
	maxPlaceholderRandom = 512
)

// Options tunes Load.
type Options struct {
	// Env looks up variables for env sources; nil means os.Getenv.
	Env func(string) string
	// CommandTimeout bounds each command source; zero means DefaultCommandTimeout.
	CommandTimeout time.Duration
	// Writable are the directories a sandboxed command may write (the
	// workspace, read-write allow_paths): a command source runs with a
	// PATH that leaves out the entries in them (commandPath).
	Writable []string
}

// Load validates the selected credentials, reads their secrets and makes
// their placeholders. Of the credentials not selected, only the names are
// checked (unique, not empty); their sources are never read. No error ever
// holds a secret.
func Load(creds []policy.Credential, selected []string, opts Options) (*Set, error) {
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	if opts.CommandTimeout == 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	chosen, loaded, err := choose(creds, selected)
	if err != nil {
		return nil, err
	}
	for i, c := range loaded {
		if c.secret, err = readSecret(chosen[i], opts); err != nil {
			return nil, fmt.Errorf("credential %q: %w", c.name, err)
		}
		if err := checkSecret(c); err != nil {
			return nil, fmt.Errorf("credential %q: %w", c.name, err)
		}
		for _, o := range loaded[:i] {
			if o.secret == c.secret {
				return nil, fmt.Errorf("credentials %q and %q have the same secret value; merge them into one credential listing all their hosts", o.name, c.name)
			}
		}
	}
	if err := checkNamesHoldNoSecret(loaded); err != nil {
		return nil, err
	}
	if err := makePlaceholders(loaded); err != nil {
		return nil, err
	}
	slices.SortFunc(loaded, func(a, b *cred) int { return strings.Compare(a.name, b.name) })
	return newSet(loaded), nil
}

// Check makes the checks of Load that read no secret and run nothing: the
// selected names are configured, and each selected credential is well
// formed. cordon run --dry-run makes them.
func Check(creds []policy.Credential, selected []string) error {
	_, _, err := choose(creds, selected)
	return err
}

// choose returns the configured credentials named in selected, and each
// parsed, its secret not yet read.
func choose(creds []policy.Credential, selected []string) ([]policy.Credential, []*cred, error) {
	chosen, err := selectCreds(creds, selected)
	if err != nil {
		return nil, nil, err
	}
	parsed := make([]*cred, 0, len(chosen))
	envs := map[string]string{}
	for _, pc := range chosen {
		c, err := parseCred(pc)
		if err != nil {
			return nil, nil, err
		}
		if other, ok := envs[c.env]; ok {
			return nil, nil, fmt.Errorf("credentials %q and %q both set env %s; give each its own variable", other, c.name, c.env)
		}
		envs[c.env] = c.name
		parsed = append(parsed, c)
	}
	return chosen, parsed, nil
}

// selectCreds returns the configured credentials named in selected, once each.
func selectCreds(creds []policy.Credential, selected []string) ([]policy.Credential, error) {
	byName := map[string]policy.Credential{}
	var known []string
	for i, c := range creds {
		if c.Name == "" {
			return nil, fmt.Errorf("credentials[%d]: name is empty; give each credential a unique name", i)
		}
		if _, dup := byName[c.Name]; dup {
			return nil, fmt.Errorf("credential %q is configured twice; names must be unique", c.Name)
		}
		byName[c.Name] = c
		known = append(known, c.Name)
	}
	slices.Sort(known)
	var chosen []policy.Credential
	seen := map[string]bool{}
	for _, name := range selected {
		c, ok := byName[name]
		switch {
		case !ok:
			return nil, policy.UnknownCredential(name, known)
		case seen[name]:
			continue
		}
		seen[name] = true
		chosen = append(chosen, c)
	}
	return chosen, nil
}

// parseCred checks everything about a credential but its secret.
func parseCred(pc policy.Credential) (*cred, error) {
	c := &cred{name: pc.Name, env: pc.Env, prefix: pc.PlaceholderPrefix, allowPlaintext: pc.AllowPlaintext, files: pc.Files}
	fail := func(format string, args ...any) (*cred, error) {
		return nil, fmt.Errorf("credential %q: "+format, append([]any{pc.Name}, args...)...)
	}
	if !validName(pc.Name) {
		return fail("the name may hold only letters, digits, '.', '_' and '-' (at most 64); rename it")
	}
	if n := countSet(pc.Source.Env, pc.Source.File, pc.Source.Command); n != 1 {
		return fail("source sets %d of env, file and command; set exactly one, e.g. source: {env: OPENAI_API_KEY}", n)
	}
	if pc.Source.Env != "" && !validEnvName(pc.Source.Env) {
		return fail("source.env %q is not a variable name; use letters, digits and '_', not starting with a digit", pc.Source.Env)
	}
	if len(pc.Hosts) == 0 {
		return fail("hosts is empty; list the hosts the secret may be sent to, e.g. hosts: [api.openai.com]")
	}
	for _, h := range pc.Hosts {
		p, err := policy.ParsePattern(h)
		if err != nil {
			return fail("hosts: %v", err)
		}
		c.patterns = append(c.patterns, p)
	}
	switch n := countSet(pc.Header, pc.BasicAuth, pc.Query, pc.Path); {
	case n != 1:
		return fail(`sets %d of header, basic_auth, query and path; set exactly one, the place the API takes the key, e.g. header: "Authorization: Bearer {}" (path: "/bot{}/" for a key in the URL path)`, n)
	case pc.Header != "":
		name, value, err := parseHeaderTemplate(pc.Header)
		if err != nil {
			return fail("%v", err)
		}
		c.header, c.headerValue = name, value
	case pc.BasicAuth != "":
		if strings.Contains(pc.BasicAuth, ":") || hasControl(pc.BasicAuth) {
			return fail("basic_auth user %q may not hold ':' or control characters; write the user name alone", pc.BasicAuth)
		}
		c.basicUser = pc.BasicAuth
	case pc.Query != "":
		if hasControl(pc.Query) || strings.ContainsAny(pc.Query, " &=#") {
			return fail("query %q is not a parameter name; write the name alone, such as key", pc.Query)
		}
		c.query = pc.Query
	default:
		before, after, err := parsePathTemplate(pc.Path)
		if err != nil {
			return fail("%v", err)
		}
		c.pathBefore, c.pathAfter = before, after
	}
	if !validEnvName(pc.Env) {
		return fail("env %q is not a variable name; set env to the variable the sandbox reads, such as OPENAI_API_KEY", pc.Env)
	}
	if !validPrefix(pc.PlaceholderPrefix) {
		return fail("placeholder_prefix %q may hold only letters, digits, '.', '_' and '-' (at most 64), such as sk-", pc.PlaceholderPrefix)
	}
	return c, nil
}

// parseHeaderTemplate splits "Name: value with {}" into the canonical
// header name and the value template.
func parseHeaderTemplate(t string) (string, string, error) {
	name, value, ok := strings.Cut(t, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	switch {
	case !ok:
		return "", "", fmt.Errorf(`header %q has no ':'; write it as "Name: value", e.g. "Authorization: Bearer {}"`, t)
	case !validToken(name):
		return "", "", fmt.Errorf(`header %q: %q is not a header name; write it as "Name: value", e.g. "x-api-key: {}"`, t, name)
	case strings.Count(value, "{}") != 1:
		return "", "", fmt.Errorf(`header %q: the value must hold exactly one {} where the secret goes, e.g. "Authorization: Bearer {}"`, t)
	case hasControl(value):
		return "", "", fmt.Errorf("header %q: the value holds a control character; write it on one line", t)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	if slices.Contains(reservedHeaders, name) {
		return "", "", fmt.Errorf("header %q: %s is managed by the HTTP layer and cannot carry a secret; use the header the API documents", t, name)
	}
	return name, value, nil
}

// parsePathTemplate splits "/bot{}/" into what comes before and after
// the {} where the secret goes.
func parsePathTemplate(t string) (string, string, error) {
	before, after, ok := strings.Cut(t, "{}")
	switch {
	case !ok || strings.Contains(after, "{}"):
		return "", "", fmt.Errorf(`path %q must hold exactly one {} where the secret goes, e.g. path: "/bot{}/"`, t)
	case !strings.HasPrefix(before, "/"):
		return "", "", fmt.Errorf(`path %q must start with '/': it is the start of the URL path, with {} where the secret goes, e.g. path: "/bot{}/"`, t)
	case !strings.ContainsFunc(before+after, func(r rune) bool { return !isPathChar(r) }):
		return before, after, nil
	}
	return "", "", fmt.Errorf(`path %q may hold only letters, digits, '/', '-', '.', '_' and '~' around the {}; write the start of the path as the API documents it, e.g. path: "/bot{}/"`, t)
}

// isPathChar accepts the characters a path template may hold: RFC
// 3986's unreserved ones and '/', which every client sends as written.
func isPathChar(r rune) bool {
	return r < 0x80 && (isAlnum(byte(r)) || strings.ContainsRune("/-._~", r))
}

// reservedHeaders frame or route a request; a secret never goes there.
var reservedHeaders = []string{
	"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// readSecret reads a credential's secret from its source, trimmed of
// surrounding white space. Errors name the source, never the value.
func readSecret(pc policy.Credential, opts Options) (string, error) {
	src := pc.Source
	switch {
	case src.Env != "":
		v := strings.TrimSpace(opts.Env(src.Env))
		if v == "" {
			return "", fmt.Errorf("source.env %s is empty or unset; export it in the shell that starts cordon", src.Env)
		}
		return v, nil
	case src.File != "":
		return readSecretFile(src.File)
	default:
		var env, left []string // nil: cordon's own environment
		if path, ok := os.LookupEnv("PATH"); ok && len(opts.Writable) > 0 {
			path, left = commandPath(path, opts.Writable)
			env = append(os.Environ(), "PATH="+path) // the last one counts
		}
		v, err := runSecretCommand(src.Command, opts.CommandTimeout, env)
		if err != nil && len(left) > 0 {
			err = fmt.Errorf("%w (it runs without the PATH entries the sandboxed command may write, where it could have planted a program of the name: %s)", err, strings.Join(left, ", "))
		}
		return v, err
	}
}

func readSecretFile(path string) (string, error) {
	if rest, ok := strings.CutPrefix(path, "~"); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
		home, err := homedir.Dir()
		if err != nil {
			return "", fmt.Errorf("source.file %s: %w; or write the path out in full", path, err)
		}
		path = home + rest
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("source.file %s is relative; write an absolute path or one starting with ~/", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("source.file: %w; check the path, or create the file holding only the secret", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretSource+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("source.file %s: %w", path, err)
	case len(b) > maxSecretSource:
		return "", fmt.Errorf("source.file %s is larger than %d KiB; the file must hold only the secret", path, maxSecretSource>>10)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("source.file %s is empty; put the secret in it", path)
	}
	return v, nil
}

// runSecretCommand runs command with /bin/sh -c, from commandDir, in the
// environment env (nil: cordon's), and returns its stdout.
func runSecretCommand(command string, timeout time.Duration, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = commandDir()
	cmd.Env = env
	var stdout, stderr limitedBuffer
	stdout.limit, stderr.limit = maxSecretSource, maxSecretSource
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A grandchild holding the pipes open must not outlive the timeout.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	out := stdout.buf.String()
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("source.command did not finish within %s; make sure it runs without waiting for input", timeout)
	case err != nil:
		return "", fmt.Errorf("source.command failed (%v; run it in a shell to see why)%s", err, quoteStderr(stderr.buf.Bytes(), out))
	case stdout.over:
		return "", fmt.Errorf("source.command printed more than %d KiB; it must print only the secret", maxSecretSource>>10)
	}
	v := strings.TrimSpace(out)
	if v == "" {
		return "", fmt.Errorf("source.command printed nothing on stdout%s", quoteStderr(stderr.buf.Bytes(), out))
	}
	return v, nil
}

// commandDir is where a command source runs: the user's home directory,
// else /. Never cordon's own working directory, which is the workspace, the
// sandboxed side's to write: the command runs on the host, outside any
// box, before the run's box exists, and many tools look in their working
// directory first (python3 -m imports a module from it, npx, uv run and
// bundle exec run the project's own copy, sh runs ./NAME for a PATH entry
// that is empty or "."), so a file a previous run planted there would run
// with the user's rights.
func commandDir() string {
	if h, err := homedir.Dir(); err == nil {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			return h
		}
	}
	return "/"
}

// commandPath is path, a PATH, without its entries that lie in one of
// writable, which it returns as left (as written or with their links resolved): the directories a
// sandboxed command may write. A workspace directory on PATH (an activated
// virtualenv's bin, a node_modules/.bin) may hold a program of a command
// source's name that a box wrote in an earlier run, and the source runs
// on the host, with the user's rights, before any box exists.
func commandPath(path string, writable []string) (kept string, left []string) {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		real := d
		if r, err := filepath.EvalSymlinks(d); err == nil {
			real = r
		}
		if slices.ContainsFunc(writable, func(w string) bool { return writableDir(w, d) || writableDir(w, real) }) {
			left = append(left, d)
		} else {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator)), left
}

// writableDir says whether the PATH entry p lies in the writable
// directory dir; a relative p (taken from commandDir) is in none.
func writableDir(dir, p string) bool {
	p = filepath.Clean(p)
	return filepath.IsAbs(p) && policy.Within(p, dir)
}

// quoteStderr returns ": " and the end of stderr, with anything the command
// printed on stdout (which may be the secret) masked out.
func quoteStderr(stderr []byte, stdout string) string {
	var needles []string
	for _, line := range strings.Split(stdout, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			needles = append(needles, line)
		}
	}
	if v := strings.TrimSpace(stdout); v != "" {
		needles = append(needles, v)
	}
	// Longest first, so a whole value is masked before its lines.
	slices.SortFunc(needles, func(a, b string) int { return len(b) - len(a) })
	s := string(stderr)
	for _, n := range needles {
		s = strings.ReplaceAll(s, n, "[masked]")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > maxStderr {
		s = "..." + s[len(s)-maxStderr:]
	}
	return ": " + s
}

// limitedBuffer keeps the first limit bytes written and notes the excess.
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - b.buf.Len()
	if len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// checkSecret refuses secrets that cannot be matched or sent safely.
func checkSecret(c *cred) error {
	switch {
	case len(c.secret) < MinSecretLen:
		return fmt.Errorf("the secret is only %d bytes, fewer than %d; check that the source yields the secret itself", len(c.secret), MinSecretLen)
	case hasControl(c.secret):
		return errors.New("the secret holds a line break or another control character; a secret must be one line (for a multi-line command output such as pass, print only the first line: | head -n1)")
	case strings.EqualFold(c.header, "Cookie") && strings.Contains(c.secret, ";"):
		// A ';' ends a cookie: over HTTP/2 net/http sends the parts as
		// cookies of their own, and an origin that echoes them joins
		// them with "; ", a spelling of the secret no mask knows.
		return errors.New("the secret holds a ';', which ends a cookie, so it cannot go in a Cookie header as one value; put it in the header the API documents for keys")
	}
	return nil
}

// checkNamesHoldNoSecret refuses a name, variable or placeholder prefix
// that holds a secret: those reach the sandbox, audit lines and masked
// output. The error cannot quote the offending field.
func checkNamesHoldNoSecret(creds []*cred) error {
	for i, c := range creds {
		for _, o := range creds {
			for _, f := range [][2]string{{"name", c.name}, {"env", c.env}, {"placeholder_prefix", c.prefix}} {
				if strings.Contains(f[1], o.secret) {
					return fmt.Errorf("selected credential #%d: its %s holds a secret value; choose a %s that is not secret", i+1, f[0], f[0])
				}
			}
		}
	}
	return nil
}

// makePlaceholders gives each credential a fresh random placeholder that
// neither holds nor is held by any secret or other placeholder.
func makePlaceholders(creds []*cred) error {
	const attempts = 8
	for i, c := range creds {
		for try := 0; ; try++ {
			if try == attempts {
				return fmt.Errorf("credential %q: could not make a placeholder distinct from the secrets; report this as a bug", c.name)
			}
			c.placeholder = newPlaceholder(c.secret, c.prefix)
			if placeholderDistinct(c.placeholder, creds, i) {
				break
			}
		}
	}
	return nil
}

// newPlaceholder returns prefix, the marker and random hex digits, padded to
// the secret's length so SDKs that check a key's length accept it.
func newPlaceholder(secret, prefix string) string {
	n := min(max(minPlaceholderRandom, len(secret)-len(prefix)-len(placeholderMarker)), maxPlaceholderRandom)
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return prefix + placeholderMarker + hex.EncodeToString(b)[:n]
}

// placeholderDistinct reports whether p is safe beside the secrets of all
// creds and the placeholders of creds[:i].
func placeholderDistinct(p string, creds []*cred, i int) bool {
	for j, o := range creds {
		if strings.Contains(p, o.secret) || strings.Contains(o.secret, p) {
			return false
		}
		if j < i && (strings.Contains(p, o.placeholder) || strings.Contains(o.placeholder, p)) {
			return false
		}
	}
	return true
}

func countSet(fields ...string) int {
	n := 0
	for _, f := range fields {
		if f != "" {
			n++
		}
	}
	return n
}

// validName accepts credential names, which appear in errors, audit lines
// and masked output.
func validName(s string) bool {
	return s != "" && validPrefix(s)
}

// validPrefix accepts up to 64 letters, digits, '.', '_' and '-'.
func validPrefix(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(isAlnum(c) || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validEnvName accepts a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(isAlnum(c) || c == '_') {
			return false
		}
	}
	return true
}

// validToken accepts an HTTP header field name (RFC 9110 token).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
