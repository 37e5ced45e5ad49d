package integration

// What reaches the realtime routes from outside: message cursors across a
// topic's re-creation, keys in URLs, the Authorization scheme's case,
// bursts of client frames, and records written by Kafka tools.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/twmb/franz-go/pkg/kgo"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// A bare message cursor does not silently cross a topic's deletion: after
// DELETE and re-create, ?cursor=0-4 (of the old topic) is a
// msgmesh-resync epoch, not the new topic's data from offset 5; with
// ?epoch= naming the new topic it resumes exactly, with the old epoch it
// resyncs. WebSocket subscribe frames take the same epoch.
func TestRealtimeBareCursorAcrossRecreate(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	other := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "again", 1)
	old := h.Must(t, n.URL, "GET", "/v1/topics/again", key, nil, http.StatusOK).JSON(t)["epoch"].(string)
	cs := publishSeq(t, n.URL, key, "again", 0, 5)
	if cs[4].String() != "0-4" {
		t.Fatalf("the 5th message is %s, want 0-4", cs[4])
	}
	// Before any deletion a bare cursor resumes exactly.
	s := mustSSE(t, n.URL, key, "again", url.Values{"cursor": {"0-2"}}, "")
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 3 {
		t.Fatalf("cursor 0-2 resumed at seq %d, want 3", seqOf(t, m.Msg))
	}
	s.Close()

	h.Must(t, n.URL, "DELETE", "/v1/topics/again", key, nil, http.StatusNoContent)
	h.CreateTopic(t, n.URL, key, "again", 1)
	fresh := h.Must(t, n.URL, "GET", "/v1/topics/again", key, nil, http.StatusOK).JSON(t)["epoch"].(string)
	// Published through the other node (n's gateway producer may hold the
	// old topic id after delete + re-create, see ResyncBeyondWindow).
	publishSeq(t, other.URL, key, "again", 100, 110)

	wantResync := func(what string, q url.Values) {
		t.Helper()
		s := mustSSE(t, n.URL, key, "again", q, "")
		ev, ok := s.Next(30 * time.Second)
		if !ok || ev.Type != "msgmesh-resync" || !strings.Contains(ev.Data, `"reason":"epoch"`) {
			t.Fatalf("%s: first event %+v (ok %v), want msgmesh-resync reason epoch", what, ev, ok)
		}
		s.Close()
	}
	wantResync("bare cursor 0-4 after re-create", url.Values{"cursor": {"0-4"}})
	wantResync("cursor 0-4 with the old epoch", url.Values{"cursor": {"0-4"}, "epoch": {old}})
	s = mustSSE(t, n.URL, key, "again", url.Values{"cursor": {"0-4"}, "epoch": {fresh}}, "")
	if m := s.Messages(t, 1, 30*time.Second)[0]; seqOf(t, m.Msg) != 105 {
		t.Fatalf("cursor 0-4 with the new epoch resumed at seq %d, want 105", seqOf(t, m.Msg))
	}
	s.Close()
	_, r := openSSE(t, n.URL, key, "again", url.Values{"cursor": {"0-4"}, "epoch": {"no/such"}}, "")
	h.WantError(t, "a malformed epoch", r, http.StatusBadRequest, "invalid_cursor")

	ws := mustWS(t, n.URL, key)
	ws.send(t, map[string]any{"type": "subscribe", "id": "bare", "topic": "again", "cursor": "0-4"})
	if f := ws.await(t, "resync", "bare", 15*time.Second, nil); f["reason"] != "epoch" {
		t.Errorf("WebSocket bare cursor after re-create: %v, want resync epoch", f)
	}
	ws.send(t, map[string]any{"type": "subscribe", "id": "ep", "topic": "again", "cursor": "0-4", "epoch": fresh})
	f := ws.await(t, "message", "ep", 15*time.Second, func(f map[string]any) {
		if f["type"] == "resync" && f["id"] == "ep" {
			t.Errorf("WebSocket cursor with the current epoch resynced: %v", f)
		}
	})
	if seqOf(t, wsMessage(t, f)) != 105 {
		t.Errorf("WebSocket cursor 0-4 with the new epoch started at %v", f)
	}
}

// ?token= takes short-lived tokens only: a key there is 401 key_in_url on
// SSE and WebSocket (keys stay out of URLs, logs and browser history).
// The Authorization scheme is case-insensitive for the whole life of a
// stream: a "bearer" stream survives its credential re-checks.
func TestRealtimeCredentialsInURLAndHeader(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.Unlimited(cfg)
		cfg.Realtime.Heartbeat = 200 * time.Millisecond
	})
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "urlkey", 3)
	for _, cred := range []string{key, c.OperatorKey} {
		_, r := openSSE(t, n.URL, "", "urlkey", url.Values{"token": {cred}}, "")
		h.WantError(t, "SSE with a key in ?token=", r, http.StatusUnauthorized, "key_in_url")
		_, resp, err := dialWS(t, n.URL, cred, true)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("WebSocket with a key in ?token=: err %v resp %v, want 401", err, resp)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if body["code"] != "key_in_url" {
			t.Errorf("WebSocket with a key in ?token=: body %v, want code key_in_url", body)
		}
	}
	tok, _ := h.MintToken(t, n.URL, key, 60, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"urlkey"}}})
	mustSSE(t, n.URL, "", "urlkey", url.Values{"token": {tok}}, "").Close()

	// "bearer" (lower case) on SSE and WebSocket, past several re-checks.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/v1/topics/urlkey/events", nil)
	req.Header.Set("Authorization", "bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE with Authorization: bearer: %v %v", err, resp)
	}
	defer resp.Body.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(n.URL, "http")+"/v1/ws", http.Header{"Authorization": {"bearer " + key}})
	if err != nil {
		t.Fatalf("WebSocket with Authorization: bearer: %v", err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"type": "subscribe", "id": "b", "topic": "urlkey"}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, conn, 10*time.Second); f["type"] != "subscribed" {
		t.Fatalf("frame %v, want subscribed", f)
	}
	// Every heartbeat follows a credential re-check that passed (a failed
	// one ends the stream with msgmesh-closed): wait for three of them (the
	// WebSocket's pings, on the same heartbeat, re-check it alike).
	got := make(chan string, 2)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		said := false
		for {
			k, err := resp.Body.Read(buf)
			b.Write(buf[:k])
			if !said && strings.Count(b.String(), ": heartbeat\n") >= 3 {
				said = true
				got <- "re-checked"
			}
			if strings.Contains(b.String(), `"seq":0`) {
				got <- "message"
				return
			}
			if err != nil || strings.Contains(b.String(), "msgmesh-closed") {
				got <- "ended: " + b.String()
				return
			}
		}
	}()
	for _, want := range []string{"re-checked", "message"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("the bearer SSE stream %s, want %s", g, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the bearer SSE stream: no %s", want)
		}
		if want == "re-checked" {
			publishSeq(t, n.URL, key, "urlkey", 0, 1)
		}
	}
	for {
		f := readFrame(t, conn, 10*time.Second)
		if f["type"] == "message" {
			break
		}
		if f["type"] == "closed" {
			t.Fatalf("the bearer WebSocket was closed: %v", f)
		}
	}
}

// A burst of 300 pings on one connection gets 300 pongs: client frames are
// rate-limited on their own (read more slowly), never by the delivery
// queue's slow-consumer rule.
func TestRealtimeWebSocketPingBurst(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	conn := rawWS(t, n.URL, c.AdminKey)
	const burst = 300
	for range burst {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)); err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	for i := range burst {
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("after %d pongs: %v", i, err)
		}
		if string(data) != `{"type":"pong"}` {
			t.Fatalf("frame %d: %s, want pong", i, data)
		}
	}
	// Still open and serving.
	if err := conn.WriteJSON(map[string]any{"type": "ping"}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, conn, 10*time.Second); f["type"] != "pong" {
		t.Fatalf("after the burst: %v", f)
	}

	// A flood beyond the burst is read more slowly (100 frames a second
	// after a burst of 500), every ping still answered, and a
	// subscription's messages are delivered in the middle of it.
	h.CreateTopic(t, n.URL, c.AdminKey, "pings", 1)
	if err := conn.WriteJSON(map[string]any{"type": "subscribe", "id": "p", "topic": "pings"}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, conn, 10*time.Second); f["type"] != "subscribed" {
		t.Fatalf("frame %v, want subscribed", f)
	}
	const flood = 800
	began := time.Now()
	go func() {
		for range flood {
			if conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)) != nil {
				return
			}
		}
	}()
	// Publish once the flood is read at the limited rate: past the burst
	// of 500 frames the server admits at once (wsFrameBurst).
	const pastBurst = 550
	pongs, msgAt := 0, -1
	for pongs < flood || msgAt < 0 {
		f := readFrame(t, conn, 15*time.Second)
		switch f["type"] {
		case "pong":
			if pongs++; pongs == pastBurst {
				publishSeq(t, n.URL, c.AdminKey, "pings", 0, 1)
			}
		case "message":
			msgAt = pongs
		default:
			t.Fatalf("frame %v during the flood", f)
		}
	}
	took := time.Since(began)
	t.Logf("%d pings answered in %v; the message arrived after %d pongs", flood, took.Round(time.Millisecond), msgAt)
	if took < 3*time.Second {
		t.Errorf("%d pings (beyond the first ones' allowance) answered in %v: client frames are not rate-limited", flood, took)
	}
	if msgAt >= flood {
		t.Errorf("the message waited behind every pong: deliveries are not apart from client frames")
	}
}

// Records written by Kafka tools: a record keyed "eu" by kcat's default
// partitioner (librdkafka's consistent_random: crc32) lands on another
// partition than the room's (murmur2), so a ?room=eu stream does not
// receive it; it is counted (msgmesh_realtime_room_misplaced_records_total)
// and logged. With -X topic.partitioner=murmur2_random (the README's fix)
// the room stream receives it. The whole-topic stream receives both.
func TestRealtimeRoomsFromKafkaTools(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	tp := h.CreateTopic(t, n.URL, key, "tools", 3)
	room := mustSSE(t, n.URL, key, "tools", url.Values{"room": {"eu"}}, "")
	whole := mustSSE(t, n.URL, key, "tools", nil, "")
	if p := roomPartitionOf("eu", 3); p != 1 {
		t.Fatalf("room eu is on partition %d, want 1", p)
	}
	// A producer with another partitioner: key eu on partition 0.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.KafkaTopic, Partition: 0, Key: []byte("eu"), Value: []byte(`{"seq":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produced := 1
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Logf("kcat is not installed (apt-get install kcat): only the franz-go producer is tried")
	} else {
		run := func(seq string, args ...string) {
			t.Helper()
			cmd := exec.CommandContext(ctx, kcat, append([]string{"-P", "-b", strings.Join(c.Brokers, ","), "-t", tp.KafkaTopic, "-k", "eu"}, args...)...)
			cmd.Stdin = strings.NewReader(`{"seq":` + seq + "}\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kcat %v: %v: %s", args, err, out)
			}
			produced++
		}
		run("2")                                           // librdkafka's default partitioner
		run("3", "-X", "topic.partitioner=murmur2_random") // the README's fix
	}
	publishSeq(t, n.URL, key, "tools", 4, 5, "eu")
	// The whole topic sees everything.
	seen := map[int]string{}
	for _, m := range whole.Messages(t, produced+1, 30*time.Second) {
		seen[seqOf(t, m.Msg)] = m.Cursor
	}
	t.Logf("whole-topic stream: %v", seen)
	// The room stream: the murmur2 records only, in order.
	want := []int{4}
	if kcat != "" {
		want = []int{3, 4}
	}
	for _, w := range want {
		m := room.Messages(t, 1, 30*time.Second)[0]
		if seqOf(t, m.Msg) != w || m.Pos(t).Partition != 1 {
			t.Fatalf("room eu got seq %d at %s, want seq %d on partition 1", seqOf(t, m.Msg), m.Cursor, w)
		}
	}
	misplaced := produced - len(want) + 1
	if ok, _ := h.PollUntil(10*time.Second, 100*time.Millisecond, func() bool {
		return metricValue(t, n.URL, "msgmesh_realtime_room_misplaced_records_total") >= float64(misplaced)
	}); !ok {
		t.Errorf("msgmesh_realtime_room_misplaced_records_total = %v, want %d",
			metricValue(t, n.URL, "msgmesh_realtime_room_misplaced_records_total"), misplaced)
	}
}
