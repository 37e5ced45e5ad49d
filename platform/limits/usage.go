package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
)

// ErrNotReady is returned by Flush before Run has read the usage topic up
// to where it ended when Run started.
var ErrNotReady = errors.New("limits: usage topic not read yet")

// usage is one (month, tenant)'s count. Fields are guarded by Limiter.umu.
type usage struct {
	month, tenant string
	// nodes holds the latest count read from the topic for every other
	// node; others is their sum.
	nodes  map[string]int64
	others int64
	// prior is the count found in the topic under this process's own
	// NodeID before Run caught up: an earlier process with the same id.
	// This process continues it.
	prior int64
	// local counts what this process recorded.
	local int64
	// written is the value of this process's key last acknowledged by
	// Kafka; prior+local != written means a flush is due.
	written int64
}

func (u *usage) total() int64 { return u.others + u.prior + u.local }

func usageKey(month, tenant string) string { return month + "/" + tenant }

func (l *Limiter) ensureTopic(ctx context.Context) error {
	_, err := kafkaclient.EnsureTopic(ctx, l.adm, l.cfg.UsageTopic, kafkaclient.TopicSpec{
		Partitions: 1, ReplicationFactor: l.cfg.ReplicationFactor, MinInsyncReplicas: l.cfg.MinInsyncReplicas,
		Configs: map[string]string{"cleanup.policy": "compact,delete", "retention.ms": strconv.FormatInt(usageRetention.Milliseconds(), 10)},
	})
	if err != nil {
		return fmt.Errorf("limits: usage topic: %w", err)
	}
	return nil
}

// Record counts n messages of tenant, published and acknowledged by Kafka,
// toward the current month's usage. n ≤ 0 is ignored.
func (l *Limiter) Record(tenant string, n int) {
	if n <= 0 {
		return
	}
	month := monthOf(l.now())
	l.umu.Lock()
	l.entry(month, tenant).local += int64(n)
	l.umu.Unlock()
}

// Usage returns the current UTC month (e.g. "2026-11") and tenant's
// messages in it across every process: the latest counts read from the
// usage topic plus this process's own count, flushed or not. Other
// processes' counts lag by up to their FlushEvery plus the topic's delay.
func (l *Limiter) Usage(tenant string) (month string, used int64) {
	month = monthOf(l.now())
	return month, l.used(tenant, month)
}

func (l *Limiter) used(tenant, month string) int64 {
	l.umu.Lock()
	defer l.umu.Unlock()
	if u := l.usage[usageKey(month, tenant)]; u != nil {
		return u.total()
	}
	return 0
}

// entry returns (month, tenant)'s count, creating it. The caller holds umu.
func (l *Limiter) entry(month, tenant string) *usage {
	k := usageKey(month, tenant)
	u := l.usage[k]
	if u == nil {
		u = &usage{month: month, tenant: tenant}
		l.usage[k] = u
	}
	return u
}

// unwritten sums the counts not yet acknowledged by Kafka.
func (l *Limiter) unwritten() int64 {
	l.umu.Lock()
	defer l.umu.Unlock()
	var n int64
	for _, u := range l.usage {
		n += u.prior + u.local - u.written
	}
	return n
}

// Ready reports whether Run has read the usage topic up to where it ended
// when Run started. Before that, usage from other processes may be
// missing, so the quota admits more than it should: use it in readiness
// checks.
func (l *Limiter) Ready() bool { return l.ready.Load() }

// WaitReady blocks until Ready or ctx is done.
func (l *Limiter) WaitReady(ctx context.Context) error {
	select {
	case <-l.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limiter) markReady() {
	if l.ready.CompareAndSwap(false, true) {
		close(l.readyCh)
		l.log.Debug("limits: usage topic caught up", "topic", l.cfg.UsageTopic, "node", l.node)
	}
}

// KafkaErr reports why Kafka could not be reached the last time Run tried
// to make or read the usage topic before it was ready, or nil once it was;
// for readiness checks.
func (l *Limiter) KafkaErr() error {
	if p := l.kafkaErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Run creates the usage topic if it is missing, reads it from the start,
// then follows it, and writes this process's counts every FlushEvery once
// caught up. It returns nil when ctx is done; Kafka errors are logged and
// retried with backoff (KafkaErr says why meanwhile), never returned.
func (l *Limiter) Run(ctx context.Context) error {
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		l.flushLoop(ctx) // writes nothing before the topic was read
	}()
	defer func() { <-flushed }()
	return kafkaclient.Follow{
		Name:       "limits",
		Topic:      l.cfg.UsageTopic,
		ClientOpts: l.cfg.ClientOpts,
		Admin:      l.adm,
		Timeout:    10 * time.Second,
		Ensure:     l.ensureTopic,
		Logger:     l.log,
		KafkaErr: func(err error) {
			if err == nil {
				l.kafkaErr.Store(nil)
				return
			}
			l.kafkaErr.Store(&err)
		},
		Apply: func(r *kgo.Record) error {
			l.apply(r)
			return nil
		},
		CaughtUp: func() error {
			l.markReady()
			return nil
		},
	}.Run(ctx)
}

// apply takes one usage record into the counts.
func (l *Limiter) apply(r *kgo.Record) {
	key := string(r.Key)
	first, last := strings.IndexByte(key, '/'), strings.LastIndexByte(key, '/')
	if first < 0 || last <= first+1 || last == len(key)-1 {
		l.log.Warn("limits: skipping usage record with a malformed key", "offset", r.Offset, "partition", r.Partition)
		return
	}
	month, tenant, node := key[:first], key[first+1:last], key[last+1:]
	if _, err := time.Parse("2006-01", month); err != nil {
		l.log.Warn("limits: skipping usage record with a malformed month", "offset", r.Offset, "partition", r.Partition)
		return
	}
	var count int64
	if r.Value != nil { // nil is a tombstone: the key no longer counts
		c, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil || c < 0 {
			l.log.Warn("limits: skipping usage record with a malformed count", "offset", r.Offset, "partition", r.Partition)
			return
		}
		count = c
	}
	if month < monthOf(l.now()) {
		return // past months no longer limit anything
	}
	l.umu.Lock()
	defer l.umu.Unlock()
	if node == l.node {
		// Our own writes come back; only a count found before we caught
		// up (an earlier process with our id) is news. We never write
		// before catching up, so it cannot be one of ours.
		if !l.ready.Load() {
			u := l.entry(month, tenant)
			u.prior, u.written = count, count
		}
		return
	}
	u := l.entry(month, tenant)
	if u.nodes == nil {
		u.nodes = map[string]int64{}
	}
	u.others += count - u.nodes[node]
	if r.Value == nil {
		delete(u.nodes, node)
	} else {
		u.nodes[node] = count
	}
}

func (l *Limiter) flushLoop(ctx context.Context) {
	tick := time.NewTicker(l.cfg.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !l.ready.Load() || l.closed.Load() {
			continue
		}
		if err := l.flush(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("limits: usage flush failed; retrying at the next flush", "topic", l.cfg.UsageTopic, "err", err)
		}
	}
}

// Flush writes this process's counts that changed since the last flush and
// waits for Kafka to acknowledge them. Run does this every FlushEvery;
// call it directly to make counts visible at once. It returns ErrNotReady
// before Run caught up with the usage topic.
func (l *Limiter) Flush(ctx context.Context) error {
	if !l.ready.Load() {
		return ErrNotReady
	}
	return l.flush(ctx)
}

func (l *Limiter) flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	type pending struct {
		u     *usage
		value int64
	}
	var todo []pending
	var recs []*kgo.Record
	l.umu.Lock()
	for _, u := range l.usage {
		if v := u.prior + u.local; v != u.written {
			todo = append(todo, pending{u, v})
			recs = append(recs, &kgo.Record{
				Key:   []byte(u.month + "/" + u.tenant + "/" + l.node),
				Value: []byte(strconv.FormatInt(v, 10)),
			})
		}
	}
	l.umu.Unlock()
	var err error
	if len(recs) > 0 {
		results := l.prod.ProduceSync(ctx, recs...)
		l.umu.Lock()
		for i, res := range results {
			if res.Err == nil {
				todo[i].u.written = todo[i].value
			}
		}
		l.umu.Unlock()
		if err = results.FirstErr(); err != nil {
			l.flushFailures.Inc()
			err = fmt.Errorf("limits: write usage: %w", err)
		}
	}
	l.prune()
	return err
}

// prune forgets counts of past months once they are written. Only flush
// calls it (under flushMu), so the entries flush holds stay valid.
func (l *Limiter) prune() {
	month := monthOf(l.now())
	l.umu.Lock()
	defer l.umu.Unlock()
	for k, u := range l.usage {
		if u.month < month && u.prior+u.local == u.written {
			delete(l.usage, k)
		}
	}
}
