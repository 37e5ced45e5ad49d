package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Requests net/http cannot parse are answered before any handler runs;
// those answers come in the error format too ({"error","code"}, JSON,
// X-Request-Id), sent over raw TCP as a broken client would.
func TestRawMalformedRequestsGetErrorFormat(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	u, _ := url.Parse(n.URL)
	cases := []struct {
		name, req string
		status    int
		code      string
		mention   string
	}{
		{"missing Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "invalid_request", "Host"},
		{"two Host headers", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "invalid_request", "Bad Request"},
		{"invalid header name", "GET /healthz HTTP/1.1\r\nHost: a\r\nBad(Name): y\r\n\r\n", 400, "invalid_request", "Bad Request"},
		{"garbage request line", "HELLO\r\n\r\n", 400, "invalid_request", "Bad Request"},
		{"bad Content-Length", "POST /v1/topics HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n", 400, "invalid_request", "Bad Request"},
		{"unknown transfer coding", "POST /v1/topics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented", "transfer encoding"},
		{"HTTP/3.0", "GET /healthz HTTP/3.0\r\nHost: a\r\n\r\n", 505, "http_version_not_supported", "protocol version"},
		{"Expect other than 100-continue", "GET /healthz HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n", 417, "expectation_failed", "100-continue"},
		{"headers over 1 MiB", "GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 1<<20+8192) + "\r\n\r\n", 431, "request_headers_too_large", "Too Large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			go func() { _, _ = io.WriteString(conn, tc.req) }() // a 431 is answered while the client still writes
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json: %s", ct, raw)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("body %q is not JSON: %v", raw, err)
			}
			msg, _ := body["error"].(string)
			if body["code"] != tc.code || !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.mention)) || len(body) != 2 {
				t.Errorf("body %s, want exactly error (mentioning %q) and code %q", raw, tc.mention, tc.code)
			}
		})
	}
	// A well-formed request on the same listener is untouched.
	r := h.Do(t, n.URL, "GET", "/healthz", "", nil)
	if r.Status != 200 {
		t.Errorf("healthz after malformed requests: %d %s", r.Status, r.Body)
	}
}
