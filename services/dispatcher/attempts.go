package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// attemptLog is the write-ahead count of a tenant's webhook POSTs, so that
// a dead letter says how many POSTs were really made even when a process
// was killed during an attempt (the attempt whose outcome was never
// recorded is made again by the next process: at least once).
//
// Before every POST the dispatcher writes, and waits for Kafka to
// acknowledge, the number of POSTs started for the message's delivery to
// the webhook, in the tenant's compacted attempts topic
// (<prefix>.<tenant>.wh.attempts, key "<webhook id>/<message id>", value
// decimal). Every dispatcher follows that topic; before a consumer that
// was given partitions (after a rebalance or at its start: the previous
// owner may have died mid-attempt) makes its next attempt it reads the
// topic up to its end. The next POST's number is then the larger of the
// count the retry record carries and the logged one, plus one. Once the
// message is done with (delivered, dead-lettered, dropped with its
// webhook) its key is deleted (a tombstone), so the topic and the memory
// hold only messages in flight.
//
// A kill after the count was acknowledged but before the request left
// counts one POST the endpoint never saw; the opposite (a POST not
// counted) cannot happen.
type attemptLog struct {
	d      *Dispatcher
	tenant string
	topic  string

	mu    sync.Mutex
	posts map[string]int
	// read is the next offset to read, by partition; changed signals
	// that it moved.
	read    map[int32]int64
	changed chan struct{}
	started bool
}

func attemptKey(l letter) string { return l.Webhook + "/" + l.MessageID }

// attemptLog returns tenant's log, starting its follower on first use.
func (d *Dispatcher) attemptLog(tenant string) *attemptLog {
	d.alMu.Lock()
	defer d.alMu.Unlock()
	a := d.attemptLogs[tenant]
	if a == nil {
		a = &attemptLog{d: d, tenant: tenant, topic: d.names.AttemptsTopic(tenant), posts: map[string]int{},
			read: map[int32]int64{}, changed: make(chan struct{})}
		d.attemptLogs[tenant] = a
	}
	if !a.started && d.runCtx != nil {
		a.started = true
		d.followers.Add(1)
		go func() {
			defer d.followers.Done()
			a.follow(d.runCtx)
		}()
	}
	return a
}

// follow reads the attempts topic from its start until ctx ends,
// restarting its client after errors.
func (a *attemptLog) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := a.followOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		a.d.log.Warn("webhooks: following the attempts topic", "tenant", a.tenant, "topic", a.topic, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (a *attemptLog) followOnce(ctx context.Context) error {
	a.mu.Lock()
	from := kgo.NewOffset().AtStart()
	if o := a.read[0]; o > 0 {
		from = kgo.NewOffset().At(o)
	}
	a.mu.Unlock()
	// One partition (EnsureTopics); an offset compacted away resets to
	// the start.
	opts := append(append([]kgo.Opt{}, a.d.cfg.ClientOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{a.topic: {0: from}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil && topicGone(ferr) {
			return ferr
		}
		a.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if r.Value == nil {
				delete(a.posts, k)
			} else if n, err := strconv.Atoi(string(r.Value)); err == nil && n > a.posts[k] {
				a.posts[k] = n
			}
			a.read[r.Partition] = r.Offset + 1
		})
		if !fs.Empty() {
			close(a.changed)
			a.changed = make(chan struct{})
		}
		a.mu.Unlock()
	}
}

// sync waits until the follower has read everything written to the topic
// before the call.
func (a *attemptLog) sync(ctx context.Context) error {
	a.d.attemptLog(a.tenant) // the follower runs
	ctx, cancel := context.WithTimeout(ctx, 2*a.d.cfg.RequestTimeout)
	defer cancel()
	ends, err := a.d.adm.ListEndOffsets(ctx, a.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("reading the end of %s: %w", a.topic, err)
	}
	for {
		a.mu.Lock()
		behind := false
		for _, o := range ends[a.topic] {
			if a.read[o.Partition] < o.Offset {
				behind = true
			}
		}
		changed := a.changed
		a.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("reading %s up to its end: %w", a.topic, ctx.Err())
		}
	}
}

// start records that POST number max(recorded, logged)+1 of l begins and
// returns that number once Kafka has acknowledged it. recorded is what l's
// record says was made before.
func (a *attemptLog) start(ctx context.Context, l letter) (int, error) {
	k := attemptKey(l)
	a.mu.Lock()
	n := max(l.PostsBefore(), a.posts[k]) + 1
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.d.cfg.RequestTimeout)
	defer cancel()
	rec := &kgo.Record{Topic: a.topic, Key: []byte(k), Value: []byte(strconv.Itoa(n))}
	if err := a.d.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("recording attempt %d in %s: %w", n, a.topic, err)
	}
	a.mu.Lock()
	a.posts[k] = max(a.posts[k], n)
	a.mu.Unlock()
	return n, nil
}

// forget deletes the counts of messages done with (after the step that
// made them so is committed). Best effort: a key left behind is only a
// few bytes.
func (a *attemptLog) forget(keys []string) {
	if len(keys) == 0 {
		return
	}
	a.mu.Lock()
	for _, k := range keys {
		delete(a.posts, k)
	}
	a.mu.Unlock()
	for _, k := range keys {
		a.d.prod.Produce(context.Background(), &kgo.Record{Topic: a.topic, Key: []byte(k)}, func(_ *kgo.Record, err error) {
			if err != nil {
				a.d.log.Warn("webhooks: deleting a count from the attempts topic", "tenant", a.tenant, "err", err)
			}
		})
	}
}
