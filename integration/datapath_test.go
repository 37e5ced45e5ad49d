package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// 10,000 messages over 5 rooms go through publish → poll with nothing
// lost, each room in publish order, and every payload byte for byte as
// published: JSON batches of 100 and raw binary bodies, from concurrent
// publishers (one per room, so each room's order is defined).
func TestDataPathTenThousandMessages(t *testing.T) {
	const (
		rooms        = 5
		perRoom      = 2000
		total        = rooms * perRoom
		batchSize    = 100
		rawEvery     = batchSize + 1 // each full JSON batch of a room is followed by one raw binary publish
		topic        = "bulk"
		group        = "g-bulk"
		pollDeadline = 90 * time.Second
	)
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited) // a throughput test, not one of the plan's rate limits
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 3)

	// want[room][seq] is the payload; cursorOf[room][seq] the published cursor.
	type sent struct {
		payload []byte
		cursor  string
		raw     bool
	}
	want := make([][]sent, rooms)
	errs := make(chan error, rooms)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for r := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			room := fmt.Sprintf("room-%d", r)
			var batch [][]byte // each a {"room","data"} message
			var batchPayloads [][]byte
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				// built by hand: encoding/json would compact the payloads
				req := []byte(`{"messages":[`)
				for i, m := range batch {
					if i > 0 {
						req = append(req, ',')
					}
					req = append(req, m...)
				}
				req = append(req, "]}"...)
				st, body, err := h.DoE(ctx, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, req, "application/json")
				if err != nil || st != http.StatusOK {
					return fmt.Errorf("room %s batch publish: status %d err %v: %s", room, st, err, body)
				}
				var ans struct {
					Cursors []string `json:"cursors"`
				}
				if err := json.Unmarshal(body, &ans); err != nil || len(ans.Cursors) != len(batch) {
					return fmt.Errorf("room %s batch publish of %d answered %s", room, len(batch), body)
				}
				for i, p := range batchPayloads {
					want[r] = append(want[r], sent{payload: p, cursor: ans.Cursors[i]})
				}
				batch, batchPayloads = batch[:0], batchPayloads[:0]
				return nil
			}
			for seq := range perRoom {
				if seq%rawEvery == rawEvery-1 {
					// a raw binary message, alone in its request, after the batch before it
					if err := flush(); err != nil {
						errs <- err
						return
					}
					p := make([]byte, 1+mrand.IntN(300))
					_, _ = rand.Read(p)
					p[0] = 0xff // never valid UTF-8, let alone JSON
					st, body, err := h.DoE(ctx, n.URL, "POST", "/v1/topics/"+topic+"/messages?room="+room, key, p, "application/octet-stream")
					if err != nil || st != http.StatusOK {
						errs <- fmt.Errorf("room %s raw publish: status %d err %v: %s", room, st, err, body)
						return
					}
					var ans struct {
						Cursor string `json:"cursor"`
					}
					if err := json.Unmarshal(body, &ans); err != nil || ans.Cursor == "" {
						errs <- fmt.Errorf("room %s raw publish answered %s", room, body)
						return
					}
					want[r] = append(want[r], sent{payload: p, cursor: ans.Cursor, raw: true})
					continue
				}
				// JSON with odd spacing and non-ASCII text: it must come back byte for byte
				p := fmt.Appendf(nil, `{"room": %q,  "seq":%d, "txt":"h\u00e9llo – %s", "n":[1, 2.50, true, null]}`, room, seq, strings.Repeat("x", mrand.IntN(64)))
				batch = append(batch, fmt.Appendf(nil, `{"room":%q, "data": %s}`, room, p))
				batchPayloads = append(batchPayloads, p)
				if len(batch) == batchSize {
					if err := flush(); err != nil {
						errs <- err
						return
					}
				}
			}
			if err := flush(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for r := range rooms {
		if len(want[r]) != perRoom {
			t.Fatalf("room %d: %d messages published, want %d", r, len(want[r]), perRoom)
		}
	}

	// Index every published message by cursor.
	type ref struct{ room, seq int }
	byCursor := make(map[string]ref, total)
	for r := range rooms {
		for s, m := range want[r] {
			if _, dup := byCursor[m.cursor]; dup {
				t.Fatalf("publish answered cursor %s twice", m.cursor)
			}
			byCursor[m.cursor] = ref{r, s}
		}
	}

	seen := make(map[string]bool, total)
	next := make([]int, rooms) // next expected seq per room
	start := time.Now()
	polls := 0
	for len(seen) < total {
		if time.Since(start) > pollDeadline {
			t.Fatalf("after %v and %d polls only %d of %d messages arrived; next seq per room %v", pollDeadline, polls, len(seen), total, next)
		}
		ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 500, WaitMs: 5000})
		polls++
		if len(ms) > 500 {
			t.Fatalf("poll with max=500 answered %d messages", len(ms))
		}
		for _, m := range ms {
			if seen[m.Cursor] {
				t.Fatalf("cursor %s delivered twice to one consumer that acknowledged every batch", m.Cursor)
			}
			seen[m.Cursor] = true
			rf, ok := byCursor[m.Cursor]
			if !ok {
				t.Fatalf("polled cursor %s was never published", m.Cursor)
			}
			room := fmt.Sprintf("room-%d", rf.room)
			if m.RoomName() != room {
				t.Fatalf("cursor %s: room %q, want %q", m.Cursor, m.RoomName(), room)
			}
			if rf.seq != next[rf.room] {
				t.Fatalf("room %s: got seq %d (cursor %s), want seq %d: per-room order broken or a message skipped", room, rf.seq, m.Cursor, next[rf.room])
			}
			next[rf.room]++
			w := want[rf.room][rf.seq]
			got, err := m.Payload()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, w.payload) {
				t.Fatalf("cursor %s payload differs:\n got %q\nwant %q", m.Cursor, got, w.payload)
			}
			if w.raw && m.DataBase64 == nil {
				t.Fatalf("cursor %s: a binary publish came back as \"data\", want \"data_base64\"", m.Cursor)
			}
			if !w.raw && m.Data == nil {
				t.Fatalf("cursor %s: a JSON publish came back without \"data\"", m.Cursor)
			}
		}
	}
	// Acknowledge the last batch; nothing more must come.
	if ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 500, WaitMs: 1000}); len(ms) != 0 {
		t.Fatalf("after all %d messages, poll still returned %d (first %s)", total, len(ms), ms[0].Cursor)
	}
	t.Logf("%d messages in %d polls, %v", total, polls, time.Since(start).Round(time.Millisecond))
}
