package audit

import (
	"encoding/json"
	"testing"
	"time"
)

// sameAsMarshal fails unless appendJSON and encoding/json agree on r.
func sameAsMarshal(t *testing.T, r Record) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.appendJSON(nil); string(got) != string(want) {
		t.Fatalf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
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
		{Time: at.In(time.FixedZone("x", 3600)), Session: "zone"},
	} {
		sameAsMarshal(t, r)
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("example.com", "detail \"<&>\" \u2028", "/p", "sh", int64(443), uint64(1), true)
	f.Add("", "", "", "", int64(0), uint64(0), false)
	f.Add("\xff", "\x00\x1f\x7f", "\xe2\x80\xa8", "日本", int64(-5), uint64(1<<63), true)
	f.Fuzz(func(t *testing.T, host, detail, path, arg string, n int64, id uint64, exit bool) {
		r := Record{Time: time.Unix(0, n).UTC(), Session: arg, Type: Type(path), Kind: Kind(host), ID: id, Host: host, Port: int(n),
			Detail: detail, Path: path, BytesUp: n, Command: []string{arg, detail}, Outcome: host}
		if exit {
			code := int(n)
			r.ExitCode = &code
		}
		sameAsMarshal(t, r)
	})
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
