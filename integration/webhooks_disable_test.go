package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/integration/harness"
)

// parkedRecords counts webhook id's records in the tenant's retry topic.
func parkedRecords(t *testing.T, c *harness.Cluster, id string) int {
	n := 0
	for _, recs := range harness.ReadCommitted(t, c.Brokers, c.Prefix+".default.wh.retry") {
		for _, r := range recs {
			if string(r.Key) == id {
				n++
			}
		}
	}
	return n
}

// The pending retries of a disabled webhook wait: each is looked at (and
// written again) at most once per backoff_max, not in a loop, and they
// are delivered once it is enabled again.
func TestWebhookDisabledRetriesDoNotChurn(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 5, time.Second, 300*time.Millisecond) // backoff_max 1.2 s
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	rc.Answer("/down", 503)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/down"), "")
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"x": 1})
	waitDeliveries(t, rc, "/down", 1, 30*time.Second)
	harness.Must(t, n.URL, "PATCH", "/v1/webhooks/"+wh.ID, c.AdminKey, map[string]any{"enabled": false}, http.StatusOK)
	time.Sleep(time.Second)
	before, attempts := parkedRecords(t, c, wh.ID), len(rc.Got("/down"))
	time.Sleep(6 * time.Second)
	after := parkedRecords(t, c, wh.ID)
	t.Logf("retry records: %d, then %d after 6 s disabled", before, after)
	if after-before > 8 { // one rewrite per backoff_max (1.2 s) is 5
		t.Fatalf("%d retry records written in 6 s while disabled: the parked retry churns", after-before)
	}
	if got := len(rc.Got("/down")); got != attempts {
		t.Fatalf("%d attempts while disabled (had %d)", got, attempts)
	}
	rc.Answer("/down", 200)
	harness.Must(t, n.URL, "PATCH", "/v1/webhooks/"+wh.ID, c.AdminKey, map[string]any{"enabled": true}, http.StatusOK)
	ok, _ := harness.PollUntil(30*time.Second, 50*time.Millisecond, func() bool { return len(rc.Got("/down")) > attempts })
	if !ok {
		t.Fatal("the parked retry was not delivered after re-enabling")
	}
	if got := c.DLQRecords(t, "default", wh.ID); got != 0 {
		t.Fatalf("%d dead letters, want none", got)
	}
}

// Kafka drops an empty group's offsets after offsets.retention.minutes:
// a webhook re-enabled after that resumes where it stopped (the offsets
// recorded in webhook.disabled), not at the beginning of the topic.
func TestWebhookReEnableAfterGroupOffsetsExpired(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 2)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/hook"), "")
	for i := 0; i < 4; i++ {
		publishJSON(t, n, c.AdminKey, "orders", "r"+string(rune('a'+i)), map[string]any{"n": i})
	}
	waitDeliveries(t, rc, "/hook", 4, 30*time.Second)
	time.Sleep(time.Second)
	harness.Must(t, n.URL, "PATCH", "/v1/webhooks/"+wh.ID, c.AdminKey, map[string]any{"enabled": false}, http.StatusOK)
	for i := 4; i < 7; i++ {
		publishJSON(t, n, c.AdminKey, "orders", "r"+string(rune('a'+i)), map[string]any{"n": i})
	}
	// What offsets.retention.minutes does to the empty group.
	adm := c.Admin(t)
	ok, _ := harness.PollUntil(30*time.Second, 200*time.Millisecond, func() bool {
		resp, err := adm.DeleteGroups(context.Background(), wh.Group)
		return err == nil && resp.Error() == nil
	})
	if !ok {
		t.Fatal("could not delete the disabled webhook's group")
	}
	harness.Must(t, n.URL, "PATCH", "/v1/webhooks/"+wh.ID, c.AdminKey, map[string]any{"enabled": true}, http.StatusOK)
	waitDeliveries(t, rc, "/hook", 7, 30*time.Second)
	time.Sleep(2 * time.Second)
	got := rc.Got("/hook")
	if len(got) != 7 {
		t.Fatalf("%d deliveries, want 7: the messages delivered before the disable were delivered again", len(got))
	}
	for _, d := range got[4:] {
		if nn := d.Payload(t)["data"].(map[string]any)["n"].(float64); nn < 4 {
			t.Fatalf("message %v delivered again after re-enabling", nn)
		}
	}
}
