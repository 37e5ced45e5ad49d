package controlplane

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// fixedResolver answers from its map; other names do not resolve.
type fixedResolver map[string][]netip.Addr

func (r fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

// The webhook API through its handlers, with the real SSRF guard (over a
// fixed resolver) and real Kafka: who may manage webhooks, the refusals
// and their codes, the secret shown once, enable and disable, tenant
// isolation, deletion being final, and dead-letter inspection and replay
// of a webhook with none.
func TestHandlersWebhooks(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	a := newTestAPIWith(t, func(svc *Service, cfg config.Config, clog *controlstate.MemoryLog, adm *kadm.Client) {
		store, err := webhookstore.Open(webhookstore.Config{
			Webhooks: cfg.Webhooks, Names: names.Mapper{Prefix: cfg.Kafka.TopicPrefix},
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Admin: adm, Log: clog,
			ReplicationFactor: -1, MinInsyncReplicas: -1, RequestTimeout: cfg.Kafka.RequestTimeout,
			MaxRecordBytes: 1 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		store.SetResolver(fixedResolver{
			"hooks.example":    {netip.MustParseAddr("93.184.215.14")},
			"internal.example": {netip.MustParseAddr("10.0.0.7")},
			"metadata.example": {netip.MustParseAddr("169.254.169.254")},
		})
		svc.SetWebhooks(store)
	})
	_, body := a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "paid"})
	admin, _ := body["admin_key"].(string)
	_, body = a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "other", "plan": "paid"})
	otherAdmin, _ := body["admin_key"].(string)
	st, body := a.do("POST", "/v1/keys", admin, map[string]any{"name": "c", "role": "consumer"})
	a.want("create a consumer key", 201, "", st, body)
	consumer, _ := body["key"].(string)
	st, body = a.do("POST", "/v1/topics", admin, map[string]any{"name": "orders", "partitions": 2})
	a.want("create topic", 201, "", st, body)

	// Refusals before anything is registered.
	for _, c := range []struct {
		what   string
		body   map[string]any
		status int
		code   string
	}{
		{"no topic", map[string]any{"url": "https://hooks.example/in"}, 400, "invalid_request"},
		{"an unknown topic", map[string]any{"topic": "nope", "url": "https://hooks.example/in"}, 404, "topic_not_found"},
		{"no url", map[string]any{"topic": "orders"}, 422, "validation_failed"},
		{"plain http", map[string]any{"topic": "orders", "url": "http://hooks.example/in"}, 422, "webhook_target_refused"},
		{"a private address", map[string]any{"topic": "orders", "url": "https://internal.example/in"}, 422, "webhook_target_refused"},
		{"the metadata address", map[string]any{"topic": "orders", "url": "https://metadata.example/"}, 422, "webhook_target_refused"},
		{"a loopback literal", map[string]any{"topic": "orders", "url": "https://127.0.0.1/in"}, 422, "webhook_target_refused"},
		{"a name that does not resolve", map[string]any{"topic": "orders", "url": "https://gone.example/in"}, 422, "webhook_target_refused"},
		{"an unknown field", map[string]any{"topic": "orders", "url": "https://hooks.example/in", "colour": "red"}, 400, "invalid_request"},
	} {
		st, body := a.do("POST", "/v1/webhooks", admin, c.body)
		a.want("register with "+c.what, c.status, c.code, st, body)
	}
	st, body = a.do("POST", "/v1/webhooks", consumer, map[string]any{"topic": "orders", "url": "https://hooks.example/in"})
	a.want("a consumer registering a webhook", 403, "forbidden", st, body)
	if _, body := a.do("GET", "/v1/webhooks", admin, nil); len(body["webhooks"].([]any)) != 0 {
		t.Fatalf("refused registrations left webhooks: %v", body)
	}

	// Registered: the secret once, in the create answer only.
	st, body = a.do("POST", "/v1/webhooks", admin, map[string]any{"topic": "orders", "url": "https://hooks.example/in?sig=1"})
	a.want("register", 201, "", st, body)
	id, _ := body["id"].(string)
	secret, _ := body["secret"].(string)
	if id == "" || !strings.HasPrefix(secret, "whsec_") || body["enabled"] != true || body["group"] == "" || body["room"] != nil {
		t.Fatalf("register: %v", body)
	}
	st, body = a.do("GET", "/v1/webhooks/"+id, admin, nil)
	a.want("get", 200, "", st, body)
	if _, has := body["secret"]; has || body["url"] != "https://hooks.example/in?sig=1" {
		t.Fatalf("get: %v (no secret, the URL as registered)", body)
	}
	st, body = a.do("GET", "/v1/webhooks", admin, nil)
	if hooks, _ := body["webhooks"].([]any); st != 200 || len(hooks) != 1 || strings.Contains(mustJSON(t, body), secret) {
		t.Fatalf("list: %d %v", st, body)
	}

	// Another tenant sees nothing of it; a consumer may not manage it.
	st, body = a.do("GET", "/v1/webhooks/"+id, otherAdmin, nil)
	a.want("another tenant's webhook", 404, "webhook_not_found", st, body)
	st, body = a.do("DELETE", "/v1/webhooks/"+id, otherAdmin, nil)
	a.want("deleting another tenant's webhook", 404, "webhook_not_found", st, body)
	st, body = a.do("GET", "/v1/webhooks/"+id, consumer, nil)
	a.want("a consumer reading a webhook", 403, "forbidden", st, body)

	// Disable, refuse a private URL on the way back, enable.
	st, body = a.do("PATCH", "/v1/webhooks/"+id, admin, map[string]any{})
	a.want("an empty change", 400, "invalid_request", st, body)
	st, body = a.do("PATCH", "/v1/webhooks/"+id, admin, map[string]any{"enabled": false})
	a.want("disable", 200, "", st, body)
	if body["enabled"] != false {
		t.Fatalf("disable: %v", body)
	}
	st, body = a.do("PATCH", "/v1/webhooks/"+id, admin, map[string]any{"enabled": true, "url": "https://internal.example/in"})
	a.want("enable with a private URL", 422, "webhook_target_refused", st, body)
	if _, body := a.do("GET", "/v1/webhooks/"+id, admin, nil); body["enabled"] != false || body["url"] != "https://hooks.example/in?sig=1" {
		t.Fatalf("a refused change changed the webhook: %v", body)
	}
	st, body = a.do("PATCH", "/v1/webhooks/"+id, admin, map[string]any{"enabled": true, "url": "https://hooks.example/v2"})
	a.want("enable with a new URL", 200, "", st, body)
	if body["enabled"] != true || body["url"] != "https://hooks.example/v2" {
		t.Fatalf("enable: %v", body)
	}

	// Dead letters of a webhook that has none.
	st, body = a.do("GET", "/v1/webhooks/"+id+"/dead-letters?max=0", admin, nil)
	a.want("inspect with max 0", 400, "invalid_request", st, body)
	st, body = a.do("GET", "/v1/webhooks/"+id+"/dead-letters", admin, nil)
	a.want("inspect", 200, "", st, body)
	if dls, _ := body["dead_letters"].([]any); len(dls) != 0 || body["one_shot"] != true {
		t.Fatalf("inspect: %v", body)
	}
	st, body = a.do("POST", "/v1/webhooks/"+id+"/dead-letters/replay", admin, map[string]any{"cursors": []string{}})
	a.want("replay an empty list", 400, "invalid_request", st, body)
	st, body = a.do("POST", "/v1/webhooks/"+id+"/dead-letters/replay", admin, nil)
	a.want("replay all", 200, "", st, body)

	// Deleting is final.
	st, body = a.do("DELETE", "/v1/webhooks/"+id, admin, nil)
	a.want("delete", 204, "", st, body)
	st, body = a.do("GET", "/v1/webhooks/"+id, admin, nil)
	a.want("the deleted webhook", 404, "webhook_not_found", st, body)
	st, body = a.do("PATCH", "/v1/webhooks/"+id, admin, map[string]any{"enabled": true})
	a.want("enabling the deleted webhook", 404, "webhook_not_found", st, body)
}
