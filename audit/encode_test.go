package audit

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/internal/termtext"
)

// clipped is r as appendJSON writes it: every string clipped to
// MaxFieldBytes, and the command's words together.
func clipped(r Record) Record {
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString(clip(f.String(), MaxFieldBytes))
		}
	}
	r.Command = clipWords(r.Command)
	return r
}

// sameAsMarshal fails unless appendJSON and encoding/json agree on r, its
// strings clipped and what a terminal could act on escaped
// (EscapeUnprintable), the line holds no such character raw and decodes
// as Marshal's does, and it is well below MaxLineBytes.
func sameAsMarshal(t *testing.T, r Record) {
	t.Helper()
	marshalled, err := json.Marshal(clipped(r))
	if err != nil {
		t.Fatal(err)
	}
	want := EscapeUnprintable(marshalled)
	got := r.appendJSON(nil)
	if string(got) != string(want) {
		t.Fatalf("appendJSON:\n%s\nencoding/json, escaped:\n%s", got, want)
	}
	for _, c := range string(got) {
		if c == 0x7f || c >= utf8.RuneSelf && !termtext.Shows(c) {
			t.Fatalf("appendJSON left %U raw: %s", c, got)
		}
	}
	var fromGot, fromMarshal Record
	if err := json.Unmarshal(got, &fromGot); err != nil {
		t.Fatalf("appendJSON wrote no JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(marshalled, &fromMarshal); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromGot, fromMarshal) {
		t.Fatalf("appendJSON's line decodes to\n%+v\nencoding/json's to\n%+v", fromGot, fromMarshal)
	}
	if len(got) >= MaxLineBytes/2 {
		t.Fatalf("appendJSON wrote %d bytes, want fewer than %d", len(got), MaxLineBytes/2)
	}
}

func TestAppendJSONMatchesMarshal(t *testing.T) {
	code, zero := 3, 0
	at := time.Date(2026, 11, 29, 12, 9, 43, 565263816, time.UTC)
	for _, r := range []Record{
		{},
		{Time: at, Session: "s", Type: TypeDecision},
		{Time: at.Truncate(time.Second), Session: "fa42", Type: TypeDecision, Kind: KindConnect, ID: 7, Client: "127.0.0.1:4", Host: "example.com",
			Port: 443, Addr: "93.184.216.34:443", Decision: Deny, Reason: "not_allowlisted", Detail: `say "why" <b>&amp;</b> \ ok`, Rule: "*.x"},
		{Time: at, Type: TypeClose, Method: "GET", Path: "/a\u2028b\u2029c", Status: 200, BytesUp: 1 << 40, BytesDown: -1, DurationMS: 12, Credential: "k"},
		{Time: at, Type: TypeLaunch, Command: []string{"sh", "-c", "echo\t\"hi\"\n\x00\x1f\x7f"}, Workdir: "/w", Network: "off"},
		{Time: at, Type: TypeExit, Command: []string{}, ExitCode: &code, Signal: "SIGTERM", Outcome: "completed"},
		{Time: at, Type: TypeExit, ExitCode: &zero},
		{Time: at, Detail: "bad \xff\xfe utf-8 \xe2\x80 cut, then ü, 日本, 🙂", Host: "\b\f\r"},
		// What a terminal would act on: C1 controls (CSI, OSC, ST), a bidi
		// override, a zero-width space, a non-breaking space, a tag
		// character beyond the BMP, a private-use code point.
		{Time: at, Type: TypeDecision, Method: "GET", Path: "/\u009b2K\u009d52;c;eA==\u009c\u202egnp.\u200bx\u00a0\U000e0041\ue000"},
		// What shows as nothing: a Hangul filler, a variation selector.
		{Time: at, Type: TypeDecision, Host: "github.com\u3164", Path: "/a\ufe0f"},
		{Time: at.In(time.FixedZone("x", 3600)), Session: "zone"},
		{Time: at, Type: TypeDecision, Host: strings.Repeat("h", 900<<10), Path: strings.Repeat("<", 1<<20), Detail: strings.Repeat("日", MaxFieldBytes)},
		{Time: at, Type: TypeLaunch, Command: []string{"sh", "-c", strings.Repeat("\x00", 1<<20)}, Workdir: strings.Repeat("/w", MaxFieldBytes)},
	} {
		sameAsMarshal(t, r)
	}
}

// FuzzAppendJSON: whatever a record holds, appendJSON writes what
// encoding/json makes of it clipped, well below MaxLineBytes; rep repeats
// the path and the command's words, to make them long.
func FuzzAppendJSON(f *testing.F) {
	f.Add("example.com", "detail \"<&>\" \u2028", "/p", "sh", int64(443), uint64(1), true, uint16(0))
	f.Add("", "", "", "", int64(0), uint64(0), false, uint16(0))
	f.Add("\xff", "\x00\x1f\x7f", "\xe2\x80\xa8", "日本", int64(-5), uint64(1<<63), true, uint16(1))
	f.Add("<", "\x01", "%3C<", "", int64(1), uint64(1), false, uint16(5000))
	f.Fuzz(func(t *testing.T, host, detail, path, arg string, n int64, id uint64, exit bool, rep uint16) {
		times := int(rep)%(2*MaxFieldBytes) + 1
		r := Record{Time: time.Unix(0, n).UTC(), Session: arg, Type: Type(path), Kind: Kind(host), ID: id, Host: host, Port: int(n),
			Detail: detail, Path: strings.Repeat(path, times), BytesUp: n, Command: slices.Repeat([]string{arg, detail}, times), Outcome: host}
		if exit {
			code := int(n)
			r.ExitCode = &code
		}
		sameAsMarshal(t, r)
	})
}

func TestClip(t *testing.T) {
	for _, tt := range []struct {
		name, s string
		n       int
		want    string
	}{
		{"short", "abc", 40, "abc"},
		{"at the bound", strings.Repeat("a", 40), 40, strings.Repeat("a", 40)},
		{"over", strings.Repeat("a", 100), 40, strings.Repeat("a", 13) + "…[clipped from 100 bytes]"},
		{"through a character", strings.Repeat("a", 12) + "日" + strings.Repeat("b", 100), 40, strings.Repeat("a", 12) + "…[clipped from 115 bytes]"},
		{"through a 4-byte character", strings.Repeat("a", 10) + "🙂" + strings.Repeat("b", 101), 40, strings.Repeat("a", 10) + "…[clipped from 115 bytes]"},
		{"invalid UTF-8, backed off 3 at most", strings.Repeat("\x80", 100), 40, strings.Repeat("\x80", 10) + "…[clipped from 100 bytes]"},
		{"no room but for the mark", strings.Repeat("a", 100), 5, "…[clipped from 100 bytes]"},
		{"nothing left", "a", 0, "…[clipped from 1 bytes]"},
		{"empty", "", 0, ""},
	} {
		got := clip(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("%s: clip(%d bytes, %d) = %q, want %q", tt.name, len(tt.s), tt.n, got, tt.want)
		}
		if len(got) > tt.n && got != tt.s && !strings.HasPrefix(got, "…") {
			t.Errorf("%s: clip(%d bytes, %d) is %d bytes", tt.name, len(tt.s), tt.n, len(got))
		}
	}
}

func TestClipWords(t *testing.T) {
	huge := strings.Repeat("x", 10000)
	for _, tt := range []struct {
		name        string
		words, want []string
	}{
		{"none", nil, nil},
		{"short", []string{"sh", "-c", "echo hi"}, []string{"sh", "-c", "echo hi"}},
		{"one word at the bound", []string{strings.Repeat("x", MaxFieldBytes)}, []string{strings.Repeat("x", MaxFieldBytes)}},
		// "sh" and "-c" take 3 bytes each.
		{"a long word", []string{"sh", "-c", huge, "after"},
			[]string{"sh", "-c", clip(huge, MaxFieldBytes-6), "…[clipped: 1 more words]"}},
		// 1365 words of 3 bytes leave 1, too few for the next.
		{"many words", slices.Repeat([]string{"ab"}, 5000),
			append(slices.Repeat([]string{"ab"}, 1365), "…[clipped from 2 bytes]", "…[clipped: 3634 more words]")},
		{"many empty words", slices.Repeat([]string{""}, 5000),
			append(slices.Repeat([]string{""}, MaxFieldBytes+1), "…[clipped: 903 more words]")},
	} {
		if got := clipWords(tt.words); !slices.Equal(got, tt.want) {
			t.Errorf("%s: clipWords gave %d words, want %d", tt.name, len(got), len(tt.want))
		}
	}
}

// TestLineBounded: a record whose every string is huge and of the
// characters escaping makes longest still makes a line well below
// MaxLineBytes, which the Reader reads back; it would be skipped were the
// fields not clipped.
func TestLineBounded(t *testing.T) {
	const huge = 1 << 20
	for _, fill := range []string{"<", "\x01", "\xff", "\u2028"} {
		for _, command := range [][]string{
			{strings.Repeat(fill, huge)},
			slices.Repeat([]string{fill}, huge),
			slices.Repeat([]string{""}, huge),
		} {
			r := Record{Time: t0, Command: command}
			v := reflect.ValueOf(&r).Elem()
			for i := range v.NumField() {
				if f := v.Field(i); f.Kind() == reflect.String {
					f.SetString(strings.Repeat(fill, huge))
				}
			}
			line := r.appendJSON(nil)
			if len(line) >= MaxLineBytes/2 {
				t.Fatalf("%q, %d words: the line is %d bytes, want fewer than %d", fill, len(command), len(line), MaxLineBytes/2)
			}
			recs, _, warns, _ := readAll(t, string(line)+"\n")
			if len(recs) != 1 || len(warns) != 0 {
				t.Fatalf("%q, %d words: read %d records, warnings %v; want the one", fill, len(command), len(recs), warns)
			}
			mark := "…[clipped from " + strconv.Itoa(len(fill)*huge) + " bytes]"
			got := recs[0]
			if last := got.Command[len(got.Command)-1]; !strings.HasSuffix(got.Path, mark) || !strings.HasSuffix(got.Detail, mark) || !strings.Contains(last, "…[clipped") {
				t.Fatalf("%q, %d words: the path, detail or command's last word has no clip mark", fill, len(command))
			}
		}
	}
}

func BenchmarkRecordEncode(b *testing.B) {
	r := Record{Time: time.Now().UTC(), Session: "fa42c389b64f4a44", Type: TypeDecision, Kind: KindConnect, ID: 12,
		Client: "127.0.0.1:47556", Host: "api.example.com", Port: 443, Addr: "10.0.0.1:443", Decision: Allow,
		Reason: "allowlisted", Rule: "*.example.com", Method: "GET", Path: "/v1/things"}
	b.Run("appendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = r.appendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestEscapeUnprintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"path":"/a b","detail":"café 日本 🙂 \u009b"}`, `{"path":"/a b","detail":"café 日本 🙂 \u009b"}`},
		{"{\"path\":\"/\u009b2K\u009d0;t\u009c\"}", `{"path":"/\u009b2K\u009d0;t\u009c"}`},
		{"{\"host\":\"evil\u202emoc.\u200bx\u00a0\U000e0041\"}", `{"host":"evil\u202emoc.\u200bx\u00a0\udb40\udc41"}`},
		{"{\"detail\":\"\x9b2J\x7f \xff\"}", `{"detail":"\ufffd2J\u007f \ufffd"}`},
		{"{\"host\":\"github.com\u3164\"}", `{"host":"github.com\u3164"}`},
	} {
		got := EscapeUnprintable([]byte(c.in))
		if string(got) != c.want {
			t.Errorf("EscapeUnprintable(%q) = %q, want %q", c.in, got, c.want)
		}
		var in, out map[string]string
		if err := json.Unmarshal([]byte(c.in), &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &out); err != nil || !reflect.DeepEqual(in, out) {
			t.Errorf("EscapeUnprintable(%q) decodes to %q (%v), the line to %q", c.in, out, err, in)
		}
	}
	plain := []byte(`{"host":"example.com"}`)
	if got := EscapeUnprintable(plain); &got[0] != &plain[0] {
		t.Errorf("a line with nothing to escape was copied")
	}
}
