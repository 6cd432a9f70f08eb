package egress

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

func TestServerRefusal(t *testing.T) {
	const h = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	tests := []struct {
		name, in string
		status   int
		why      string
	}{
		{"bad request", "HTTP/1.1 400 Bad Request" + h + "400 Bad Request", 400, "400 Bad Request"},
		{"with text", "HTTP/1.1 400 Bad Request: malformed Host header" + h + "400 Bad Request: malformed Host header", 400, "400 Bad Request: malformed Host header"},
		{"transfer coding", "HTTP/1.1 501 Not Implemented" + h + "Unsupported transfer encoding", 501, "Unsupported transfer encoding"},
		{"too large", "HTTP/1.1 431 Request Header Fields Too Large" + h + "431 Request Header Fields Too Large", 431, "431 Request Header Fields Too Large"},
		// A handler's answer has a Date and its own header order.
		{"handler answer", "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\nX-Cordon-Reason: not_allowlisted\r\n\r\nno", 0, ""},
		{"success", "HTTP/1.1 200 OK" + h + "fine", 0, ""},
		{"tunnel bytes", "\x16\x03\x01\x02\x00", 0, ""},
		{"status line split", "HTTP/1.1 400 Bad\r\nX: y" + h + "x", 0, ""},
		{"short", "HTTP/1.1 40", 0, ""},
		{"not a number", "HTTP/1.1 4x0 Bad" + h, 0, ""},
		{"long reason cut", "HTTP/1.1 400 Bad Request" + h + strings.Repeat("a", 500), 400, strings.Repeat("a", maxAnswer)},
	}
	for _, tt := range tests {
		status, why, ok := serverRefusal([]byte(tt.in))
		if ok != (tt.status != 0) || status != tt.status || why != tt.why {
			t.Errorf("%s: serverRefusal = %d %q %v, want %d %q", tt.name, status, why, ok, tt.status, tt.why)
		}
	}
}

func FuzzServerRefusal(f *testing.F) {
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"))
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		status, why, ok := serverRefusal(p)
		if ok && (status < 400 || status > 599 || len(why) > maxAnswer) {
			t.Fatalf("serverRefusal(%q) = %d %q", p, status, why)
		}
		if status, _, ok := expectationFailed(p); ok && (status != http.StatusExpectationFailed || !bytes.HasSuffix(p, []byte("\r\n\r\n"))) {
			t.Fatalf("expectationFailed(%q) = %d", p, status)
		}
	})
}

// TestParserRefusalLogsNoQuery: a request Go's parser refuses is logged
// with the start of its request line, less the query, which the log never
// holds, and never a header line in its place.
func TestParserRefusalLogsNoQuery(t *testing.T) {
	for _, tc := range []struct {
		name, request string
		status        int
		began         string
	}{
		{"malformed Host header", "GET http://allowed.test/x?api_key=QUERYSECRET HTTP/1.1\r\nHost: bad host\r\n\r\n",
			http.StatusBadRequest, `"GET http://allowed.test/x HTTP/1.1"`},
		{"no version", "GET http://allowed.test/x?api_key=QUERYSECRET\r\nHost: allowed.test\r\n\r\n",
			http.StatusBadRequest, `"GET http://allowed.test/x"`},
		{"unknown transfer coding", "POST http://allowed.test/x?api_key=QUERYSECRET HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: gzip\r\n\r\n",
			http.StatusNotImplemented, `"POST http://allowed.test/x HTTP/1.1"`},
		// A read that starts with a header line, not the request line:
		// the header (a credential, here) is not taken for it.
		// net/http answers an Expect other than 100-continue itself,
		// through a response writer of its own.
		{"unsupported expectation", "GET http://allowed.test/x?api_key=QUERYSECRET HTTP/1.1\r\nHost: allowed.test\r\nExpect: x\r\n\r\n",
			http.StatusExpectationFailed, `"GET http://allowed.test/x HTTP/1.1"`},
		{"unsupported expectation, CONNECT", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\nExpect: x\r\n\r\n",
			http.StatusExpectationFailed, `"CONNECT evil.test:443 HTTP/1.1"`},
		{"unsupported expectation, HTTP/1.0", "GET http://allowed.test/x?api_key=QUERYSECRET HTTP/1.0\r\nHost: allowed.test\r\nExpect: x\r\n\r\n",
			http.StatusExpectationFailed, `"GET http://allowed.test/x HTTP/1.0"`},
		{"header in a later read", "POST http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n|Authorization: Bearer QUERYSECRET\r\nTransfer-Encoding: gzip\r\n\r\n",
			http.StatusNotImplemented, `"POST http://allowed.test/x HTTP/1.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, _, logPath := startProxy(t, "allowed.test", 0)
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			for i, part := range strings.Split(tc.request, "|") {
				if i > 0 {
					time.Sleep(100 * time.Millisecond) // another read
				}
				if _, err := c.Write([]byte(part)); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tc.status)
			}
			// The refusal is logged before it goes out.
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "QUERYSECRET") {
				t.Fatalf("a query in the log:\n%s", data)
			}
			rd := audit.NewReader(strings.NewReader(string(data)), nil)
			found := false
			for rd.Next() {
				r := rd.Record()
				found = found || r.Reason == string(ReasonBadRequest) && strings.HasSuffix(r.Detail, "the request began "+tc.began)
			}
			if !found {
				t.Fatalf("no bad_request line saying the request began %s:\n%s", tc.began, data)
			}
		})
	}
}

func TestExpectationFailed(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\nContent-Length: 0\r\n\r\n", true},
		{"HTTP/1.0 417 Expectation Failed\r\nConnection: close\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\nContent-Length: 0\r\n\r\n", true},
		{"HTTP/1.1 417 Expectation Failed", false}, // no line end yet
		// An upstream's, forwarded by a handler: its fields sorted, a
		// Date of its own among them.
		{"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\n\r\n", false},
		{"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: Tue, 01 Dec 2026 20:00:00 GMT\r\nContent-Length: 0\r\nServer: x\r\n\r\n", false},
		{"HTTP/1.1 417 Other\r\n\r\n", false},
		{"HTTP/1.1 400 Bad Request\r\n\r\n", false},
	} {
		if status, why, ok := expectationFailed([]byte(tt.in)); ok != tt.ok || ok && (status != 417 || why != "417 Expectation Failed") {
			t.Errorf("expectationFailed(%q) = %d %q %v, want ok %v", tt.in, status, why, ok, tt.ok)
		}
	}
}
