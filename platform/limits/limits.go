// Package limits enforces each tenant's plan limits: a request rate, a
// message rate and a monthly message quota. Over any of them the API
// answers 429 with Retry-After (spec section 6: "rate limit or included
// quota exceeded"); the errors returned here are *Error values of kind
// ErrRateLimited or ErrQuotaExceeded with RetryAfter set, which
// platform/httpapi maps to their HTTP answers.
//
// Rates are token buckets per tenant on each process (config.PlanLimits:
// a deployment of N processes admits up to N times the rate). Every tenant
// has its own bucket, so one tenant's burst never slows another.
//
// The monthly quota is counted across every process through a compacted
// Kafka topic (Config.UsageTopic). Each process keeps a cumulative count of
// the messages it recorded per (month, tenant) and writes it every
// Config.FlushEvery as one record:
//
//	key   <month>/<tenant>/<node>   e.g. 2026-11/acme/5f0c3a9e1b2d4c6f
//	value cumulative count, decimal e.g. 1234
//
// Every process reads the topic from the start and keeps the latest count
// per key; a tenant's usage in a month is the sum over nodes plus this
// process's count not yet written. Months are calendar months in UTC.
// Keys of processes that stopped keep counting until the month ends, so a
// restart never forgets usage.
package limits

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
)

const (
	// idleBucket is how long a tenant's buckets stay in memory unused; an
	// evicted tenant comes back with full buckets, which is what an idle
	// tenant would have anyway.
	idleBucket = 10 * time.Minute
	// sweepEvery bounds how often the bucket map is scanned for idle
	// tenants (on the request path, by the Config.Now clock).
	sweepEvery = time.Minute
	// closeFlushTimeout bounds the final flush in Close.
	closeFlushTimeout = 5 * time.Second
	// usageRetention is the usage topic's retention.ms. A record matters
	// only until its month ends, and the oldest record still needed (a count
	// last written on the 1st) is at most 31 days old; the margin covers
	// clock skew. Compaction keeps the topic to one record per key meanwhile.
	usageRetention = 40 * 24 * time.Hour
)

// Config configures a Limiter.
type Config struct {
	// Limits are the per-plan limits; a zero field means unlimited.
	Limits config.Limits
	// ClientOpts reach Kafka (seed brokers and the like).
	ClientOpts []kgo.Opt
	// UsageTopic is the Kafka topic that carries usage counts (required),
	// e.g. "msgmesh.__usage". New creates it if missing: one partition,
	// cleanup.policy=compact,delete, retention.ms of 40 days.
	UsageTopic string
	// ReplicationFactor of the usage topic when New creates it; -1 (or 0)
	// uses the broker default.
	ReplicationFactor int16
	// MinInsyncReplicas of the usage topic when New creates it; 0 or -1 uses the
	// broker default.
	MinInsyncReplicas int16
	// NodeID names this process in usage keys; empty picks a random one
	// (recommended). It must not contain "/". Two live processes must never
	// share one; a restarted process may reuse its old id (its earlier count
	// is picked up and continued) or take a new one (the old key still
	// counts).
	NodeID string
	// FlushEvery is how often this process writes its counts to the usage
	// topic; 0 means 1s. It bounds how far other processes lag behind this
	// one's usage.
	FlushEvery time.Duration
	// Now is the clock for rates and months; nil means time.Now.
	Now func() time.Time
	// Logger receives warnings (flush and fetch failures); nil discards.
	Logger *slog.Logger
	// Registerer, if set, receives the metrics
	// msgmesh_limits_refused_total{reason="rate"|"quota"} and
	// msgmesh_limits_usage_flush_failures_total.
	Registerer prometheus.Registerer
}

func (c *Config) validate() error {
	var errs []error
	if c.UsageTopic == "" {
		errs = append(errs, errors.New("UsageTopic is required"))
	}
	if strings.Contains(c.NodeID, "/") {
		errs = append(errs, fmt.Errorf("NodeID %q must not contain \"/\"", c.NodeID))
	}
	if c.FlushEvery < 0 {
		errs = append(errs, fmt.Errorf("FlushEvery must not be negative, got %v", c.FlushEvery))
	}
	if c.ReplicationFactor < -1 {
		errs = append(errs, fmt.Errorf("ReplicationFactor: want -1 (broker default) or positive, got %d", c.ReplicationFactor))
	}
	// The limits section's own rules (config.Limits.Validate), in one place.
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("limits: invalid config: %w", err)
	}
	return nil
}

// Limiter enforces the limits. Its methods are safe for concurrent use.
type Limiter struct {
	cfg  Config
	log  *slog.Logger
	now  func() time.Time
	node string
	prod *kgo.Client
	adm  *kadm.Client

	mu        sync.Mutex // guards buckets, lastSweep and every bucket.lastUsed
	buckets   map[string]*bucket
	lastSweep time.Time

	umu   sync.Mutex // guards usage and the fields of every *usage
	usage map[string]*usage

	flushMu sync.Mutex // serializes Flush
	closed  atomic.Bool

	ready   atomic.Bool
	readyCh chan struct{}
	// kafkaErr is why Run could not reach Kafka last time it tried (nil
	// once it did).
	kafkaErr atomic.Pointer[error]

	refused       *prometheus.CounterVec
	flushFailures prometheus.Counter
}

// New validates cfg and prepares the Kafka clients; it does not wait for
// Kafka. Call Run to create the usage topic if it is missing, follow it and
// flush counts, and Close when done.
func New(ctx context.Context, cfg Config) (*Limiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	node := cfg.NodeID
	if node == "" {
		node = randomID()
	}
	l := &Limiter{
		cfg: cfg, log: cfg.Logger, now: cfg.Now, node: node,
		buckets: map[string]*bucket{}, usage: map[string]*usage{}, readyCh: make(chan struct{}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgmesh_limits_refused_total",
			Help: "Requests refused with 429 by tenant limits, by reason (rate: request or message rate; quota: monthly messages).",
		}, []string{"reason"}),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "msgmesh_limits_usage_flush_failures_total",
			Help: "Failed writes of usage counts to the usage topic (retried at the next flush).",
		}),
	}
	if cfg.Registerer != nil {
		if err := l.register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	// Both reasons' series exist from the start (for rate() in alerts).
	l.refused.WithLabelValues("rate")
	l.refused.WithLabelValues("quota")
	prod, err := kgo.NewClient(kafkaclient.With(cfg.ClientOpts,
		kgo.DefaultProduceTopic(cfg.UsageTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("limits: client: %w", err)
	}
	l.prod, l.adm = prod, kadm.NewClient(prod)
	return l, nil
}

// register registers the metrics, reusing ones already registered by an
// earlier Limiter on the same registerer (a restart within one process).
func (l *Limiter) register(reg prometheus.Registerer) error {
	if err := reg.Register(l.refused); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := (*prometheus.CounterVec)(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*prometheus.CounterVec)
		}
		if !ok {
			return fmt.Errorf("limits: metrics: %w", err)
		}
		l.refused = existing
	}
	if err := reg.Register(l.flushFailures); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := prometheus.Counter(nil), false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(prometheus.Counter)
		}
		if !ok {
			return fmt.Errorf("limits: metrics: %w", err)
		}
		l.flushFailures = existing
	}
	return nil
}

// NodeID is the name this process writes its usage counts under.
func (l *Limiter) NodeID() string { return l.node }

// Close writes the counts not yet written (bounded by a few seconds, and
// only once Run has caught up with the usage topic) and releases the Kafka
// client. Stop Run by cancelling its context first.
func (l *Limiter) Close() {
	if !l.closed.CompareAndSwap(false, true) {
		return
	}
	if l.ready.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
		if err := l.flush(ctx); err != nil {
			l.log.Warn("limits: final usage flush failed; counts since the last flush are lost", "err", err)
		}
		cancel()
	} else if n := l.unwritten(); n > 0 {
		l.log.Warn("limits: closing before the usage topic was read; counts not written", "messages", n)
	}
	l.prod.Close()
}

// AllowRequest admits one API request of tenant on plan ("free" or "paid";
// anything else is treated as free). It returns nil, or an *Error of kind
// ErrRateLimited with RetryAfter ≥ 1s (until a request would be
// admitted). A change of plan takes effect at once.
func (l *Limiter) AllowRequest(tenant, plan string) error {
	if l.cfg.Limits.Plan(plan).RequestsPerSecond == 0 {
		return nil
	}
	now := l.now()
	b := l.bucket(tenant, plan, now)
	b.mu.Lock()
	retry, ok := take(b.req, 1, now)
	b.mu.Unlock()
	if ok {
		return nil
	}
	l.refused.WithLabelValues("rate").Inc()
	return refused(ErrRateLimited, retry, fmt.Sprintf("request rate limit of %g per second exceeded", b.req.Limit()))
}

// AllowMessages admits publishing n more messages for tenant on plan: it
// checks the monthly quota (usage this month across every process + n must
// not exceed it) and the message rate. It returns nil, or an *Error of kind
// ErrQuotaExceeded (RetryAfter = until the next UTC month) or
// ErrRateLimited (RetryAfter ≥ 1s). The quota is checked first, so a tenant
// over both sees quota_exceeded. A refused call consumes nothing.
//
// A batch larger than one second's worth of messages is admitted when the
// bucket holds a full second's worth; the bucket then goes into debt for
// the rest, so the rate holds over time. Admitting does not count usage:
// call Record once Kafka acknowledged. Concurrent publishes of one tenant
// may therefore overshoot the quota by what is in flight.
func (l *Limiter) AllowMessages(tenant, plan string, n int) error {
	if n <= 0 {
		return nil
	}
	pl := l.cfg.Limits.Plan(plan)
	now := l.now()
	if pl.MonthlyMessages > 0 {
		month := monthOf(now)
		if used := l.used(tenant, month); used+int64(n) > pl.MonthlyMessages {
			l.refused.WithLabelValues("quota").Inc()
			return refused(ErrQuotaExceeded, untilNextMonth(now),
				fmt.Sprintf("monthly quota of %d messages exceeded: %d used in %s, %d more requested", pl.MonthlyMessages, used, month, n))
		}
	}
	if pl.MessagesPerSecond == 0 {
		return nil
	}
	b := l.bucket(tenant, plan, now)
	b.mu.Lock()
	retry, ok := take(b.msg, n, now)
	b.mu.Unlock()
	if ok {
		return nil
	}
	l.refused.WithLabelValues("rate").Inc()
	return refused(ErrRateLimited, retry, fmt.Sprintf("message rate limit of %g per second exceeded", b.msg.Limit()))
}

// bucket is one tenant's token buckets. A nil limiter is unlimited.
type bucket struct {
	plan     string
	lastUsed time.Time // guarded by Limiter.mu

	mu  sync.Mutex // makes check-then-take atomic per tenant
	req *rate.Limiter
	msg *rate.Limiter
}

func newBucket(plan string, pl config.PlanLimits) *bucket {
	return &bucket{plan: plan, req: newRate(pl.RequestsPerSecond), msg: newRate(pl.MessagesPerSecond)}
}

// newRate is a token bucket of perSecond with a burst of one second's
// worth (at least 1); nil for 0 (unlimited).
func newRate(perSecond float64) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := math.Ceil(perSecond)
	if burst > math.MaxInt32 {
		burst = math.MaxInt32
	}
	return rate.NewLimiter(rate.Limit(perSecond), int(burst))
}

// bucket returns tenant's buckets for plan, building them when the tenant
// is new or its plan changed, and drops buckets idle for idleBucket.
func (l *Limiter) bucket(tenant, plan string, now time.Time) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery || now.Before(l.lastSweep) {
		for t, b := range l.buckets {
			if now.Sub(b.lastUsed) >= idleBucket {
				delete(l.buckets, t)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[tenant]
	if b == nil || b.plan != plan {
		b = newBucket(plan, l.cfg.Limits.Plan(plan))
		l.buckets[tenant] = b
	}
	b.lastUsed = now
	return b
}

// take takes n tokens from lim at now if it holds min(n, burst) of them
// (beyond the burst the bucket goes into debt); otherwise it takes nothing
// and returns the whole seconds until it would hold them (≥ 1). The caller
// holds the bucket's mutex.
func take(lim *rate.Limiter, n int, now time.Time) (retryAfter int, ok bool) {
	burst := lim.Burst()
	need := min(n, burst)
	if have := lim.TokensAt(now); have < float64(need) {
		return ceilSeconds((float64(need) - have) / float64(lim.Limit())), false
	}
	for rest := n; rest > 0; rest -= burst {
		lim.ReserveN(now, min(rest, burst))
	}
	return 0, true
}

func ceilSeconds(s float64) int {
	if s >= math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(math.Ceil(s)))
}

// monthOf is t's calendar month in UTC, e.g. "2026-11".
func monthOf(t time.Time) string { return t.UTC().Format("2006-01") }

// untilNextMonth is the whole seconds from t to the start of the next UTC
// month, rounded up, at least 1.
func untilNextMonth(t time.Time) int {
	t = t.UTC()
	next := time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	return max(1, int((next.Sub(t)+time.Second-1)/time.Second))
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
