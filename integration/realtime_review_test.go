package integration

// Review fixes of the realtime service: no heartbeat written after the SSE
// handler returned, catch-up slots that slow clients cannot exhaust, a
// catch-up that ends with its topic, and a WebSocket writer that stops at
// its first failed write.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// SSE heartbeats are written by the stream itself: none lands after the
// handler returned, in the response of a later request that reuses the
// handler's (pooled) writer. Heartbeats every millisecond while streams
// open and close beside plain requests; run with -race too.
func TestRealtimeSSENoWriteAfterReturn(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = time.Millisecond
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "beat", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	stray := make(chan string, 1)
	for range 4 { // plain requests, each on the pooled gin contexts
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{}
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/v1/topics/beat", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := cl.Do(req)
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if strings.Contains(string(b), "heartbeat") || strings.Contains(string(b), "msgmesh") && !strings.HasPrefix(string(b), "{") {
					select {
					case stray <- string(b):
					default:
					}
				}
			}
		}()
	}
	for i := range 150 {
		s := mustSSE(t, n.URL, key, "beat", nil, "")
		// Let a few heartbeats go, then hang up mid-stream.
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		s.Close()
	}
	cancel()
	wg.Wait()
	select {
	case b := <-stray:
		t.Fatalf("a plain response carried SSE bytes written after their handler returned: %.200q", b)
	default:
	}
}

// metricValue reads one sample of /metrics (0 if absent).
func metricValue(t testing.TB, base, sample string) float64 {
	t.Helper()
	r := h.Must(t, base, "GET", "/metrics", "", nil, http.StatusOK)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(r.Body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// Slow readers do not use up the catch-up slots: with max_catchups 2, a
// WebSocket whose client reads nothing resumes 4 subscriptions from far
// back (its connection may catch up 2 at a time, and it gives the slots
// back while it waits for its client); an SSE resume on the same node
// still gets its backlog promptly. (A resume that finds no slot within
// write_timeout ends resumably: services/realtime's unit tests.)
func TestRealtimeCatchupSlotsSlowReaders(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.MaxCatchups = 2
		cfg.Realtime.WSQueueFrames = 8
		cfg.Realtime.WriteTimeout = 20 * time.Second
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "slots", 3)
	padSeq = strings.Repeat("x", 8192) // far more than socket buffers hold
	publishSeq(t, n.URL, key, "slots", 0, 2000, spread...)
	padSeq = ""
	// A WebSocket that never reads: 4 subscriptions from the start, each
	// blocks on its client with a catch-up in progress.
	ws := rawWS(t, n.URL, key)
	for i := range 4 {
		if err := ws.WriteJSON(map[string]any{"type": "subscribe", "id": fmt.Sprint("s", i), "topic": "slots", "from": "earliest"}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until all 4 are open and catching up (they then block on the
	// client that reads nothing).
	if ok, _ := h.PollUntil(20*time.Second, 50*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="ws"}`) == 4 &&
			metricValue(t, n.URL, "msgmesh_realtime_catchup_messages_total") > 0
	}); !ok {
		t.Fatal("the 4 WebSocket subscriptions did not open and start catching up")
	}
	// Another client resumes: it is served within a few seconds.
	start := time.Now()
	s := mustSSE(t, n.URL, key, "slots", url.Values{"from": {"earliest"}}, "")
	ms := s.Messages(t, 2000, 30*time.Second)
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the SSE backlog took %v beside a WebSocket that reads nothing (catch-up slots held by a slow client)", took)
	}
	seen := map[int]bool{}
	for _, m := range ms {
		seen[seqOf(t, m.Msg)] = true
	}
	if len(seen) != 2000 {
		t.Fatalf("the SSE backlog had %d distinct messages, want 2000", len(seen))
	}
}

// A catch-up ends with its topic: a resume waiting for the node's only
// catch-up slot (held by a client that reads nothing) while its topic is
// deleted and made again under the same name ends (the reconnect gets a
// resync), and never serves a record of the new topic under the old
// stream.
func TestRealtimeCatchupEndsWithTopic(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.MaxCatchups = 1
		cfg.Realtime.WriteTimeout = 3 * time.Second
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "gone", 1)
	padSeq = strings.Repeat("x", 8192)
	publishSeq(t, n.URL, key, "gone", 0, 2000, "")
	padSeq = ""
	// The holder resumes from the start and reads nothing.
	addr := strings.TrimPrefix(n.URL, "http://")
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	// (?token= takes tokens only: with the key itself the holder was
	// refused 401 key_in_url and held nothing.)
	tok, _ := h.MintToken(t, n.URL, key, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"gone"}}})
	fmt.Fprintf(hold, "GET /v1/topics/gone/events?from=earliest&token=%s HTTP/1.1\r\nHost: %s\r\n\r\n", url.QueryEscape(tok), addr)
	if ok, _ := h.PollUntil(20*time.Second, 50*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 1 &&
			metricValue(t, n.URL, "msgmesh_realtime_catchup_messages_total") > 0
	}); !ok {
		t.Fatal("the holder's stream did not open and start catching up")
	}
	s := mustSSE(t, n.URL, key, "gone", url.Values{"from": {"earliest"}}, "")
	time.Sleep(500 * time.Millisecond)
	h.Must(t, n.URL, "DELETE", "/v1/topics/gone", key, nil, http.StatusNoContent)
	h.CreateTopic(t, n.URL, key, "gone", 1)
	publishSeq(t, n.URL, key, "gone", 100000, 100010, "")
	deadline := time.Now().Add(20 * time.Second)
	for {
		ev, ok := s.Next(time.Until(deadline))
		if !ok {
			break
		}
		if ev.Type == "" && seqOf(t, ev.message(t).Msg) >= 100000 {
			t.Fatalf("a record of the new topic was served on the old stream: %.80s", ev.Data)
		}
	}
	if time.Now().After(deadline) {
		t.Fatal("the stream did not end after its topic was deleted")
	}
	if s.LastID != "" {
		s2 := mustSSE(t, n.URL, key, "gone", nil, s.LastID)
		if ev, ok := s2.Next(10 * time.Second); !ok || ev.Type != "msgmesh-resync" {
			t.Fatalf("first event %+v after the topic was made again, want msgmesh-resync", ev)
		}
	}
}

// A WebSocket whose client stops reading is closed as a slow consumer
// once: the writer stops at its first failed write (it used to go on
// writing every queued control frame to the broken connection, counting
// each as another slow consumer).
func TestRealtimeWebSocketSlowCountedOnce(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.WriteTimeout = time.Second
	})
	key := c.AdminKey
	sample := `msgmesh_realtime_slow_consumers_total{action="disconnect"}`
	before := metricValue(t, n.URL, sample)
	ws := rawWS(t, n.URL, key)
	// Big error frames (they echo the frame's id) that the client never
	// reads: the socket buffers fill, then the control queue.
	id := strings.Repeat("i", 60<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 400 {
			_ = ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if ws.WriteJSON(map[string]any{"type": "nonsense", "id": id}) != nil {
				return
			}
		}
	}()
	<-done
	deadline := time.Now().Add(20 * time.Second)
	for metricValue(t, n.URL, sample) == before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let any further counting happen
	if d := metricValue(t, n.URL, sample) - before; d != 1 {
		t.Fatalf("one slow WebSocket counted %v times as a slow consumer, want 1", d)
	}
}
