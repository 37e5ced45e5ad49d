package integration

import (
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/names"
)

// Control-log hygiene: an operator or tenant call naming an id that does
// not exist is 404, a free-text field over its limit is 400, a create of
// what exists is 409, and a call that changes nothing succeeds; none of
// them appends an event (the control topic's end offset stays put).
func TestControlLogHygiene(t *testing.T) {
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.WebhookConfig(t, rc, 3, 2*time.Second, 100*time.Millisecond)(cfg)
		h.Unlimited(cfg)
	})
	op, admin := c.OperatorKey, c.AdminKey
	h.CreateTopic(t, n.URL, admin, "orders", 1)
	wh := h.CreateWebhook(t, n.URL, admin, "orders", rc.URLFor("", "/hook"), "")
	keyID := h.Must(t, n.URL, "POST", "/v1/keys", admin, map[string]any{"name": "k", "role": "consumer"}, 201).JSON(t)["id"].(string)
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+keyID, admin, nil, 204)
	kid := h.Must(t, n.URL, "POST", "/v1/signing-keys", op, nil, 201).JSON(t)["kid"].(string)
	h.Must(t, n.URL, "POST", "/v1/signing-keys/"+kid+"/retire", op, nil, 204)
	h.Must(t, n.URL, "POST", "/v1/tenants/default/suspend", op, map[string]any{"reason": "billing"}, 200)
	h.Must(t, n.URL, "POST", "/v1/tenants/default/reinstate", op, nil, 200)

	topic := names.Mapper{Prefix: c.Prefix}.ControlTopic()
	before := h.TotalRecords(t, c.Brokers, topic)
	big := strings.Repeat("x", 200<<10)
	for _, tc := range []struct {
		what, method, path, cred string
		body                     any
		status                   int
		code                     string
	}{
		{"suspend an unknown tenant", "POST", "/v1/tenants/nope/suspend", op, map[string]any{"reason": "billing"}, 404, "tenant_not_found"},
		{"reinstate an unknown tenant", "POST", "/v1/tenants/nope/reinstate", op, nil, 404, "tenant_not_found"},
		{"change the plan of an unknown tenant", "PATCH", "/v1/tenants/nope", op, map[string]any{"plan": "paid"}, 404, "tenant_not_found"},
		{"retire an unknown signing key", "POST", "/v1/signing-keys/sk_nope/retire", op, nil, 404, "not_found"},
		{"revoke an unknown key", "DELETE", "/v1/keys/key_nope", admin, nil, 404, "key_not_found"},
		{"delete an unknown topic", "DELETE", "/v1/topics/nope", admin, nil, 404, "topic_not_found"},
		{"enable an unknown webhook", "PATCH", "/v1/webhooks/wh_nope", admin, map[string]any{"enabled": true}, 404, "webhook_not_found"},
		{"delete an unknown webhook", "DELETE", "/v1/webhooks/wh_nope", admin, nil, 404, "webhook_not_found"},
		{"create an existing tenant", "POST", "/v1/tenants", op, map[string]any{"id": "default", "plan": "free"}, 409, "conflict"},
		{"create an existing topic", "POST", "/v1/topics", admin, map[string]any{"name": "orders"}, 409, "conflict"},
		{"a 200 KB suspension reason", "POST", "/v1/tenants/default/suspend", op, map[string]any{"reason": big}, 400, "invalid_request"},
		{"a suspension reason of 501 bytes", "POST", "/v1/tenants/default/suspend", op, map[string]any{"reason": strings.Repeat("r", 501)}, 400, "invalid_request"},
		{"a key name of 201 bytes", "POST", "/v1/keys", admin, map[string]any{"name": strings.Repeat("n", 201), "role": "consumer"}, 400, "invalid_request"},
		{"a 200 KB key name", "POST", "/v1/keys", admin, map[string]any{"name": big, "role": "consumer"}, 400, "invalid_request"},
		{"a webhook url of 3000 bytes", "POST", "/v1/webhooks", admin, map[string]any{"topic": "orders", "url": rc.URLFor("", "/"+strings.Repeat("u", 3000))}, 400, "invalid_request"},
		{"a webhook room over the room limit", "POST", "/v1/webhooks", admin, map[string]any{"topic": "orders", "url": rc.URLFor("", "/r"), "room": strings.Repeat("r", 129)}, 400, "invalid_request"},
		{"patch a webhook url of 3000 bytes", "PATCH", "/v1/webhooks/" + wh.ID, admin, map[string]any{"url": rc.URLFor("", "/"+strings.Repeat("u", 3000))}, 400, "invalid_request"},
		{"capabilities with 65 room patterns", "POST", "/v1/keys", admin, map[string]any{"name": "c", "capabilities": []map[string]any{{"ops": []string{"subscribe"}, "topics": []string{"orders"}, "rooms": strings.Split(strings.Repeat("r,", 64)+"r", ",")}}}, 422, "validation_failed"},
		{"revoke a revoked key again", "DELETE", "/v1/keys/" + keyID, admin, nil, 204, ""},
		{"retire a retired signing key again", "POST", "/v1/signing-keys/" + kid + "/retire", op, nil, 204, ""},
		{"reinstate a tenant that is not suspended", "POST", "/v1/tenants/default/reinstate", op, nil, 200, ""},
		{"set the plan it has", "PATCH", "/v1/tenants/default", op, map[string]any{"plan": "free"}, 200, ""},
		{"set the strict topic gate it has", "PATCH", "/v1/tenant", admin, map[string]any{"strict_topics": true}, 200, ""},
		{"enable an enabled webhook", "PATCH", "/v1/webhooks/" + wh.ID, admin, map[string]any{"enabled": true}, 200, ""},
	} {
		r := h.Do(t, n.URL, tc.method, tc.path, tc.cred, tc.body)
		if tc.code != "" {
			h.WantError(t, tc.what, r, tc.status, tc.code)
		} else if r.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.what, r.Status, r.Body, tc.status)
		}
		if got := h.TotalRecords(t, c.Brokers, topic); got != before {
			t.Fatalf("%s appended %d control events", tc.what, got-before)
		}
	}
	// Still suspendable for real (the checks do not block real changes).
	h.Must(t, n.URL, "POST", "/v1/tenants/default/suspend", op, map[string]any{"reason": "billing"}, 200)
	if got := h.TotalRecords(t, c.Brokers, topic); got != before+1 {
		t.Fatalf("a real suspension appended %d events, want 1", got-before)
	}
}
