package wsframe

import (
	"bytes"
	"testing"
)

// TestAppend: the three length forms, masked and not, byte for byte as
// RFC 6455 lays them out.
func TestAppend(t *testing.T) {
	key := [4]byte{1, 2, 3, 4}
	long := bytes.Repeat([]byte{'x'}, 1<<16)
	for _, tc := range []struct {
		name    string
		payload []byte
		key     *[4]byte
		head    []byte
	}{
		{"short", []byte("hi"), nil, []byte{0x81, 2}},
		{"short, masked", []byte("hi"), &key, []byte{0x81, 0x80 | 2, 1, 2, 3, 4}},
		{"126 bytes", bytes.Repeat([]byte{'x'}, 126), nil, []byte{0x81, 126, 0, 126}},
		{"64 KiB", long, nil, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
		{"64 KiB, masked", long, &key, []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4}},
	} {
		got := Append([]byte("before"), 0x81, tc.payload, tc.key)
		want := append([]byte("before"), tc.head...)
		if !bytes.HasPrefix(got, want) || len(got) != len(want)+len(tc.payload) {
			t.Errorf("%s: frame starts %x (%d bytes), want %x and %d payload bytes", tc.name, got[:min(len(got), len(want))], len(got), want, len(tc.payload))
			continue
		}
		body := got[len(want):]
		for i := range body {
			if tc.key != nil {
				body[i] ^= tc.key[i%4]
			}
		}
		if !bytes.Equal(body, tc.payload) {
			t.Errorf("%s: payload does not come back", tc.name)
		}
	}
}
