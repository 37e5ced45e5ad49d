package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Split mode, as deployed: controlplane, gateway, realtime and dispatcher
// as four `msgmesh serve --target=...` processes on one broker, each on
// its own port and serving only its own API. The README quick start runs
// through them (topic on the control plane; publish, batch and poll with
// acks on the gateway), an SSE stream on the realtime process resumes
// exactly from its Last-Event-ID, and a webhook registered on the control
// plane is delivered by the dispatcher.
func TestSplitTargetsFourProcesses(t *testing.T) {
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	hooks := []string{"MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS=true", "MSGMESH_WEBHOOKS_UNSAFE_CA_FILE=" + rc.CAFile(t)}
	start := func(target string, extra ...string) *h.Proc {
		addr := h.FreeAddr(t)
		return h.StartProcess(t, addr, c.EnvFor(addr, extra...), "--target="+target) // waits for /readyz 200
	}
	// The control plane first: it bootstraps tenant "default" and its key.
	cp := start("controlplane", hooks...)
	gw := start("gateway")
	rt := start("realtime")
	dp := start("dispatcher", hooks...)
	key := c.AdminKey

	// Each process serves its own API only.
	for _, wrong := range []struct {
		p            *h.Proc
		method, path string
	}{{gw, "GET", "/v1/topics"}, {rt, "POST", "/v1/topics/orders/messages"}, {cp, "POST", "/v1/topics/orders/poll"}, {dp, "GET", "/v1/webhooks"}} {
		if r := h.Do(t, wrong.p.URL, wrong.method, wrong.path, key, nil); r.Status != http.StatusNotFound {
			t.Fatalf("%s %s on %s: %d %s, want 404 (another target's API)", wrong.method, wrong.path, wrong.p.Addr, r.Status, r.Body)
		}
	}

	// README quick start: create a topic (3 partitions by default).
	top := h.Must(t, cp.URL, "POST", "/v1/topics", key, map[string]any{"name": "orders"}, http.StatusCreated).JSON(t)
	if top["partitions"] != float64(3) {
		t.Fatalf("create topic: %v, want 3 partitions", top)
	}
	// An SSE stream on the realtime process, open before anything is
	// published.
	s := mustSSE(t, rt.URL, key, "orders", url.Values{"from": {"earliest"}}, "")
	one := h.Must(t, gw.URL, "POST", "/v1/topics/orders/messages", key, map[string]any{"data": map[string]any{"id": 42, "total": 9.5}, "room": "eu"}, http.StatusOK).JSON(t)
	if one["cursor"] == nil {
		t.Fatalf("publish: %v", one)
	}
	batch := h.Must(t, gw.URL, "POST", "/v1/topics/orders/messages", key, map[string]any{"messages": []any{map[string]any{"data": 1}, map[string]any{"data": 2, "room": "us"}}}, http.StatusOK).JSON(t)
	if cs, _ := batch["cursors"].([]any); len(cs) != 2 {
		t.Fatalf("batch publish: %v", batch)
	}
	// Consume with group g1, each poll acknowledging the previous answer's
	// batch (the README's loop).
	var polled []h.Msg
	ack := ""
	for deadline := time.Now().Add(30 * time.Second); len(polled) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("polled %d of 3 messages in 30s", len(polled))
		}
		var a h.PollAnswer
		r := h.Must(t, gw.URL, "POST", "/v1/topics/orders/poll", key, map[string]any{"group": "g1", "wait_ms": 5000, "ack": ack}, http.StatusOK)
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		polled = append(polled, a.Messages...)
		if a.Batch != "" {
			ack = a.Batch
		}
	}
	r := h.Must(t, gw.URL, "POST", "/v1/topics/orders/poll", key, map[string]any{"group": "g1", "wait_ms": 500, "ack": ack}, http.StatusOK)
	if rest := r.JSON(t); len(rest["messages"].([]any)) != 0 || rest["batch"] != nil {
		t.Fatalf("after acknowledging everything the poll answered %s", r.Body)
	}
	rooms := map[string]int{}
	for _, m := range polled {
		rooms[m.RoomName()]++
	}
	if rooms["eu"] != 1 || rooms["us"] != 1 || rooms[""] != 1 {
		t.Fatalf("polled rooms %v, want one each of eu, us and none", rooms)
	}

	// SSE: the three messages, then a reconnect from the last id gets only
	// what was published since.
	first := s.Messages(t, 3, 30*time.Second)
	s.Close()
	publishSeq(t, gw.URL, key, "orders", 0, 2)
	s = mustSSE(t, rt.URL, key, "orders", nil, first[2].ID)
	resumed := s.Messages(t, 2, 30*time.Second)
	got := map[int]bool{seqOf(t, resumed[0].Msg): true, seqOf(t, resumed[1].Msg): true}
	if !got[0] || !got[1] {
		t.Fatalf("resumed stream got seqs %v, want 0 and 1", got)
	}
	if ev, ok := s.Next(time.Second); ok {
		t.Fatalf("resumed stream has more than what was published since: %+v", ev)
	}
	s.Close()

	// A webhook registered on the control plane, delivered by the
	// dispatcher process.
	wh := h.CreateWebhook(t, cp.URL, key, "orders", rc.URLFor("", "/hook"), "eu")
	ok, _ := h.PollUntil(30*time.Second, 100*time.Millisecond, func() bool {
		h.Must(t, gw.URL, "POST", "/v1/topics/orders/messages", key, map[string]any{"data": map[string]any{"hook": wh.ID}, "room": "eu"}, http.StatusOK)
		return len(rc.Got("/hook")) > 0
	})
	if !ok {
		t.Fatal("no webhook delivery from the dispatcher process in 30s")
	}
	for _, d := range rc.Got("/hook") {
		if data, _ := d.Payload(t)["data"].(map[string]any); data["hook"] == wh.ID {
			return
		}
	}
	t.Fatalf("webhook deliveries %d, none carries the messages published for it", len(rc.Got("/hook")))
}
