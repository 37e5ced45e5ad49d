package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// dropPollAnswer sends a poll over a raw connection, waits until the server
// has started writing its answer and hangs up without reading it: a client
// whose timeout fired after the server wrote the batch (kafka-rest#1350).
func dropPollAnswer(t *testing.T, base, key, topic string, body map[string]any) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/topics/%s/poll HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", topic, u.Host, key, len(raw), raw)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := bufio.NewReader(conn).Peek(1); err != nil {
		t.Fatalf("dropped poll: no answer started: %v", err)
	}
}

// committedOffsets reads the group's committed offsets from Kafka.
func committedOffsets(t *testing.T, c *h.Cluster, topic, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := c.Admin(t).FetchOffsets(ctx, c.KafkaGroup(topic, group))
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	for p, o := range offs[c.KafkaTopic(topic)] {
		out[p] = o.At
	}
	return out
}

// A poll acknowledges only the batch it names: an answer the client never
// read comes again on its next poll (same messages), an "ack" with the
// batch id moves on, and across a restart the unacknowledged batch comes
// back.
func TestDataPathPollAckByBatch(t *testing.T) {
	const topic, group, consumer = "acked", "g-ack", "c1"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 1)
	cursors := publishRoom(t, n.URL, key, topic, "r1", 0, 15)
	req := h.PollReq{Group: group, Consumer: consumer, Max: 5, WaitMs: 10000, NoAck: true}
	poll := func(what, ack string) h.PollAnswer {
		t.Helper()
		r := req
		r.Ack = ack
		deadline := time.Now().Add(30 * time.Second)
		for {
			a, err := h.PollBatchE(context.Background(), n.URL, key, topic, r)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if len(a.Messages) > 0 {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nothing within 30s", what)
			}
		}
	}

	b1 := poll("first poll", "")
	sameCursors(t, "first batch", b1.Messages, cursors[:5])
	again := poll("poll without ack", "")
	sameCursors(t, "a poll without ack", again.Messages, cursors[:5])
	if again.Batch != b1.Batch {
		t.Errorf("batch delivered again as %q, want %q", again.Batch, b1.Batch)
	}
	if c := committedOffsets(t, c, topic, group); c[0] > 0 {
		t.Errorf("committed %v before any ack", c)
	}

	// The next answer (b2) is written but never read: the client acked b1
	// and hung up. Its next poll still names b1 (all it saw).
	dropPollAnswer(t, n.URL, key, topic, map[string]any{"group": group, "consumer": consumer, "max": 5, "wait_ms": 10000, "ack": b1.Batch})
	b2 := poll("poll after a dropped answer, acking b1 again", b1.Batch)
	sameCursors(t, "after a dropped answer", b2.Messages, cursors[5:10])
	if got := committedOffsets(t, c, topic, group); got[0] != 5 {
		t.Errorf("committed %v after the ack of b1, want partition 0 at 5", got)
	}
	b2again := poll("poll with a stale ack", "no-such-batch")
	sameCursors(t, "a poll with an ack naming no batch", b2again.Messages, cursors[5:10])

	b3 := poll("poll acking b2", b2.Batch)
	sameCursors(t, "after the ack of b2", b3.Messages, cursors[10:15])
	if got := committedOffsets(t, c, topic, group); got[0] != 10 {
		t.Errorf("committed %v after the ack of b2, want partition 0 at 10", got)
	}

	// b3 is not acknowledged: after a restart it comes back.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n = c.Start(t, nil)
	b3again := poll("first poll after a restart", "")
	sameCursors(t, "after a restart, the unacknowledged batch", b3again.Messages, cursors[10:15])
	more := publishRoom(t, n.URL, key, topic, "r1", 15, 2)
	b4 := poll("poll acking b3 after the restart", b3again.Batch)
	sameCursors(t, "after the ack following the restart", b4.Messages, more)

	// POST /commit acknowledges what it covers: the next poll without ack
	// gets only the rest of the batch.
	h.Commit(t, n.URL, key, topic, group, consumer, h.Cursors(b4.Messages[:1]))
	rest := poll("poll after a commit of part of b4", "")
	sameCursors(t, "after /commit of the first message", rest.Messages, more[1:])
	if !slices.Equal([]string{rest.Batch}, []string{b4.Batch}) {
		t.Errorf("rest of b4 delivered as batch %q, want %q", rest.Batch, b4.Batch)
	}
}

// The first poll after a restart waits (within wait_ms) for the member's
// group assignment and returns the backlog, every time (issue 18 item 7).
func TestDataPathFirstPollAfterRestartGetsBacklog(t *testing.T) {
	const topic, group = "first", "g-first"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 3)
	for i := range 4 {
		cursors := publishRoom(t, n.URL, key, topic, "r1", 10*i, 3)
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		n = c.Start(t, nil)
		start := time.Now()
		ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 15000})
		if len(ms) == 0 {
			t.Fatalf("restart %d: first poll answered [] after %v with a backlog of %v", i, time.Since(start).Round(time.Millisecond), cursors)
		}
		sameCursors(t, fmt.Sprintf("restart %d: first poll", i), ms, cursors)
		t.Logf("restart %d: first poll answered in %v", i, time.Since(start).Round(time.Millisecond))
		// Acknowledge it (the harness sends the batch id).
		h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 10, WaitMs: 1})
	}
}

// After msgmesh is killed (no LeaveGroup), the restarted process's first
// poll gets the backlog within its wait instead of waiting for Kafka to
// expire the dead member's session (poll.session_timeout, 10 s here):
// each poll consumer is a static member of its group (KIP-345) whose
// restarted successor takes its place at once (issue 18 item 7).
func TestDataPathFirstPollAfterKillGetsBacklog(t *testing.T) {
	const topic, group = "killed", "g-killed"
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	env := c.EnvFor(addr)
	p := h.StartProcess(t, addr, env)
	key := c.AdminKey
	h.CreateTopic(t, p.URL, key, topic, 3)
	first := publishRoom(t, p.URL, key, topic, "r1", 0, 2)
	if ms := h.Poll(t, p.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 10000}); len(ms) == 0 {
		t.Fatalf("first poll got nothing; want %v", first)
	}
	h.Poll(t, p.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 1}) // ack
	for i := range 3 {
		backlog := publishRoom(t, p.URL, key, topic, fmt.Sprintf("k%d", i), 10*(i+1), 2)
		p.Kill()
		p = h.StartProcess(t, addr, env)
		start := time.Now()
		ms := h.Poll(t, p.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 5000})
		if len(ms) == 0 {
			t.Fatalf("kill %d: first poll answered [] after %v with a backlog of %v", i, time.Since(start).Round(time.Millisecond), backlog)
		}
		sameCursors(t, fmt.Sprintf("kill %d: first poll", i), ms, backlog)
		t.Logf("kill %d: first poll answered in %v", i, time.Since(start).Round(time.Millisecond))
		h.Poll(t, p.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", WaitMs: 1}) // ack
	}
}
