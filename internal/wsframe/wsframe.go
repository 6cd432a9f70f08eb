// Package wsframe writes WebSocket frames (RFC 6455, section 5.2).
package wsframe

import "encoding/binary"

// Append appends a frame of payload to dst, first being its FIN and RSV
// bits and opcode. With key set, the payload is masked with it, as a
// client sends a frame; without, it goes as it is, as a server sends one.
func Append(dst []byte, first byte, payload []byte, key *[4]byte) []byte {
	var maskBit byte
	if key != nil {
		maskBit = 0x80
	}
	dst = append(dst, first)
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, maskBit|byte(n))
	case n < 1<<16:
		dst = binary.BigEndian.AppendUint16(append(dst, maskBit|126), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint64(append(dst, maskBit|127), uint64(n))
	}
	if key == nil {
		return append(dst, payload...)
	}
	dst = append(dst, key[:]...)
	for i, b := range payload {
		dst = append(dst, b^key[i%4])
	}
	return dst
}
