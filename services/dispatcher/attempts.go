package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
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
// decimal; a poll's first attempts are counted in one produce, startAll,
// and those not attempted after all are given back, unstart). Every
// dispatcher follows that topic (skipping its own records, applied when
// written: hInstance); before a consumer that
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
	opts := kafkaclient.With(a.d.cfg.ClientOpts,
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
			a.read[r.Partition] = r.Offset + 1
			if a.own(r) {
				return // applied when written
			}
			k := string(r.Key)
			if r.Value == nil {
				delete(a.posts, k)
			} else if n, err := strconv.Atoi(string(r.Value)); err == nil && n > a.posts[k] {
				a.posts[k] = n
			}
		})
		if !fs.Empty() {
			close(a.changed)
			a.changed = make(chan struct{})
		}
		a.mu.Unlock()
	}
}

// hInstance names the process that wrote an attempts record: the
// follower skips this process's own records, which it applied when it
// wrote them (a count given back by unstart must not come back when the
// follower reads the record that counted it).
const hInstance = "msgmesh-instance"

// record is an attempts record of this process: count value for key k
// (nil: a tombstone).
func (a *attemptLog) record(k string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: a.topic, Key: []byte(k), Value: value,
		Headers: []kgo.RecordHeader{{Key: hInstance, Value: []byte(a.d.instance)}}}
}

// own reports whether r was written by this process.
func (a *attemptLog) own(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == hInstance {
			return string(h.Value) == a.d.instance
		}
	}
	return false
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
	rec := a.record(k, []byte(strconv.Itoa(n)))
	if err := a.d.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("recording attempt %d in %s: %w", n, a.topic, err)
	}
	a.mu.Lock()
	a.posts[k] = max(a.posts[k], n)
	a.mu.Unlock()
	return n, nil
}

// startAll is start for many letters at once (a poll's first attempts):
// one produce for all of them, acknowledged before any of their POSTs.
// Each letter's Posts is then the number of its coming POST. A letter
// that is not attempted after all must be given back (unstart).
func (a *attemptLog) startAll(ctx context.Context, ls []*letter) error {
	if len(ls) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(ls))
	ns := make([]int, len(ls))
	a.mu.Lock()
	for i, l := range ls {
		k := attemptKey(*l)
		ns[i] = max(l.PostsBefore(), a.posts[k]) + 1
		recs[i] = a.record(k, []byte(strconv.Itoa(ns[i])))
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.d.cfg.RequestTimeout)
	defer cancel()
	if err := a.d.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("recording %d attempts in %s: %w", len(ls), a.topic, err)
	}
	a.mu.Lock()
	for i, l := range ls {
		k := attemptKey(*l)
		a.posts[k] = max(a.posts[k], ns[i])
		l.Posts = ns[i]
	}
	a.mu.Unlock()
	return nil
}

// unstart gives back the counts startAll recorded for letters that were
// not attempted after all (a poll's run stopped before them): a first
// POST counted but never made is deleted, and the letter is read again
// and counted anew. A letter that had POSTs counted before (made again
// after a crash) keeps its count: one POST too many in its dead letter,
// as after a kill between a count and its POST.
func (a *attemptLog) unstart(ls []*letter) {
	var keys []string
	a.mu.Lock()
	for _, l := range ls {
		k := attemptKey(*l)
		if l.Posts == 1 && a.posts[k] == 1 {
			delete(a.posts, k)
			keys = append(keys, k)
		}
	}
	a.mu.Unlock()
	a.tombstones(keys)
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
	a.tombstones(keys)
}

// tombstones deletes keys from the attempts topic (asynchronously).
func (a *attemptLog) tombstones(keys []string) {
	for _, k := range keys {
		a.d.prod.Produce(context.Background(), a.record(k, nil), func(_ *kgo.Record, err error) {
			if err != nil {
				a.d.log.Warn("webhooks: deleting a count from the attempts topic", "tenant", a.tenant, "err", err)
			}
		})
	}
}
