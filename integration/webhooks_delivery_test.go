package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// webhookCluster starts a node whose dispatcher trusts rc and may reach
// loopback (test-only settings), with attempts, timeout and backoff.
func webhookCluster(t *testing.T, attempts int, timeout, backoff time.Duration) (*harness.Cluster, *harness.Node, *harness.Receiver, func(*config.Config)) {
	t.Helper()
	c := harness.NewCluster(t)
	rc := harness.NewReceiver(t)
	mut := harness.WebhookConfig(t, rc, attempts, timeout, backoff)
	n := c.Start(t, mut)
	return c, n, rc, mut
}

func publishJSON(t *testing.T, n *harness.Node, key, topic, room string, data any) string {
	t.Helper()
	body := map[string]any{"data": data}
	if room != "" {
		body["room"] = room
	}
	r := harness.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, body, http.StatusOK)
	return fmt.Sprint(r.JSON(t)["cursor"])
}

func waitDeliveries(t *testing.T, rc *harness.Receiver, path string, want int, timeout time.Duration) []harness.Delivery {
	t.Helper()
	ok, _ := harness.PollUntil(timeout, 20*time.Millisecond, func() bool { return len(rc.Got(path)) >= want })
	got := rc.Got(path)
	if !ok {
		t.Fatalf("%s: %d deliveries after %v, want %d", path, len(got), timeout, want)
	}
	return got
}

func waitDLQ(t *testing.T, c *harness.Cluster, id string, want int, timeout time.Duration) time.Duration {
	t.Helper()
	ok, took := harness.PollUntil(timeout, 100*time.Millisecond, func() bool { return c.DLQRecords(t, "default", id) >= want })
	if !ok {
		t.Fatalf("webhook %s: %d dead letters after %v, want %d", id, c.DLQRecords(t, "default", id), timeout, want)
	}
	return took
}

// Delivery: signed per Standard Webhooks (verified with its Go library),
// the message's id, cursor, topic, room and data, partition order kept,
// and the webhook is a real consumer group whose offsets follow.
func TestWebhookDeliverySignedAndOrdered(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, 2*time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 3)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/ok"), "")
	if wh.Group != c.Prefix+".default.wh."+wh.ID || !wh.Enabled {
		t.Fatalf("webhook %+v: want enabled with group <prefix>.default.wh.<id>", wh)
	}
	if r := harness.Must(t, n.URL, "GET", "/v1/webhooks/"+wh.ID, c.AdminKey, nil, http.StatusOK); json.Valid(r.Body) && r.JSON(t)["secret"] != nil {
		t.Fatalf("GET shows the secret: %s", r.Body)
	}
	var cursors []string
	for i := 0; i < 20; i++ {
		cursors = append(cursors, publishJSON(t, n, c.AdminKey, "orders", "r1", map[string]any{"n": i}))
	}
	publishJSON(t, n, c.AdminKey, "orders", "", "no room")
	got := waitDeliveries(t, rc, "/ok", 21, 30*time.Second)
	verifier, err := standardwebhooks.NewWebhook(wh.Secret)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for _, d := range got {
		if err := verifier.Verify(d.Body, d.Header); err != nil {
			t.Fatalf("signature does not verify: %v (headers %v)", err, d.Header)
		}
		p := d.Payload(t)
		if p["id"] != d.Header.Get("webhook-id") || p["topic"] != "orders" {
			t.Fatalf("body id/topic %v/%v, header webhook-id %q", p["id"], p["topic"], d.Header.Get("webhook-id"))
		}
		if p["room"] == nil {
			if p["data"] != "no room" {
				t.Fatalf("room-less message body %s", d.Body)
			}
			continue
		}
		data, _ := p["data"].(map[string]any)
		if data["n"] != float64(next) || p["cursor"] != cursors[next] || p["room"] != "r1" || p["published_at"] == nil {
			t.Fatalf("delivery %d out of order or wrong: %s (want n=%d cursor %s)", next, d.Body, next, cursors[next])
		}
		next++
	}
	if len(rc.Got("/ok")) != 21 {
		t.Fatalf("%d deliveries, want 21 (one per message)", len(rc.Got("/ok")))
	}
	// A message is delivered once: the group's offsets are committed.
	adm := harness.KafkaAdmin(t, c.Brokers)
	ok, _ := harness.PollUntil(10*time.Second, 100*time.Millisecond, func() bool {
		offs, err := adm.FetchOffsets(t.Context(), wh.Group)
		if err != nil {
			return false
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == 21
	})
	if !ok {
		t.Fatalf("group %s did not commit all 21 messages", wh.Group)
	}
}

// Each of the nine permanent codes: one attempt, one dead letter.
func TestWebhookPermanentCodesDeadLetterAtOnce(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 4, 2*time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	codes := []int{400, 404, 405, 410, 413, 414, 415, 422, 501}
	hooks := map[int]harness.Webhook{}
	for _, code := range codes {
		path := fmt.Sprintf("/p%d", code)
		rc.Answer(path, code)
		hooks[code] = harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", path), "")
	}
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"x": 1})
	for _, code := range codes {
		waitDLQ(t, c, hooks[code].ID, 1, 30*time.Second)
	}
	time.Sleep(1500 * time.Millisecond) // retries would have come by now
	for _, code := range codes {
		path := fmt.Sprintf("/p%d", code)
		if got := len(rc.Got(path)); got != 1 {
			t.Errorf("%d: %d attempts, want 1", code, got)
		}
		dls := harness.InspectDeadLetters(t, n.URL, c.AdminKey, hooks[code].ID)
		if len(dls) != 1 || dls[0].Attempts != 1 || dls[0].LastStatus != code {
			t.Errorf("%d: dead letters %+v, want one with attempts 1 and last_status %d", code, dls, code)
		}
		if got := c.DLQRecords(t, "default", hooks[code].ID); got != 1 {
			t.Errorf("%d: %d dead-letter records, want 1", code, got)
		}
	}
}

// Every temporary class: exactly N attempts, then one dead letter. A
// refused connection runs the sequence in seconds; a hanging endpoint
// takes about N × the attempt timeout; a 308 is never followed.
func TestWebhookTemporaryClassesRetryNTimes(t *testing.T) {
	const attempts = 3
	const timeout = time.Second
	c, n, rc, _ := webhookCluster(t, attempts, timeout, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	// A port nothing listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "https://" + ln.Addr().String() + "/refused"
	ln.Close()
	cases := map[string]int{"/t503": 503, "/t500": 500, "/t429": 429, "/t401": 401, "/t403": 403, "/t408": 408, "/t409": 409, "/t308": 308, "/hang": harness.Hang}
	hooks := map[string]harness.Webhook{}
	for path, status := range cases {
		rc.Answer(path, status)
		hooks[path] = harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", path), "")
	}
	refused := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", refusedURL, "")
	start := time.Now()
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"x": 1})
	tookRefused := waitDLQ(t, c, refused.ID, 1, 30*time.Second)
	if tookRefused > 5*time.Second {
		t.Errorf("connection refused: dead-lettered after %v, want seconds", tookRefused)
	}
	for path := range cases {
		waitDLQ(t, c, hooks[path].ID, 1, 60*time.Second)
	}
	hang := rc.Got("/hang")
	took := time.Since(start)
	if len(hang) == attempts {
		spent := hang[attempts-1].At.Sub(start) + timeout
		if spent < attempts*timeout || spent > attempts*timeout+5*time.Second {
			t.Errorf("hanging endpoint: sequence took %v, want about %v", spent, attempts*timeout)
		}
	}
	time.Sleep(time.Second)
	for path, status := range cases {
		if got := len(rc.Got(path)); got != attempts {
			t.Errorf("%s (%d): %d attempts, want %d", path, status, got, attempts)
		}
		dls := harness.InspectDeadLetters(t, n.URL, c.AdminKey, hooks[path].ID)
		if len(dls) != 1 || dls[0].Attempts != attempts {
			t.Errorf("%s: dead letters %+v, want one after %d attempts", path, dls, attempts)
		}
	}
	if got := rc.Got("/t308/"); len(got) != 0 {
		t.Errorf("the 308 was followed %d times", len(got))
	}
	dls := harness.InspectDeadLetters(t, n.URL, c.AdminKey, refused.ID)
	if len(dls) != 1 || dls[0].Attempts != attempts || dls[0].LastError == "" {
		t.Errorf("connection refused: dead letters %+v, want one after %d attempts with the error", dls, attempts)
	}
	t.Logf("connection refused sequence %v; all classes done in %v", tookRefused, took)
}

// A dispatcher stopped mid-sequence and started again still makes exactly
// N attempts in all.
func TestWebhookRestartMidRetryKeepsAttemptCount(t *testing.T) {
	const attempts = 4
	c := harness.NewCluster(t)
	rc := harness.NewReceiver(t)
	mut := harness.WebhookConfig(t, rc, attempts, time.Second, 700*time.Millisecond)
	n := c.Start(t, mut)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 1)
	rc.Answer("/down", 503)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/down"), "")
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"x": 1})
	waitDeliveries(t, rc, "/down", 2, 30*time.Second)
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stoppedAt := len(rc.Got("/down"))
	n2 := c.Start(t, mut)
	waitDLQ(t, c, wh.ID, 1, 60*time.Second)
	time.Sleep(2 * time.Second)
	if got := len(rc.Got("/down")); got != attempts {
		t.Fatalf("%d attempts in all (%d before the restart), want exactly %d", got, stoppedAt, attempts)
	}
	dls := harness.InspectDeadLetters(t, n2.URL, c.AdminKey, wh.ID)
	if len(dls) != 1 || dls[0].Attempts != attempts || dls[0].LastStatus != 503 {
		t.Fatalf("dead letters %+v, want one after %d attempts, last 503", dls, attempts)
	}
}

// Inspection is one-shot; replay goes its own way (inspection does not
// hide anything from it), keeps the webhook enabled and the replayed
// messages are delivered again with new ids.
func TestWebhookInspectionOneShotReplayUnaffected(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 2)
	rc.Answer("/gone", 410)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/gone"), "")
	for i := 0; i < 3; i++ {
		publishJSON(t, n, c.AdminKey, "orders", fmt.Sprintf("r%d", i), map[string]any{"n": i})
	}
	waitDLQ(t, c, wh.ID, 3, 30*time.Second)
	first := harness.InspectDeadLetters(t, n.URL, c.AdminKey, wh.ID)
	if len(first) != 3 {
		t.Fatalf("first inspection: %d dead letters, want 3", len(first))
	}
	if again := harness.InspectDeadLetters(t, n.URL, c.AdminKey, wh.ID); len(again) != 0 {
		t.Fatalf("second inspection showed %d again, want 0 (one-shot)", len(again))
	}
	firstIDs := map[string]bool{}
	for _, d := range rc.Got("/gone") {
		firstIDs[d.Header.Get("webhook-id")] = true
	}
	rc.Answer("/gone", 200)
	r := harness.Must(t, n.URL, "POST", "/v1/webhooks/"+wh.ID+"/dead-letters/replay", c.AdminKey, nil, http.StatusOK)
	if m := r.JSON(t); m["replayed"] != float64(3) {
		t.Fatalf("replay all: %s, want 3 replayed", r.Body)
	}
	got := waitDeliveries(t, rc, "/gone", 6, 30*time.Second)
	for _, d := range got[3:] {
		if firstIDs[d.Header.Get("webhook-id")] {
			t.Fatalf("replayed message kept its old id %s", d.Header.Get("webhook-id"))
		}
		if !slices.ContainsFunc(d.Payload(t)["headers"].([]any), func(x any) bool { return x.(map[string]any)["key"] == "msgmesh-replay-of" }) {
			t.Fatalf("replayed message has no msgmesh-replay-of header: %s", d.Body)
		}
	}
	r = harness.Must(t, n.URL, "POST", "/v1/webhooks/"+wh.ID+"/dead-letters/replay", c.AdminKey, nil, http.StatusOK)
	if m := r.JSON(t); m["replayed"] != float64(0) {
		t.Fatalf("second replay all: %s, want 0", r.Body)
	}
	// A chosen dead letter can still be replayed by its cursor.
	r = harness.Must(t, n.URL, "POST", "/v1/webhooks/"+wh.ID+"/dead-letters/replay", c.AdminKey,
		map[string]any{"cursors": []string{first[0].Cursor}}, http.StatusOK)
	if m := r.JSON(t); m["replayed"] != float64(1) {
		t.Fatalf("replay by cursor: %s, want 1", r.Body)
	}
	waitDeliveries(t, rc, "/gone", 7, 30*time.Second)
	if w := harness.GetWebhook(t, n.URL, c.AdminKey, wh.ID); !w.Enabled {
		t.Fatalf("webhook disabled after replay: %+v", w)
	}
}

// Register, delete, register the same URL: one POST per message.
func TestWebhookDeleteAndReRegisterDeliversOnce(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 3, time.Second, 100*time.Millisecond)
	harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 3)
	url := rc.URLFor("", "/same")
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", url, "")
	publishJSON(t, n, c.AdminKey, "orders", "", "m1")
	waitDeliveries(t, rc, "/same", 1, 30*time.Second)
	harness.Must(t, n.URL, "DELETE", "/v1/webhooks/"+wh.ID, c.AdminKey, nil, http.StatusNoContent)
	harness.WantError(t, "deleted webhook", harness.Do(t, n.URL, "GET", "/v1/webhooks/"+wh.ID, c.AdminKey, nil), 404, "webhook_not_found")
	wh2 := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", url, "")
	if wh2.ID == wh.ID || wh2.Group == wh.Group {
		t.Fatalf("re-registered webhook reuses id or group: %+v", wh2)
	}
	publishJSON(t, n, c.AdminKey, "orders", "", "m2")
	got := waitDeliveries(t, rc, "/same", 2, 30*time.Second)
	time.Sleep(2 * time.Second)
	got = rc.Got("/same")
	if len(got) != 2 || got[0].Payload(t)["data"] != "m1" || got[1].Payload(t)["data"] != "m2" {
		var bodies []string
		for _, d := range got {
			bodies = append(bodies, string(d.Body))
		}
		t.Fatalf("deliveries %v, want exactly m1 then m2", bodies)
	}
}
