package survive

import (
	"strings"
	"testing"
)

func TestRecover(t *testing.T) {
	read := func(fail bool) (n int, err error) {
		defer Recover(&err, "reading a test")
		if fail {
			var b []byte
			_ = b[3] // index out of range
		}
		return 7, nil
	}
	if n, err := read(false); n != 7 || err != nil {
		t.Fatalf("without a panic: %d, %v", n, err)
	}
	n, err := read(true)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "cordon failed reading a test: runtime error: index out of range") {
		t.Fatalf("after a panic: %d, %v; want 0 and the panic as the error", n, err)
	}
}
