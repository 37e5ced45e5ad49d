package integration

import (
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// A topic deleted and made again under the same name takes publishes on
// the same node at once, and its old records are gone.
func TestTopicDeletedAndRecreatedTakesPublishes(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.Must(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "again", "partitions": 2}, 201)
	h.Must(t, n.URL, "POST", "/v1/topics/again/messages", key, map[string]any{"data": "old"}, 200)
	h.Must(t, n.URL, "DELETE", "/v1/topics/again", key, nil, 204)
	h.Must(t, n.URL, "POST", "/v1/topics/again/messages", key, map[string]any{"data": "x"}, 404)
	h.Must(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "again", "partitions": 2}, 201)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.Do(t, n.URL, "POST", "/v1/topics/again/messages", key, map[string]any{"data": "new"})
		if r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish to the re-created topic still %d after 30s: %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	poll := h.Must(t, n.URL, "POST", "/v1/topics/again/poll", key, map[string]any{"group": "g", "wait_ms": 10000}, 200).JSON(t)
	msgs, _ := poll["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["data"] != "new" {
		t.Fatalf("re-created topic holds %v, want only the new message", msgs)
	}
}
