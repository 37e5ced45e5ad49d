package openapitest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/proto/openapitest"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

const (
	adminKey    = "mm_openapitestAdminKey0123456789abcdefghijklmn" // "mm_" + 43 URL-safe
	operatorKey = "operator-openapitest-0123456789abcdef"
)

// server boots every target in-process on the embedded broker.
func server(t *testing.T) string {
	t.Helper()
	if len(adminKey) != 46 {
		t.Fatalf("adminKey has %d characters", len(adminKey))
	}
	cfg := config.Defaults()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Kafka.EmbeddedAddr = "127.0.0.1:0"
	cfg.BootstrapAdminKey = adminKey
	cfg.OperatorKey = operatorKey
	// Small limits so the 413s are cheap to provoke.
	cfg.Publish.MaxMessageBytes = 1024
	cfg.Publish.MaxBatchBytes = 16 << 10
	cfg.Publish.MaxBatchMessages = 5
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, []string{app.All}, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("app did not stop")
		}
	})
	return "http://" + a.Addr
}

type client struct {
	t    *testing.T
	v    *openapitest.V
	base string
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func (r reply) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

// do sends one request and checks the exchange against the spec.
func (c *client) do(method, path, key, contentType string, body []byte) reply {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	c.v.Check(c.t, req, body, resp, rb)
	return reply{status: resp.StatusCode, header: resp.Header, body: rb}
}

// json sends v as a JSON body (raw bytes when v is a string).
func (c *client) json(method, path, key string, v any) reply {
	c.t.Helper()
	var b []byte
	switch x := v.(type) {
	case nil:
		return c.do(method, path, key, "", nil)
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	return c.do(method, path, key, "application/json", b)
}

// expect fails unless r has status (and, for errors, code).
func (c *client) expect(what string, r reply, status int, code string) reply {
	c.t.Helper()
	if r.status != status || (code != "" && r.code() != code) {
		c.t.Errorf("%s: got %d %s, want %d %s: %s", what, r.status, r.code(), status, code, r.body)
	}
	return r
}

// eventually retries f until it returns true (control events apply on
// every node within a moment).
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a server")
	}
	c := &client{t: t, v: openapitest.Validator(t), base: server(t)}

	// Probes: /readyz answers 503 not_ready until caught up (checked too).
	eventually(t, "/readyz 200", func() bool { return c.do("GET", "/readyz", "", "", nil).status == 200 })
	c.expect("healthz", c.do("GET", "/healthz", "", "", nil), 200, "")
	eventually(t, "the bootstrap admin key", func() bool { return c.json("GET", "/v1/topics", adminKey, nil).status == 200 })
	m := c.expect("metrics", c.do("GET", "/metrics", "", "", nil), 200, "")
	if !bytes.Contains(m.body, []byte("msgmesh_published_messages_total")) {
		t.Errorf("metrics lack msgmesh_published_messages_total")
	}

	// 401s.
	c.expect("no credential", c.json("GET", "/v1/topics", "", nil), 401, "unauthenticated")
	c.expect("malformed credential", c.json("GET", "/v1/topics", "nonsense", nil), 401, "invalid_credential")
	c.expect("unknown key", c.json("GET", "/v1/topics", "mm_"+strings.Repeat("x", 43), nil), 401, "invalid_credential")

	// Topics.
	c.expect("create topic", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "orders", "partitions": 2}), 201, "")
	c.expect("create topic again", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "orders"}), 409, "conflict")
	c.expect("create bad name", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "a.b"}), 422, "validation_failed")
	c.expect("create too many partitions", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "big", "partitions": 100000}), 422, "validation_failed")
	c.expect("create unknown field", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "x", "retention": 1}), 400, "invalid_request")
	c.expect("create bad JSON", c.json("POST", "/v1/topics", adminKey, `{"name":`), 400, "invalid_request")
	c.expect("create default partitions", c.json("POST", "/v1/topics", adminKey, map[string]any{"name": "events"}), 201, "")
	lt := c.expect("list topics", c.json("GET", "/v1/topics", adminKey, nil), 200, "").json(t)
	if n := len(lt["topics"].([]any)); n != 2 {
		t.Errorf("list topics: %d topics, want 2", n)
	}
	gt := c.expect("get topic", c.json("GET", "/v1/topics/orders", adminKey, nil), 200, "").json(t)
	if gt["partitions"] != float64(2) || gt["kafka_topic"] != "msgmesh.default.orders" {
		t.Errorf("get topic: %v", gt)
	}
	c.expect("get missing topic", c.json("GET", "/v1/topics/nope", adminKey, nil), 404, "topic_not_found")

	// Publish: single, batch, raw.
	var cursors []string
	r := c.expect("publish one", c.json("POST", "/v1/topics/orders/messages", adminKey,
		map[string]any{"data": map[string]any{"id": 1}, "room": "r1", "headers": map[string]string{"x-trace": "t1"}}), 200, "")
	cursors = append(cursors, r.json(t)["cursor"].(string))
	r = c.expect("publish batch", c.json("POST", "/v1/topics/orders/messages", adminKey,
		`{"messages":[{"data":null},{"data":"text","room":"r1"},{"data":[1,2,{"k":true}],"headers":{"a":"b"}}]}`), 200, "")
	for _, x := range r.json(t)["cursors"].([]any) {
		cursors = append(cursors, x.(string))
	}
	r = c.expect("publish raw text", c.do("POST", "/v1/topics/orders/messages?room=r2", adminKey, "text/plain; charset=utf-8", []byte("hello")), 200, "")
	cursors = append(cursors, r.json(t)["cursor"].(string))
	r = c.expect("publish NDJSON", c.do("POST", "/v1/topics/orders/messages?room=r3", adminKey, "application/x-ndjson", []byte("{\"id\":2}\n[3]\n")), 200, "")
	for _, x := range r.json(t)["cursors"].([]any) {
		cursors = append(cursors, x.(string))
	}
	r = c.expect("publish raw bytes", c.do("POST", "/v1/topics/orders/messages", adminKey, "application/octet-stream", []byte{0, 1, 2, 0xff}), 200, "")
	cursors = append(cursors, r.json(t)["cursor"].(string))

	// Publish errors.
	c.expect("publish to a topic never created", c.json("POST", "/v1/topics/missing/messages", adminKey, map[string]any{"data": 1}), 404, "topic_not_found")
	c.expect("publish bad JSON", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":`), 400, "invalid_request")
	c.expect("publish data and messages", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"messages":[{"data":2}]}`), 400, "invalid_request")
	c.expect("publish neither", c.json("POST", "/v1/topics/orders/messages", adminKey, `{}`), 400, "invalid_request")
	c.expect("publish empty batch", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"messages":[]}`), 400, "invalid_request")
	c.expect("publish empty room", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"room":""}`), 400, "invalid_request")
	c.expect("publish reserved header", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"headers":{"msgmesh-x":"y"}}`), 400, "invalid_request")
	c.expect("publish headers list", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"headers":[{"key":"a","value":"1"},{"key":"a","value_base64":"/w=="}]}`), 200, "")
	c.expect("publish header with value and value_base64", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"headers":[{"key":"a","value":"1","value_base64":"MQ=="}]}`), 400, "invalid_request")
	c.expect("publish header object with a number", c.json("POST", "/v1/topics/orders/messages", adminKey, `{"data":1,"headers":{"a":1}}`), 400, "invalid_request")
	c.expect("publish NDJSON with a bad line", c.do("POST", "/v1/topics/orders/messages", adminKey, "application/x-ndjson", []byte("1\n{\n")), 400, "invalid_request")
	c.expect("publish invalid UTF-8", c.do("POST", "/v1/topics/orders/messages", adminKey, "application/json", []byte("{\"data\":\"\xff\"}")), 400, "invalid_request")
	c.expect("publish JSON with ?room=", c.do("POST", "/v1/topics/orders/messages?room=r1", adminKey, "application/json", []byte(`{"data":1}`)), 400, "invalid_request")
	big := fmt.Sprintf(`{"data":"%s"}`, strings.Repeat("x", 2000))
	c.expect("publish message too large", c.json("POST", "/v1/topics/orders/messages", adminKey, big), 413, "payload_too_large")
	c.expect("publish raw too large", c.do("POST", "/v1/topics/orders/messages", adminKey, "application/octet-stream", bytes.Repeat([]byte{1}, 2000)), 413, "payload_too_large")
	c.expect("publish body too large", c.do("POST", "/v1/topics/orders/messages", adminKey, "application/octet-stream", bytes.Repeat([]byte{1}, 20<<10)), 413, "payload_too_large")
	c.expect("publish batch too long", c.json("POST", "/v1/topics/orders/messages", adminKey,
		`{"messages":[{"data":1},{"data":2},{"data":3},{"data":4},{"data":5},{"data":6}]}`), 413, "payload_too_large")

	// Poll until every published message arrived, then commit.
	got := map[string]map[string]any{}
	ack := ""
	eventually(t, "every message polled", func() bool {
		r := c.expect("poll", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{"group": "g1", "consumer": "w1", "wait_ms": 1000, "ack": ack}), 200, "")
		if r.status != 200 {
			return false
		}
		if b, ok := r.json(t)["batch"].(string); ok {
			ack = b
		}
		for _, x := range r.json(t)["messages"].([]any) {
			msg := x.(map[string]any)
			got[msg["cursor"].(string)] = msg
		}
		return len(got) >= len(cursors)
	})
	for _, cu := range cursors {
		if got[cu] == nil {
			t.Errorf("cursor %s was not polled", cu)
		}
	}
	if m := got[cursors[0]]; m != nil {
		want := []any{map[string]any{"key": "content-type", "value": "application/json"}, map[string]any{"key": "x-trace", "value": "t1"}}
		if m["room"] != "r1" || !reflect.DeepEqual(m["headers"], want) {
			t.Errorf("polled message 1: %v", m)
		}
	}
	if m := got[cursors[1]]; m != nil {
		if v, has := m["data"]; !has || v != nil || m["room"] != nil {
			t.Errorf("polled null message: %v", m)
		}
	}
	if m := got[cursors[4]]; m != nil {
		if m["data_base64"] != base64.StdEncoding.EncodeToString([]byte("hello")) || m["room"] != "r2" {
			t.Errorf("polled raw text: %v", m)
		}
	}
	c.expect("commit", c.json("POST", "/v1/topics/orders/commit", adminKey, map[string]any{"group": "g1", "consumer": "w1", "cursors": cursors}), 204, "")
	c.expect("poll empty", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{"group": "g1", "consumer": "w1", "wait_ms": 0}), 200, "")

	// Poll and commit errors.
	c.expect("poll with a long ack", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{"group": "g1", "ack": strings.Repeat("x", 200)}), 400, "invalid_request")
	c.expect("poll with room", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{"group": "g1", "room": "r1"}), 400, "room_not_supported")
	c.expect("poll with ?room=", c.do("POST", "/v1/topics/orders/poll?room=r1", adminKey, "application/json", []byte(`{"group":"g1"}`)), 400, "room_not_supported")
	c.expect("poll without group", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{}), 400, "invalid_request")
	c.expect("poll max 0", c.json("POST", "/v1/topics/orders/poll", adminKey, map[string]any{"group": "g1", "max": 0}), 400, "invalid_request")
	c.expect("poll missing topic", c.json("POST", "/v1/topics/missing/poll", adminKey, map[string]any{"group": "g1"}), 404, "topic_not_found")
	c.expect("commit bad cursor", c.json("POST", "/v1/topics/orders/commit", adminKey, map[string]any{"group": "g1", "cursors": []string{"x-1"}}), 400, "invalid_request")
	c.expect("commit no cursors", c.json("POST", "/v1/topics/orders/commit", adminKey, map[string]any{"group": "g1", "cursors": []string{}}), 400, "invalid_request")
	c.expect("commit unknown consumer", c.json("POST", "/v1/topics/orders/commit", adminKey, map[string]any{"group": "g1", "consumer": "ghost", "cursors": []string{"0-0"}}), 404, "consumer_not_found")

	// Keys and roles.
	pk := c.expect("create producer key", c.json("POST", "/v1/keys", adminKey, map[string]any{"name": "prod", "role": "producer"}), 201, "").json(t)
	ck := c.expect("create consumer key", c.json("POST", "/v1/keys", adminKey, map[string]any{"name": "cons", "role": "consumer"}), 201, "").json(t)
	c.expect("create key bad role", c.json("POST", "/v1/keys", adminKey, map[string]any{"name": "x", "role": "root"}), 422, "validation_failed")
	producer, consumer := pk["key"].(string), ck["key"].(string)
	eventually(t, "the producer key", func() bool { return c.json("GET", "/v1/topics", producer, nil).status == 200 })
	keys := c.expect("list keys", c.json("GET", "/v1/keys", adminKey, nil), 200, "").json(t)["keys"].([]any)
	if len(keys) != 3 {
		t.Errorf("list keys: %d, want 3", len(keys))
	}
	c.expect("producer publishes", c.json("POST", "/v1/topics/orders/messages", producer, map[string]any{"data": 1}), 200, "")
	c.expect("producer polls", c.json("POST", "/v1/topics/orders/poll", producer, map[string]any{"group": "g1"}), 403, "forbidden")
	c.expect("consumer publishes", c.json("POST", "/v1/topics/orders/messages", consumer, map[string]any{"data": 1}), 403, "forbidden")
	c.expect("producer lists keys", c.json("GET", "/v1/keys", producer, nil), 403, "forbidden")
	c.expect("producer creates topic", c.json("POST", "/v1/topics", producer, map[string]any{"name": "p"}), 403, "forbidden")
	c.expect("revoke producer key", c.json("DELETE", "/v1/keys/"+pk["id"].(string), adminKey, nil), 204, "")
	c.expect("revoke again", c.json("DELETE", "/v1/keys/"+pk["id"].(string), adminKey, nil), 204, "")
	c.expect("revoke unknown key", c.json("DELETE", "/v1/keys/key_0000000000000000", adminKey, nil), 404, "key_not_found")
	c.expect("revoked key", c.json("GET", "/v1/topics", producer, nil), 401, "credential_revoked")
	keys = c.expect("list keys after revoke", c.json("GET", "/v1/keys", adminKey, nil), 200, "").json(t)["keys"].([]any)
	revoked := 0
	for _, k := range keys {
		if _, has := k.(map[string]any)["revoked_at"]; has {
			revoked++
		}
	}
	if revoked != 1 {
		t.Errorf("%d keys revoked, want 1", revoked)
	}

	// Tenants and the strict topic gate.
	tr := c.expect("create tenant", c.json("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "paid"}), 201, "").json(t)
	c.expect("create tenant again", c.json("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme"}), 409, "conflict")
	c.expect("create tenant bad id", c.json("POST", "/v1/tenants", operatorKey, map[string]any{"id": "Acme"}), 422, "validation_failed")
	c.expect("admin creates tenant", c.json("POST", "/v1/tenants", adminKey, map[string]any{"id": "other"}), 403, "forbidden")
	c.expect("operator lists keys", c.json("GET", "/v1/keys", operatorKey, nil), 403, "forbidden")
	c.expect("operator reads tenant", c.json("GET", "/v1/tenant", operatorKey, nil), 403, "forbidden")
	acme := tr["admin_key"].(string)
	eventually(t, "the acme admin key", func() bool { return c.json("GET", "/v1/tenant", acme, nil).status == 200 })
	c.expect("get tenant", c.json("GET", "/v1/tenant", adminKey, nil), 200, "")
	c.expect("gate off", c.json("PATCH", "/v1/tenant", adminKey, map[string]any{"strict_topics": false}), 200, "")
	c.expect("publish creates the topic", c.json("POST", "/v1/topics/auto/messages", adminKey, map[string]any{"data": 1}), 200, "")
	c.expect("publish auto-create bad name", c.json("POST", "/v1/topics/a.b/messages", adminKey, map[string]any{"data": 1}), 422, "validation_failed")
	c.expect("patch nothing", c.json("PATCH", "/v1/tenant", adminKey, map[string]any{}), 400, "invalid_request")
	c.expect("gate on", c.json("PATCH", "/v1/tenant", adminKey, map[string]any{"strict_topics": true}), 200, "")
	c.expect("consumer patches tenant", c.json("PATCH", "/v1/tenant", consumer, map[string]any{"strict_topics": false}), 403, "forbidden")

	// Capability keys and tokens.
	capk := c.expect("create capability key", c.json("POST", "/v1/keys", adminKey, map[string]any{"name": "room42",
		"capabilities": []map[string]any{
			{"ops": []string{"publish", "topics.read"}, "topics": []string{"events"}, "rooms": []string{"room-42"}},
			{"ops": []string{"tokens.mint"}, "topics": []string{"*"}}}}), 201, "").json(t)
	c.expect("create key with role and capabilities", c.json("POST", "/v1/keys", adminKey, map[string]any{"role": "admin", "capabilities": []map[string]any{{"ops": []string{"*"}, "topics": []string{"*"}}}}), 400, "invalid_request")
	c.expect("create key with neither", c.json("POST", "/v1/keys", adminKey, map[string]any{"name": "x"}), 400, "invalid_request")
	c.expect("create key bad op", c.json("POST", "/v1/keys", adminKey, map[string]any{"capabilities": []map[string]any{{"ops": []string{"fly"}, "topics": []string{"*"}}}}), 422, "validation_failed")
	room42 := capk["key"].(string)
	eventually(t, "the capability key", func() bool { return c.json("GET", "/v1/topics/events", room42, nil).status == 200 })
	c.expect("publish in the allowed room", c.json("POST", "/v1/topics/events/messages", room42, map[string]any{"data": 1, "room": "room-42"}), 200, "")
	c.expect("publish in another room", c.json("POST", "/v1/topics/events/messages", room42, map[string]any{"data": 1, "room": "room-43"}), 403, "forbidden")
	c.expect("get another topic", c.json("GET", "/v1/topics/auto", room42, nil), 403, "forbidden")
	tok := c.expect("mint token", c.json("POST", "/v1/tokens", room42, map[string]any{"ttl_seconds": 60}), 200, "").json(t)
	c.expect("mint token without body", c.do("POST", "/v1/tokens", consumer, "", nil), 200, "")
	c.expect("mint token overreach", c.json("POST", "/v1/tokens", room42, map[string]any{"capabilities": []map[string]any{{"ops": []string{"publish"}, "topics": []string{"*"}}}}), 403, "forbidden")
	c.expect("mint token ttl too long", c.json("POST", "/v1/tokens", room42, map[string]any{"ttl_seconds": 10 << 20}), 422, "validation_failed")
	token := tok["token"].(string)
	c.expect("token publishes", c.json("POST", "/v1/topics/events/messages", token, map[string]any{"data": 2, "room": "room-42"}), 200, "")
	c.expect("token mints", c.json("POST", "/v1/tokens", token, nil), 403, "forbidden")
	c.expect("tampered token", c.json("GET", "/v1/topics/events", token[:len(token)-4]+"AAAA", nil), 401, "")

	// Operator: tenants and signing keys.
	c.expect("list tenants", c.json("GET", "/v1/tenants", operatorKey, nil), 200, "")
	c.expect("get tenant by id", c.json("GET", "/v1/tenants/acme", operatorKey, nil), 200, "")
	c.expect("get missing tenant", c.json("GET", "/v1/tenants/nope", operatorKey, nil), 404, "tenant_not_found")
	c.expect("set plan", c.json("PATCH", "/v1/tenants/acme", operatorKey, map[string]any{"plan": "free"}), 200, "")
	c.expect("set bad plan", c.json("PATCH", "/v1/tenants/acme", operatorKey, map[string]any{"plan": "gold"}), 422, "validation_failed")
	c.expect("admin lists tenants", c.json("GET", "/v1/tenants", adminKey, nil), 403, "forbidden")
	c.expect("suspend", c.json("POST", "/v1/tenants/acme/suspend", operatorKey, map[string]any{"reason": "unpaid"}), 200, "")
	c.expect("suspended tenant", c.json("GET", "/v1/tenant", acme, nil), 403, "tenant_suspended")
	c.expect("reinstate", c.do("POST", "/v1/tenants/acme/reinstate", operatorKey, "", nil), 200, "")
	c.expect("reinstated tenant", c.json("GET", "/v1/tenant", acme, nil), 200, "")
	sks := c.expect("list signing keys", c.json("GET", "/v1/signing-keys", operatorKey, nil), 200, "").json(t)["signing_keys"].([]any)
	c.expect("rotate signing key", c.do("POST", "/v1/signing-keys", operatorKey, "", nil), 201, "")
	if len(sks) > 0 {
		old := sks[0].(map[string]any)["kid"].(string)
		c.expect("retire signing key", c.do("POST", "/v1/signing-keys/"+old+"/retire", operatorKey, "", nil), 204, "")
		c.expect("token of a retired key", c.json("GET", "/v1/topics/events", token, nil), 401, "invalid_token")
	}
	c.expect("retire unknown signing key", c.do("POST", "/v1/signing-keys/sk_0000000000000000/retire", operatorKey, "", nil), 404, "")

	// The audit log (the in-memory window: no postgres.url here).
	var audit []any
	eventually(t, "the audit log", func() bool {
		r := c.expect("audit", c.json("GET", "/v1/audit", adminKey, nil), 200, "").json(t)
		audit, _ = r["events"].([]any)
		return r["source"] == "memory" && len(audit) >= 6
	})
	first := c.expect("audit page 1", c.json("GET", "/v1/audit?limit=2", adminKey, nil), 200, "").json(t)
	next, _ := first["next"].(string)
	if len(first["events"].([]any)) != 2 || next == "" {
		t.Errorf("audit page 1: %v", first)
	}
	second := c.expect("audit page 2", c.json("GET", "/v1/audit?limit=2&after="+next, adminKey, nil), 200, "").json(t)
	if ev := second["events"].([]any); len(ev) != 2 || ev[0].(map[string]any)["id"] != audit[2].(map[string]any)["id"] {
		t.Errorf("audit page 2 does not continue page 1: %v", second)
	}
	for _, e := range c.expect("audit of key.created", c.json("GET", "/v1/audit?type=key.created", adminKey, nil), 200, "").json(t)["events"].([]any) {
		if ev := e.(map[string]any); ev["type"] != "key.created" || ev["actor"] == "" {
			t.Errorf("audit type filter: %v", ev)
		}
	}
	c.expect("audit bad since", c.json("GET", "/v1/audit?since=yesterday", adminKey, nil), 400, "invalid_request")
	c.expect("audit bad after", c.json("GET", "/v1/audit?after=nonsense", adminKey, nil), 400, "invalid_request")
	c.expect("audit limit 0", c.json("GET", "/v1/audit?limit=0", adminKey, nil), 400, "invalid_request")
	c.expect("audit as consumer", c.json("GET", "/v1/audit", consumer, nil), 403, "forbidden")
	c.expect("attempts of an unknown webhook", c.json("GET", "/v1/webhooks/wh_0000000000000000/attempts", adminKey, nil), 404, "webhook_not_found")

	// Routes outside the spec.
	c.expect("unknown route", c.json("GET", "/v1/nope", adminKey, nil), 404, "not_found")
	c.expect("wrong method", c.json("PUT", "/v1/topics", adminKey, nil), 405, "method_not_allowed")

	// Delete.
	c.expect("delete topic", c.json("DELETE", "/v1/topics/orders", adminKey, nil), 204, "")
	c.expect("delete topic again", c.json("DELETE", "/v1/topics/orders", adminKey, nil), 404, "topic_not_found")

	// Request ids: a sane one is echoed.
	req, _ := http.NewRequest("GET", c.base+"/healthz", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("X-Request-Id %q, want abc-123 echoed", got)
	}
}

// spy records failures instead of failing the test, to test the
// validator itself.
type spy struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (s *spy) Helper() {}
func (s *spy) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

// The validator catches drift: each doctored exchange must fail, each
// faithful one pass. No server needed.
func TestValidatorCatchesDrift(t *testing.T) {
	v := openapitest.Validator(t)
	type exchange struct {
		name                  string
		method, path, ct      string
		reqBody               string
		status                int
		respHeader            map[string]string
		respBody              string
		wantFail              bool
		wantFailingSubstrings []string
	}
	jsonH := map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Request-Id": "rid1"}
	noRID := map[string]string{"Content-Type": "application/json; charset=utf-8"}
	cases := []exchange{
		{name: "publish ok", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":{"a":1}}`,
			status: 200, respHeader: jsonH, respBody: `{"cursor":"0-5"}`},
		{name: "publish batch ok", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"messages":[{"data":1,"room":"r"}]}`,
			status: 200, respHeader: jsonH, respBody: `{"cursors":["1-0"]}`},
		{name: "publish cursor not a string", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 200, respHeader: jsonH, respBody: `{"cursor":5}`, wantFail: true},
		{name: "publish a number beyond float64 (valid JSON, kept verbatim)", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1e999}`,
			status: 200, respHeader: jsonH, respBody: `{"cursor":"0-5"}`},
		{name: "a route this node does not serve (split targets)", method: "GET", path: "/v1/topics", ct: "",
			status: 404, respHeader: jsonH, respBody: `{"error":"no route GET /v1/topics","code":"not_found"}`},
		{name: "topic_not_found where the operation has no 404", method: "GET", path: "/v1/topics", ct: "",
			status: 404, respHeader: jsonH, respBody: `{"error":"x","code":"topic_not_found"}`, wantFail: true},
		{name: "publish 201", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 201, respHeader: jsonH, respBody: `{"cursor":"0-5"}`, wantFail: true},
		{name: "publish without X-Request-Id", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 200, respHeader: noRID, respBody: `{"cursor":"0-5"}`, wantFail: true},
		{name: "server accepted an invalid request", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"payload":1}`,
			status: 200, respHeader: jsonH, respBody: `{"cursor":"0-5"}`, wantFail: true},
		{name: "server rejected an invalid request", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"payload":1}`,
			status: 400, respHeader: jsonH, respBody: `{"error":"bad","code":"invalid_request"}`},
		{name: "code of another status", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 400, respHeader: jsonH, respBody: `{"error":"bad","code":"topic_not_found"}`, wantFail: true},
		{name: "unknown code", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 404, respHeader: jsonH, respBody: `{"error":"bad","code":"topic_missing"}`, wantFail: true},
		{name: "error without code", method: "GET", path: "/v1/topics/x", status: 404, respHeader: jsonH, respBody: `{"error":"x"}`, wantFail: true},
		{name: "5xx without request_id", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 503, respHeader: jsonH, respBody: `{"error":"x","code":"kafka_unavailable"}`, wantFail: true},
		{name: "5xx with request_id", method: "POST", path: "/v1/topics/orders/messages", ct: "application/json", reqBody: `{"data":1}`,
			status: 503, respHeader: jsonH, respBody: `{"error":"x","code":"kafka_unavailable","request_id":"rid1"}`},
		{name: "undocumented status", method: "GET", path: "/v1/topics", status: 409, respHeader: jsonH, respBody: `{"error":"x","code":"conflict"}`, wantFail: true},
		{name: "poll message ok", method: "POST", path: "/v1/topics/orders/poll", ct: "application/json", reqBody: `{"group":"g"}`, status: 200, respHeader: jsonH,
			respBody: `{"messages":[{"cursor":"0-1","room":null,"data":null,"headers":[{"key":"content-type","value":"application/json"},{"key":"k","value_base64":"/w=="}],"published_at":"2026-11-30T11:46:00.123Z"},{"cursor":"1-1","room":"r","data_base64":"aGk=","headers":[],"published_at":"2026-11-30T11:46:00.123Z"}],"batch":"b-1"}`},
		{name: "poll message with headers as an object", method: "POST", path: "/v1/topics/orders/poll", ct: "application/json", reqBody: `{"group":"g"}`, status: 200, respHeader: jsonH,
			respBody: `{"messages":[{"cursor":"0-1","room":null,"data":1,"headers":{"content-type":"application/json"},"published_at":"2026-11-30T11:46:00.123Z"}],"batch":"b-1"}`, wantFail: true},
		{name: "poll header with value and value_base64", method: "POST", path: "/v1/topics/orders/poll", ct: "application/json", reqBody: `{"group":"g"}`, status: 200, respHeader: jsonH,
			respBody: `{"messages":[{"cursor":"0-1","room":null,"data":1,"headers":[{"key":"k","value":"v","value_base64":"dg=="}],"published_at":"2026-11-30T11:46:00.123Z"}],"batch":"b-1"}`, wantFail: true},
		{name: "poll message with data and data_base64", method: "POST", path: "/v1/topics/orders/poll", ct: "application/json", reqBody: `{"group":"g"}`, status: 200, respHeader: jsonH,
			respBody: `{"messages":[{"cursor":"0-1","room":null,"data":1,"data_base64":"aGk=","headers":[],"published_at":"2026-11-30T11:46:00.123Z"}]}`, wantFail: true},
		{name: "poll message without room", method: "POST", path: "/v1/topics/orders/poll", ct: "application/json", reqBody: `{"group":"g"}`, status: 200, respHeader: jsonH,
			respBody: `{"messages":[{"cursor":"0-1","data":1,"headers":[],"published_at":"2026-11-30T11:46:00.123Z"}]}`, wantFail: true},
		{name: "unknown route 404", method: "GET", path: "/v2/x", status: 404, respHeader: jsonH, respBody: `{"error":"x","code":"not_found"}`},
		{name: "unknown route 200", method: "GET", path: "/v2/x", status: 200, respHeader: jsonH, respBody: `{}`, wantFail: true},
		{name: "delete 204", method: "DELETE", path: "/v1/topics/orders", status: 204, respHeader: map[string]string{"X-Request-Id": "r"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = http.NoBody
			if tc.reqBody != "" {
				body = strings.NewReader(tc.reqBody)
			}
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, body)
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			rec := httptest.NewRecorder()
			for k, v := range tc.respHeader {
				rec.Header().Set(k, v)
			}
			rec.WriteHeader(tc.status)
			rec.WriteString(tc.respBody)
			resp := rec.Result()
			s := &spy{TB: t}
			v.Check(s, req, []byte(tc.reqBody), resp, []byte(tc.respBody))
			if failed := len(s.errs) > 0; failed != tc.wantFail {
				t.Errorf("failed=%v, want %v: %v", failed, tc.wantFail, s.errs)
			}
			for _, sub := range tc.wantFailingSubstrings {
				if !slices.ContainsFunc(s.errs, func(e string) bool { return strings.Contains(e, sub) }) {
					t.Errorf("no failure mentions %q: %v", sub, s.errs)
				}
			}
		})
	}
}
