package limits

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// clock is a settable clock shared by the Limiters of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(s string) *clock {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &clock{t: t}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	brokers []string
	topic   string
	clock   *clock
	limits  config.Limits
}

func newEnv(t *testing.T, limits config.Limits) *env {
	t.Helper()
	brokers, _ := kafkatest.Brokers(t)
	return &env{brokers: brokers, topic: kafkatest.Name("usage"), clock: newClock("2026-11-15T12:00:00Z"), limits: limits}
}

// start opens a Limiter ("a process") on the env's usage topic, runs it and
// waits until it caught up. stop cancels Run and closes it (also at cleanup).
func (e *env) start(t *testing.T, node string, reg prometheus.Registerer) (l *Limiter, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := New(ctx, Config{
		Limits: e.limits, ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, UsageTopic: e.topic,
		ReplicationFactor: -1, NodeID: node, FlushEvery: 50 * time.Millisecond, Now: e.clock.Now, Registerer: reg,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; l.Close() }) }
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := l.WaitReady(wctx); err != nil {
		t.Fatalf("limiter %s not ready: %v", node, err)
	}
	return l, stop
}

// wantCode checks that err is an *Error of kind with RetryAfter at least
// minRetry seconds, and returns it.
func wantCode(t *testing.T, err error, kind error, minRetry int) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, kind) {
		t.Fatalf("got %v, want *limits.Error of kind %v", err, kind)
	}
	if e.RetryAfter < time.Duration(minRetry)*time.Second || e.RetryAfter%time.Second != 0 {
		t.Fatalf("RetryAfter = %v, want whole seconds ≥ %ds", e.RetryAfter, minRetry)
	}
	return e
}

// waitUsage waits until l reports want for tenant this month.
func waitUsage(t *testing.T, l *Limiter, tenant string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, got := l.Usage(tenant)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: usage of %s = %d, want %d", l.NodeID(), tenant, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func refusals(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "msgmesh_limits_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" {
					out[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func TestRequestRateLimitPerTenant(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{RequestsPerSecond: 5}})
	reg := prometheus.NewRegistry()
	l, _ := e.start(t, "", reg)
	for i := range 5 {
		if err := l.AllowRequest("acme", "free"); err != nil {
			t.Fatalf("request %d within the burst refused: %v", i, err)
		}
	}
	wantCode(t, l.AllowRequest("acme", "free"), ErrRateLimited, 1)
	// Another tenant is not affected by acme's exhausted bucket.
	for i := range 5 {
		if err := l.AllowRequest("globex", "free"); err != nil {
			t.Fatalf("globex request %d refused: %v", i, err)
		}
	}
	// A paid tenant with no request limit is never refused.
	for range 100 {
		if err := l.AllowRequest("initech", "paid"); err != nil {
			t.Fatalf("unlimited plan refused: %v", err)
		}
	}
	// Tokens come back with time.
	e.clock.Advance(time.Second)
	if err := l.AllowRequest("acme", "free"); err != nil {
		t.Fatalf("after 1s still refused: %v", err)
	}
	if got := refusals(t, reg); got["rate"] != 1 || got["quota"] != 0 {
		t.Fatalf("refusals = %v, want rate=1", got)
	}
}

func TestMessageRateLimit(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{MessagesPerSecond: 10}})
	l, _ := e.start(t, "", nil)
	if err := l.AllowMessages("acme", "free", 7); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.AllowMessages("acme", "free", 5), ErrRateLimited, 1)
	// The refused batch consumed nothing: the 3 tokens left are still there.
	if err := l.AllowMessages("acme", "free", 3); err != nil {
		t.Fatalf("refused batch consumed tokens: %v", err)
	}
	wantCode(t, l.AllowMessages("acme", "free", 1), ErrRateLimited, 1)
	if err := l.AllowMessages("globex", "free", 10); err != nil {
		t.Fatalf("other tenant affected: %v", err)
	}

	// A batch beyond one second's worth passes on a full bucket and leaves
	// it in debt, so the rate holds over time.
	e.clock.Advance(time.Second)
	if err := l.AllowMessages("acme", "free", 25); err != nil {
		t.Fatalf("batch over the burst on a full bucket: %v", err)
	}
	wantCode(t, l.AllowMessages("acme", "free", 1), ErrRateLimited, 2)
	e.clock.Advance(2 * time.Second)
	if err := l.AllowMessages("acme", "free", 1); err != nil {
		t.Fatalf("debt not repaid after 2s: %v", err)
	}
}

func TestPlanChangeApplies(t *testing.T) {
	e := newEnv(t, config.Limits{
		Free: config.PlanLimits{RequestsPerSecond: 2, MessagesPerSecond: 2},
		Paid: config.PlanLimits{RequestsPerSecond: 100, MessagesPerSecond: 100},
	})
	l, _ := e.start(t, "", nil)
	for range 2 {
		if err := l.AllowRequest("acme", "free"); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, l.AllowRequest("acme", "free"), ErrRateLimited, 1)
	if err := l.AllowMessages("acme", "free", 2); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.AllowMessages("acme", "free", 1), ErrRateLimited, 1)
	// Upgrade: the paid rate applies at once.
	for i := range 100 {
		if err := l.AllowRequest("acme", "paid"); err != nil {
			t.Fatalf("paid request %d refused: %v", i, err)
		}
	}
	if err := l.AllowMessages("acme", "paid", 50); err != nil {
		t.Fatalf("paid batch refused: %v", err)
	}
	// Downgrade: back to the free rate.
	for range 2 {
		if err := l.AllowRequest("acme", "free"); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, l.AllowRequest("acme", "free"), ErrRateLimited, 1)
}

func TestIdleBucketsEvicted(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{RequestsPerSecond: 1}})
	l, _ := e.start(t, "", nil)
	for _, tenant := range []string{"a", "b", "c"} {
		_ = l.AllowRequest(tenant, "free")
	}
	e.clock.Advance(idleBucket + time.Second)
	_ = l.AllowRequest("d", "free")
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets after the idle period, want 1", n)
	}
}

func TestQuotaAcrossProcesses(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{MonthlyMessages: 100}})
	reg := prometheus.NewRegistry()
	a, _ := e.start(t, "node-a", reg)
	b, _ := e.start(t, "node-b", nil)

	a.Record("acme", 40)
	b.Record("acme", 50)
	b.Record("globex", 7)
	// Each sees its own count at once, flushed or not.
	if month, used := a.Usage("acme"); month != "2026-11" || used != 40 {
		t.Fatalf("a: Usage = %s %d, want 2026-11 40", month, used)
	}
	// After a flush both see the sum.
	waitUsage(t, a, "acme", 90)
	waitUsage(t, b, "acme", 90)
	waitUsage(t, a, "globex", 7)

	for _, l := range []*Limiter{a, b} {
		if err := l.AllowMessages("acme", "free", 10); err != nil {
			t.Fatalf("node %s: 90+10 of 100 refused: %v", l.NodeID(), err)
		}
		wantCode(t, l.AllowMessages("acme", "free", 11), ErrQuotaExceeded, 1)
	}
	if err := a.AllowMessages("globex", "free", 93); err != nil {
		t.Fatalf("other tenant affected by acme's quota: %v", err)
	}
	if got := refusals(t, reg); got["quota"] != 1 || got["rate"] != 0 {
		t.Fatalf("refusals on a = %v, want quota=1", got)
	}

	// A third process started later reads both counts from the topic.
	c, _ := e.start(t, "node-c", nil)
	waitUsage(t, c, "acme", 90)
}

func TestQuotaRetryAfterAndNewMonth(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{MonthlyMessages: 10}})
	e.clock.Set(time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC))
	a, _ := e.start(t, "", nil)
	b, _ := e.start(t, "", nil)
	a.Record("acme", 10)
	waitUsage(t, b, "acme", 10)
	err := wantCode(t, b.AllowMessages("acme", "free", 1), ErrQuotaExceeded, 1)
	if err.RetryAfter != 60*time.Second {
		t.Fatalf("RetryAfter = %v, want 60s (seconds to 2026-12-01T00:00Z)", err.RetryAfter)
	}
	e.clock.Advance(59*time.Second + 500*time.Millisecond)
	err = wantCode(t, b.AllowMessages("acme", "free", 1), ErrQuotaExceeded, 1)
	if err.RetryAfter != time.Second {
		t.Fatalf("RetryAfter half a second before the month ends = %v, want 1s", err.RetryAfter)
	}

	// A new month starts from zero on every process.
	e.clock.Advance(time.Second)
	for _, l := range []*Limiter{a, b} {
		if month, used := l.Usage("acme"); month != "2026-12" || used != 0 {
			t.Fatalf("node %s in December: Usage = %s %d, want 2026-12 0", l.NodeID(), month, used)
		}
		if err := l.AllowMessages("acme", "free", 10); err != nil {
			t.Fatalf("node %s: new month still refused: %v", l.NodeID(), err)
		}
	}
	a.Record("acme", 3)
	waitUsage(t, b, "acme", 3)
	// The finished month's counts are dropped from memory once written.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.umu.Lock()
		_, stale := a.usage[usageKey("2026-11", "acme")]
		a.umu.Unlock()
		if !stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("November's count still held in December")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRestartKeepsUsage(t *testing.T) {
	e := newEnv(t, config.Limits{Free: config.PlanLimits{MonthlyMessages: 100}})
	reg := prometheus.NewRegistry()
	a, stopA := e.start(t, "first", reg)
	a.Record("acme", 30)
	stopA() // Close writes what the flush loop has not

	// A restarted process with a new id: the old key still counts.
	b, stopB := e.start(t, "second", reg) // same registerer: metrics are reused
	waitUsage(t, b, "acme", 30)
	wantCode(t, b.AllowMessages("acme", "free", 71), ErrQuotaExceeded, 1)
	b.Record("acme", 5)
	stopB()

	// A restart that reuses its id continues the old count instead of
	// overwriting it.
	c, _ := e.start(t, "first", nil)
	waitUsage(t, c, "acme", 35)
	c.Record("acme", 1)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, _ := e.start(t, "observer", nil)
	waitUsage(t, d, "acme", 36)
}

func TestUnlimitedAndValidation(t *testing.T) {
	e := newEnv(t, config.Limits{})
	l, _ := e.start(t, "", nil)
	for range 1000 {
		if err := l.AllowRequest("acme", "free"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AllowMessages("acme", "free", 1_000_000); err != nil {
		t.Fatal(err)
	}
	l.Record("acme", 5) // counted even without a quota
	if _, used := l.Usage("acme"); used != 5 {
		t.Fatalf("usage = %d, want 5", used)
	}

	_, err := New(context.Background(), Config{NodeID: "a/b", FlushEvery: -1,
		Limits: config.Limits{Paid: config.PlanLimits{MonthlyMessages: -1}}})
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"UsageTopic", "NodeID", "FlushEvery", "limits.paid.monthly_messages"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestUntilNextMonth(t *testing.T) {
	for _, c := range []struct {
		now  string
		want int
	}{
		{"2026-11-30T23:59:00Z", 60},
		{"2026-12-31T23:59:59.001Z", 1},
		{"2026-02-28T00:00:00Z", 86400},
		{"2026-11-30T23:30:00-01:00", 31*86400 - 1800}, // already 2026-12-01T00:30Z: months are UTC
	} {
		now, err := time.Parse(time.RFC3339Nano, c.now)
		if err != nil {
			t.Fatal(err)
		}
		got := untilNextMonth(now)
		if got != c.want {
			t.Errorf("untilNextMonth(%s) = %d, want %d", c.now, got, c.want)
		}
	}
}
