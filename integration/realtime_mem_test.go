package integration

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Memory held by idle SSE streams (heap and goroutine stacks of the
// process, after a GC, divided by the streams): the spec aims under 10 KB.
// The bench measures the RSS of a separate process (make bench); this
// guards against regressions. MSGMESH_TEST_HEAP_PROFILE=file writes a
// heap profile with the streams open.
func TestRealtimeSSEIdleMemory(t *testing.T) {
	if os.Getenv("MSGMESH_TEST_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "idle", 3)
	// ?token= takes tokens only (a key there is 401 key_in_url).
	tok, _ := h.MintToken(t, n.URL, key, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"idle"}}})
	addr := strings.TrimPrefix(n.URL, "http://")
	open := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		fmt.Fprintf(conn, "GET /v1/topics/idle/events?token=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", url.QueryEscape(tok), addr)
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 1024)
		var got []byte
		for !strings.Contains(string(got), ": msgmesh") {
			k, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("SSE stream: %v (got %q)", err, got)
			}
			got = append(got, buf[:k]...)
		}
		if !strings.HasPrefix(string(got), "HTTP/1.1 200") {
			t.Fatalf("SSE answer %q", got)
		}
		return conn
	}
	for range 20 { // warm up: the hub, pools
		open()
	}
	measure := func() (heap, stack uint64) {
		var m runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return m.HeapAlloc, m.StackInuse
	}
	const streams = 1000
	h0, s0 := measure()
	for range streams {
		open()
	}
	time.Sleep(500 * time.Millisecond)
	h1, s1 := measure()
	if f := os.Getenv("MSGMESH_TEST_HEAP_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err == nil {
			_ = pprof.Lookup("heap").WriteTo(out, 0)
			_ = out.Close()
		}
	}
	heap := float64(int64(h1)-int64(h0)) / streams
	stack := float64(int64(s1)-int64(s0)) / streams
	t.Logf("per idle SSE stream (server and raw client sockets in one process): heap %.0f B, goroutine stacks %.0f B, total %.1f KiB",
		heap, stack, (heap+stack)/1024)
	// A guard against regressions (net/http's buffers and handler
	// goroutine held again, a per-stream buffer or goroutine too many),
	// with room for noise: measured 38 KiB on 2026-11-30 with net/http
	// holding the stream, 14 KiB on 2026-12-01 with the connection
	// hijacked, 13 KiB on 2026-12-02 with the live queue grown on demand,
	// 8.8 KiB the same day with one goroutine per idle stream (issue 17
	// aims at 16 KiB of RSS per connection). A second goroutine per
	// stream again (4 KiB of stack) goes over the guard.
	if heap+stack > 12<<10 {
		t.Errorf("an idle SSE stream holds %.1f KiB (heap and stacks), want under 12 KiB (8.8 KiB measured when written)", (heap+stack)/1024)
	}
}
