package credinject

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// benchInput is 4 MiB of JSON-like text with a real secret every 64 KiB.
func benchInput(secret string) []byte {
	rng := rand.New(rand.NewPCG(1, 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyz      {}\":,0123456789-_sk"
	b := make([]byte, 0, 4<<20)
	for len(b) < 4<<20 {
		if len(b)%(64<<10) < 64 && len(b) > 64 {
			b = append(b, secret...)
		}
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return b
}

// onlyReader hides a reader's WriterTo, so that io.Copy moves the data in
// buffer-sized chunks as it does from a network connection or a pipe.
type onlyReader struct{ io.Reader }

// BenchmarkCopyBaseline is plain io.Copy, for comparing the throughput of
// the streaming replacements below.
func BenchmarkCopyBaseline(b *testing.B) {
	in := benchInput(openaiSecret)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := io.Copy(io.Discard, onlyReader{bytes.NewReader(in)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMaskBody(b *testing.B) {
	set := applySet(b)
	in := benchInput(openaiSecret)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := io.Copy(io.Discard, set.MaskBody(io.NopCloser(bytes.NewReader(in)))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMaskWriter(b *testing.B) {
	set := applySet(b)
	in := benchInput(openaiSecret)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		mw := NewMaskWriter(io.Discard, set)
		if _, err := io.Copy(mw, onlyReader{bytes.NewReader(in)}); err != nil {
			b.Fatal(err)
		}
		if err := mw.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaskWriterSmallWrites is interactive output: 64-byte writes.
func BenchmarkMaskWriterSmallWrites(b *testing.B) {
	set := applySet(b)
	in := benchInput(openaiSecret)[:1<<20]
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		mw := NewMaskWriter(io.Discard, set)
		for off := 0; off < len(in); off += 64 {
			if _, err := mw.Write(in[off:min(off+64, len(in))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBodyGuard(b *testing.B) {
	set := applySet(b)
	in := benchInput("no secret here")
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		g := set.GuardBody(io.NopCloser(bytes.NewReader(in)), "api.openai.com", 443)
		if _, err := io.Copy(io.Discard, g); err != nil {
			b.Fatal(err)
		}
	}
}
