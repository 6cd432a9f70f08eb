package tlsterm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/policy"
)

// h2Conn opens a terminated HTTP/2 connection through r, speaks the
// client's preface and reads the server's settings.
func (r *rig) h2Conn(t *testing.T) (*tls.Conn, *http2.Framer, *http2.SettingsFrame) {
	t.Helper()
	c, fr := h2Dial(t, r.Addr, r.ClientRoots, r.Host)
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	return c, fr, sf
}

// h2Dial opens a TLS connection to addr offering h2 alone, for name
// under roots, and speaks the client's preface and settings; the
// connection closes when the test ends, and fails its reads and writes
// after 10 seconds.
func h2Dial(t *testing.T, addr string, roots *x509.CertPool, name string, settings ...http2.Setting) (*tls.Conn, *http2.Framer) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: name, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// TestHTTP2FrameSizeBounded: a terminated HTTP/2 client may send frames
// of the protocol's default size, 16 KiB, and no larger; a larger one
// ends its connection with FRAME_SIZE_ERROR. net/http advertised 1 MiB,
// and kept a buffer the size of the largest frame read for the life of
// the connection, so a box could make cordon hold 1 MiB per terminated
// connection with one frame each.
func TestHTTP2FrameSizeBounded(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), rigOptions{})
	_, fr, sf := r.h2Conn(t)
	if v, ok := sf.Value(http2.SettingMaxFrameSize); ok && v != maxFrameSize {
		t.Fatalf("the server advertises frames of %d bytes, want %d", v, maxFrameSize)
	}
	// A frame of an unknown type is read whole and ignored: at the bound,
	// the connection goes on (the PING after it is answered).
	if err := fr.WriteRawFrame(0xfa, 0, 0, make([]byte, maxFrameSize)); err != nil {
		t.Fatal(err)
	}
	fr.WritePing(false, [8]byte{1})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("a frame of %d bytes: %v, want the connection to go on", maxFrameSize, err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			break
		}
	}
	// One byte more ends the connection.
	if err := fr.WriteRawFrame(0xfa, 0, 0, make([]byte, maxFrameSize+1)); err != nil {
		t.Fatal(err)
	}
	fr.WritePing(false, [8]byte{2})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("a frame of %d bytes: the connection ended (%v) without GOAWAY FRAME_SIZE_ERROR", maxFrameSize+1, err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			t.Fatalf("a frame of %d bytes was read, and the connection goes on", maxFrameSize+1)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeFrameSize {
				t.Fatalf("GOAWAY %v, want %v", g.ErrCode, http2.ErrCodeFrameSize)
			}
			break
		}
	}
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatalf("the connection stayed open after its GOAWAY: %v", err)
	}
}

// TestClosedUpstreamsForgotten: a stream keeps only the upstream
// connections still open. A client that cancels each request in the
// middle of its response leaves that request's upstream connection
// unusable, so the next request dials anew; the stream kept every
// connection it had ever opened, with its buffers, until the client
// connection ended, which a client that keeps it busy never does.
func TestClosedUpstreamsForgotten(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, big)
	}), rigOptions{h1Only: true})
	st := &stream{t: r.T, authority: r.authority(), s: &Stream{Host: r.Host, Port: r.Port,
		Redial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", r.authority())
		}}}
	defer st.closeUpstream()
	c := &http.Client{Transport: st.newTransport(fullWindow)}
	const requests = 20
	for range requests {
		resp, err := c.Get("https://" + r.authority() + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(resp.Body, make([]byte, 1000))
		resp.Body.Close() // cancelled mid-body: its connection is closed
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st.upMu.Lock()
		n := len(st.upstreams)
		st.upMu.Unlock()
		if n <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d cancelled requests the stream holds %d upstream connections, want the open one at most", requests, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTP2NestedConnectRefused: a CONNECT on an HTTP/2 stream, to the
// tunnel's own authority, is refused and logged, and nothing reaches the
// origin. It was forwarded as an HTTP/1.1 CONNECT with the stream's DATA
// written raw after it, which the origin read as a request of its own:
// another Host, and no decision line for it.
func TestHTTP2NestedConnectRefused(t *testing.T) {
	origin := &untouchedOrigin{}
	r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
	req, err := http.NewRequest(http.MethodConnect, "https://"+r.authority(), strings.NewReader("GET /hidden HTTP/1.1\r\nHost: other.test\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.client(r.ClientRoots, true).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Cordon-Reason") != string(ReasonNestedConnect) {
		t.Fatalf("got %s %d %v %q, want HTTP/2 403 %s", resp.Proto, resp.StatusCode, resp.Header, body, ReasonNestedConnect)
	}
	d := r.waitRecords(t, audit.TypeDecision, 1)[0]
	if d.Decision != audit.Deny || d.Reason != string(ReasonNestedConnect) || d.Method != http.MethodConnect {
		t.Fatalf("decision line %+v, want a deny for the CONNECT", d)
	}
	origin.expectNone(t)
}

// TestHTTP2OpaqueURIRefused: an HTTP/2 :path holding an opaque URI
// ("https:http://other.test/x", no authority of its own) is refused and
// logged. It passed the authority check, which found no host in it, and
// went to an HTTP/1.1 upstream as written, an absolute-form target naming
// another host, which the server takes over Host. (Go's client will not
// send such a :path, so the frames are written here.)
func TestHTTP2OpaqueURIRefused(t *testing.T) {
	expectH2PathRefused(t, "https:http://other.test/x", http.StatusMisdirectedRequest, ReasonAuthorityMismatch)
}

// TestHTTP2SpaceInQueryRefused: an HTTP/2 :path whose query holds spaces
// is refused and logged. It went to an HTTP/1.1 upstream raw, in the
// request line, which the server split at them: "GET /x?a HTTP/1.0 b
// HTTP/1.1" (the path is sent escaped; the query was sent as written). So
// are other bytes no URI holds unescaped: a server splitting at any white
// space split "GET /x?a\xa0b HTTP/1.1" at the no-break space (red team,
// round 7).
func TestHTTP2SpaceInQueryRefused(t *testing.T) {
	for _, path := range []string{"/x?a HTTP/1.0 b", "/x?a\xa0b", "/x?a\x85b", "/x?a\xa0", "/x?caf\xc3\xa9"} {
		expectH2PathRefused(t, path, http.StatusBadRequest, ReasonBadRequest)
	}
}

// expectH2PathRefused sends an HTTP/2 GET for path through a rig whose
// HTTP/1.1 origin is not to be reached, and wants it answered with status
// and reason and logged as refused.
func expectH2PathRefused(t *testing.T, path string, status int, reason policy.Reason) {
	t.Helper()
	origin := &untouchedOrigin{}
	r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
	got := r.h2Request(t, r.pseudo(http.MethodGet, path)...)
	if got[":status"] != strconv.Itoa(status) || got["x-cordon-reason"] != string(reason) {
		t.Fatalf("got %v, want %d %s", got, status, reason)
	}
	if d := r.waitRecords(t, audit.TypeDecision, 1)[0]; d.Decision != audit.Deny || d.Reason != string(reason) {
		t.Fatalf("decision line %+v, want a deny", d)
	}
	origin.expectNone(t)
}

// h2Request sends a bodyless HTTP/2 request of the given header fields
// (written as frames, so any field goes as it is) through r, and returns
// its response's header fields, or ":reset" and the error code for a
// stream reset.
func (r *rig) h2Request(t *testing.T, fields ...[2]string) map[string]string {
	t.Helper()
	_, fr, _ := r.h2Conn(t)
	h2Headers(t, fr, http2.HeadersFrameParam{StreamID: 1, EndStream: true}, fields)
	got := map[string]string{}
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got[f.Name] = f.Value })
	for got[":status"] == "" {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			dec.Write(f.HeaderBlockFragment())
		case *http2.RSTStreamFrame:
			return map[string]string{":reset": f.ErrCode.String()}
		}
	}
	return got
}

// h2Headers writes a HEADERS frame of p (its stream, whether the stream
// ends) holding the given header fields, each written as it is.
func h2Headers(t *testing.T, fr *http2.Framer, p http2.HeadersFrameParam, fields [][2]string) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	p.BlockFragment, p.EndHeaders = block.Bytes(), true
	if err := fr.WriteHeaders(p); err != nil {
		t.Fatal(err)
	}
}

// pseudo is the pseudo-header fields of an HTTP/2 request for method and
// path to r's origin.
func (r *rig) pseudo(method, path string) [][2]string {
	return [][2]string{{":method", method}, {":scheme", "https"}, {":authority", r.authority()}, {":path", path}}
}

// TestHTTP2ExtendedConnectRefused: an extended CONNECT (RFC 8441, a
// WebSocket over an HTTP/2 stream: :method CONNECT with :protocol) is not
// offered, and one sent anyway never reaches the origin: net/http's server
// resets it while extended CONNECT is off (Go 1.26's default), which is
// logged as a protocol error (TestHTTP2ProtocolRefusalsLogged), and, were
// it on, the handler would refuse and log it as a nested CONNECT. Held
// here so a Go release that turns it on cannot forward it unseen.
func TestHTTP2ExtendedConnectRefused(t *testing.T) {
	origin := &untouchedOrigin{}
	r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
	_, _, settings := r.h2Conn(t)
	if v, ok := settings.Value(http2.SettingEnableConnectProtocol); ok && v != 0 {
		t.Errorf("the server offers extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL %d)", v)
	}
	got := r.h2Request(t, append(r.pseudo(http.MethodConnect, "/ws"), [2]string{":protocol", "websocket"})...)
	switch {
	case got[":reset"] != "":
		// Refused by the protocol, before any handler, and logged so.
		r.expectProtocolRefusal(t, "stream_PROTOCOL_ERROR_bad_connect")
	case got[":status"] == "403" && got["x-cordon-reason"] == string(ReasonNestedConnect):
		if d := r.waitRecords(t, audit.TypeDecision, 1)[0]; d.Decision != audit.Deny || d.Reason != string(ReasonNestedConnect) {
			t.Fatalf("decision line %+v, want a deny", d)
		}
	default:
		t.Fatalf("extended CONNECT answered %v, want a reset or 403 %s", got, ReasonNestedConnect)
	}
	origin.expectNone(t)
}

// TestHTTP2ProtocolRefusalsLogged: a stream net/http's HTTP/2 server
// resets itself as a protocol error, before cordon's handler sees its
// request, or a connection it ends so, is logged as refused on the
// stream's connection, naming net/http's error type, and nothing reaches
// the origin. Such refusals left no line at all.
func TestHTTP2ProtocolRefusalsLogged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream uint32
		fields func(r *rig) [][2]string
		// frame is how the server refuses: RST_STREAM or GOAWAY.
		frame, errType string
	}{
		{"userinfo in :authority", 1, userinfoFields, "RST_STREAM", "stream_PROTOCOL_ERROR_userinfo_in_authority"},
		{"no :path", 1, func(r *rig) [][2]string { return r.pseudo(http.MethodGet, "/x")[:3] }, "RST_STREAM", "stream_PROTOCOL_ERROR_bad_path_method"},
		{"a :path that is no path", 1, func(r *rig) [][2]string { return r.pseudo(http.MethodGet, "x") }, "RST_STREAM", "stream_PROTOCOL_ERROR_bad_path"},
		{"a stream id a server would choose", 2, func(r *rig) [][2]string { return r.pseudo(http.MethodGet, "/x") }, "GOAWAY", "conn_PROTOCOL_ERROR_headers_even"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := &untouchedOrigin{}
			r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
			_, fr, _ := r.h2Conn(t)
			h2Headers(t, fr, http2.HeadersFrameParam{StreamID: tc.stream, EndStream: true}, tc.fields(r))
			if got, want := h2Refusal(t, fr), tc.frame+" PROTOCOL_ERROR"; got != want {
				t.Fatalf("refused with %s, want %s", got, want)
			}
			r.expectProtocolRefusal(t, tc.errType)
			origin.expectNone(t)
		})
	}
}

// h2Refusal reads fr's frames up to the first RST_STREAM or GOAWAY and
// returns its type and error code; a response fails t.
func h2Refusal(t *testing.T, fr *http2.Framer) string {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM or GOAWAY: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String()
		case *http2.HeadersFrame:
			t.Fatalf("answered (%v), not refused", f)
		}
	}
}

// TestHTTP2RefusedByNetHTTPNeverForwarded: the HTTP/2 requests net/http's
// server refuses without telling cordon (protocolRefusals) never reach
// the origin: those it answers itself (a connection-specific field, a te
// other than trailers, a header list past MaxHeaderBytes) and those whose
// header block its frame reader rejects.
func TestHTTP2RefusedByNetHTTPNeverForwarded(t *testing.T) {
	// A field of 2 KiB, repeated: the encoder sends it once and then by
	// its index in the table both ends keep (4 KiB), so one frame carries
	// a header list past the bound.
	big := [2]string{"x-big", strings.Repeat("a", 2<<10)}
	for _, tc := range []struct {
		name  string
		extra [][2]string
		want  string
	}{
		{"te other than trailers", [][2]string{{"te", "gzip"}}, "400"},
		{"a connection-specific field", [][2]string{{"connection", "keep-alive"}}, "400"},
		{"upgrade", [][2]string{{"upgrade", "websocket"}}, "400"},
		{"a header list past the bound", slices.Repeat([][2]string{big}, MaxHeaderBytes/len(big[1])+1), "431"},
		{"a field name in upper case", [][2]string{{"X-Upper", "a"}}, "PROTOCOL_ERROR"},
		{"a value holding a NUL", [][2]string{{"x-a", "a\x00b"}}, "PROTOCOL_ERROR"},
		{"an unknown pseudo-header", [][2]string{{":unknown", "a"}}, "PROTOCOL_ERROR"},
		{"a repeated pseudo-header", [][2]string{{":path", "/y"}}, "PROTOCOL_ERROR"},
		{"a pseudo-header after a field", [][2]string{{"x-a", "b"}, {":protocol", "websocket"}}, "PROTOCOL_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := &untouchedOrigin{}
			r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
			got := r.h2Request(t, append(r.pseudo(http.MethodGet, "/x"), tc.extra...)...)
			if got[":status"] != tc.want && got[":reset"] != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
			origin.expectNone(t)
		})
	}
}

// TestHTTP2ProtocolRefusalsBounded: a client decides how many of its
// streams are refused, so each kind of refusal is logged once as it
// happens and once more, with how many followed, as its connection ends:
// 100 bad streams write two lines, not 100.
func TestHTTP2ProtocolRefusalsBounded(t *testing.T) {
	origin := &untouchedOrigin{}
	r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
	c, fr, _ := r.h2Conn(t)
	const streams = maxClientStreams
	for i := range streams {
		h2Headers(t, fr, http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndStream: true}, userinfoFields(r))
	}
	for resets := 0; resets < streams; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d of %d resets: %v", resets, streams, err)
		}
		if _, ok := f.(*http2.RSTStreamFrame); ok {
			resets++
		}
	}
	const errType = "stream_PROTOCOL_ERROR_userinfo_in_authority"
	r.expectProtocolRefusal(t, errType)
	c.Close()
	more := r.waitRecords(t, audit.TypeDecision, 2)[1]
	if want := fmt.Sprintf("%s (%d more times on this connection)", errType, streams-1); more.Decision != audit.Deny || !strings.HasSuffix(more.Detail, want) {
		t.Fatalf("the connection's last line %+v, want a deny ending %q", more, want)
	}
	origin.expectNone(t)
}

// TestProtocolRefusalLinesBounded: however many refusals of however many
// types a client draws on one connection, it writes a line for the first
// of each type while open and one for the rest of each at its end; the
// noise type writes none, and a refusal counted after the end (net/http's
// frame reader may count one as the connection closes) writes nothing.
func TestProtocolRefusalLinesBounded(t *testing.T) {
	var recs []audit.Record
	p := &protocolRefusals{record: func(r ...audit.Record) error { recs = append(recs, r...); return nil }}
	types := []string{"stream_PROTOCOL_ERROR_userinfo_in_authority", "stream_PROTOCOL_ERROR_bad_path", "conn_PROTOCOL_ERROR_stream_idle", h2Noise}
	const each = 1000
	for range each {
		for _, typ := range types {
			p.count(typ)
		}
	}
	if len(recs) != len(types)-1 {
		t.Fatalf("%d lines while the connection was open, want one a type but the noise: %+v", len(recs), recs)
	}
	p.end()
	p.count(types[0])
	if len(recs) != 2*(len(types)-1) {
		t.Fatalf("%d lines in all, want two a type but the noise, nothing after the end: %+v", len(recs), recs)
	}
	for _, r := range recs[len(types)-1:] {
		if !strings.HasSuffix(r.Detail, fmt.Sprintf(" (%d more times on this connection)", each-1)) {
			t.Errorf("the end's line %q does not count the rest", r.Detail)
		}
	}
}

// TestHTTP2LateBodyNotARefusal: DATA a client had on its way when its
// stream ended (here a request refused for its authority, its body still
// coming) draws STREAM_CLOSED from net/http's server, which it counts as
// a protocol error; it refuses nothing, and is not logged as one: the
// refused request has its one line.
func TestHTTP2LateBodyNotARefusal(t *testing.T) {
	origin := &untouchedOrigin{}
	r := newRig(t, origin, rigOptions{h1Only: true, connState: origin.connState})
	_, fr, _ := r.h2Conn(t)
	fields := r.pseudo(http.MethodPost, "/x")
	fields[2][1] = "other.test"
	h2Headers(t, fr, http2.HeadersFrameParam{StreamID: 1}, fields)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no STREAM_CLOSED: %v", err)
		}
		rst, ok := f.(*http2.RSTStreamFrame)
		if !ok {
			continue
		}
		if rst.ErrCode == http2.ErrCodeStreamClosed {
			break
		}
		// The stream ended (NO_ERROR) with the refusal; the body goes on.
		if err := fr.WriteData(1, false, []byte("more body")); err != nil {
			t.Fatal(err)
		}
	}
	// The error was counted before its RST_STREAM was sent.
	if d := r.waitRecords(t, audit.TypeDecision, 1)[0]; d.Reason != string(ReasonAuthorityMismatch) {
		t.Fatalf("decision line %+v, want the refusal of the request alone", d)
	}
}

// userinfoFields is an HTTP/2 GET whose :authority, r's origin, carries
// userinfo, which net/http's server refuses.
func userinfoFields(r *rig) [][2]string {
	f := r.pseudo(http.MethodGet, "/x")
	f[2][1] = "user@" + f[2][1]
	return f
}

// expectProtocolRefusal wants the one decision line r has logged to
// refuse, on r's connection, an HTTP/2 protocol error of errType.
func (r *rig) expectProtocolRefusal(t *testing.T, errType string) {
	t.Helper()
	d := r.waitRecords(t, audit.TypeDecision, 1)[0]
	if d.Decision != audit.Deny || d.Reason != string(ReasonBadRequest) || d.Host != r.Host || d.Port != r.Port ||
		!strings.HasSuffix(d.Detail, ": "+errType) {
		t.Fatalf("decision line %+v, want a bad_request deny on %s:%d for %s", d, r.Host, r.Port, errType)
	}
}

// TestHTTP2OptionsStarJudged: an HTTP/2 OPTIONS * is judged, logged and
// forwarded like any other request, as an HTTP/1.x one is. net/http's
// server answered it itself (200, no body), so the request had no
// decision line and no close line, and the origin never saw it.
func TestHTTP2OptionsStarJudged(t *testing.T) {
	seen := make(chan string, 1)
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen <- req.Method + " " + req.RequestURI
		w.Header().Set("Allow", "GET, OPTIONS")
	}), rigOptions{h1Only: true})
	got := r.h2Request(t, r.pseudo(http.MethodOptions, "*")...)
	if got[":status"] != "200" || got["allow"] != "GET, OPTIONS" {
		t.Fatalf("got %v, want the origin's 200 with its Allow", got)
	}
	select {
	case s := <-seen:
		if s != "OPTIONS *" {
			t.Fatalf("the origin got %q, want OPTIONS *", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the OPTIONS * never reached the origin")
	}
	d := r.waitRecords(t, audit.TypeDecision, 1)[0]
	if d.Decision != audit.Allow || d.Method != http.MethodOptions || d.Path != "*" {
		t.Fatalf("decision line %+v, want an allow for OPTIONS *", d)
	}
	if c := r.waitRecords(t, audit.TypeClose, 1)[0]; c.Status != http.StatusOK {
		t.Fatalf("close line %+v, want status 200", c)
	}
}

// untouchedOrigin is an origin no request is to reach: it notes each
// that does, and, as its server's ConnState (rigOptions.connState), each
// connection that read any of a request, which sees a request the server
// refuses itself.
type untouchedOrigin struct {
	mu   sync.Mutex
	seen []string
}

func (o *untouchedOrigin) ServeHTTP(_ http.ResponseWriter, req *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, req.Method+" "+req.Host+" "+req.RequestURI)
}

func (o *untouchedOrigin) connState(c net.Conn, s http.ConnState) {
	if s != http.StateActive {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, "a request's bytes from "+c.RemoteAddr().String())
}

// expectNone fails t if a request reached the origin, waiting first for
// one that was forwarded to arrive.
func (o *untouchedOrigin) expectNone(t *testing.T) {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) > 0 {
		t.Fatalf("the origin got %q", o.seen)
	}
}

// TestHTTP2UploadWindowBounded: a terminated HTTP/2 client may send at
// most maxUploadBuffer of request body that nothing has read yet, on a
// connection: the next frame is a flow-control error. net/http's default
// window of 1 MiB let each connection make cordon hold 1 MiB of a body
// that waited on a slow upstream (1,000 connections took it to 850 MB).
// The refusal is a protocol error the server reports, and cordon logs.
func TestHTTP2UploadWindowBounded(t *testing.T) {
	ca, leaf := localLeaf(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	defer close(release)
	// The refusal is a protocol error the server counts, and so logs
	// (protocolRefusals).
	counted := make(chan string, 16)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2"}})
		if tc.Handshake() != nil {
			return
		}
		// A handler that never reads the body, as one waiting on its
		// upstream does not.
		serveH2(tc, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }), func(errType string) {
			select {
			case counted <- errType:
			default:
			}
		})
	}()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	_, fr := h2Dial(t, ln.Addr().String(), roots, "127.0.0.1")
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	// The window, then one frame more, then a PING: its answer must not
	// come before the refusal.
	chunk := make([]byte, maxFrameSize)
	go func() {
		for range maxUploadBuffer/len(chunk) + 1 {
			if fr.WriteData(1, false, chunk) != nil {
				return
			}
		}
		fr.WritePing(false, [8]byte{1})
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended (%v) without a flow-control error", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() {
				t.Fatalf("the server took more than %d bytes of body nothing read", maxUploadBuffer)
			}
		case *http2.RSTStreamFrame:
			if f.ErrCode != http2.ErrCodeFlowControl {
				t.Fatalf("RST_STREAM %v, want %v", f.ErrCode, http2.ErrCodeFlowControl)
			}
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeFlowControl {
				t.Fatalf("GOAWAY %v, want %v", f.ErrCode, http2.ErrCodeFlowControl)
			}
		default:
			continue
		}
		select {
		case e := <-counted:
			if !strings.Contains(e, "FLOW_CONTROL_ERROR") {
				t.Fatalf("the server counted %s, want a FLOW_CONTROL_ERROR", e)
			}
		default:
			t.Fatal("the server did not count the flow-control error, which is then not logged")
		}
		return
	}
}

// TestUpstreamWindowsBounded: the upstream HTTP/2 transports of a
// session's first fullWindows client connections at once get a window
// of fullWindow, the rest leastWindow, and a transport's window is what
// its upstream connection is granted (a stream, half of it): an upstream
// may send no more ahead of the client's reading. net/http's
// Transport granted 4 MiB a stream and 1 GiB a connection, and a box
// whose 1,000 requests fetched large bodies it never read took cordon
// past 2.4 GB.
func TestUpstreamWindowsBounded(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), rigOptions{})
	var releases []func()
	for i := range fullWindows + 1 {
		w, release := r.T.window()
		releases = append(releases, release)
		if want := map[bool]int{true: fullWindow, false: leastWindow}[i < fullWindows]; w != want {
			t.Fatalf("transport %d got a window of %d, want %d", i+1, w, want)
		}
	}
	releases[0]()
	if w, _ := r.T.window(); w != fullWindow {
		t.Fatalf("once a transport let its window go, the next got %d, want %d", w, fullWindow)
	}

	// What a transport's upstream connection is granted: its SETTINGS and
	// the connection's WINDOW_UPDATE, read by an origin that speaks raw
	// HTTP/2.
	ln, ca := rawH2Listener(t)
	granted := make(chan [2]uint32, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		stream, conn := uint32(65535), uint32(65535)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					stream = v
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					conn += f.Increment
				}
			case *http2.HeadersFrame: // the request: all is said
				granted <- [2]uint32{stream, conn}
				return
			}
		}
	}()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	tm, err := New(Config{Leaves: certs.NewLeafCache(ca, 1), Roots: func() (*x509.CertPool, error) { return roots, nil }, Audit: r.T.cfg.Audit})
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	st := &stream{t: tm, authority: ln.Addr().String(), s: &Stream{Host: "127.0.0.1", Port: port,
		Redial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}}}
	defer st.closeUpstream()
	c := &http.Client{Transport: st.newTransport(leastWindow), Timeout: 5 * time.Second}
	go c.Get("https://" + ln.Addr().String() + "/")
	select {
	case g := <-granted:
		// net/http adds the window to the connection's initial 64 KiB. A
		// stream gets half of it, so one whose client does not read
		// leaves the others room.
		if g[0] != leastWindow/2 || g[1] > leastWindow+65535 {
			t.Fatalf("the upstream was granted %d bytes a stream and %d a connection, want %d and %d at most", g[0], g[1], leastWindow/2, leastWindow+65535)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the origin never saw the request")
	}
}

// TestUpstreamConnectionsPerTransport: an upstream HTTP/2 transport keeps
// to one connection to an upstream that allows few streams at once, and
// requests past them wait for a stream: a transport's window (fullWindow
// for a session's first few) bounds what its upstream may send ahead only
// if it has one connection. An upstream allowing one stream each got a
// connection per request, each with the window.
func TestUpstreamConnectionsPerTransport(t *testing.T) {
	ln, ca := rawH2Listener(t)
	conns := make(chan net.Conn, 16)
	asked := make(chan struct{}, 16) // a request, or the settings ack, came in
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				// An origin allowing one stream at once, answering none.
				if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
					return
				}
				fr := http2.NewFramer(c, c)
				fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							fr.WriteSettingsAck()
						} else {
							asked <- struct{}{} // the client took in the bound
						}
					case *http2.HeadersFrame:
						asked <- struct{}{}
					}
				}
			}()
		}
	}()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	aw, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	tm, err := New(Config{Leaves: certs.NewLeafCache(ca, 1), Roots: func() (*x509.CertPool, error) { return roots, nil }, Audit: aw})
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{t: tm, authority: ln.Addr().String(), s: &Stream{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port,
		Redial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}}}
	defer st.closeUpstream()
	tr := st.newTransport(fullWindow)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first request takes the origin's one stream and its settings
	// come back; three more follow.
	get := func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ln.Addr().String()+"/", nil)
		tr.RoundTrip(req)
	}
	go get()
	first := <-conns
	defer first.Close()
	for range 2 { // the first request, and the client's ack of the bound
		select {
		case <-asked:
		case <-time.After(5 * time.Second):
			t.Fatal("the origin never saw the first request and the client's settings ack")
		}
	}
	for range 3 {
		go get()
	}
	select {
	case c := <-conns:
		c.Close()
		t.Fatal("a transport opened a second upstream connection")
	case <-time.After(200 * time.Millisecond):
	}
}

// rawH2Listener listens on 127.0.0.1 with TLS offering h2 only, a leaf of
// its own CA (returned too), for an origin that speaks HTTP/2 frame by
// frame; it closes when the test ends.
func rawH2Listener(t *testing.T) (net.Listener, *certs.CA) {
	t.Helper()
	ca, leaf := localLeaf(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ca
}

// localLeaf is a new ephemeral CA and its leaf for 127.0.0.1.
func localLeaf(t *testing.T) (*certs.CA, *tls.Certificate) {
	t.Helper()
	ca, err := certs.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.NewLeafCache(ca, 1).Get("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return ca, leaf
}

// TestHTTP2ClosedWindowNotHeld: a client that opens no flow-control
// window for its streams (SETTINGS_INITIAL_WINDOW_SIZE 0) cannot keep a
// response waiting on it past h2WriteWait, a refusal's included: the
// stream is reset and its handler returns. Before, each such stream held
// its request for as long as the client liked, and refused for 1,800
// header fields (some 300 KB of map), 20 connections of 100 took cordon to
// 580 MB (red team, round 8).
func TestHTTP2ClosedWindowNotHeld(t *testing.T) {
	defer func(w time.Duration) { h2WriteWait = w }(h2WriteWait)
	h2WriteWait = 200 * time.Millisecond
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 1000))
	}), rigOptions{})
	_, fr := h2Dial(t, r.Addr, r.ClientRoots, r.Host, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	refused := r.pseudo("GET", "/refused")
	for i := range MaxHeaderFields + 1 {
		refused = append(refused, [2]string{fmt.Sprintf("a%d", i), "b"})
	}
	h2Headers(t, fr, http2.HeadersFrameParam{StreamID: 1, EndStream: true}, refused)
	h2Headers(t, fr, http2.HeadersFrameParam{StreamID: 3, EndStream: true}, r.pseudo("GET", "/allowed"))
	status := map[uint32]string{}
	reset := map[uint32]bool{}
	dec := hpack.NewDecoder(4096, nil)
	for len(reset) < 2 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("streams reset: %v, answered: %v; then %v", reset, status, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, hf := range fields {
				if hf.Name == ":status" {
					status[f.StreamID] = hf.Value
				}
			}
		case *http2.RSTStreamFrame:
			reset[f.StreamID] = true
		case *http2.DataFrame:
			t.Fatalf("DATA on stream %d through a closed window", f.StreamID)
		}
	}
	if status[1] != "431" || status[3] != "200" {
		t.Errorf("statuses %v, want 431 for stream 1 and 200 for stream 3", status)
	}
	r.waitRecords(t, audit.TypeClose, 1)
}
