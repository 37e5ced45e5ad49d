package integration

import (
	"strconv"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Issue 18 item 3: a second msgmesh on the data directory of a running
// embedded broker fails at once, naming the process that holds it; the
// first keeps serving.
func TestSecondServerOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	httpAddr, kafkaAddr := h.FreeAddr(t), h.FreeAddr(t)
	first := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))

	code, out := h.RunBinary(t, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+h.FreeAddr(t), "MSGMESH_HTTP_ADDR="+h.FreeAddr(t)), "serve")
	if code == 0 {
		t.Fatalf("second server on %s exited 0:\n%s", dir, out)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(first.Pid()), "in use by another process"} {
		if !strings.Contains(out, want) {
			t.Errorf("second server's message does not say %q:\n%s", want, out)
		}
	}
	h.Must(t, first.URL, "GET", "/readyz", "", nil, 200)

	// Once the first is gone (even by kill -9) the directory is free again.
	first.Kill()
	again := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))
	h.Must(t, again.URL, "GET", "/readyz", "", nil, 200)
}

// Issue 18 item 5: refusal and range texts say what really happened.
func TestErrorTextsSayWhatHappened(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	for _, topic := range []string{"chat", "orders"} {
		h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": topic}, 201)
	}
	tok, _ := h.MintToken(t, n.URL, c.AdminKey, 300, []h.Cap{{Ops: []string{"publish", "subscribe"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}})

	// Another topic, with a room: refused for the topic, not for "every room".
	r := h.Do(t, n.URL, "POST", "/v1/topics/orders/messages", tok, map[string]any{"data": 1, "room": "eu"})
	msg := string(r.Body)
	if r.Status != 403 || !strings.Contains(msg, `may not publish on topic \"orders\"`) || strings.Contains(msg, "every room") || strings.Contains(msg, "limited to some rooms") {
		t.Errorf("publish to another topic with a room: %d %s", r.Status, msg)
	}
	// Its own topic without a room: told that it must name one of its rooms.
	r = h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", tok, map[string]any{"data": 1})
	if r.Status != 403 || !strings.Contains(string(r.Body), "without naming a room") {
		t.Errorf("publish without a room: %d %s", r.Status, r.Body)
	}

	// ttl_seconds 0 is the documented default; the range error says so.
	got := h.Must(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": 0}, 200).JSON(t)
	if got["ttl_seconds"] != float64(900) {
		t.Errorf("ttl_seconds 0 answered %v, want the default 900", got["ttl_seconds"])
	}
	r = h.Do(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": 86401})
	if r.Status != 422 || !strings.Contains(string(r.Body), "between 1 and 86400 (tokens.max_ttl), or 0 or absent for the default of 900") {
		t.Errorf("ttl_seconds 86401: %d %s", r.Status, r.Body)
	}

	// The operator key is told what it may do.
	r = h.Do(t, n.URL, "GET", "/v1/keys", c.OperatorKey, nil)
	if r.Status != 403 || !strings.Contains(string(r.Body), "may only manage tenants and token signing keys") {
		t.Errorf("operator on /v1/keys: %d %s", r.Status, r.Body)
	}

	// Errors show <...> as is.
	r = h.Do(t, n.URL, "GET", "/v1/topics/chat/events?cursor=garbage", c.AdminKey, nil)
	if r.Status != 400 || strings.Contains(string(r.Body), `\u003c`) || !strings.Contains(string(r.Body), "<") {
		t.Errorf("bad cursor: %d %s, want <...> unescaped", r.Status, r.Body)
	}
}
