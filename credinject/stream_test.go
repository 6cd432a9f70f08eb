package credinject

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/syncbuf"
	"github.com/cordon-sandbox/cordon/policy"
)

// propertySeeds is how many random cases each property test runs.
const propertySeeds = 400

// secretSet builds a Set straight from secret values, skipping Load's
// checks so that tests can use short, overlapping and prefix-sharing
// values. Credential k is named "cK" with placeholder "<K>".
func secretSet(secrets ...string) *Set {
	var creds []*cred
	for k, s := range secrets {
		creds = append(creds, &cred{name: fmt.Sprintf("c%d", k), secret: s, placeholder: fmt.Sprintf("<%d>", k)})
	}
	return newSet(creds)
}

// reference replaces needles by the strings.NewReplacer semantics the
// matcher promises: leftmost first, longest at a position, no overlaps.
func reference(input string, needles []string, repl func(k int) string) string {
	idx := make([]int, len(needles))
	for k := range idx {
		idx[k] = k
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(needles[b]) - len(needles[a]) })
	var pairs []string
	for _, k := range idx {
		pairs = append(pairs, needles[k], repl(k))
	}
	return strings.NewReplacer(pairs...).Replace(input)
}

// randomNeedles returns 1 to 4 distinct needles over a small alphabet, so
// that they often share prefixes, overlap and contain each other.
func randomNeedles(rng *rand.Rand, alphabet string) []string {
	var needles []string
	for range 1 + rng.IntN(4) {
		n := randomString(rng, alphabet, 1+rng.IntN(6))
		if !slices.Contains(needles, n) {
			needles = append(needles, n)
		}
	}
	return needles
}

func randomString(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// randomChunks splits n bytes into chunk sizes: all ones, or random sizes.
func randomChunks(rng *rand.Rand, n int) []int {
	var sizes []int
	allOnes := rng.IntN(4) == 0
	for n > 0 {
		c := 1
		if !allOnes {
			c = min(n, 1+rng.IntN(12))
		}
		sizes = append(sizes, c)
		n -= c
	}
	return sizes
}

// chunksFrom derives chunk sizes from fuzz input bytes, cycling through them.
func chunksFrom(seed []byte, n int) []int {
	var sizes []int
	for i := 0; n > 0; i++ {
		c := 1
		if len(seed) > 0 {
			c = min(n, 1+int(seed[i%len(seed)])%16)
		}
		sizes = append(sizes, c)
		n -= c
	}
	return sizes
}

// spelt returns the needles a set masks (every spelling of its secrets)
// and what MaskBody (placeholders) and a MaskWriter ("[masked:cK]") put in
// their place, for reference.
func spelt(set *Set) (needles, placeholders, masks []string) {
	for _, sp := range set.spellings {
		needles = append(needles, sp.secret)
		placeholders = append(placeholders, sp.placeholder)
		masks = append(masks, "[masked:"+set.creds[sp.cred].name+"]")
	}
	return needles, placeholders, masks
}

// window is how many bytes a masking stream over set holds back: at
// least its longest needle less one, fixed by the secrets' lengths.
func window(set *Set) int { return set.secrets.window }

// endsIn reports whether a needle occurs in in, ending after from.
func endsIn(in string, needles []string, from int) bool {
	for _, n := range needles {
		for i := 0; ; i++ {
			j := strings.Index(in[i:], n)
			if j < 0 {
				break
			}
			if i += j; i+len(n) > from {
				return true
			}
		}
	}
	return false
}

// checkMaskWriter writes input in the given chunks and checks, after every
// write, that the held-back tail is the last window(set) bytes, whatever
// they are (fewer only where a whole secret ends in them), and that
// everything before it is already out, exactly as the reference would
// have it.
func checkMaskWriter(t *testing.T, secrets []string, input string, sizes []int) {
	t.Helper()
	var got bytes.Buffer
	set := secretSet(secrets...)
	needles, _, masks := spelt(set)
	repl := func(k int) string { return masks[k] }
	mw := NewMaskWriter(&got, set)
	off := 0
	for _, n := range sizes {
		if w, err := mw.Write([]byte(input[off : off+n])); w != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", w, err, n)
		}
		off += n
		mw.mu.Lock()
		tail, out := string(mw.st.tail), got.String()
		mw.mu.Unlock()
		want := min(off, window(set))
		if len(tail) > want || len(tail) < want && !endsIn(input[:off], needles, off-want) {
			t.Fatalf("secrets %q, input %q, after %d bytes: holds %q, want the last %d bytes", secrets, input, off, tail, want)
		}
		if want := reference(input[:off-len(tail)], needles, repl); out != want {
			t.Fatalf("secrets %q, input %q, after %d bytes: wrote %q, want %q", secrets, input, off, out, want)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	if want := reference(input, needles, repl); got.String() != want {
		t.Fatalf("secrets %q, input %q: got %q, want %q", secrets, input, got.String(), want)
	}
}

func TestMaskWriterProperty(t *testing.T) {
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 1))
		secrets := randomNeedles(rng, "ab")
		input := randomString(rng, "abc", rng.IntN(120))
		checkMaskWriter(t, secrets, input, randomChunks(rng, len(input)))
	}
}

func TestMaskWriterCases(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		input   string
		want    string
	}{
		{"none", []string{"secret99"}, "hello world", "hello world"},
		{"whole", []string{"secret99"}, "secret99", "[masked:c0]"},
		{"twice adjacent", []string{"secret99"}, "xsecret99secret99y", "x[masked:c0][masked:c0]y"},
		{"near miss at end", []string{"secret99"}, "a secret9", "a secret9"},
		{"longest wins at a position", []string{"abc", "abcdef"}, "abcdefabcx", "[masked:c1][masked:c0]x"},
		{"shorter inside longer", []string{"cd", "abcdef"}, "abcdecd", "ab[masked:c0]e[masked:c0]"},
		{"leftmost wins over longer later", []string{"abcd", "bcdefg"}, "abcdefg", "[masked:c0]efg"},
		{"no secrets", nil, "anything", "anything"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{1, 2, 3, 1000} {
				var sizes []int
				for n := len(tt.input); n > 0; n -= min(n, size) {
					sizes = append(sizes, min(n, size))
				}
				var got bytes.Buffer
				mw := NewMaskWriter(&got, secretSet(tt.secrets...))
				for off, i := 0, 0; i < len(sizes); off, i = off+sizes[i], i+1 {
					if _, err := mw.Write([]byte(tt.input[off : off+sizes[i]])); err != nil {
						t.Fatal(err)
					}
				}
				if err := mw.Close(); err != nil {
					t.Fatal(err)
				}
				if got.String() != tt.want {
					t.Errorf("chunk %d: got %q, want %q", size, got.String(), tt.want)
				}
			}
		})
	}
}

// TestMaskWriterHandsOutQuietTails: a prompt, a line protocol's message or
// the start of a secret is held back alike, and written once no more bytes
// come; nothing tells the command whether what it wrote starts a secret.
func TestMaskWriterHandsOutQuietTails(t *testing.T) {
	set := secretSet("sk-live-0123456789")
	for _, chunk := range []string{"Password: ", "{\"jsonrpc\":\"2.0\"}\n", "sk-live-01", "sk-live-0123456789 ok"} {
		var got syncbuf.Buffer
		mw := NewMaskWriter(&got, set)
		if _, err := mw.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
		mw.mu.Lock()
		held := len(mw.st.tail)
		mw.mu.Unlock()
		if whole := strings.Contains(chunk, "sk-live-0123456789"); !whole && held != min(len(chunk), window(set)) {
			t.Errorf("after %q: holds %d bytes, want %d whatever they are", chunk, held, min(len(chunk), window(set)))
		}
		want := strings.ReplaceAll(chunk, "sk-live-0123456789", "[masked:c0]")
		deadline := time.Now().Add(5 * time.Second)
		for got.String() != want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got.String() != want {
			t.Errorf("after %q and quiet: wrote %q, want %q", chunk, got.String(), want)
		}
		mw.Close()
	}
}

func TestMaskWriterClose(t *testing.T) {
	var got bytes.Buffer
	set := secretSet("secret99")
	mw := NewMaskWriter(&got, set)
	in := "a tail long enough to pass a window, then secret9"
	if _, err := mw.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	mw.mu.Lock()
	before := got.String()
	mw.mu.Unlock()
	if before != in[:len(in)-window(set)] {
		t.Fatalf("before Close: %q", before)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	if got.String() != in {
		t.Fatalf("after Close: %q", got.String())
	}
	if err := mw.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := mw.Write([]byte("x")); !errors.Is(err, errWriteAfterClose) {
		t.Errorf("Write after Close: %v, want errWriteAfterClose", err)
	}
}

type failWriter struct{}

var errFail = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errFail }

func TestMaskWriterWriteError(t *testing.T) {
	mw := NewMaskWriter(failWriter{}, secretSet("secret99"))
	if _, err := mw.Write([]byte(strings.Repeat("hello, and more than a window holds. ", 2))); !errors.Is(err, errFail) {
		t.Fatalf("Write: %v, want %v", err, errFail)
	}
	if _, err := mw.Write([]byte("again")); !errors.Is(err, errFail) {
		t.Errorf("second Write: %v, want %v", err, errFail)
	}
	if err := mw.Close(); !errors.Is(err, errFail) {
		t.Errorf("Close: %v, want %v", err, errFail)
	}
}

// chunkReader returns its data in the given chunk sizes, then io.EOF.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n, r.sizes = min(n, r.sizes[0]), r.sizes[1:]
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

// readInChunks reads r to the end with read buffers of the given sizes
// (cycling), returning what was read and the first error other than EOF.
func readInChunks(r io.Reader, sizes []int) ([]byte, error) {
	var out []byte
	for i := 0; ; i++ {
		size := 7
		if len(sizes) > 0 {
			size = sizes[i%len(sizes)]
		}
		buf := make([]byte, size)
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func checkMaskBody(t *testing.T, secrets []string, input string, srcSizes, readSizes []int) {
	t.Helper()
	set := secretSet(secrets...)
	needles, placeholders, _ := spelt(set)
	body := set.MaskBody(&chunkReader{data: []byte(input), sizes: srcSizes})
	defer body.Close()
	got, err := readInChunks(body, readSizes)
	if err != nil {
		t.Fatal(err)
	}
	if want := reference(input, needles, func(k int) string { return placeholders[k] }); string(got) != want {
		t.Fatalf("secrets %q, input %q: got %q, want %q", secrets, input, got, want)
	}
}

func TestMaskBodyProperty(t *testing.T) {
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 2))
		secrets := randomNeedles(rng, "ab")
		input := randomString(rng, "abc", rng.IntN(120))
		checkMaskBody(t, secrets, input, randomChunks(rng, len(input)), randomChunks(rng, 1+rng.IntN(40)))
	}
}

// TestMaskBodySingleSecret checks one realistic secret against
// strings.ReplaceAll across every split point.
func TestMaskBodySingleSecret(t *testing.T) {
	secret := "sk-ant-api03-abcdefghijklmnop"
	input := "{\"echo\":\"" + secret + "\",\"again\":\"" + secret + "sk-ant\"}"
	want := strings.ReplaceAll(input, secret, "<0>")
	for split := range len(input) + 1 {
		src := &chunkReader{data: []byte(input), sizes: []int{split, len(input)}}
		got, err := io.ReadAll(secretSet(secret).MaskBody(src))
		if err != nil || string(got) != want {
			t.Fatalf("split at %d: got %q, %v; want %q", split, got, err, want)
		}
	}
}

// errReader returns data, then a non-EOF error.
type errReader struct{ data []byte }

var errReset = errors.New("connection reset")

func (r *errReader) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, errReset
	}
	return n, nil
}

func (r *errReader) Close() error { return nil }

func TestMaskBodySourceErrorDropsHeldTail(t *testing.T) {
	set := secretSet("secret99")
	in := "a body long enough to pass a window, then secre"
	got, err := io.ReadAll(set.MaskBody(&errReader{data: []byte(in)}))
	if !errors.Is(err, errReset) {
		t.Fatalf("err = %v, want %v", err, errReset)
	}
	if string(got) != in[:len(in)-window(set)] {
		t.Errorf("got %q, want the held tail dropped", got)
	}
}

// reads reads r on its own goroutine until it fails, sending what each
// read returns, then closes the channel.
func reads(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		buf := make([]byte, 256)
		for {
			k, err := r.Read(buf)
			if k > 0 {
				ch <- string(buf[:k])
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// collect gathers what arrives on ch for d, or until it closes.
func collect(ch <-chan string, d time.Duration) string {
	var got string
	deadline := time.After(d)
	for {
		select {
		case b, ok := <-ch:
			if !ok {
				return got
			}
			got += b
		case <-deadline:
			return got
		}
	}
}

// TestMaskBodyHandsOutQuietTails: a body that goes quiet hands out what
// it held back up to the last byte no secret holds (letters and digits
// aside) and keeps the rest until more comes: the same whether the rest
// starts a secret or not, so that a sandbox whose bytes the upstream
// echoes (a WebSocket or streaming echo) learns nothing of the key from
// what comes back and when.
func TestMaskBodyHandsOutQuietTails(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	set := secretSet(secret)
	for _, tc := range []struct{ tail, quiet string }{
		{secret[:len(secret)-1], "echo: "},
		{"xk-lave-9876543210fedcb", "echo: "}, // as long, and no prefix
		{secret[:3], "echo: "},
		{"xk-", "echo: "},
		{"hello there", "echo: hello "},
		{"done.\n", "echo: done.\n"},
	} {
		pr, pw := io.Pipe()
		body := set.MaskBody(pr)
		got := reads(body)
		go pw.Write([]byte("echo: " + tc.tail))
		if b := collect(got, 10*maskIdle); b != tc.quiet {
			t.Errorf("%q: handed out %q while the upstream is quiet, want %q", tc.tail, b, tc.quiet)
		}
		pw.Close()
		if b := collect(got, 5*time.Second); tc.quiet+b != "echo: "+tc.tail {
			t.Errorf("%q: the rest %q once the body ended", tc.tail, b)
		}
		body.Close()
	}
}

// TestMaskBodyPauseSplitsNoSecret: a secret split by a pause, as a
// response that outgrows the first flight of a distant upstream's TCP
// window is, or one the sandbox reads slowly, reaches the client as its
// placeholder; what precedes it goes out during the pause. Before, the
// held bytes went out at the pause, the secret's first part among them,
// and the rest, no longer whole, after it: the sandbox had the key.
func TestMaskBodyPauseSplitsNoSecret(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	set := secretSet(secret)
	for cut := 1; cut < len(secret); cut += 5 {
		pr, pw := io.Pipe()
		body := set.MaskBody(pr)
		got := reads(body)
		go pw.Write([]byte(`{"key": "` + secret[:cut]))
		quiet := collect(got, 10*maskIdle)
		go func() {
			pw.Write([]byte(secret[cut:] + `"}`))
			pw.Close()
		}()
		all := quiet + collect(got, 5*time.Second)
		if quiet != `{"key": "` || all != `{"key": "<0>"}` {
			t.Errorf("cut after %d bytes: %q during the pause, %q in all; want the placeholder whole", cut, quiet, all)
		}
		body.Close()
	}
}

// emptyReader never makes progress.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }
func (emptyReader) Close() error             { return nil }

func TestMaskBodyNoProgress(t *testing.T) {
	_, err := secretSet("secret99").MaskBody(emptyReader{}).Read(make([]byte, 8))
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

// checkGuard checks the body guard for a set of refused needles: the read
// fails exactly when a needle occurs, and nothing from the leftmost
// occurrence on is ever handed out.
func checkGuard(t *testing.T, needles []string, input string, srcSizes, readSizes []int) {
	t.Helper()
	var nb [][]byte
	for _, n := range needles {
		nb = append(nb, []byte(n))
	}
	errFound := errors.New("found")
	var found []int
	r := newStreamReader(&chunkReader{data: []byte(input), sizes: srcSizes}, newMatcher(nb), func(dst []byte, k int) ([]byte, error) {
		found = append(found, k)
		return dst, errFound
	})
	got, err := readInChunks(r, readSizes)
	first := -1
	for _, n := range needles {
		if i := strings.Index(input, n); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		if err != nil || string(got) != input {
			t.Fatalf("needles %q, input %q: got %q, %v; want it unchanged", needles, input, got, err)
		}
		return
	}
	if !errors.Is(err, errFound) || len(found) != 1 {
		t.Fatalf("needles %q, input %q: err %v after %d matches; want one refusal", needles, input, err, len(found))
	}
	if string(got) != input[:first] {
		t.Fatalf("needles %q, input %q: handed out %q before refusing, want %q", needles, input, got, input[:first])
	}
	if !strings.HasPrefix(input[first:], needles[found[0]]) {
		t.Fatalf("needles %q, input %q: refused needle %q, which is not at %d", needles, input, needles[found[0]], first)
	}
}

func TestGuardProperty(t *testing.T) {
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 3))
		needles := randomNeedles(rng, "abc")
		input := randomString(rng, "abcd", rng.IntN(80))
		checkGuard(t, needles, input, randomChunks(rng, len(input)), randomChunks(rng, 1+rng.IntN(20)))
	}
}

func TestMaskBytes(t *testing.T) {
	s := secretSet("npm_secret_token", "gh_token_123")
	in := "//registry.npmjs.org/:_authToken=npm_secret_token\n# gh_token_123gh_token_12\n"
	want := "//registry.npmjs.org/:_authToken=<0>\n# <1>gh_token_12\n"
	if got := string(s.MaskBytes([]byte(in))); got != want {
		t.Errorf("MaskBytes = %q, want %q", got, want)
	}
	if got := s.MaskString("x gh_token_123"); got != "x <1>" {
		t.Errorf("MaskString = %q", got)
	}
	var nilSet *Set
	if got := string(nilSet.MaskBytes([]byte(in))); got != in {
		t.Errorf("nil set MaskBytes = %q, want unchanged", got)
	}
}

func FuzzMaskWriter(f *testing.F) {
	f.Add("sk-abc", "sk-abcdef", []byte("xx sk-abcdef sk-abc sk-ab"), []byte{0})
	f.Add("aa", "aaa", []byte("aaaaaaa"), []byte{0, 1, 2})
	f.Add("token", "", []byte("tok"), []byte{3})
	f.Fuzz(func(t *testing.T, a, b string, data, chunkSeed []byte) {
		secrets := fuzzNeedles(a, b)
		checkMaskWriter(t, secrets, string(data), chunksFrom(chunkSeed, len(data)))
	})
}

func FuzzReplaceReader(f *testing.F) {
	f.Add("secret", "secretive", []byte("a secretive secret secre"), []byte{0}, []byte{5})
	f.Add("ab", "ba", []byte("abababa"), []byte{1, 2}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b string, data, srcSeed, readSeed []byte) {
		secrets := fuzzNeedles(a, b)
		checkMaskBody(t, secrets, string(data), chunksFrom(srcSeed, len(data)), chunksFrom(readSeed, 64))
	})
}

func FuzzDetector(f *testing.F) {
	f.Add("cordon123", "real-secret", []byte("body with real-secr and cordon12"), []byte{0}, []byte{3})
	f.Add("xy", "yx", []byte("yyyxy"), []byte{1}, []byte{1})
	f.Fuzz(func(t *testing.T, a, b string, data, srcSeed, readSeed []byte) {
		needles := fuzzNeedles(a, b)
		checkGuard(t, needles, string(data), chunksFrom(srcSeed, len(data)), chunksFrom(readSeed, 64))
	})
}

// fuzzNeedles keeps the non-empty, distinct needles among a and b, capped
// in length to keep each case fast.
func fuzzNeedles(a, b string) []string {
	var needles []string
	for _, n := range []string{a, b} {
		n = n[:min(len(n), 64)]
		if n != "" && !slices.Contains(needles, n) {
			needles = append(needles, n)
		}
	}
	return needles
}

// readWithin reads r until it has n bytes or fails, and says whether that
// happened within d; a read still waiting then is left to its goroutine.
func readWithin(r io.Reader, n int, d time.Duration) (string, bool) {
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 256)
		var all []byte
		for len(all) < n {
			k, err := r.Read(buf)
			all = append(all, buf[:k]...)
			if err != nil {
				break
			}
		}
		got <- string(all)
	}()
	select {
	case b := <-got:
		return b, true
	case <-time.After(d):
		return "", false
	}
}

// endless is a source that always has more.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func (endless) Close() error { return nil }

// TestMaskBodyCloseEndsReadAhead: a masked body its reader abandons after
// a little leaves nothing running once it is closed.
func TestMaskBodyCloseEndsReadAhead(t *testing.T) {
	set := secretSet("secret99")
	before := runtime.NumGoroutine()
	for range 50 {
		body := set.MaskBody(endless{})
		body.Read(make([]byte, 10))
		body.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Fatalf("%d goroutines after 50 closed bodies, %d before", n, before)
	}
}

// TestMaskerProperty: a message fed to a Masker in any pieces comes out
// masked as the reference masks it whole, with never more than the window
// held back, and a Masker that ended a message starts the next afresh.
func TestMaskerProperty(t *testing.T) {
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 3))
		secrets := randomNeedles(rng, "ab")
		set := secretSet(secrets...)
		needles, placeholders, _ := spelt(set)
		m := set.NewMasker()
		for range 2 {
			input := randomString(rng, "abc", rng.IntN(120))
			var got []byte
			off := 0
			for _, n := range randomChunks(rng, len(input)) {
				got = m.Mask(got, []byte(input[off:off+n]))
				off += n
				if held := len(m.st.tail); held > window(set) {
					t.Fatalf("secrets %q, input %q: holds %d bytes, more than the window %d", secrets, input, held, window(set))
				}
			}
			got = m.End(got)
			if want := reference(input, needles, func(k int) string { return placeholders[k] }); string(got) != want {
				t.Fatalf("secrets %q, input %q: got %q, want %q", secrets, input, got, want)
			}
		}
	}
}

// TestMaskWindowTellsNothing: how many bytes a masking stream holds back
// depends on the secrets' lengths (which the placeholders show) and the
// basic_auth user, never on their bytes. It was the longest spelling's
// length, and a sandbox whose bytes an upstream echoes counts what comes
// before a pause in a run of letters: a key's percent-encoding is longer
// by two for each byte not unreserved ('/', '+', '='), its JSON escaping
// longer still for a '&' or a character beyond ASCII, so the box learnt
// how many of those the key holds.
func TestMaskWindowTellsNothing(t *testing.T) {
	load := func(secret, user string) *Set {
		c := policy.Credential{Name: "api", Source: policy.Source{Env: "API_REAL"}, Hosts: []string{"api.example"}, Env: "API_KEY"}
		if user != "" {
			c.BasicAuth = user
		} else {
			c.Header = "X-Api-Key: {}"
		}
		return loadOne(t, c, secret)
	}
	letters := bytes.Repeat([]byte("a"), 4096)
	for _, tc := range []struct{ name, plain, odd, user string }{
		{"header", "abcdefgh/12345678_xyz", "ab/d+fgh=1&3<5\u00e96\U0001F600", ""},
		{"basic_auth", "abcdefgh/12345678_xyz", "////////////////////!", "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.plain) != len(tc.odd) {
				t.Fatalf("secrets of %d and %d bytes", len(tc.plain), len(tc.odd))
			}
			var decided []int
			for _, secret := range []string{tc.plain, tc.odd} {
				set := load(secret, tc.user)
				decided = append(decided, len(set.NewMasker().Mask(nil, letters)))
				body := set.MaskBody(io.NopCloser(&chunkReader{data: letters, sizes: []int{len(letters)}}))
				first := make([]byte, len(letters))
				n, _ := body.Read(first)
				decided = append(decided, n)
				body.Close()
			}
			if decided[0] != decided[2] || decided[1] != decided[3] {
				t.Errorf("of %d letters, a Masker and a body hand out %d and %d for the key %q, %d and %d for %q of the same length",
					len(letters), decided[0], decided[1], tc.plain, decided[2], decided[3], tc.odd)
			}
		})
	}
	// A key of letters, digits and -._~, as most API keys are, is held
	// back as before, one byte less than itself: that its spellings hold
	// no '%' shows anyway.
	if plain := "sk-ant-api03_0123456789.abc~def"; window(load(plain, "")) != len(plain)-1 {
		t.Errorf("the key %q: window %d, want %d", plain, window(load(plain, "")), len(plain)-1)
	}
	// Whatever a key holds, the window is its bound, which covers its
	// longest spelling.
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []rune("aZ09-._~:/+=&<>\"%; \u00e9\u20ac\U0001F600")
	for range propertySeeds {
		var b strings.Builder
		for range 8 + rng.IntN(40) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		for _, user := range []string{"", "bob"} {
			set := load(b.String(), user)
			if want := set.window(); set.secrets.window != want || set.secrets.longest-1 > want {
				t.Fatalf("key %q, user %q: window %d, longest needle %d, want the window %d", b.String(), user, set.secrets.window, set.secrets.longest, want)
			}
		}
	}
}
