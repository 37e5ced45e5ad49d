package integration

import (
	"fmt"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// Every bad input gets a clear {"error","code"} with the right status and
// an X-Request-Id, and nothing of a rejected publish reaches Kafka.
func TestBadInputIsRejectedClearly(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Publish.MaxBatchMessages = 5
		cfg.Publish.MaxMessageBytes = 1024
		cfg.Publish.MaxBatchBytes = 4096
		cfg.Publish.MaxRoomLength = 16
		cfg.Topics.MaxPartitions = 8
		cfg.HTTP.MaxBodyBytes = 64 << 10
	})
	key := c.AdminKey
	h.Must(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "bad", "partitions": 2}, 201)

	acked := 0
	ok := func(what string, body any, ct ...string) {
		t.Helper()
		r := h.Do(t, n.URL, "POST", "/v1/topics/bad/messages", key, body, ct...)
		if r.Status != 200 {
			t.Fatalf("%s: status %d, want 200: %s", what, r.Status, r.Body)
		}
		if r.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: no X-Request-Id", what)
		}
		m := r.JSON(t)
		if cs, has := m["cursors"].([]any); has {
			acked += len(cs)
		} else {
			acked++
		}
	}
	bad := func(what string, body any, status int, code string, ct ...string) map[string]any {
		t.Helper()
		return h.WantError(t, what, h.Do(t, n.URL, "POST", "/v1/topics/bad/messages", key, body, ct...), status, code)
	}

	ok("single", []byte(`{"data":{"ok":1}}`))
	ok("batch at the count limit", []byte(`{"messages":[{"data":1},{"data":2},{"data":3},{"data":4},{"data":5}]}`))
	ok("message at the byte limit", []byte(`{"data":"`+strings.Repeat("a", 1022)+`"}`))
	ok("room at the length limit", map[string]any{"data": 1, "room": strings.Repeat("r", 16)})

	msg := func(size int) string { return `{"data":"` + strings.Repeat("x", size-2) + `"}` } // data is size bytes

	bad("malformed JSON", []byte(`{"data":`), 400, "invalid_request")
	bad("not an object", []byte(`[1,2]`), 400, "invalid_request")
	bad("trailing data", []byte(`{"data":1} {"data":2}`), 400, "invalid_request")
	bad("unknown field", []byte(`{"data":1,"colour":"red"}`), 400, "invalid_request")
	bad("both data and messages", []byte(`{"data":1,"messages":[{"data":2}]}`), 400, "invalid_request")
	bad("neither data nor messages", []byte(`{"room":"r"}`), 400, "invalid_request")
	bad("empty body", []byte(``), 400, "invalid_request")
	bad("empty messages", []byte(`{"messages":[]}`), 400, "invalid_request")
	bad("batch message without data", []byte(`{"messages":[{"data":1},{"room":"r"}]}`), 400, "invalid_request")
	bad("batch over max_batch_messages", []byte(`{"messages":[{"data":1},{"data":2},{"data":3},{"data":4},{"data":5},{"data":6}]}`), 413, "payload_too_large")
	bad("single message over max_message_bytes", []byte(msg(1025)), 413, "payload_too_large")
	bad("batch message over max_message_bytes", []byte(`{"messages":[{"data":1},`+msg(1025)+`]}`), 413, "payload_too_large")
	bad("raw body over max_message_bytes", []byte(strings.Repeat("z", 1025)), 413, "payload_too_large", "application/octet-stream")
	bad("body over max_batch_bytes", []byte(`{"messages":[`+strings.Join([]string{msg(1000), msg(1000), msg(1000), msg(1000), msg(1000)}, ",")+`]}`), 413, "payload_too_large")
	bad("room over max_room_length", map[string]any{"data": 1, "room": strings.Repeat("r", 17)}, 400, "invalid_request")
	bad("empty room", map[string]any{"data": 1, "room": ""}, 400, "invalid_request")
	bad("batch with one bad room", map[string]any{"messages": []any{map[string]any{"data": 1, "room": "fine"}, map[string]any{"data": 2, "room": strings.Repeat("r", 17)}}}, 400, "invalid_request")
	for _, hdr := range []string{"msgmesh-trace", "MsgMesh-Anything", "content-type", "Content-Type"} {
		bad("reserved header "+hdr, map[string]any{"data": 1, "headers": map[string]string{hdr: "v"}}, 400, "invalid_request")
	}
	bad("batch with a reserved header", map[string]any{"messages": []any{map[string]any{"data": 1}, map[string]any{"data": 2, "headers": map[string]string{"msgmesh-x": "v"}}}}, 400, "invalid_request")
	bad("batch-level room", map[string]any{"messages": []any{map[string]any{"data": 1}}, "room": "r"}, 400, "invalid_request")

	// Query-string rooms.
	h.WantError(t, "raw publish with an empty ?room=", h.Do(t, n.URL, "POST", "/v1/topics/bad/messages?room=", key, []byte("raw"), "text/plain"), 400, "invalid_request")
	h.WantError(t, "raw publish with ?room= over the limit", h.Do(t, n.URL, "POST", "/v1/topics/bad/messages?room="+strings.Repeat("q", 17), key, []byte("raw"), "text/plain"), 400, "invalid_request")
	h.WantError(t, "JSON publish with ?room=", h.Do(t, n.URL, "POST", "/v1/topics/bad/messages?room=r1", key, map[string]any{"data": 1}), 400, "invalid_request")

	// Poll. (Bad group and consumer names are 422 validation_failed per
	// proto/openapi.yaml since f2d7993; spec section 6 groups 400 and 422.)
	poll := func(what string, path string, body any, status int, code string) map[string]any {
		t.Helper()
		return h.WantError(t, what, h.Do(t, n.URL, "POST", path, key, body), status, code)
	}
	m := poll("poll with room", "/v1/topics/bad/poll", map[string]any{"group": "g", "room": "r1"}, 400, "room_not_supported")
	if s, _ := m["error"].(string); !strings.Contains(s, "SSE") || !strings.Contains(s, "WebSocket") {
		t.Errorf("room_not_supported error %q does not point to SSE and WebSocket", s)
	}
	poll("poll with ?room=", "/v1/topics/bad/poll?room=r1", map[string]any{"group": "g"}, 400, "room_not_supported")
	poll("poll with a bad group name", "/v1/topics/bad/poll", map[string]any{"group": "bad group!"}, 422, "validation_failed")
	poll("poll with a dotted group", "/v1/topics/bad/poll", map[string]any{"group": "a.b"}, 422, "validation_failed")
	poll("poll without group", "/v1/topics/bad/poll", map[string]any{}, 400, "invalid_request")
	poll("poll with a bad consumer name", "/v1/topics/bad/poll", map[string]any{"group": "g", "consumer": "c/1"}, 422, "validation_failed")
	poll("poll with negative max", "/v1/topics/bad/poll", map[string]any{"group": "g", "max": -1}, 400, "invalid_request")
	poll("poll with negative wait_ms", "/v1/topics/bad/poll", map[string]any{"group": "g", "wait_ms": -5}, 400, "invalid_request")
	poll("poll with an unknown field", "/v1/topics/bad/poll", map[string]any{"group": "g", "limit": 5}, 400, "invalid_request")
	poll("poll with malformed JSON", "/v1/topics/bad/poll", []byte(`{"group":`), 400, "invalid_request")
	poll("commit with a bad cursor", "/v1/topics/bad/commit", map[string]any{"group": "g", "cursors": []string{"zero-one"}}, 400, "invalid_request")
	poll("commit with no cursors", "/v1/topics/bad/commit", map[string]any{"group": "g", "cursors": []string{}}, 400, "invalid_request")
	poll("poll a topic never created", "/v1/topics/nope/poll", map[string]any{"group": "g"}, 404, "topic_not_found")

	// Topics.
	for _, name := range []string{"a.b", "a/b", "..", ".", "with space", "", strings.Repeat("t", 101), "wh", "dlq"} {
		r := h.Do(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": name})
		h.WantError(t, fmt.Sprintf("create topic %q", name), r, 422, "validation_failed")
	}
	h.WantError(t, "partitions over the cap", h.Do(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "big", "partitions": 9}), 422, "validation_failed")
	h.WantError(t, "negative partitions", h.Do(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "neg", "partitions": -1}), 422, "validation_failed")
	h.WantError(t, "partitions not a number", h.Do(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "nan", "partitions": "three"}), 400, "invalid_request")
	h.WantError(t, "duplicate topic", h.Do(t, n.URL, "POST", "/v1/topics", key, map[string]any{"name": "bad"}), 409, "conflict")
	for _, name := range []string{"big", "neg", "nan"} {
		h.WantError(t, "rejected topic "+name+" exists?", h.Do(t, n.URL, "GET", "/v1/topics/"+name, key, nil), 404, "topic_not_found")
	}

	// Strict topic gate (on by default): publishing never creates a topic.
	ten := h.Must(t, n.URL, "GET", "/v1/tenant", key, nil, 200).JSON(t)
	if ten["strict_topics"] != true {
		t.Errorf("tenant default has strict_topics %v, want true by default", ten["strict_topics"])
	}
	h.WantError(t, "publish to a never-created topic", h.Do(t, n.URL, "POST", "/v1/topics/ghost/messages", key, map[string]any{"data": 1}), 404, "topic_not_found")
	h.WantError(t, "ghost exists?", h.Do(t, n.URL, "GET", "/v1/topics/ghost", key, nil), 404, "topic_not_found")
	h.WantError(t, "PATCH tenant with nothing", h.Do(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{}), 400, "invalid_request")
	h.WantError(t, "PATCH tenant with a bad type", h.Do(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{"strict_topics": "no"}), 400, "invalid_request")
	pt := h.Must(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{"strict_topics": false}, 200).JSON(t)
	if pt["strict_topics"] != false {
		t.Errorf("PATCH answered %v, want strict_topics false", pt)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/ghost/messages", key, map[string]any{"data": "creates"}, 200)
	h.Must(t, n.URL, "GET", "/v1/topics/ghost", key, nil, 200)
	if got := h.TotalRecords(t, c.Brokers, c.TenantKafkaTopic("default", "ghost")); got != 1 {
		t.Errorf("auto-created topic ghost holds %d records, want 1", got)
	}
	// Even with the gate off, an invalid name is not created.
	h.WantError(t, "publish auto-creating an invalid name", h.Do(t, n.URL, "POST", "/v1/topics/a.b/messages", key, map[string]any{"data": 1}), 422, "validation_failed")

	// Authentication.
	noAuth := h.Do(t, n.URL, "GET", "/v1/topics", "", nil)
	h.WantError(t, "missing Authorization", noAuth, 401, "unauthenticated")
	h.WantError(t, "publish without Authorization", h.Do(t, n.URL, "POST", "/v1/topics/bad/messages", "", map[string]any{"data": 1}), 401, "unauthenticated")
	h.WantError(t, "unknown key", h.Do(t, n.URL, "GET", "/v1/topics", h.NewKey(), nil), 401, "invalid_credential")
	h.WantError(t, "garbage key", h.Do(t, n.URL, "GET", "/v1/topics", "hunter2", nil), 401, "invalid_credential")

	// Any route's body is capped (http.max_body_bytes).
	h.WantError(t, "key request over http.max_body_bytes", h.Do(t, n.URL, "POST", "/v1/keys", key, map[string]any{"name": strings.Repeat("n", 70<<10), "role": "producer"}), 413, "payload_too_large")
	h.WantError(t, "key name over 200 bytes", h.Do(t, n.URL, "POST", "/v1/keys", key, map[string]any{"name": strings.Repeat("n", 201), "role": "producer"}), 400, "invalid_request")

	// Routes.
	h.WantError(t, "unknown route", h.Do(t, n.URL, "GET", "/v1/nope", key, nil), 404, "not_found")
	h.WantError(t, "unknown route without auth", h.Do(t, n.URL, "GET", "/nope", "", nil), 404, "not_found")
	h.WantError(t, "wrong method", h.Do(t, n.URL, "PUT", "/v1/topics", key, map[string]any{"name": "x"}), 405, "method_not_allowed")
	h.WantError(t, "wrong method on messages", h.Do(t, n.URL, "GET", "/v1/topics/bad/messages", key, nil), 405, "method_not_allowed")

	// Kafka holds exactly what was acknowledged.
	if got := h.TotalRecords(t, c.Brokers, c.TenantKafkaTopic("default", "bad")); got != int64(acked) {
		t.Errorf("topic bad holds %d records, want exactly the %d acknowledged", got, acked)
	}
	t.Logf("%d messages acknowledged; every rejection left Kafka untouched", acked)
}

// With the strict topic gate off, a publish that is rejected (bad body,
// bad room, over a limit, wrong role) creates no topic: a rejected request
// has no side effect.
func TestRejectedPublishCreatesNoTopic(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Publish.MaxBatchMessages = 2 })
	key := c.AdminKey
	h.Must(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{"strict_topics": false}, 200)
	_, cons := ctlCreateKey(t, n.URL, key, "c", "consumer")
	cases := []struct {
		topic, what string
		body        any
		key         string
		status      int
		code        string
	}{
		{"side-malformed", "malformed JSON", []byte(`{"data":`), key, 400, "invalid_request"},
		{"side-both", "data and messages", []byte(`{"data":1,"messages":[{"data":1}]}`), key, 400, "invalid_request"},
		{"side-room", "empty room", map[string]any{"data": 1, "room": ""}, key, 400, "invalid_request"},
		{"side-batch", "batch over the limit", []byte(`{"messages":[{"data":1},{"data":2},{"data":3}]}`), key, 413, "payload_too_large"},
	}
	for _, tc := range cases {
		h.WantError(t, tc.what, h.Do(t, n.URL, "POST", "/v1/topics/"+tc.topic+"/messages", tc.key, tc.body), tc.status, tc.code)
		if r := h.Do(t, n.URL, "GET", "/v1/topics/"+tc.topic, key, nil); r.Status != 404 {
			t.Errorf("a publish rejected for %s created topic %s (GET answers %d %s)", tc.what, tc.topic, r.Status, r.Body)
		}
	}
	h.WantError(t, "consumer publishes", h.Do(t, n.URL, "POST", "/v1/topics/side-role/messages", cons, map[string]any{"data": 1}), 403, "forbidden")
	if r := h.Do(t, n.URL, "GET", "/v1/topics/side-role", key, nil); r.Status != 404 {
		t.Errorf("a publish forbidden to a consumer created topic side-role (%d)", r.Status)
	}
}

// Only "Authorization: Bearer <credential>" authenticates: another scheme,
// or a bare key with no scheme, is answered 401 unauthenticated (no bearer
// credential was sent), never accepted.
func TestAuthorizationRequiresBearerScheme(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	for _, hv := range []struct{ what, value, method, path, body string }{
		{"Basic scheme with a valid key", "Basic " + c.AdminKey, "GET", "/v1/topics", ""},
		{"a valid key without the Bearer scheme", c.AdminKey, "GET", "/v1/topics", ""},
		{"the operator key without the Bearer scheme", c.OperatorKey, "POST", "/v1/tenants", `{"id":"no-scheme","plan":"free"}`},
		{"Bearer with no credential", "Bearer ", "GET", "/v1/topics", ""},
	} {
		var body []byte
		hdr := map[string]string{"Authorization": hv.value}
		if hv.body != "" {
			body = []byte(hv.body)
			hdr["Content-Type"] = "application/json"
		}
		r, err := h.RawRequest(h.Client, hv.method, n.URL+hv.path, body, hdr)
		if err != nil {
			t.Fatal(err)
		}
		h.WantError(t, hv.what+" ("+hv.method+" "+hv.path+")", r, 401, "unauthenticated")
	}
	h.Must(t, n.URL, "GET", "/v1/topics", c.AdminKey, nil, 200)
}
