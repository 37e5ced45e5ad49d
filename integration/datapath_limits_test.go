package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// expectStream checks that polled messages continue want (cursors in
// order) from position *next, with no duplicate and none skipped.
func expectStream(t *testing.T, ms []h.Msg, want []string, next *int) {
	t.Helper()
	for _, m := range ms {
		if *next >= len(want) {
			t.Fatalf("got cursor %s beyond the %d published", m.Cursor, len(want))
		}
		if m.Cursor != want[*next] {
			t.Fatalf("got cursor %s, want %s (message %d): a duplicate or a skip", m.Cursor, want[*next], *next)
		}
		*next++
	}
}

// Poll limits over HTTP: max and max_bytes are honoured, leftovers come
// next time with no duplicate and none skipped, a record larger than
// max_bytes comes alone instead of stalling the group, and a long-poll
// returns as soon as a record is published.
func TestDataPathPollLimits(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey

	t.Run("max", func(t *testing.T) {
		const topic, group = "lim-max", "g-max"
		h.CreateTopic(t, n.URL, key, topic, 1)
		want := publishRoom(t, n.URL, key, topic, "r1", 0, 25)
		next, full, polls := 0, false, 0
		for next < len(want) {
			if polls++; polls > 30 {
				t.Fatalf("only %d of %d messages after 30 polls", next, len(want))
			}
			ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 10000})
			if len(ms) > 10 {
				t.Fatalf("poll with max=10 returned %d messages", len(ms))
			}
			full = full || len(ms) == 10
			expectStream(t, ms, want, &next)
		}
		if !full {
			t.Errorf("with 25 messages waiting, no poll with max=10 returned 10")
		}
		if ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 500}); len(ms) != 0 {
			t.Fatalf("after all 25, poll returned %v", h.Cursors(ms))
		}

		// wait_ms: a long-poll on the drained topic returns when a record
		// is published during the wait.
		pubErr := make(chan error, 1)
		var pubCursor string
		go func() {
			time.Sleep(300 * time.Millisecond)
			st, body, err := h.DoE(context.Background(), n.URL, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"room": "r1", "data": "late"}, "")
			if err == nil && st != http.StatusOK {
				err = fmt.Errorf("status %d: %s", st, body)
			}
			pubCursor = string(body)
			pubErr <- err
		}()
		start := time.Now()
		ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 10000})
		took := time.Since(start)
		if err := <-pubErr; err != nil {
			t.Fatalf("publish during the long-poll: %v", err)
		}
		if took >= 8*time.Second {
			t.Fatalf("long-poll with wait_ms=10000 took %v although a record was published after 300ms", took)
		}
		if len(ms) != 1 || string(ms[0].Data) != `"late"` {
			t.Fatalf("long-poll returned %v (published %s), want the one late message", h.Cursors(ms), pubCursor)
		}
		t.Logf("long-poll returned after %v", took.Round(time.Millisecond))
	})

	// A client that gives up on a long-poll (timeout, closed connection)
	// loses nothing: a record published during or after the abandoned wait
	// comes to the consumer's next poll.
	t.Run("abandoned_long_poll", func(t *testing.T) {
		const topic, group = "lim-abandon", "g-abandon"
		h.CreateTopic(t, n.URL, key, topic, 1)
		first := publishRoom(t, n.URL, key, topic, "r1", 0, 1)
		ms := pollUntil(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 10000})
		sameCursors(t, "first poll", ms, first)
		for round := range 3 {
			// the abandoned poll acknowledges the previous batch, then waits
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			_, err := h.PollE(ctx, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 10000})
			cancel()
			if err == nil {
				t.Fatalf("round %d: the poll was expected to be abandoned by the client", round)
			}
			// round 0: publish after the client left; round 1: while the
			// dead request may still be parked; round 2: two messages
			time.Sleep(time.Duration(round) * 100 * time.Millisecond)
			want := publishRoom(t, n.URL, key, topic, "r1", 1+round*2, 1+round/2)
			var got []h.Msg
			deadline := time.Now().Add(30 * time.Second)
			for len(got) < len(want) && time.Now().Before(deadline) {
				got = append(got, h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 5000})...)
			}
			sameCursors(t, fmt.Sprintf("round %d: after an abandoned long-poll", round), got, want)
		}
	})

	t.Run("max_bytes", func(t *testing.T) {
		const (
			topic, group = "lim-bytes", "g-bytes"
			maxBytes     = 3500
		)
		h.CreateTopic(t, n.URL, key, topic, 1)
		sizes := []int{1000, 1000, 1000, 1000, 1000, 10000, 1000, 1000, 1000}
		var want []string
		payloads := map[string][]byte{}
		for _, sz := range sizes {
			p := make([]byte, sz)
			_, _ = rand.Read(p)
			r := h.Do(t, n.URL, "POST", "/v1/topics/"+topic+"/messages?room=b", key, p, "application/octet-stream")
			if r.Status != http.StatusOK {
				t.Fatalf("publish of %d bytes: %d %s", sz, r.Status, r.Body)
			}
			cur, _ := r.JSON(t)["cursor"].(string)
			want = append(want, cur)
			payloads[cur] = p
		}
		next, polls, bigAlone := 0, 0, false
		for next < len(want) {
			if polls++; polls > 30 {
				t.Fatalf("only %d of %d messages after 30 polls: a record larger than max_bytes stalls the group", next, len(want))
			}
			ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", MaxBytes: maxBytes, WaitMs: 10000})
			total := 0
			for _, m := range ms {
				got, err := m.Payload()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, payloads[m.Cursor]) {
					t.Fatalf("cursor %s: payload differs (%d bytes, want %d)", m.Cursor, len(got), len(payloads[m.Cursor]))
				}
				total += len(got)
				if len(got) > maxBytes && len(ms) == 1 {
					bigAlone = true
				}
			}
			if len(ms) > 1 && total > maxBytes {
				t.Fatalf("poll with max_bytes=%d returned %d messages of %d bytes in all", maxBytes, len(ms), total)
			}
			expectStream(t, ms, want, &next)
		}
		if !bigAlone {
			t.Errorf("the 10000-byte record did not come alone")
		}
		if polls < 4 {
			t.Errorf("%d messages of 14000 bytes in %d polls of max_bytes=%d", len(want), polls, maxBytes)
		}
	})
}

// The largest message the configuration allows (publish.max_message_bytes,
// default 1 MiB, documented "over it: 413") is accepted with a room and
// comes back byte for byte, alone in its poll. One byte more is refused
// with 413.
func TestDataPathLargestAllowedMessage(t *testing.T) {
	const topic, group = "big", "g-big"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 1)
	limit := n.Cfg.Publish.MaxMessageBytes

	p := make([]byte, limit)
	_, _ = rand.Read(p)
	r := h.Do(t, n.URL, "POST", "/v1/topics/"+topic+"/messages?room=room-big", key, p, "application/octet-stream")
	if r.Status != http.StatusOK {
		t.Fatalf("publish of %d bytes (exactly publish.max_message_bytes) with a room: status %d %s", limit, r.Status, r.Body)
	}
	cur, _ := r.JSON(t)["cursor"].(string)
	ms := pollUntil(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 10000})
	if len(ms) != 1 || ms[0].Cursor != cur {
		t.Fatalf("polled %v, want only %s", h.Cursors(ms), cur)
	}
	got, err := ms[0].Payload()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, p) {
		t.Fatalf("payload of %d bytes came back as %d different bytes", len(p), len(got))
	}

	over := h.Do(t, n.URL, "POST", "/v1/topics/"+topic+"/messages?room=room-big", key, append(p, 0), "application/octet-stream")
	if over.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("publish of %d bytes (limit %d): status %d %s, want 413", limit+1, limit, over.Status, over.Body)
	}
}
