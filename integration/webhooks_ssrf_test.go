package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/integration/harness"
)

// Targets the guard refuses at registration: 422 webhook_target_refused
// with the reason, even with the test-only private-target setting on
// (which lets loopback and RFC 1918 through, nothing else).
func TestWebhookRegistrationRefusesInternalTargets(t *testing.T) {
	c, n, _, _ := webhookCluster(t, 3, time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	dns := harness.NewFakeDNS()
	dns.Set("metadata.example", "169.254.169.254")
	dns.Set("rebind.example", "203.0.113.7")
	n.App.SetWebhookResolver(dns)
	for _, url := range []string{
		"http://127.0.0.1/hook",                 // not https
		"https://169.254.169.254/latest",        // cloud metadata
		"https://[fd00:ec2::254]/",              // AWS IPv6 metadata
		"https://168.63.129.16/",                // Azure WireServer
		"https://100.100.100.200/",              // shared space (Alibaba metadata)
		"https://metadata.google.internal/",     // GCP metadata name
		"https://[::ffff:169.254.169.254]/",     // IPv4-mapped
		"https://0x7f000001/", "https://127.1/", // non-canonical IPv4
		"https://user@169.254.169.254/", // userinfo
		"https://metadata.example/",     // a name resolving to metadata
		"https://rebind.example/",       // documentation range
		"https://nxdomain.example/",     // does not resolve
	} {
		r := harness.Do(t, n.URL, "POST", "/v1/webhooks", c.AdminKey, map[string]any{"topic": "orders", "url": url})
		m := harness.WantError(t, url, r, http.StatusUnprocessableEntity, "webhook_target_refused")
		if m != nil && !strings.Contains(fmt.Sprint(m["error"]), "refused") {
			t.Errorf("%s: error %q does not say why", url, m["error"])
		}
	}
}

// A name that turns internal after registration (DNS rebinding): the
// delivery is stopped at dial, the webhook is disabled with the reason,
// nothing is dead-lettered and the group does not move; messages
// published meanwhile are all delivered, in order, once the name is
// fixed and the webhook re-enabled.
func TestWebhookRebindingDisablesAndResumesInOrder(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 3)
	dns := harness.NewFakeDNS()
	dns.Set("example.com", "127.0.0.1") // the receiver (allowed by the test-only setting)
	n.App.SetWebhookResolver(dns)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("example.com", "/hook"), "")
	publishJSON(t, n, c.AdminKey, "orders", "room-a", map[string]any{"n": 0})
	waitDeliveries(t, rc, "/hook", 1, 30*time.Second)

	dns.Set("example.com", "169.254.169.254") // refused whatever the settings
	// A kept-alive connection goes on to the address checked when it was
	// dialled; the next dial is checked again. Make the next delivery dial.
	rc.CloseClientConnections()
	publishJSON(t, n, c.AdminKey, "orders", "room-a", map[string]any{"n": 1})
	var w harness.Webhook
	ok, _ := harness.PollUntil(30*time.Second, 50*time.Millisecond, func() bool {
		w = harness.GetWebhook(t, n.URL, c.AdminKey, wh.ID)
		return !w.Enabled
	})
	if !ok || !strings.Contains(w.DisabledReason, "169.254.169.254") {
		t.Fatalf("webhook %+v: want disabled with the refused address in the reason", w)
	}
	for i := 2; i < 52; i++ {
		publishJSON(t, n, c.AdminKey, "orders", "room-a", map[string]any{"n": i})
	}
	time.Sleep(2 * time.Second)
	if got := len(rc.Got("/hook")); got != 1 {
		t.Fatalf("%d deliveries while disabled, want the 1 before", got)
	}
	if got := c.DLQRecords(t, "default", wh.ID); got != 0 {
		t.Fatalf("%d dead letters, want none: a refused delivery is not dead-lettered", got)
	}

	dns.Set("example.com", "127.0.0.1")
	r := harness.Must(t, n.URL, "PATCH", "/v1/webhooks/"+wh.ID, c.AdminKey, map[string]any{"enabled": true}, http.StatusOK)
	if !r.JSON(t)["enabled"].(bool) {
		t.Fatalf("PATCH enabled: %s", r.Body)
	}
	got := waitDeliveries(t, rc, "/hook", 52, 60*time.Second)
	time.Sleep(time.Second)
	got = rc.Got("/hook")
	if len(got) != 52 {
		t.Fatalf("%d deliveries, want 52 (each message once)", len(got))
	}
	for i, d := range got {
		data, _ := d.Payload(t)["data"].(map[string]any)
		if data["n"] != float64(i) {
			t.Fatalf("delivery %d has n=%v: order broken", i, data["n"])
		}
	}
	if got := c.DLQRecords(t, "default", wh.ID); got != 0 {
		t.Fatalf("%d dead letters after resuming, want none", got)
	}
}
