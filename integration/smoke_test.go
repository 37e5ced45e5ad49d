package integration

import (
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// The README quick start, as a user runs it: create a topic, publish,
// poll, and see the message come back with its cursor and room.
func TestQuickStart(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.Must(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "orders"}, 201)
	pub := h.Must(t, n.URL, "POST", "/v1/topics/orders/messages", key, map[string]any{"data": map[string]any{"hello": 1}, "room": "r1"}, 200).JSON(t)
	cur, _ := pub["cursor"].(string)
	if cur == "" {
		t.Fatalf("publish answered %v, want a cursor", pub)
	}
	poll := h.Must(t, n.URL, "POST", "/v1/topics/orders/poll", key, map[string]any{"group": "g1", "wait_ms": 10000}, 200).JSON(t)
	msgs, _ := poll["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("poll got %d messages, want 1: %v", len(msgs), poll)
	}
	m := msgs[0].(map[string]any)
	if m["cursor"] != cur || m["room"] != "r1" {
		t.Fatalf("message %v, want cursor %s room r1", m, cur)
	}
	if d, _ := m["data"].(map[string]any); d["hello"] != float64(1) {
		t.Fatalf("data %v", m["data"])
	}
}
