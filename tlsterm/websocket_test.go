package tlsterm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/echotest"
	"github.com/cordon-sandbox/cordon/policy"
)

// TestMaskSwitchedWebSocket: a WebSocket's messages reach the client with
// the secret masked however the server frames them: split between
// fragments (one byte a frame, too), with control frames between, in a
// control frame itself, in a frame longer than one read, and with a
// placeholder longer than its secret (the frames are made anew, so their
// lengths hold). Before, the frames' bytes were masked as they passed,
// and a secret split between two frames reached the client whole.
func TestMaskSwitchedWebSocket(t *testing.T) {
	const secret = "sk-short-secret" // its placeholder is longer
	creds, ph := echotest.Creds(t, secret)
	frame := echotest.WebSocketFrame
	oneByteFrames := func(s string) []byte {
		var b []byte
		for i := range len(s) {
			first := byte(0x0)
			if i == 0 {
				first = 0x1
			}
			if i == len(s)-1 {
				first |= 0x80
			}
			b = append(b, frame(first, []byte(s[i:i+1]))...)
		}
		return b
	}
	long := strings.Repeat("x", 3*maxRecord)
	for _, tc := range []struct {
		name     string
		frames   []byte
		messages []string
		control  []string
	}{
		{"split between fragments, a ping between", bytes.Join([][]byte{
			frame(0x01, []byte("key sk-sho")), frame(0x89, []byte("ping")), frame(0x00, []byte("rt-sec")), frame(0x80, []byte("ret."))}, nil),
			[]string{"key " + ph + "."}, []string{"ping"}},
		{"one byte a frame", oneByteFrames("a " + secret + " b"), []string{"a " + ph + " b"}, nil},
		{"in a control frame", append(frame(0x89, []byte("ping "+secret)), frame(0x88, []byte("\x03\xe8bye "+secret))...),
			nil, []string{"ping " + ph, "\x03\xe8bye " + ph}},
		{"across messages and a long frame", bytes.Join([][]byte{
			frame(0x82, []byte(secret)), frame(0x01, []byte(long+secret[:4])), frame(0x80, []byte(secret[4:]+long))}, nil),
			[]string{ph, long + ph + long}, nil},
		{"empty frames", bytes.Join([][]byte{frame(0x01, nil), frame(0x00, []byte(secret)), frame(0x80, nil), frame(0x81, nil)}, nil),
			[]string{ph, ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := io.ReadAll(MaskSwitched(creds, "WebSocket", io.NopCloser(bytes.NewReader(tc.frames))))
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(bytes.NewReader(out))
			var messages, control []string
			for {
				msg, ctl, err := echotest.ReadWebSocketMessage(br)
				control = append(control, ctl...)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%v, in %q", err, out)
				}
				messages = append(messages, msg)
			}
			if strings.Join(messages, "|") != strings.Join(tc.messages, "|") || strings.Join(control, "|") != strings.Join(tc.control, "|") {
				t.Fatalf("messages %q, control frames %q; want %q, %q", messages, control, tc.messages, tc.control)
			}
		})
	}
}

// TestMaskSwitchedWebSocketRefuses: frames masking cannot read cut the
// connection with a WebSocketError (logged unchecked_encoding): a reserved
// bit set (a compressed message, no extension negotiated), a masked frame,
// an unknown opcode, frames out of order, an oversized control frame.
// What a message held back then goes nowhere; a connection cut in the
// middle of a message ends unexpectedly, its held-back bytes dropped.
func TestMaskSwitchedWebSocketRefuses(t *testing.T) {
	const secret = "s3cr3t-value-for-the-websocket-tests-0123"
	creds, _ := echotest.Creds(t, secret)
	frame := echotest.WebSocketFrame
	for _, tc := range []struct {
		name   string
		frames []byte
		want   error
	}{
		{"reserved bit", echotest.WebSocketText("key "+secret, true), &WebSocketError{}},
		{"masked", []byte{0x81, 0x84, 1, 2, 3, 4, 'a', 'b', 'c', 'd'}, &WebSocketError{}},
		{"unknown opcode", frame(0x83, []byte("x")), &WebSocketError{}},
		{"continuation first", frame(0x80, []byte("x")), &WebSocketError{}},
		{"message in a message", append(frame(0x01, []byte("x")), frame(0x81, []byte("y"))...), &WebSocketError{}},
		{"fragmented control", frame(0x09, []byte("x")), &WebSocketError{}},
		{"oversized control", frame(0x89, bytes.Repeat([]byte("x"), 126)), &WebSocketError{}},
		{"cut in a message", frame(0x01, []byte("key "+secret[:20])), io.ErrUnexpectedEOF},
		{"cut in a frame", frame(0x81, []byte("key "+secret))[:30], io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := MaskSwitched(creds, "websocket", io.NopCloser(bytes.NewReader(tc.frames)))
			out, err := io.ReadAll(m)
			var we *WebSocketError
			if _, isWS := tc.want.(*WebSocketError); isWS && !errors.As(err, &we) || !isWS && !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %T %v", err, tc.want, tc.want)
			}
			if d, ok := UncheckedEncoding(wsRefusal(m)); (we != nil) != ok || ok && d.Reason != ReasonUncheckedEncoding {
				t.Fatalf("refusal %+v %v", d, ok)
			}
			if bytes.Contains(out, []byte(secret[:20])) {
				t.Fatalf("handed out %q", out)
			}
		})
	}
}

// TestWebSocketFragmentsMasked: through the terminated HTTP/1.1 path, a
// WebSocket message whose secret the server splits between two frames
// (a ping between) reaches the client masked; a frame compressed though
// nothing was negotiated cuts the connection, and its close line says
// why.
func TestWebSocketFragmentsMasked(t *testing.T) {
	const secret = "s3cr3t-value-for-the-websocket-tests-0123"
	creds, ph := echotest.Creds(t, secret)
	r := newRig(t, echotest.Origin(nil), rigOptions{creds: creds})
	c, br := r.dial(t, false)
	io.WriteString(c, echotest.WebSocketRequest("/websocket?fragmented", r.authority(), "Authorization: Bearer "+ph))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	msg, control, err := echotest.ReadWebSocketMessage(br)
	if msg != "key Bearer "+ph || len(control) != 1 || control[0] != "Bearer "+ph || err != nil {
		t.Fatalf("message %q, control frames %q, %v; want the placeholder", msg, control, err)
	}
	c.Close()

	c, br = r.dial(t, false)
	io.WriteString(c, echotest.WebSocketRequest("/websocket?compressed", r.authority(), "Authorization: Bearer "+ph))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
		t.Fatalf("after a compressed frame: %q %v; want the connection cut", rest, err)
	}
	cut := false
	for _, rec := range r.waitRecords(t, audit.TypeClose, 2) {
		cut = cut || rec.Path == "/websocket" && rec.Reason == string(ReasonUncheckedEncoding) && strings.Contains(rec.Detail, "reserved bit")
	}
	if !cut {
		t.Fatal("no close line says the WebSocket was cut for a frame it could not check")
	}
}

// twoCreds loads "api", bound to 127.0.0.1 on any port, and "other",
// bound elsewhere, and returns them with their placeholders by name.
func twoCreds(t *testing.T, apiSecret, otherSecret string) (*credinject.Set, map[string]string) {
	t.Helper()
	creds, err := credinject.Load([]policy.Credential{
		{Name: "api", Source: policy.Source{Env: "API_SECRET"}, Hosts: []string{"127.0.0.1:*"}, Header: "Authorization: Bearer {}", Env: "API_KEY"},
		{Name: "other", Source: policy.Source{Env: "OTHER_SECRET"}, Hosts: []string{"elsewhere.test"}, Header: "X-Key: {}", Env: "OTHER_KEY"},
	}, []string{"api", "other"}, credinject.Options{Env: func(name string) string {
		return map[string]string{"API_SECRET": apiSecret, "OTHER_SECRET": otherSecret}[name]
	}})
	if err != nil {
		t.Fatal(err)
	}
	ph := map[string]string{}
	for _, kv := range creds.Env() {
		name, v, _ := strings.Cut(kv, "=")
		ph[map[string]string{"API_KEY": "api", "OTHER_KEY": "other"}[name]] = v
	}
	return creds, ph
}

// TestGuardSwitchedWebSocket: a client's WebSocket frames pass on as they
// are, their payloads checked unmasked: another host's placeholder, or a
// real secret, is refused in a data frame (split between fragments with a
// ping between, too), in a control frame, and in a frame the client left
// unmasked; a frame with a reserved bit set cannot be checked and is
// refused as unchecked. Before, the guard read the masked bytes and let
// every placeholder through.
func TestGuardSwitchedWebSocket(t *testing.T) {
	const secret = "s3cr3t-value-for-the-guard-tests"
	creds, ph := twoCreds(t, secret, "another-secret-value")
	key := [4]byte{0x5a, 0x01, 0xc3, 0x77}
	frame := func(first byte, payload string) []byte {
		return echotest.WebSocketClientFrame(first, []byte(payload), key)
	}
	other := ph["other"]
	for _, tc := range []struct {
		name   string
		frames []byte
		want   policy.Reason
	}{
		{"passed on as they are", bytes.Join([][]byte{frame(0x81, "hello"), frame(0x89, "p"), frame(0x81, "key "+ph["api"]),
			frame(0x02, strings.Repeat("x", 70000)), frame(0x80, "end")}, nil), ""},
		{"another host's placeholder", frame(0x81, "key "+other), credinject.ReasonMisroute},
		{"split between fragments, a ping between", bytes.Join([][]byte{
			frame(0x01, "key "+other[:9]), frame(0x89, "ping"), frame(0x80, other[9:])}, nil), credinject.ReasonMisroute},
		{"in a ping", frame(0x89, other), credinject.ReasonMisroute},
		{"a real secret in a close frame", frame(0x88, "\x03\xe8"+secret), credinject.ReasonSecretLeak},
		{"unmasked", echotest.WebSocketFrame(0x81, []byte("key "+other)), credinject.ReasonMisroute},
		{"reserved bit", frame(0xc1, "compressed"), ReasonUncheckedEncoding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := GuardSwitched(creds, "websocket", io.NopCloser(bytes.NewReader(tc.frames)), "127.0.0.1", 443)
			out, err := io.ReadAll(g)
			if tc.want == "" {
				if err != nil || g.Err() != nil || !bytes.Equal(out, tc.frames) {
					t.Fatalf("%v %v; want the frames passed on unchanged", err, g.Err())
				}
				return
			}
			if err == nil || g.Err() == nil {
				t.Fatalf("passed on %d of %d bytes, no refusal", len(out), len(tc.frames))
			}
			if d := Failure(g.Err(), creds); d.Reason != tc.want || strings.Contains(d.Detail, other) || strings.Contains(d.Detail, secret) {
				t.Fatalf("refusal %+v, want %s", d, tc.want)
			}
		})
	}
}

// TestWebSocketGuardedThroughTheTunnel: through the terminated HTTP/1.1
// path, another host's placeholder in a masked WebSocket frame never
// reaches the origin (the frame's header may): the connection is cut,
// and the request's close line says credential_misroute.
func TestWebSocketGuardedThroughTheTunnel(t *testing.T) {
	creds, ph := twoCreds(t, "s3cr3t-value-for-the-guard-tests", "another-secret-value")
	got := make(chan string, 1)
	origin := http.NewServeMux()
	origin.HandleFunc("/websocket", func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(brw)
		got <- string(b)
	})
	r := newRig(t, origin, rigOptions{creds: creds})
	c, br := r.dial(t, false)
	io.WriteString(c, echotest.WebSocketRequest("/websocket", r.authority()))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	key := [4]byte{1, 2, 3, 4}
	c.Write(echotest.WebSocketClientFrame(0x81, []byte("hello"), key))
	c.Write(echotest.WebSocketClientFrame(0x81, []byte(fmt.Sprintf("misrouted %s", ph["other"])), key))
	select {
	case b := <-got:
		// The refused frame's header may have gone, none of its payload.
		if first := echotest.WebSocketClientFrame(0x81, []byte("hello"), key); !strings.HasPrefix(b, string(first)) || len(b) > len(first)+14 {
			t.Fatalf("the origin got %q; want the first frame, and no more than the next one's header", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the origin's connection was not cut")
	}
	cut := false
	for _, rec := range r.waitRecords(t, audit.TypeClose, 1) {
		cut = cut || rec.Path == "/websocket" && rec.Reason == string(credinject.ReasonMisroute)
	}
	if !cut {
		t.Fatal("no close line says the WebSocket was cut for a misrouted placeholder")
	}
}

// FuzzMaskSwitchedWebSocket feeds an upstream's WebSocket bytes, whatever
// they are, to the masking reader: it never panics, hands out at most a
// bounded multiple of what came in, and never the secret.
func FuzzMaskSwitchedWebSocket(f *testing.F) {
	const secret = "sk-fuzz-secret-0123"
	frame := echotest.WebSocketFrame
	f.Add(bytes.Join([][]byte{frame(0x01, []byte("key sk-fuzz")), frame(0x89, []byte("ping")), frame(0x80, []byte("-secret-0123."))}, nil))
	f.Add(frame(0x88, []byte("\x03\xe8bye "+secret)))
	f.Add(append(frame(0xc1, []byte("compressed")), frame(0x81, []byte(secret))...))
	f.Add([]byte{0x81, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	creds, _ := echotest.Creds(f, secret)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := MaskSwitched(creds, "websocket", io.NopCloser(bytes.NewReader(in)))
		out, _ := io.ReadAll(io.LimitReader(r, int64(8*len(in)+1024)))
		if bytes.Contains(out, []byte(secret)) {
			t.Fatalf("the secret reached the client: %q from %q", out, in)
		}
		if len(out) > 4*len(in)+64 {
			t.Fatalf("%d bytes out of %d in", len(out), len(in))
		}
	})
}

// FuzzGuardSwitchedWebSocket feeds a client's WebSocket bytes, whatever
// they are, to the guard: it never panics, and passes on only what came
// in, in order.
func FuzzGuardSwitchedWebSocket(f *testing.F) {
	const secret = "sk-fuzz-secret-0123"
	masked := func(first byte, key [4]byte, payload string) []byte {
		return echotest.WebSocketClientFrame(first, []byte(payload), key)
	}
	f.Add(masked(0x81, [4]byte{1, 2, 3, 4}, "hello"))
	f.Add(append(masked(0x01, [4]byte{9, 8, 7, 6}, "key sk-fuzz"), masked(0x80, [4]byte{5, 5, 5, 5}, "-secret-0123")...))
	f.Add(masked(0xc1, [4]byte{}, "compressed"))
	creds, _ := echotest.Creds(f, secret)
	f.Fuzz(func(t *testing.T, in []byte) {
		g := GuardSwitched(creds, "websocket", io.NopCloser(bytes.NewReader(in)), "127.0.0.1", 443)
		out, _ := io.ReadAll(g)
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("passed on %q, not a prefix of %q", out, in)
		}
	})
}
