package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// Publish refuses what a consumer could not parse, and refuses a form body
// (what curl -d sends without a Content-Type) instead of storing it raw.
func TestPublishRefusesInvalidJSONAndForms(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.Must(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "strict"}, 201)
	r := h.Do(t, n.URL, "POST", "/v1/topics/strict/messages", key, []byte(`{"data":"\xff"}`), "application/json")
	if r.Status != 400 || !strings.Contains(string(r.Body), "invalid_request") {
		t.Fatalf("invalid UTF-8 in data: %d %s", r.Status, r.Body)
	}
	r = h.Do(t, n.URL, "POST", "/v1/topics/strict/messages", key, []byte(`{"data":1}`), "application/x-www-form-urlencoded")
	if r.Status != 415 || !strings.Contains(string(r.Body), "unsupported_media_type") {
		t.Fatalf("form body: %d %s", r.Status, r.Body)
	}
	// Valid JSON that the fast decoder alone would mishandle comes back as data.
	h.Must(t, n.URL, "POST", "/v1/topics/strict/messages", key, []byte(`{"data":1e999}`), 200)
	poll := h.Must(t, n.URL, "POST", "/v1/topics/strict/poll", key, map[string]any{"group": "g", "wait_ms": 10000}, 200)
	if !strings.Contains(string(poll.Body), `"data":1e999`) {
		t.Fatalf("poll: %s", poll.Body)
	}
}

// The Bearer scheme is case-insensitive; other schemes are refused.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", n.URL+"/v1/topics", nil)
		req.Header.Set("Authorization", scheme+" "+c.AdminKey)
		resp, err := h.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", scheme, resp.StatusCode)
		}
	}
}

// A control-plane write answers 503 within kafka.request_timeout when Kafka
// is gone, instead of hanging.
func TestControlWriteTimesOutWhenKafkaIsGone(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Kafka.Brokers = kc.ListenAddrs()
		cfg.Kafka.RequestTimeout = 3 * time.Second
	})
	h.Must(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "before", "role": "producer"}, 201)
	kc.Close()
	start := time.Now()
	r := h.Do(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "after", "role": "producer"})
	if r.Status != 503 || !strings.Contains(string(r.Body), "request_id") {
		t.Fatalf("create key with Kafka gone: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("answered after %v; want about kafka.request_timeout", d)
	}
}

// One tenant cannot take every poll consumer slot of a process: it is held
// to a quarter of poll.max_consumers, and other tenants keep polling.
func TestPollConsumerSlotsAreShared(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Poll.MaxConsumers = 4 })
	acme := h.Must(t, n.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": "acme", "plan": "free"}, 201).JSON(t)["admin_key"].(string)
	for _, k := range []string{acme, c.AdminKey} {
		h.Must(t, n.URL, "POST", "/v1/topics", k, map[string]any{"name": "jobs"}, 201)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/jobs/poll", acme, map[string]any{"group": "g", "consumer": "a", "wait_ms": 0}, 200)
	r := h.Do(t, n.URL, "POST", "/v1/topics/jobs/poll", acme, map[string]any{"group": "g", "consumer": "b", "wait_ms": 0})
	if r.Status != 429 || !strings.Contains(string(r.Body), "too_many_consumers") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("second consumer of acme: %d %s", r.Status, r.Body)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/jobs/poll", c.AdminKey, map[string]any{"group": "g", "consumer": "a", "wait_ms": 0}, 200)
}

// A narrow keys.manage key may not revoke a key broader than itself.
func TestNarrowKeyCannotRevokeAdmin(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	km := h.Must(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "km",
		"capabilities": []map[string]any{{"ops": []string{"keys.manage"}, "topics": []string{"*"}}}}, 201).JSON(t)["key"].(string)
	prod := h.Must(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "p", "role": "producer"}, 201).JSON(t)
	var adminID string
	for _, k := range h.Must(t, n.URL, "GET", "/v1/keys", km, nil, 200).JSON(t)["keys"].([]any) {
		if m := k.(map[string]any); m["role"] == "admin" {
			adminID = m["id"].(string)
		}
	}
	r := h.Do(t, n.URL, "DELETE", "/v1/keys/"+adminID, km, nil)
	if r.Status != 403 {
		t.Fatalf("narrow key revoking the admin key: %d %s", r.Status, r.Body)
	}
	h.Must(t, n.URL, "GET", "/v1/topics", c.AdminKey, nil, 200)
	// A key within its own capabilities it may revoke... a producer key is
	// broader than keys.manage alone, so that is refused too; the admin may.
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+prod["id"].(string), km, nil, 403)
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+prod["id"].(string), c.AdminKey, nil, 204)
}

// Odd paths and values get JSON errors, never redirects or overflows.
func TestEdgeRequests(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "orders"}, 201)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", n.URL+"/v1/topics/", nil)
	req.Header.Set("Authorization", "Bearer "+c.AdminKey)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("X-Request-Id") == "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("trailing slash: %d %v", resp.StatusCode, resp.Header)
	}
	if r := h.Do(t, n.URL, "POST", "/v1/topics/orders%2Fmessages", c.AdminKey, map[string]any{"data": 1}); r.Status == 200 {
		t.Fatalf("encoded slash reached publish: %s", r.Body)
	}
	if r := h.Do(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": int64(18446744174)}); r.Status != 422 && r.Status != 400 {
		t.Fatalf("huge ttl_seconds: %d %s", r.Status, r.Body)
	}
	tok := h.Must(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": 900}, 200).JSON(t)
	if tok["ttl_seconds"] != float64(900) {
		t.Fatalf("ttl_seconds %v, want 900", tok["ttl_seconds"])
	}
	if r := h.Do(t, n.URL, "GET", "/v1/tenant", c.OperatorKey, nil); r.Status != 403 {
		t.Fatalf("operator on /v1/tenant: %d %s", r.Status, r.Body)
	}
}

// Shutdown does not wait out long polls: a poll parked for 30 s ends at
// once with 503 shutting_down and the node stops promptly.
func TestShutdownEndsLongPolls(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "idle"}, 201)
	h.Must(t, n.URL, "POST", "/v1/topics/idle/poll", c.AdminKey, map[string]any{"group": "g", "wait_ms": 0}, 200)
	got := make(chan h.Response, 1)
	go func() {
		got <- h.Do(t, n.URL, "POST", "/v1/topics/idle/poll", c.AdminKey, map[string]any{"group": "g", "wait_ms": 30000})
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("shutdown took %v with a long poll parked", d)
	}
	select {
	case r := <-got:
		if r.Status != 503 && r.Status != 200 {
			t.Fatalf("parked poll answered %d %s", r.Status, r.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked poll never answered")
	}
}
