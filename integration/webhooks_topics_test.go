package integration

import (
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Deleting a tenant's webhook retry topic (an operator mistake, a
// retention accident) used to make the dispatcher fetch in a tight loop,
// logging UNKNOWN_TOPIC_ID about 9,000 times a second, while the topic
// was never made again. Now the retry consumer stops, the topic is made
// again after a backoff, retries flow through it, and the log stays
// small.
func TestWebhookRetryTopicDeletedIsMadeAgain(t *testing.T) {
	c := h.NewCluster(t)
	rc := newCrashReceiver(t) // answers every POST 503
	ca := rc.caFile(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, crashEnv(c, addr, ca))
	h.CreateTopic(t, p.URL, c.AdminKey, "orders", 1)
	h.CreateWebhook(t, p.URL, c.AdminKey, "orders", rc.URL+"/down", "")
	second := rc.on(2)
	publishJSON(t, &h.Node{URL: p.URL}, c.AdminKey, "orders", "", map[string]any{"x": 1})
	select {
	case <-second:
	case <-time.After(30 * time.Second):
		t.Fatalf("the retry (2nd attempt) did not arrive in 30s")
	}

	retryTopic := c.Prefix + ".default.wh.retry"
	adm := h.KafkaAdmin(t, c.Brokers)
	if _, err := adm.DeleteTopics(t.Context(), retryTopic); err != nil {
		t.Fatal(err)
	}
	deletedAt, before := time.Now(), len(p.Output())
	ok, took := h.PollUntil(60*time.Second, 200*time.Millisecond, func() bool {
		topics, err := adm.ListTopics(t.Context())
		return err == nil && topics.Has(retryTopic) && topics[retryTopic].Err == nil
	})
	if !ok {
		t.Fatalf("the retry topic was not made again within 60s\n%s", p.Output()[before:])
	}
	t.Logf("retry topic made again %v after its deletion", took.Round(time.Millisecond))

	// Retries flow again: a new message gets its retry through the new
	// topic.
	n := len(rc.deliveries())
	again := rc.on(n + 2)
	publishJSON(t, &h.Node{URL: p.URL}, c.AdminKey, "orders", "", map[string]any{"x": 2})
	select {
	case <-again:
	case <-time.After(60 * time.Second):
		t.Fatalf("no retry through the re-made retry topic in 60s (%d attempts)\n%s", len(rc.deliveries()), p.Output()[before:])
	}
	// The log stays bounded meanwhile: at most a few lines a second.
	if wait := 10*time.Second - time.Since(deletedAt); wait > 0 {
		time.Sleep(wait)
	}
	out := p.Output()[before:]
	lines := strings.Count(out, "\n")
	elapsed := time.Since(deletedAt)
	if max := int(elapsed.Seconds()*5) + 20; lines > max {
		t.Fatalf("%d log lines in %v after the deletion, want at most %d:\n%.4000s", lines, elapsed.Round(time.Second), max, out)
	}
	t.Logf("%d log lines in %v after the deletion", lines, elapsed.Round(time.Second))
}
