package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// publishRoom publishes n JSON messages {"i":k} to one room (one
// partition, so their order is Kafka's) and returns their cursors.
func publishRoom(t *testing.T, base, key, topic, room string, from, n int) []string {
	t.Helper()
	msgs := make([]map[string]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"room": room, "data": map[string]any{"i": from + i}}
	}
	ans := h.Must(t, base, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"messages": msgs}, 200).JSON(t)
	raw, _ := ans["cursors"].([]any)
	if len(raw) != n {
		t.Fatalf("publish of %d answered %v", n, ans)
	}
	out := make([]string, n)
	for i, c := range raw {
		out[i], _ = c.(string)
	}
	return out
}

// pollUntil polls until it gets a non-empty batch (or fails after 30 s).
func pollUntil(t *testing.T, base, key, topic string, req h.PollReq) []h.Msg {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms := h.Poll(t, base, key, topic, req)
		if len(ms) > 0 {
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll %+v: nothing within 30s", req)
		}
	}
}

func sameCursors(t *testing.T, what string, got []h.Msg, want []string) {
	t.Helper()
	if g := h.Cursors(got); !slices.Equal(g, want) {
		t.Fatalf("%s: got cursors %v, want %v", what, g, want)
	}
}

// An unacknowledged batch is delivered again once its consumer expires:
// c1 polls a batch and vanishes; after the idle timeout it has left the
// group (kadm shows no member) and c2 of the same group gets the very same
// cursors.
func TestDataPathRedeliveryAfterConsumerExpiry(t *testing.T) {
	const topic, group = "expiry", "g-exp"
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Poll.ConsumerIdleTimeout = 3 * time.Second })
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 3)
	cursors := publishRoom(t, n.URL, key, topic, "r1", 0, 10)

	b1 := pollUntil(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c1", Max: 5, WaitMs: 10000})
	sameCursors(t, "c1's first batch", b1, cursors[:5])
	polled := time.Now()

	// c1 never polls or commits again: it must leave the group by itself.
	adm := c.Admin(t)
	kgroup := c.KafkaGroup(topic, group)
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		dg, err := adm.DescribeGroups(ctx, kgroup)
		cancel()
		if err == nil && dg[kgroup].Err == nil && len(dg[kgroup].Members) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer c1 still a member of %s 45s after its last poll (idle timeout 3s): %+v %v", kgroup, dg[kgroup], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if idle := time.Since(polled); idle < 3*time.Second {
		t.Fatalf("c1 left the group %v after its poll, before the 3s idle timeout", idle)
	}

	b2 := pollUntil(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c2", Max: 5, WaitMs: 10000})
	sameCursors(t, "c2 after c1 expired", b2, cursors[:5])
	// c2 acknowledges it by polling on and gets the rest, nothing twice.
	b3 := pollUntil(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: "c2", Max: 5, WaitMs: 10000})
	sameCursors(t, "c2's next batch", b3, cursors[5:])
}

// An unacknowledged batch is delivered again after msgmesh restarts; an
// acknowledged one (by polling again, or by POST /commit) is not.
func TestDataPathRedeliveryAfterRestart(t *testing.T) {
	const topic, group, consumer = "restart", "g-rst", "c1"
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, 3)
	cursors := publishRoom(t, n.URL, key, topic, "r1", 0, 15)
	req := h.PollReq{Group: group, Consumer: consumer, Max: 5, WaitMs: 10000}

	b1 := pollUntil(t, n.URL, key, topic, req)
	sameCursors(t, "first batch", b1, cursors[:5])
	restart := func(step string) *h.Node {
		t.Helper()
		if err := n.Stop(); err != nil {
			t.Fatalf("%s: stop: %v", step, err)
		}
		return c.Start(t, nil)
	}

	// Not acknowledged: the restart delivers it again.
	n = restart("unacknowledged")
	b1again := pollUntil(t, n.URL, key, topic, req)
	sameCursors(t, "after a restart, the unacknowledged batch", b1again, cursors[:5])

	// This poll acknowledges b1; its batch b2 is acknowledged by /commit.
	b2 := pollUntil(t, n.URL, key, topic, req)
	sameCursors(t, "second batch", b2, cursors[5:10])
	h.Commit(t, n.URL, key, topic, group, consumer, h.Cursors(b2))

	n = restart("committed")
	b3 := pollUntil(t, n.URL, key, topic, req)
	sameCursors(t, "after a restart, with b1 acknowledged by polling and b2 by /commit", b3, cursors[10:])
	// Acknowledge b3 by polling again (nothing left).
	if ms := h.Poll(t, n.URL, key, topic, h.PollReq{Group: group, Consumer: consumer, Max: 5, WaitMs: 500}); len(ms) != 0 {
		t.Fatalf("after the last batch, poll returned %v", h.Cursors(ms))
	}

	n = restart("all acknowledged")
	more := publishRoom(t, n.URL, key, topic, "r1", 15, 1)
	b4 := pollUntil(t, n.URL, key, topic, req)
	sameCursors(t, fmt.Sprintf("after a restart with everything acknowledged, only the new message"), b4, more)
}
