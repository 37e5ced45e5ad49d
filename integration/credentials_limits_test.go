package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// credRetryAfter checks a 429 with code and a Retry-After of whole
// seconds between 1 and max, and returns it.
func credRetryAfter(t *testing.T, what string, r h.Response, code string, max int) int {
	t.Helper()
	if h.WantError(t, what, r, 429, code) == nil {
		return 0
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > max {
		t.Errorf("%s: Retry-After %q, want whole seconds in 1..%d", what, r.Header.Get("Retry-After"), max)
		return 1
	}
	return ra
}

func credBatch(n int, tag string) map[string]any {
	msgs := make([]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"data": fmt.Sprintf("%s-%d", tag, i)}
	}
	return map[string]any{"messages": msgs}
}

// Request and message rates per tenant: over them 429 rate_limited with
// Retry-After, nothing published; another tenant on the same plan is not
// affected; after Retry-After the tenant is served again.
func TestCredentialsRateLimits(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Limits.Free = config.PlanLimits{RequestsPerSecond: 5, MessagesPerSecond: 10}
	})
	op := c.OperatorKey
	burst := h.CreateTenant(t, n.URL, op, "burst", "free")
	msgs := h.CreateTenant(t, n.URL, op, "msgs", "free")
	calm := h.CreateTenant(t, n.URL, op, "calm", "free")
	// The limits' clock moves only when the test moves it (a loaded
	// machine must not refill a bucket between two requests).
	var fake atomic.Int64
	fake.Store(time.Now().UnixNano())
	n.App.SetClock(func() time.Time { return time.Unix(0, fake.Load()) })
	t.Cleanup(func() { n.App.SetClock(nil) })

	// Request rate: the burst of 5 passes, then 429.
	var statuses []int
	var first429 h.Response
	for i := 0; i < 15; i++ {
		r := h.Do(t, n.URL, "GET", "/v1/tenant", burst, nil)
		statuses = append(statuses, r.Status)
		if r.Status == 429 && first429.Status == 0 {
			first429 = r
		}
	}
	ok := 0
	for i, s := range statuses {
		if s == 200 {
			ok++
		}
		if i < 5 && s != 200 {
			t.Errorf("request %d of the burst answered %d, want the first 5 admitted (statuses %v)", i, s, statuses)
		}
	}
	if first429.Status == 0 || ok != 5 {
		t.Fatalf("15 requests at 5/s with the clock still: statuses %v, want 5 admitted and the rest 429", statuses)
	}
	ra := credRetryAfter(t, "request over the rate", first429, "rate_limited", 2)
	// The other tenant is not slowed: its own burst of 5 all pass now.
	for i := 0; i < 5; i++ {
		if r := h.Do(t, n.URL, "GET", "/v1/tenant", calm, nil); r.Status != 200 {
			t.Errorf("calm tenant request %d while burst is limited: %d %s", i, r.Status, r.Body)
		}
	}
	// The operator is not rate limited.
	for i := 0; i < 10; i++ {
		h.Must(t, n.URL, "GET", "/v1/tenants/burst", op, nil, 200)
	}
	fake.Add(int64(time.Duration(ra) * time.Second))
	if r := h.Do(t, n.URL, "GET", "/v1/tenant", burst, nil); r.Status != 200 {
		t.Errorf("burst tenant after waiting Retry-After (%ds): %d %s", ra, r.Status, r.Body)
	}

	// Message rate: a batch of 10 fills the second; the next batch is 429
	// and writes nothing.
	tp := h.CreateTopic(t, n.URL, msgs, "events", 1)
	h.Must(t, n.URL, "POST", "/v1/topics/events/messages", msgs, credBatch(10, "a"), 200)
	r := h.Do(t, n.URL, "POST", "/v1/topics/events/messages", msgs, credBatch(10, "b"))
	ra = credRetryAfter(t, "batch over the message rate", r, "rate_limited", 2)
	if got := h.TotalRecords(t, c.Brokers, tp.KafkaTopic); got != 10 {
		t.Errorf("events holds %d records, want 10 (the refused batch must write nothing)", got)
	}
	// calm publishes its own 10 at the same moment.
	h.CreateTopic(t, n.URL, calm, "events", 1)
	h.Must(t, n.URL, "POST", "/v1/topics/events/messages", calm, credBatch(10, "calm"), 200)
	fake.Add(int64(time.Duration(ra) * time.Second))
	h.Must(t, n.URL, "POST", "/v1/topics/events/messages", msgs, credBatch(10, "c"), 200)
	if got := h.TotalRecords(t, c.Brokers, tp.KafkaTopic); got != 20 {
		t.Errorf("events holds %d records, want 20", got)
	}
}

// The monthly quota is counted across nodes sharing a broker: 30 on A,
// then on B only 20 more fit a quota of 50; over it 429 quota_exceeded
// with Retry-After up to the next month, nothing written; another tenant
// is unaffected; A learns B's usage too.
func TestCredentialsQuotaAcrossNodes(t *testing.T) {
	c := h.NewCluster(t)
	mut := func(cfg *config.Config) {
		cfg.Limits.Free = config.PlanLimits{MonthlyMessages: 50}
	}
	a := c.Start(t, mut)
	b := c.Start(t, mut)
	admin := c.AdminKey
	calm := h.CreateTenant(t, a.URL, c.OperatorKey, "calm", "free")
	tp := h.CreateTopic(t, a.URL, admin, "metered", 1)
	h.CreateTopic(t, a.URL, calm, "metered", 1)
	pub := func(base, key, data string) h.Response {
		return h.Do(t, base, "POST", "/v1/topics/metered/messages", key, map[string]any{"data": data})
	}
	for i := 0; i < 30; i++ {
		if r := pub(a.URL, admin, fmt.Sprint("a", i)); r.Status != 200 {
			t.Fatalf("publish %d on A (quota 50): %d %s", i, r.Status, r.Body)
		}
	}
	// Usage is flushed every second; allow it to reach B.
	time.Sleep(2500 * time.Millisecond)
	untilMonth := int(time.Date(time.Now().UTC().Year(), time.Now().UTC().Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(time.Now()).Seconds()) + 2
	// A batch that would cross the quota is refused whole.
	r := h.Do(t, b.URL, "POST", "/v1/topics/metered/messages", admin, credBatch(21, "b"))
	credRetryAfter(t, "batch of 21 over a quota with 20 left (on B)", r, "quota_exceeded", untilMonth)
	if got := h.TotalRecords(t, c.Brokers, tp.KafkaTopic); got != 30 {
		t.Errorf("metered holds %d records after the refused batch, want 30", got)
	}
	accepted, refused := 0, 0
	var last h.Response
	for i := 0; i < 30; i++ {
		r := pub(b.URL, admin, fmt.Sprint("b", i))
		switch r.Status {
		case 200:
			accepted++
			if refused > 0 {
				t.Errorf("publish %d on B admitted after an earlier one was refused", i)
			}
		case 429:
			refused++
			last = r
		default:
			t.Fatalf("publish %d on B: %d %s", i, r.Status, r.Body)
		}
	}
	if accepted != 20 || refused != 10 {
		t.Errorf("on B after 30 on A (quota 50): %d admitted, %d refused, want 20 and 10", accepted, refused)
	}
	credRetryAfter(t, "publish over the quota on B", last, "quota_exceeded", untilMonth)
	// The other tenant on the same plan publishes on both nodes.
	for _, node := range []*h.Node{a, b} {
		if r := pub(node.URL, calm, "calm"); r.Status != 200 {
			t.Errorf("calm tenant on %s while default is over quota: %d %s", node.URL, r.Status, r.Body)
		}
	}
	// A learns B's 20.
	time.Sleep(2500 * time.Millisecond)
	credRetryAfter(t, "publish over the quota on A", pub(a.URL, admin, "late"), "quota_exceeded", untilMonth)
	if got := h.TotalRecords(t, c.Brokers, tp.KafkaTopic); got != 50 {
		t.Errorf("metered holds %d records, want exactly the quota of 50", got)
	}
	// Requests other than publishing are still served.
	h.Must(t, b.URL, "GET", "/v1/topics/metered", admin, nil, 200)
}

// A publish refused for the tenant's limits has no side effect: with the
// strict topic gate off, the unknown topic it named is not created.
func TestCredentialsLimitedPublishCreatesNoTopic(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Limits.Free = config.PlanLimits{MessagesPerSecond: 1, MonthlyMessages: 3}
	})
	admin := c.AdminKey
	h.Must(t, n.URL, "PATCH", "/v1/tenant", admin, map[string]any{"strict_topics": false}, 200)
	// The limits' clock moves only when the test moves it: a slow first
	// publish (it creates the topic) does not refill the message bucket.
	var fake atomic.Int64
	base := time.Now()
	fake.Store(base.UnixNano())
	n.App.SetClock(func() time.Time { return time.Unix(0, fake.Load()) })
	t.Cleanup(func() { n.App.SetClock(nil) })
	h.Must(t, n.URL, "POST", "/v1/topics/first/messages", admin, map[string]any{"data": 1}, 200)
	// The message bucket is empty now: the next publish is rate limited.
	r := h.Do(t, n.URL, "POST", "/v1/topics/second/messages", admin, map[string]any{"data": 2})
	credRetryAfter(t, "publish over the message rate", r, "rate_limited", 2)
	h.WantError(t, "topic named by a rate-limited publish", h.Do(t, n.URL, "GET", "/v1/topics/second", admin, nil), 404, "topic_not_found")
	// Use the quota up (3), a second apart, then a publish to a new topic
	// is quota_exceeded.
	for i := 0; i < 2; i++ {
		fake.Add(int64(1100 * time.Millisecond))
		h.Must(t, n.URL, "POST", "/v1/topics/first/messages", admin, map[string]any{"data": i}, 200)
	}
	fake.Add(int64(1100 * time.Millisecond))
	r = h.Do(t, n.URL, "POST", "/v1/topics/third/messages", admin, map[string]any{"data": 3})
	h.WantError(t, "publish over the quota", r, 429, "quota_exceeded")
	h.WantError(t, "topic named by an over-quota publish", h.Do(t, n.URL, "GET", "/v1/topics/third", admin, nil), 404, "topic_not_found")
	adm := h.KafkaAdmin(t, c.Brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, c.TenantKafkaTopic("default", "second"), c.TenantKafkaTopic("default", "third"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range td {
		if d.Err == nil {
			t.Errorf("Kafka topic %s exists although every publish naming it was refused", d.Topic)
		}
	}
}
