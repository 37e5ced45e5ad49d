package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/cursor"
)

// The fan-out path (issue 17): an SSE stream takes its connection over from
// net/http and writes one chunk per batch of live events; whole-topic
// subscribers in step with the live feed share one encoding of each event.
// What a client sees must not change: a chunked HTTP/1.1 200 with the
// middleware's headers, every message once with the position after it as
// its id (the same id on every whole-topic stream, exact to resume from),
// room streams their own ids, and a client that hangs up frees its
// subscriber slot at once (not at the next heartbeat).
func TestRealtimeSSEFanoutHotPath(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = time.Minute // only reading can tell a hang-up
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "fan", 3)

	// The wire, read raw.
	addr := strings.TrimPrefix(n.URL, "http://")
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET /v1/topics/fan/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", addr, key)
	_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("SSE answer: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" ||
		resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("Date") == "" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("SSE answer %d, headers %v, transfer encoding %v: want 200 chunked text/event-stream with X-Request-Id", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	body := bufio.NewReader(resp.Body) // de-chunked
	var first []string
	for len(first) < 4 || first[len(first)-1] != "" || !strings.HasPrefix(first[len(first)-2], "id: ") {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("SSE start %q: %v", first, err)
		}
		first = append(first, strings.TrimSuffix(line, "\n"))
	}
	if !strings.HasPrefix(first[0], "retry: ") || first[1] != ": msgmesh" || first[2] != "" {
		t.Fatalf("SSE start %q, want the retry hint, the comment and the id-only start", first)
	}

	a := mustSSE(t, n.URL, key, "fan", nil, "")
	b := mustSSE(t, n.URL, key, "fan", nil, "")
	room := mustSSE(t, n.URL, key, "fan", url.Values{"room": {"r1"}}, "")
	const total = 60
	rooms := []string{"r1", "", "r2"}
	// One batch request: the hub hands its records over in one go, so
	// the streams write batches.
	cursors := publishSeq(t, n.URL, key, "fan", 0, total, rooms...)

	ma := a.Messages(t, total, 30*time.Second)
	mb := b.Messages(t, total, 30*time.Second)
	next := make([]int64, 3)
	seen := map[int]bool{}
	for i, m := range ma {
		seq := seqOf(t, m.Msg)
		if seen[seq] {
			t.Fatalf("message %d twice", seq)
		}
		seen[seq] = true
		cu, err := cursor.Parse(m.Cursor)
		if err != nil || cu != cursors[seq] {
			t.Fatalf("message %d cursor %q, want %v", seq, m.Cursor, cursors[seq])
		}
		next[cu.Partition] = cu.Offset + 1
		want := fmt.Sprintf(".%d-%d-%d", next[0], next[1], next[2])
		if !strings.HasSuffix(m.ID, want) {
			t.Fatalf("event %d (message %s) id %q, want the position after it, …%s", i, m.Cursor, m.ID, want)
		}
		if mb[i].ID != m.ID || mb[i].Cursor != m.Cursor {
			t.Fatalf("event %d: stream A %s id %q, stream B %s id %q: want the same", i, m.Cursor, m.ID, mb[i].Cursor, mb[i].ID)
		}
	}

	// The room stream: its messages only, ids with its partition only.
	var inRoom int
	for seq := range total {
		if rooms[seq%len(rooms)] == "r1" {
			inRoom++
		}
	}
	for _, m := range room.Messages(t, inRoom, 30*time.Second) {
		if m.Room == nil || *m.Room != "r1" {
			t.Fatalf("room stream got %s (room %v)", m.Cursor, m.Room)
		}
		cu, _ := cursor.Parse(m.Cursor)
		parts := strings.Split(m.ID[strings.Index(m.ID, ".")+1:], "-")
		for p, x := range parts {
			if (p == int(cu.Partition)) != (x != "") || p == int(cu.Partition) && x != fmt.Sprint(cu.Offset+1) {
				t.Fatalf("room event %s id %q: want only partition %d, at %d", m.Cursor, m.ID, cu.Partition, cu.Offset+1)
			}
		}
	}

	// A shared id resumes exactly: from event 20 on, the rest, once each.
	resumed := mustSSE(t, n.URL, key, "fan", nil, ma[19].ID)
	rest := resumed.Messages(t, total-20, 30*time.Second)
	want := map[string]bool{}
	for _, m := range ma[20:] {
		want[m.Cursor] = true
	}
	for _, m := range rest {
		if !want[m.Cursor] {
			t.Fatalf("resumed from %q: got %s again or twice", ma[19].ID, m.Cursor)
		}
		delete(want, m.Cursor)
	}
	if ev, ok := resumed.Next(300 * time.Millisecond); ok {
		t.Fatalf("resumed stream: extra event %+v", ev)
	}

	// Hang-ups: the raw client and stream A go; their slots free at once.
	if got := metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`); got != 5 {
		t.Fatalf("%v SSE subscribers, want 5", got)
	}
	_ = raw.Close()
	a.Close()
	if ok, _ := h.PollUntil(10*time.Second, 20*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 3
	}); !ok {
		t.Fatalf("%v SSE subscribers after two clients hung up, want 3 (the heartbeat is a minute away)",
			metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`))
	}
	// The others still stream.
	publishSeq(t, n.URL, key, "fan", total, total+1)
	if m := b.Messages(t, 1, 30*time.Second); seqOf(t, m[0].Msg) != total {
		t.Fatalf("after the hang-ups stream B got %s", m[0].Cursor)
	}
}
