package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/cursor"
)

// rooms spread over the 3 partitions of the test topics.
var spread = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", ""}

// A stream cut in the middle (its node shut down) resumes with
// Last-Event-ID on another node: across 3 partitions nothing is lost and
// nothing is repeated; then a 5,000-message backlog missed while away is
// streamed from Kafka on a reconnect to the first node's successor.
func TestRealtimeSSEExactResumeAcrossNodes(t *testing.T) {
	c := h.NewCluster(t)
	a := c.Start(t, h.Unlimited)
	b := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, a.URL, key, "feed", 3)

	s := mustSSE(t, a.URL, key, "feed", nil, "")
	if ct := s.Resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if s.Resp.Header.Get("Cache-Control") != "no-cache" || s.Resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("headers %v: want Cache-Control no-cache and X-Accel-Buffering no", s.Resp.Header)
	}
	cursors := publishSeq(t, a.URL, key, "feed", 0, 300, spread...)
	parts := map[int32]bool{}
	for _, cu := range cursors {
		parts[cu.Partition] = true
	}
	if len(parts) != 3 {
		t.Fatalf("messages landed on partitions %v, want all 3", parts)
	}
	got := map[int]int{} // seq → times received
	check := func(ms []rtMsg) {
		last := map[int32]int64{}
		for _, m := range ms {
			cu := m.Pos(t)
			if o, ok := last[cu.Partition]; ok && cu.Offset <= o {
				t.Fatalf("partition %d went from offset %d to %d within one stream", cu.Partition, o, cu.Offset)
			}
			last[cu.Partition] = cu.Offset
			seq := seqOf(t, m.Msg)
			if want := cursors[seq]; want != cu {
				t.Fatalf("seq %d arrived with cursor %s, published at %s", seq, cu, want)
			}
			got[seq]++
		}
	}
	check(s.Messages(t, 120, 30*time.Second))
	lastID := s.LastID
	if !strings.Contains(lastID, ".") {
		t.Fatalf("event id %q is not a position", lastID)
	}
	// Shut node a down mid-stream: its SSE ends.
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop() }()
	defer func() { <-stopped }()
	if !s.Ended(30 * time.Second) {
		t.Fatal("the SSE stream did not end when its node shut down")
	}
	// While away, more is published (through node b).
	for k, v := range publishSeq(t, b.URL, key, "feed", 300, 600, spread...) {
		cursors[k] = v
	}
	s2 := mustSSE(t, b.URL, key, "feed", url.Values{"cursor": {"ignored-when-last-event-id"}}, lastID)
	check(s2.Messages(t, 600-120, 60*time.Second))
	for i := range 600 {
		if got[i] != 1 {
			t.Fatalf("seq %d received %d times, want exactly once (resume is exact)", i, got[i])
		}
	}
	if ev, ok := s2.Next(500 * time.Millisecond); ok {
		t.Fatalf("extra event after every message: %+v", ev)
	}

	// 5,000 messages missed while away are streamed on reconnect (to a
	// fresh node), in order and complete.
	lastID = s2.LastID
	s2.Close()
	more := publishSeq(t, b.URL, key, "feed", 600, 5600, spread...)
	d := c.Start(t, h.Unlimited)
	s3 := mustSSE(t, d.URL, key, "feed", nil, lastID)
	ms := s3.Messages(t, 5000, 90*time.Second)
	seen := map[int]bool{}
	for _, m := range ms {
		seq := seqOf(t, m.Msg)
		if more[seq] != m.Pos(t) || seen[seq] {
			t.Fatalf("backfill message seq %d at %s (published at %s, seen before %v)", seq, m.Cursor, more[seq], seen[seq])
		}
		seen[seq] = true
	}
	// ...and then the live feed continues with no gap.
	live := publishSeq(t, b.URL, key, "feed", 5600, 5610, spread...)
	for _, m := range s3.Messages(t, 10, 30*time.Second) {
		if seq := seqOf(t, m.Msg); live[seq] != m.Pos(t) {
			t.Fatalf("live message seq %d at %s, published at %s", seq, m.Cursor, live[seq])
		}
	}
}

// A single message cursor resumes a room stream after that message.
func TestRealtimeSSECursorParam(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "cur", 3)
	cs := publishSeq(t, n.URL, key, "cur", 0, 20, "room-a")
	s := mustSSE(t, n.URL, key, "cur", url.Values{"room": {"room-a"}, "cursor": {cs[9].String()}}, "")
	for i, m := range s.Messages(t, 10, 30*time.Second) {
		if seqOf(t, m.Msg) != 10+i {
			t.Fatalf("message %d is seq %d, want %d", i, seqOf(t, m.Msg), 10+i)
		}
	}
	// from=earliest on the whole topic starts at the oldest record.
	s2 := mustSSE(t, n.URL, key, "cur", url.Values{"from": {"earliest"}}, "")
	if m := s2.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 0 {
		t.Fatalf("from=earliest started at seq %d", seqOf(t, m.Msg))
	}
}

// Beyond the replay window (records, age, or another epoch of the topic)
// the stream says msgmesh-resync first, then continues live.
func TestRealtimeSSEResyncBeyondWindow(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.ReplayWindowRecords = 5
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "win", 3)
	s := mustSSE(t, n.URL, key, "win", nil, "")
	publishSeq(t, n.URL, key, "win", 0, 3, "x")
	s.Messages(t, 3, 30*time.Second)
	id := s.LastID
	s.Close()

	wantResync := func(s *sseStream, reason string) {
		t.Helper()
		ev, ok := s.Next(30 * time.Second)
		if !ok || ev.Type != "msgmesh-resync" || !strings.Contains(ev.Data, `"reason":"`+reason+`"`) || ev.ID == "" {
			t.Fatalf("first event %+v (ok %v), want msgmesh-resync with reason %s and an id", ev, ok, reason)
		}
	}
	// Within the window: exact.
	publishSeq(t, n.URL, key, "win", 3, 6, "x")
	s = mustSSE(t, n.URL, key, "win", nil, id)
	if ms := s.Messages(t, 3, 30*time.Second); seqOf(t, ms[0].Msg) != 3 {
		t.Fatalf("resume within the window started at seq %d", seqOf(t, ms[0].Msg))
	}
	id = s.LastID
	s.Close()
	// 6 missed in one partition > window of 5: resync, then live.
	publishSeq(t, n.URL, key, "win", 6, 12, "x")
	s = mustSSE(t, n.URL, key, "win", nil, id)
	wantResync(s, "window_records")
	publishSeq(t, n.URL, key, "win", 12, 13, "x")
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 12 {
		t.Fatalf("after the resync got seq %d, want the live 12", seqOf(t, m.Msg))
	}
	// The resync's own id resumes without another resync.
	id = s.LastID
	s.Close()
	publishSeq(t, n.URL, key, "win", 13, 14, "x")
	s = mustSSE(t, n.URL, key, "win", nil, id)
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 13 {
		t.Fatalf("got seq %d, want 13", seqOf(t, m.Msg))
	}
	id = s.LastID
	s.Close()

	// Age: a node whose window is 1 s.
	aged := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.ReplayWindowAge = time.Second
	})
	publishSeq(t, n.URL, key, "win", 14, 15, "x")
	time.Sleep(1500 * time.Millisecond)
	s = mustSSE(t, aged.URL, key, "win", nil, id)
	wantResync(s, "window_age")
	s.Close()

	// Another epoch: the topic deleted and made again.
	h.Must(t, n.URL, "DELETE", "/v1/topics/win", key, nil, http.StatusNoContent)
	h.CreateTopic(t, n.URL, key, "win", 3)
	s = mustSSE(t, n.URL, key, "win", nil, id)
	wantResync(s, "epoch")
	// Published through n, whose producer wrote to the deleted topic: it
	// drops the old topic id on UNKNOWN_TOPIC_ID and writes to the new one.
	publishSeq(t, n.URL, key, "win", 100, 101, "x")
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 100 {
		t.Fatalf("after the epoch resync got seq %d, want 100", seqOf(t, m.Msg))
	}
}

// Nothing missed, nothing to say: empty partitions, an idle one, and a
// cursor whose record aged out of the window with nothing after it resume
// without a resync.
func TestRealtimeSSENoSpuriousResync(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.ReplayWindowRecords = 5
		cfg.Realtime.ReplayWindowAge = time.Second
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "idle", 3)
	s := mustSSE(t, n.URL, key, "idle", nil, "")
	publishSeq(t, n.URL, key, "idle", 0, 1, "only")
	m := s.Messages(t, 1, 30*time.Second)[0]
	s.Close()
	for i, start := range []struct{ lastID, cursor string }{{s.LastID, ""}, {"", "<last cursor>"}} {
		// The last record ages out of the 1 s window; two partitions are
		// empty; nothing was published since.
		time.Sleep(1500 * time.Millisecond)
		q := url.Values{}
		if start.cursor != "" {
			q.Set("cursor", m.Cursor)
		}
		s = mustSSE(t, n.URL, key, "idle", q, start.lastID)
		publishSeq(t, n.URL, key, "idle", i+1, i+2, "only")
		ev, ok := s.Next(30 * time.Second)
		if !ok || ev.Type != "" {
			t.Fatalf("start %+v: first event %+v, want the new message (no resync)", start, ev)
		}
		m = ev.message(t)
		if seqOf(t, m.Msg) != i+1 {
			t.Fatalf("start %+v: got seq %d, want %d", start, seqOf(t, m.Msg), i+1)
		}
		s.Close()
	}
}

// Malformed or impossible positions are 400 before any streaming.
func TestRealtimeSSEBadStarts(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "bad", 3)
	s := mustSSE(t, n.URL, key, "bad", nil, "")
	publishSeq(t, n.URL, key, "bad", 0, 2, "x")
	s.Messages(t, 2, 30*time.Second)
	good := s.LastID
	s.Close()
	epoch := good[:strings.Index(good, ".")]
	for _, tc := range []struct {
		name, cursor, lastID, from, room string
		status                           int
		code                             string
	}{
		{"garbage cursor", "garbage", "", "", "", 400, "invalid_cursor"},
		{"negative offset", "0--1", "", "", "", 400, "invalid_cursor"},
		{"partition beyond the topic", "5-0", "", "", "", 400, "invalid_cursor"},
		{"offset beyond the log end", "0-999", "", "", "", 400, "invalid_cursor"},
		{"id with a bad offset", "", epoch + ".0-x-0", "", "", 400, "invalid_cursor"},
		{"id with too many partitions", "", epoch + ".0-0-0-0", "", "", 400, "invalid_cursor"},
		{"id beyond the log end", "", epoch + ".0-0-999", "", "", 400, "invalid_cursor"},
		{"garbage Last-Event-ID", "", "x.y.z", "", "", 400, "invalid_cursor"},
		{"bad from", "", "", "yesterday", "", 400, "invalid_request"},
		{"empty room", "", "", "", "\x00", 400, "invalid_request"},
	} {
		q := url.Values{}
		if tc.cursor != "" {
			q.Set("cursor", tc.cursor)
		}
		if tc.from != "" {
			q.Set("from", tc.from)
		}
		if tc.room == "\x00" {
			q.Set("room", "")
		}
		st, r := openSSE(t, n.URL, key, "bad", q, tc.lastID)
		if st != nil {
			st.Close()
			t.Errorf("%s: streamed, want %d %s", tc.name, tc.status, tc.code)
			continue
		}
		m := h.WantError(t, tc.name, r, tc.status, tc.code)
		if e, _ := m["error"].(string); tc.name == "garbage cursor" && !strings.Contains(e, "<epoch>.<offset>-<offset>-...") {
			t.Errorf("garbage cursor: error %q, want it to say what a position looks like", e)
		}
	}
	_, r := openSSE(t, n.URL, key, "nope", nil, "")
	h.WantError(t, "unknown topic", r, http.StatusNotFound, "topic_not_found")
	_, r = openSSE(t, n.URL, "", "bad", nil, "")
	h.WantError(t, "no credential", r, http.StatusUnauthorized, "unauthenticated")
}

// A room stream gets only its room, read from the room's partition; a
// credential for room-42 only may subscribe to room-42 and nothing else.
func TestRealtimeSSERooms(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "chat", 3)
	_, roomKey := h.CapKey(t, n.URL, key, "room42", h.Cap{Ops: []string{"subscribe", "tokens.mint"}, Topics: []string{"*"}, Rooms: []string{"room-42"}})
	tok, _ := h.MintToken(t, n.URL, roomKey, 600, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}})
	for _, cred := range []string{roomKey, tok} {
		_, r := openSSE(t, n.URL, cred, "chat", nil, "")
		h.WantForbidden(t, "whole topic with a room-42 credential", r, "room")
		_, r = openSSE(t, n.URL, cred, "chat", url.Values{"room": {"room-43"}}, "")
		h.WantForbidden(t, "room-43 with a room-42 credential", r, "room-43")
	}
	// ?token= (EventSource) works for the allowed room.
	q := url.Values{"room": {"room-42"}, "token": {tok}}
	s := mustSSE(t, n.URL, "", "chat", q, "")
	all := mustSSE(t, n.URL, key, "chat", nil, "")
	cs := publishSeq(t, n.URL, key, "chat", 0, 90, "room-41", "room-42", "room-43")
	ms := s.Messages(t, 30, 30*time.Second)
	for i, m := range ms {
		if m.RoomName() != "room-42" || seqOf(t, m.Msg) != 3*i+1 || cs[3*i+1] != m.Pos(t) {
			t.Fatalf("room stream message %d: room %q seq %d, want room-42 seq %d", i, m.RoomName(), seqOf(t, m.Msg), 3*i+1)
		}
	}
	if ev, ok := s.Next(time.Second); ok {
		t.Fatalf("room stream got an extra event %+v", ev)
	}
	all.Messages(t, 90, 30*time.Second)
	// A room stream's id tracks its partition alone.
	if strings.Count(s.LastID, "-") != 2 || !strings.Contains(s.LastID, ".") {
		t.Fatalf("room stream id %q, want <epoch>.<n>-<n>-<n> with the others empty", s.LastID)
	}
	s.Close()
	publishSeq(t, n.URL, key, "chat", 90, 93, "room-41", "room-42", "room-43")
	s = mustSSE(t, n.URL, tok, "chat", url.Values{"room": {"room-42"}}, s.LastID)
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 91 {
		t.Fatalf("room resume got seq %d, want 91", seqOf(t, m.Msg))
	}
	// A cursor of another partition than the room's is refused.
	var other cursor.Cursor
	for _, cu := range cs {
		if cu.Partition != cs[1].Partition {
			other = cu
			break
		}
	}
	if other != (cursor.Cursor{}) || cs[0].Partition != cs[1].Partition {
		_, r := openSSE(t, n.URL, tok, "chat", url.Values{"room": {"room-42"}, "cursor": {other.String()}}, "")
		h.WantError(t, "cursor of another partition", r, 400, "invalid_cursor")
	}
}

// A slow subscriber beside a fast one: the fast one gets everything
// promptly; the slow one drops out of the live feed, catches up from Kafka
// and still gets everything, in order.
func TestRealtimeSSESlowBesideFast(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.SubscriberBuffer = 16
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "speed", 3)
	fast := mustSSE(t, n.URL, key, "speed", nil, "")
	slow := mustSSE(t, n.URL, key, "speed", nil, "")
	const total = 3000
	slowGot := make(chan []rtMsg, 1)
	go func() {
		var out []rtMsg
		for len(out) < total {
			ev, ok := slow.Next(60 * time.Second)
			if !ok {
				break
			}
			if ev.Type == "" {
				out = append(out, ev.message(t))
			}
			if len(out)%50 == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		slowGot <- out
	}()
	start := time.Now()
	cs := publishSeq(t, n.URL, key, "speed", 0, total, spread...)
	fm := fast.Messages(t, total, 30*time.Second)
	fastTook := time.Since(start)
	sm := <-slowGot
	slowTook := time.Since(start)
	if len(sm) != total {
		t.Fatalf("slow subscriber got %d of %d", len(sm), total)
	}
	for _, ms := range [][]rtMsg{fm, sm} {
		seen := map[int]bool{}
		for _, m := range ms {
			seq := seqOf(t, m.Msg)
			if seen[seq] || cs[seq] != m.Pos(t) {
				t.Fatalf("seq %d duplicated or at the wrong cursor", seq)
			}
			seen[seq] = true
		}
	}
	t.Logf("fast subscriber done in %v, slow in %v", fastTook, slowTook)
	// The series exists from the start (at 0): it must have counted.
	if metricValue(t, n.URL, `msgmesh_realtime_slow_consumers_total{action="catchup"}`) < 1 {
		t.Errorf("the slow subscriber never fell back to catching up (metrics)")
	}
}

// A token expiring mid-stream ends the stream (at its expiry, not
// before); the reconnect is 401 token_expired, never served anonymously.
func TestRealtimeSSETokenExpiry(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "exp", 3)
	// Long enough that a loaded machine connects and delivers a message
	// well before it expires (at 2 s the stream sometimes ended first).
	tok, exp := h.MintToken(t, n.URL, key, 8, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"exp"}}})
	s := mustSSE(t, n.URL, "", "exp", url.Values{"token": {tok}}, "")
	publishSeq(t, n.URL, key, "exp", 0, 1)
	s.Messages(t, 1, time.Until(exp))
	// The stream ends with msgmesh-closed token_expired.
	deadline := time.Now().Add(time.Until(exp) + 20*time.Second)
	closed := ""
	for {
		ev, ok := s.NextAny(time.Until(deadline))
		if !ok {
			break
		}
		if ev.Type == "msgmesh-closed" {
			closed = ev.Data
		}
	}
	if time.Now().After(deadline) {
		t.Fatalf("the stream outlived its token (expired at %s) by 20s", exp.Format(time.RFC3339Nano))
	}
	if !strings.Contains(closed, `"reason":"token_expired"`) {
		t.Errorf("the stream ended with msgmesh-closed %q, want reason token_expired", closed)
	}
	// expires_at is whole seconds (the JWT's exp); the node ends the
	// stream at it, never a second before.
	if early := time.Until(exp); early > time.Second {
		t.Fatalf("the stream ended %v before its token expired", early)
	}
	_, r := openSSE(t, n.URL, "", "exp", url.Values{"token": {tok}}, s.LastID)
	h.WantError(t, "reconnect with the expired token", r, http.StatusUnauthorized, "token_expired")
	_, r = openSSE(t, n.URL, "", "exp", nil, s.LastID)
	h.WantError(t, "reconnect without a token", r, http.StatusUnauthorized, "unauthenticated")
}
