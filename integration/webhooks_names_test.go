package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/integration/harness"
)

// Kafka reads "." and "_" alike in topic names: a tenant topic "wh_retry"
// would be msgmesh.<tenant>.wh_retry, which Kafka refuses next to (or
// takes the place of) the tenant's retry topic msgmesh.<tenant>.wh.retry.
// Such names are refused with 422 whether created or published to, and
// webhooks (retries included) keep working.
func TestTopicNamesCollidingWithInternalTopicsRefused(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, 2*time.Second, 100*time.Millisecond)
	for _, name := range []string{"wh_retry", "wh", "dlq", "dlq_x", "wh_abc"} {
		r := harness.Do(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": name})
		body := harness.WantError(t, "create topic "+name, r, http.StatusUnprocessableEntity, "validation_failed")
		if msg, _ := body["error"].(string); !strings.Contains(msg, "reserved") {
			t.Errorf("create topic %s: error %q does not say the name is reserved", name, msg)
		}
		r = harness.Do(t, n.URL, "POST", "/v1/topics/"+name+"/messages", c.AdminKey, map[string]any{"data": 1})
		if r.Status < 400 || r.Status >= 500 {
			t.Errorf("publish to %s: status %d, want 4xx: %s", name, r.Status, r.Body)
		}
	}
	// Before the fix the collision broke the tenant's webhooks from then
	// on: registration could not make the retry topic.
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	rc.Answer("/flaky", 503)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/flaky"), "")
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"x": 1})
	waitDeliveries(t, rc, "/flaky", 1, 30*time.Second)
	rc.Answer("/flaky", 200)
	waitDeliveries(t, rc, "/flaky", 2, 30*time.Second) // the retry, through the retry topic
	if got := harness.GetWebhook(t, n.URL, c.AdminKey, wh.ID); !got.Enabled {
		t.Fatalf("webhook %+v disabled", got)
	}
	topics, err := harness.KafkaAdmin(t, c.Brokers).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(c.Prefix + ".default.wh_retry") {
		t.Fatalf("Kafka topic %s.default.wh_retry exists", c.Prefix)
	}
}
