package integration

// Streams that end on purpose say why (msgmesh-closed, closed frames);
// every SSE stream starts with its position and keeps it current; message
// cursors do not cross a topic's deletion; keys stay out of URLs; a burst
// of client frames is answered.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/twmb/franz-go/pkg/kgo"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// closedEvent reads events until msgmesh-closed, failing on a message or a
// timeout, and returns its data.
func (s *sseStream) closedEvent(t testing.TB, timeout time.Duration) (map[string]string, string) {
	t.Helper()
	ev, ok := s.Next(timeout)
	if !ok {
		t.Fatalf("no msgmesh-closed event within %v (the stream ended silently or stayed open)", timeout)
	}
	if ev.Type != "msgmesh-closed" {
		t.Fatalf("event %+v, want msgmesh-closed", ev)
	}
	var d map[string]string
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d["reason"] == "" || d["error"] == "" {
		t.Fatalf("msgmesh-closed data %q: want {\"reason\",\"error\"} (%v)", ev.Data, err)
	}
	if !strings.Contains(ev.ID, ".") {
		t.Errorf("msgmesh-closed id %q is not a position", ev.ID)
	}
	return d, ev.ID
}

// Deleting a topic ends its SSE streams with msgmesh-closed topic_deleted
// (a curl-like client sees why), then the stream ends and a reconnect is
// 404; a node shutting down says shutdown; an expiring token says
// token_expired, with the position to resume from.
func TestRealtimeSSEClosedEvents(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = 300 * time.Millisecond // credential re-checks
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "gone", 3)
	s := mustSSE(t, n.URL, key, "gone", nil, "")
	whole := mustSSE(t, n.URL, key, "gone", url.Values{"room": {"eu"}}, "")
	publishSeq(t, n.URL, key, "gone", 0, 1, "eu")
	s.Messages(t, 1, 30*time.Second)
	whole.Messages(t, 1, 30*time.Second)
	h.Must(t, n.URL, "DELETE", "/v1/topics/gone", key, nil, http.StatusNoContent)
	for _, st := range []*sseStream{s, whole} {
		d, _ := st.closedEvent(t, 15*time.Second)
		if d["reason"] != "topic_deleted" || !strings.Contains(d["error"], `"gone"`) {
			t.Errorf("msgmesh-closed %v, want reason topic_deleted naming the topic", d)
		}
		if !st.Ended(10 * time.Second) {
			t.Error("the stream stayed open after msgmesh-closed")
		}
	}
	_, r := openSSE(t, n.URL, key, "gone", nil, s.LastID)
	h.WantError(t, "reconnect to the deleted topic", r, http.StatusNotFound, "topic_not_found")
	if v := metricValue(t, n.URL, `msgmesh_realtime_closed_total{reason="topic_deleted",transport="sse"}`); v < 2 {
		t.Errorf("msgmesh_realtime_closed_total topic_deleted sse = %v, want 2", v)
	}

	// A token expiring mid-stream: token_expired, whose id resumes.
	h.CreateTopic(t, n.URL, key, "exp2", 3)
	// Long enough for a loaded machine to connect and deliver first.
	tok, tokExp := h.MintToken(t, n.URL, key, 8, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"exp2"}}})
	ts := mustSSE(t, n.URL, "", "exp2", url.Values{"token": {tok}}, "")
	publishSeq(t, n.URL, key, "exp2", 0, 1)
	ts.Messages(t, 1, time.Until(tokExp))
	d, id := ts.closedEvent(t, time.Until(tokExp)+20*time.Second)
	if d["reason"] != "token_expired" {
		t.Errorf("at the token's expiry msgmesh-closed %v, want reason token_expired", d)
	}
	publishSeq(t, n.URL, key, "exp2", 1, 3)
	resumed := mustSSE(t, n.URL, key, "exp2", nil, id)
	for i, m := range resumed.Messages(t, 2, 30*time.Second) {
		if seqOf(t, m.Msg) != i+1 {
			t.Fatalf("resumed from the msgmesh-closed id: message %d is seq %d, want %d", i, seqOf(t, m.Msg), i+1)
		}
	}

	// A revoked key, found by the periodic re-check: credential_revoked.
	kid, ckey := h.RoleKey(t, n.URL, key, "sse-consumer", "consumer")
	rs := mustSSE(t, n.URL, ckey, "exp2", nil, "")
	if ev, ok := rs.NextAny(10 * time.Second); !ok || !ev.idOnly() {
		t.Fatalf("first event %+v, want the id-only start", ev)
	}
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+kid, key, nil, http.StatusNoContent)
	if d, _ := rs.closedEvent(t, 15*time.Second); d["reason"] != "credential_revoked" {
		t.Errorf("after the key's revocation msgmesh-closed %v, want reason credential_revoked", d)
	}

	// The node shutting down: shutdown.
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	defer func() { <-stopped }()
	if d, _ := resumed.closedEvent(t, 30*time.Second); d["reason"] != "shutdown" {
		t.Errorf("at shutdown msgmesh-closed %v, want reason shutdown", d)
	}
}

// WebSocket: a deleted topic's subscription gets a closed frame (id,
// topic, reason topic_deleted, position) while the others go on; a node
// shutting down sends closed reason shutdown, then closes 1001; a token
// expiring sends closed reason token_expired, then 4001.
func TestRealtimeWebSocketClosedFrames(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "wsgone", 3)
	h.CreateTopic(t, n.URL, key, "wsstay", 3)
	ws := mustWS(t, n.URL, key)
	ws.send(t, map[string]any{"type": "subscribe", "id": "g", "topic": "wsgone"})
	ws.send(t, map[string]any{"type": "subscribe", "id": "s", "topic": "wsstay"})
	// The two subscriptions open concurrently: either may answer first.
	for left := map[any]bool{"g": true, "s": true}; len(left) > 0; {
		f := ws.await(t, "subscribed", "", 20*time.Second, nil)
		if !left[f["id"]] {
			t.Fatalf("subscribed frame %v, want one each for g and s", f)
		}
		delete(left, f["id"])
	}
	h.Must(t, n.URL, "DELETE", "/v1/topics/wsgone", key, nil, http.StatusNoContent)
	f := ws.await(t, "closed", "g", 15*time.Second, nil)
	if f["topic"] != "wsgone" || f["reason"] != "topic_deleted" || f["error"] == "" || f["position"] == nil {
		t.Errorf("closed frame %v, want topic wsgone, reason topic_deleted, error and position", f)
	}
	publishSeq(t, n.URL, key, "wsstay", 0, 1)
	if m := wsMessage(t, ws.await(t, "message", "s", 10*time.Second, nil)); seqOf(t, m) != 0 {
		t.Errorf("the other subscription got %v", m)
	}

	// Token expiry without a refresh.
	// Long enough for a loaded machine to dial and subscribe first.
	tok, tokExp := h.MintToken(t, n.URL, key, 8, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"wsstay"}}})
	short := mustWS(t, n.URL, tok)
	short.send(t, map[string]any{"type": "subscribe", "id": "x", "topic": "wsstay"})
	short.await(t, "subscribed", "x", time.Until(tokExp), nil)
	f = short.await(t, "closed", "", time.Until(tokExp)+20*time.Second, nil)
	if f["reason"] != "token_expired" || f["id"] != nil {
		t.Errorf("at the token's expiry: %v, want a connection closed frame reason token_expired", f)
	}
	if code := short.closeCode(t, 10*time.Second); code != 4001 {
		t.Errorf("close code %d after token_expired, want 4001", code)
	}

	// Shutdown.
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	defer func() { <-stopped }()
	f = ws.await(t, "closed", "", 30*time.Second, nil)
	if f["reason"] != "shutdown" || f["id"] != nil {
		t.Errorf("at shutdown: %v, want a connection closed frame reason shutdown", f)
	}
	if code := ws.closeCode(t, 10*time.Second); code != websocket.CloseGoingAway {
		t.Errorf("close code %d at shutdown, want 1001", code)
	}
}

// Every SSE stream starts with an id-only event carrying its position, so
// a stream cut before its first message resumes exactly; a room stream
// whose room is quiet while its partition moves is kept current by
// id-only events, so its reconnect needs no catch-up over other rooms'
// records (here: beyond a replay window of 5, which would be a resync).
func TestRealtimeSSEStartPosition(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = 300 * time.Millisecond
		cfg.Realtime.ReplayWindowRecords = 5
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "startpos", 3)
	s := mustSSE(t, n.URL, key, "startpos", nil, "")
	ev, ok := s.NextAny(10 * time.Second)
	if !ok || !ev.idOnly() || !strings.Contains(ev.ID, ".") {
		t.Fatalf("first event %+v (ok %v), want an id-only event with the starting position", ev, ok)
	}
	start := ev.ID
	s.Close()
	publishSeq(t, n.URL, key, "startpos", 0, 4, spread...)
	s = mustSSE(t, n.URL, key, "startpos", nil, start)
	got := map[int]bool{}
	for _, m := range s.Messages(t, 4, 30*time.Second) {
		got[seqOf(t, m.Msg)] = true
	}
	if len(got) != 4 || !got[0] || !got[3] {
		t.Fatalf("resumed from the starting id: got seqs %v, want 0-3", got)
	}
	s.Close()

	// A room stream: 12 records of other rooms on its partition.
	room := mustSSE(t, n.URL, key, "startpos", url.Values{"room": {"eu"}}, "")
	publishSeq(t, n.URL, key, "startpos", 100, 101, "eu")
	m := room.Messages(t, 1, 30*time.Second)[0]
	part := m.Pos(t).Partition
	var others []string
	for i := 0; len(others) < 3 && i < 1000; i++ {
		r := "o" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if roomPartitionOf(r, 3) == part {
			others = append(others, r)
		}
	}
	publishSeq(t, n.URL, key, "startpos", 200, 212, others...)
	wantOff := m.Pos(t).Offset + 13
	deadline := time.Now().Add(15 * time.Second)
	for {
		ev, ok := room.NextAny(time.Until(deadline))
		if !ok {
			t.Fatalf("no id-only event moved the room stream past the other rooms' records (last id %q)", room.LastID)
		}
		if !ev.idOnly() {
			t.Fatalf("room stream got %+v, want only id-only events", ev)
		}
		if posNext(t, ev.ID, part) == wantOff {
			break
		}
	}
	room.Close()
	publishSeq(t, n.URL, key, "startpos", 101, 102, "eu")
	room = mustSSE(t, n.URL, key, "startpos", url.Values{"room": {"eu"}}, room.LastID)
	ev, ok = room.Next(30 * time.Second)
	if !ok || ev.Type != "" {
		t.Fatalf("reconnect from the kept-current id: %+v, want the next eu message (no resync)", ev)
	}
	if seqOf(t, ev.message(t).Msg) != 101 {
		t.Fatalf("reconnect got %s", ev.Data)
	}
}

// roomPartitionOf is the partition MsgMesh keys room onto (murmur2, as
// franz-go's and the Java client's default partitioners).
func roomPartitionOf(room string, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(room)}, n))
}

// posNext is partition p's next offset in position id (-1 untracked).
func posNext(t testing.TB, id string, p int32) int64 {
	t.Helper()
	_, rest, ok := strings.Cut(id, ".")
	parts := strings.Split(rest, "-")
	if !ok || int(p) >= len(parts) {
		t.Fatalf("position %q has no partition %d", id, p)
	}
	if parts[p] == "" {
		return -1
	}
	var o int64
	if err := json.Unmarshal([]byte(parts[p]), &o); err != nil {
		t.Fatalf("position %q: %v", id, err)
	}
	return o
}
