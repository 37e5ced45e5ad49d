package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// One WebSocket, two subscriptions: one topic is flooded while the other
// gets a message now and then. The calm subscription's messages arrive
// promptly while the flood is still being written; the flooded one still
// gets every message in order; each resumes alone from its position.
func TestRealtimeWebSocketFloodDoesNotStarve(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.WSQueueFrames = 32
		cfg.Realtime.SubscriberBuffer = 64
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "flood", 3)
	h.CreateTopic(t, n.URL, key, "calm", 3)
	ws := rawWS(t, n.URL, key)
	send := func(f map[string]any) {
		if err := ws.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
	}
	send(map[string]any{"type": "ping"})
	send(map[string]any{"type": "subscribe", "id": "A", "topic": "flood"})
	send(map[string]any{"type": "subscribe", "id": "B", "topic": "calm", "room": "c"})
	for got := 0; got < 3; {
		f := readFrame(t, ws, 10*time.Second)
		if f["type"] != "pong" && f["type"] != "subscribed" {
			t.Fatalf("frame %v, want pong and subscribed", f)
		}
		got++
	}
	// The client reads nothing while 6,000 messages of 4 KiB (far more
	// than socket buffers hold) flood A; then B gets 3.
	const flood = 6000
	padSeq = strings.Repeat("x", 4096)
	floodCursors := publishSeq(t, n.URL, key, "flood", 0, flood, spread...)
	padSeq = ""
	calm := publishSeq(t, n.URL, key, "calm", 0, 3, "c")
	var aMsgs, bMsgs []h.Msg
	aAtB := -1
	lastA := ""
	for len(aMsgs) < flood || len(bMsgs) < 3 {
		f := readFrame(t, ws, 60*time.Second)
		if f["type"] != "message" {
			t.Fatalf("unexpected frame %v", f)
		}
		if f["position"] == nil || f["position"] == "" {
			t.Fatalf("message frame without a position: %v", f)
		}
		m := wsMessage(t, f)
		switch f["id"] {
		case "A":
			aMsgs = append(aMsgs, m)
			lastA, _ = f["position"].(string)
		case "B":
			bMsgs = append(bMsgs, m)
			if len(bMsgs) == 3 {
				aAtB = len(aMsgs)
			}
		}
	}
	t.Logf("the calm subscription's 3 messages came after %d of %d flood messages", aAtB, flood)
	if aAtB >= flood/2 {
		t.Errorf("the calm subscription waited behind %d flood messages", aAtB)
	}
	seen := map[int]bool{}
	for _, m := range aMsgs {
		seq := seqOf(t, m)
		if seen[seq] || floodCursors[seq] != m.Pos(t) {
			t.Fatalf("flood seq %d duplicated or at the wrong cursor %s", seq, m.Cursor)
		}
		seen[seq] = true
	}
	for i, m := range bMsgs {
		if seqOf(t, m) != i || calm[i] != m.Pos(t) {
			t.Fatalf("calm message %d is seq %d at %s", i, seqOf(t, m), m.Cursor)
		}
	}
	// Unsubscribe A; resubscribe from its last position on a new
	// connection (another subscription id) after more were published.
	send(map[string]any{"type": "unsubscribe", "id": "A"})
	if f := readFrame(t, ws, 10*time.Second); f["type"] != "unsubscribed" || f["id"] != "A" {
		t.Fatalf("unsubscribe answered %v", f)
	}
	more := publishSeq(t, n.URL, key, "flood", flood, flood+20, spread...)
	ws2 := mustWS(t, n.URL, key)
	ws2.send(t, map[string]any{"type": "subscribe", "id": "A2", "topic": "flood", "cursor": lastA})
	ws2.await(t, "subscribed", "A2", 10*time.Second, nil)
	for i := range 20 {
		f := ws2.await(t, "message", "A2", 30*time.Second, nil)
		m := wsMessage(t, f)
		if more[seqOf(t, m)] != m.Pos(t) {
			t.Fatalf("resumed message %d: seq %d at %s", i, seqOf(t, m), m.Cursor)
		}
	}
	// Subscription errors are frames, the connection stays.
	ws2.send(t, map[string]any{"type": "subscribe", "id": "X", "topic": "flood", "cursor": "9-9"})
	if f := ws2.await(t, "error", "X", 10*time.Second, nil); f["code"] != "invalid_cursor" {
		t.Fatalf("bad cursor frame %v", f)
	}
	ws2.send(t, map[string]any{"type": "subscribe", "id": "Y", "topic": "nope"})
	if f := ws2.await(t, "error", "Y", 10*time.Second, nil); f["code"] != "topic_not_found" {
		t.Fatalf("unknown topic frame %v", f)
	}
	// Graceful shutdown closes with 1001.
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	defer func() { <-stopped }()
	if code := ws2.closeCode(t, 30*time.Second); code != websocket.CloseGoingAway {
		t.Fatalf("close code %d at shutdown, want 1001", code)
	}
}

// Room capabilities hold on the WebSocket too; a token is refreshed in
// place; without a refresh the connection closes 4001 at expiry and a
// reconnect with the old token is 401 token_expired.
func TestRealtimeWebSocketAuth(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = 500 * time.Millisecond
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "chat", 3)
	caps := []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}}
	// token-expiring comes half-way for a token this short (the lead,
	// 30 s, is more than half its life): at 5 s of 10, time enough for a
	// loaded machine to subscribe and read before it and to refresh
	// between it and the expiry (a 4 s token sometimes expired before the
	// subscription was even answered).
	tok, tokExp := h.MintToken(t, n.URL, key, 10, caps)

	ws, _, err := dialWS(t, n.URL, tok, true) // ?token=
	if err != nil {
		t.Fatalf("dial with ?token=: %v", err)
	}
	// token-expiring may come while the steps below wait for other frames.
	var expiring map[string]any
	keep := func(f map[string]any) {
		if f["type"] == "token-expiring" && expiring == nil {
			expiring = f
		}
	}
	ws.send(t, map[string]any{"type": "subscribe", "id": "all", "topic": "chat"})
	if f := ws.await(t, "error", "all", 10*time.Second, keep); f["code"] != "forbidden" {
		t.Fatalf("whole topic with a room-42 token: %v", f)
	}
	ws.send(t, map[string]any{"type": "subscribe", "id": "43", "topic": "chat", "room": "room-43"})
	if f := ws.await(t, "error", "43", 10*time.Second, keep); f["code"] != "forbidden" {
		t.Fatalf("room-43 with a room-42 token: %v", f)
	}
	ws.send(t, map[string]any{"type": "subscribe", "id": "42", "topic": "chat", "room": "room-42"})
	ws.await(t, "subscribed", "42", 10*time.Second, keep)
	publishSeq(t, n.URL, key, "chat", 0, 6, "room-41", "room-42")
	for i := range 3 {
		f := ws.await(t, "message", "42", 10*time.Second, keep)
		if m := wsMessage(t, f); m.RoomName() != "room-42" || seqOf(t, m) != 2*i+1 {
			t.Fatalf("room-42 subscription got %v", f)
		}
	}
	// token-expiring comes before expiry; a refresh keeps the connection.
	if expiring == nil {
		expiring = ws.await(t, "token-expiring", "", time.Until(tokExp), nil)
	}
	if time.Now().After(tokExp) {
		t.Fatalf("token-expiring %v came after the token's expiry %s", expiring, tokExp.Format(time.RFC3339))
	}
	fresh, _ := h.MintToken(t, n.URL, key, 120, caps)
	ws.send(t, map[string]any{"type": "refresh", "token": fresh})
	ws.await(t, "refreshed", "", 10*time.Second, nil)
	// Past the first token's expiry (its exp is whole seconds), the
	// refreshed connection still delivers.
	time.Sleep(time.Until(tokExp) + 1500*time.Millisecond)
	publishSeq(t, n.URL, key, "chat", 6, 8, "room-41", "room-42")
	if f := ws.await(t, "message", "42", 10*time.Second, nil); seqOf(t, wsMessage(t, f)) != 7 {
		t.Fatalf("after the refresh got %v", f)
	}

	// Without a refresh: close 4001 at expiry (not before), then 401
	// token_expired. The token lives long enough for a loaded machine to
	// dial and subscribe first.
	short, shortExp := h.MintToken(t, n.URL, key, 8, caps)
	ws3 := mustWS(t, n.URL, short)
	ws3.send(t, map[string]any{"type": "subscribe", "id": "42", "topic": "chat", "room": "room-42"})
	ws3.await(t, "subscribed", "42", time.Until(shortExp), nil)
	if code := ws3.closeCode(t, time.Until(shortExp)+20*time.Second); code != 4001 {
		t.Fatalf("close code %d at token expiry, want 4001", code)
	}
	if early := time.Until(shortExp); early > time.Second {
		t.Fatalf("closed 4001 %v before the token expired", early)
	}
	_, resp, err := dialWS(t, n.URL, short, false)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("reconnect with the expired token: err %v resp %v, want 401", err, resp)
	}
	_, resp, err = dialWS(t, n.URL, "", false)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("connect without a credential: err %v, want 401", err)
	}
}
