package egress

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCountedBodyEnd: how a relayed body's reading ended, as its close
// line judges it: at its end (nil), by a read error (that error), or
// closed before either (errBodyCut: the relay stopped because writing to
// the client failed).
func TestCountedBodyEnd(t *testing.T) {
	broken := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name string
		body io.Reader
		read int // bytes to read before Close; -1 reads to the end
		want error
	}{
		{"read to its end", strings.NewReader("hello"), -1, nil},
		{"empty", strings.NewReader(""), -1, nil},
		{"a read error", io.MultiReader(strings.NewReader("he"), iotest.ErrReader(broken)), -1, broken},
		{"closed early", strings.NewReader("hello"), 2, errBodyCut},
		{"closed unread", strings.NewReader("hello"), 0, errBodyCut},
	} {
		var got error
		var down int64
		calls := 0
		b := newCountedBody(io.NopCloser(tc.body), func(_, d int64, end error) { got, down = end, d; calls++ })
		if tc.read < 0 {
			io.Copy(io.Discard, b)
		} else {
			io.ReadFull(b, make([]byte, tc.read))
		}
		b.Close()
		b.Close()
		if calls != 1 || !errors.Is(got, tc.want) && got != tc.want {
			t.Errorf("%s: end %v after %d calls, want %v once", tc.name, got, calls, tc.want)
		}
		if tc.read > 0 && down != int64(tc.read) {
			t.Errorf("%s: counted %d bytes, want %d", tc.name, down, tc.read)
		}
	}
}
