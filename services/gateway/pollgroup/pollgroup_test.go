package pollgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// Timing. kfake refuses session timeouts under 6 s (GroupMinSessionTimeout),
// Apache Kafka under group.min.session.timeout.ms (6 s by default), so the
// members use 6 s. A group join on a real broker takes seconds (more if
// group.initial.rebalance.delay.ms is left at 3 s), hence the generous
// "eventually" bound; tests finish as soon as their condition holds.
const (
	testSession = 6 * time.Second
	eventually  = 90 * time.Second
	longPoll    = 2 * time.Second
)

type env struct {
	brokers []string
	adm     *kadm.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	brokers, _ := kafkatest.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	t.Cleanup(cl.Close)
	return &env{brokers: brokers, adm: kadm.NewClient(cl)}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("MSGMESH_TEST_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// topic creates a topic with 3 partitions and deletes it when t ends.
func (e *env) topic(t *testing.T) string {
	t.Helper()
	name := kafkatest.Name("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// EnsureTopic returns once the topic is served: the tests produce at once.
	if created, err := kafkaclient.EnsureTopic(ctx, e.adm, name, kafkaclient.TopicSpec{Partitions: 3, ReplicationFactor: 1}); err != nil || !created {
		t.Fatalf("create topic %s: created %v, %v", name, created, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.adm.DeleteTopics(ctx, name)
	})
	return name
}

// produce writes recs to topic (Partition set by the caller) and returns
// them with their offsets.
func (e *env) produce(t *testing.T, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return recs
}

// spread returns n records for topic over 3 partitions, values size bytes.
func spread(topic string, n, size int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf("%08d", i)
		if size > len(v) {
			v += strings.Repeat(".", size-len(v))
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(fmt.Sprintf("room-%d", i%3)), Value: []byte(v)}
	}
	return recs
}

// manager returns a running Manager closed when t ends. FetchMaxWait is
// lowered from franz-go's 5 s: partitions assigned while a fetch is parked
// on the broker are only fetched when it returns, which on a real broker
// otherwise adds up to 5 s after every rebalance.
func (e *env) manager(t *testing.T, mod func(*Config)) *Manager {
	t.Helper()
	cfg := Config{
		ClientOpts:     []kgo.Opt{kgo.SeedBrokers(e.brokers...), kgo.FetchMaxWait(time.Second)},
		SessionTimeout: testSession,
		IdleTimeout:    time.Minute,
		Logger:         testLogger(),
	}
	if mod != nil {
		mod(&cfg)
	}
	mg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go mg.Run(ctx)
	t.Cleanup(func() {
		cancel()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if err := mg.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return mg
}

func id(r *kgo.Record) cursor.Cursor { return cursor.Cursor{Partition: r.Partition, Offset: r.Offset} }

// checkBatch verifies the per-response promises: limits, no offset twice.
func checkBatch(t *testing.T, req Request, b *Batch) {
	t.Helper()
	max, maxBytes := req.Max, req.MaxBytes
	if max == 0 {
		max = DefaultMax
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b.Records) > max {
		t.Errorf("batch of %d records, max %d", len(b.Records), max)
	}
	size := 0
	seen := map[cursor.Cursor]bool{}
	for _, r := range b.Records {
		size += len(r.Key) + len(r.Value)
		if seen[id(r)] {
			t.Errorf("cursor %v twice in one batch", id(r))
		}
		seen[id(r)] = true
		if r.Topic != req.Key.Topic {
			t.Errorf("record of topic %q in a poll of %q", r.Topic, req.Key.Topic)
		}
	}
	if len(b.Records) > 1 && size > maxBytes {
		t.Errorf("batch of %d bytes in %d records, max bytes %d", size, len(b.Records), maxBytes)
	}
}

// pollOne polls until a non-empty batch arrives and returns it unresolved.
func pollOne(t *testing.T, mg *Manager, req Request) *Batch {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for time.Now().Before(deadline) {
		b, err := mg.Poll(context.Background(), req)
		if err != nil {
			t.Fatalf("Poll %s: %v", req.Key, err)
		}
		checkBatch(t, req, b)
		if len(b.Records) > 0 {
			return b
		}
	}
	t.Fatalf("Poll %s: no records within %v", req.Key, eventually)
	return nil
}

// pollUntil polls (acknowledging each batch by Delivered and req.Ack on the
// next poll) until want distinct cursors were received, then returns every
// record in the order received. req.Ack is left naming the last batch.
func pollUntil(t *testing.T, mg *Manager, req *Request, want int) []*kgo.Record {
	t.Helper()
	var all []*kgo.Record
	seen := map[cursor.Cursor]bool{}
	deadline := time.Now().Add(eventually)
	for len(seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("Poll %s: %d of %d records within %v", req.Key, len(seen), want, eventually)
		}
		b, err := mg.Poll(context.Background(), *req)
		if err != nil {
			t.Fatalf("Poll %s: %v", req.Key, err)
		}
		checkBatch(t, *req, b)
		for _, r := range b.Records {
			seen[id(r)] = true
		}
		all = append(all, b.Records...)
		b.Delivered()
		if len(b.Records) > 0 {
			req.Ack = b.ID
		}
	}
	return all
}

// checkExactlyInOrder verifies that got holds want exactly once each and in
// offset order within each partition.
func checkExactlyInOrder(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d records, want %d", len(got), len(want))
	}
	byCursor := map[cursor.Cursor]*kgo.Record{}
	for _, r := range want {
		byCursor[id(r)] = r
	}
	seen := map[cursor.Cursor]bool{}
	last := map[int32]int64{}
	for _, r := range got {
		c := id(r)
		w, ok := byCursor[c]
		switch {
		case !ok:
			t.Errorf("unexpected record %v", c)
		case seen[c]:
			t.Errorf("duplicate record %v", c)
		case string(w.Value) != string(r.Value):
			t.Errorf("record %v: value %q, want %q", c, r.Value, w.Value)
		}
		seen[c] = true
		if l, ok := last[r.Partition]; ok && r.Offset <= l {
			t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, l)
		}
		last[r.Partition] = r.Offset
	}
	for c := range byCursor {
		if !seen[c] {
			t.Errorf("record %v never delivered", c)
		}
	}
}

// committed returns the group's committed offset per partition of topic.
func (e *env) committed(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os, err := e.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = os.Error()
	}
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		out[p] = o.At
	}
	return out
}

// nextOffsets returns, per partition, the highest offset in recs + 1.
func nextOffsets(recs []*kgo.Record) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		out[r.Partition] = max(out[r.Partition], r.Offset+1)
	}
	return out
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// without returns recs minus those in drop.
func without(recs, drop []*kgo.Record) []*kgo.Record {
	gone := map[cursor.Cursor]bool{}
	for _, r := range drop {
		gone[id(r)] = true
	}
	return slices.DeleteFunc(slices.Clone(recs), func(r *kgo.Record) bool { return gone[id(r)] })
}

// waitGone waits until key's member no longer exists (expired). It looks
// inside the Manager: any call on the member would count as activity.
func waitGone(t *testing.T, mg *Manager, key Key) {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for time.Now().Before(deadline) {
		mg.mu.Lock()
		_, ok := mg.members[key]
		mg.mu.Unlock()
		if !ok {
			if err := mg.Commit(context.Background(), key, nil); !errors.Is(err, ErrUnknownMember) {
				t.Fatalf("Commit of expired member %s: %v, want ErrUnknownMember", key, err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("member %s did not expire within %v", key, eventually)
}

// counter reads a counter or gauge value from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

func TestPollDeliversEveryRecordOnceInOrder(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	reg := prometheus.NewRegistry()
	mg := e.manager(t, func(c *Config) { c.Registerer = reg })
	want := e.produce(t, spread(topic, 1000, 20)...)

	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	req := Request{Key: key, Max: 100, Wait: longPoll}
	got := pollUntil(t, mg, &req, len(want))
	checkExactlyInOrder(t, got, want)

	// The last batch is acknowledged by one more poll.
	b, err := mg.Poll(context.Background(), Request{Key: key, Ack: req.Ack})
	if err != nil {
		t.Fatalf("final Poll: %v", err)
	}
	if len(b.Records) != 0 {
		t.Errorf("final Poll: %d records, want none", len(b.Records))
	}
	b.Delivered()
	if c, w := e.committed(t, key.Group, topic), nextOffsets(want); !equalOffsets(c, w) {
		t.Errorf("committed %v, want %v", c, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lags, err := e.adm.Lag(ctx, key.Group)
	if err != nil {
		t.Fatalf("Lag: %v", err)
	}
	if l := lags[key.Group]; l.Error() != nil || l.Lag.Total() != 0 {
		t.Errorf("group lag %d (err %v), want 0", l.Lag.Total(), l.Error())
	}
	if v := counter(t, reg, "msgmesh_pollgroup_records_delivered_total"); v != 1000 {
		t.Errorf("records delivered metric %v, want 1000", v)
	}
	if v := counter(t, reg, "msgmesh_pollgroup_members"); v != 1 {
		t.Errorf("members metric %v, want 1", v)
	}
	if v := counter(t, reg, "msgmesh_pollgroup_commits_total"); v < 1 {
		t.Errorf("commits metric %v, want > 0", v)
	}
}

func TestMaxAndMaxBytesKeepLeftovers(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, nil)
	want := e.produce(t, spread(topic, 60, 100)...) // 106 bytes each with the key

	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	req := Request{Key: key, Max: 7, Wait: longPoll}
	got := pollUntil(t, mg, &req, 30)
	req.Max, req.MaxBytes = 100, 250
	rest := pollUntil(t, mg, &req, len(want)-len(got))
	checkExactlyInOrder(t, append(got, rest...), want)
}

func TestRecordLargerThanMaxBytesComesAlone(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, nil)
	want := e.produce(t,
		&kgo.Record{Topic: topic, Value: []byte("small-1")},
		&kgo.Record{Topic: topic, Value: []byte(strings.Repeat("B", 5000))},
		&kgo.Record{Topic: topic, Value: []byte("small-2")},
		&kgo.Record{Topic: topic, Value: []byte("small-3")},
	)
	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	req := Request{Key: key, Max: 10, MaxBytes: 1000, Wait: longPoll}
	var got []*kgo.Record
	bigAlone := false
	deadline := time.Now().Add(eventually)
	for len(got) < len(want) && time.Now().Before(deadline) {
		b, err := mg.Poll(context.Background(), req)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		checkBatch(t, req, b)
		for _, r := range b.Records {
			if len(r.Value) == 5000 {
				bigAlone = len(b.Records) == 1
			}
		}
		got = append(got, b.Records...)
		b.Delivered()
		req.Ack = b.ID
	}
	checkExactlyInOrder(t, got, want)
	if !bigAlone {
		t.Error("the record larger than MaxBytes did not come alone")
	}
}

func TestUnacknowledgedRedeliveredAfterExpiry(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	reg := prometheus.NewRegistry()
	mg := e.manager(t, func(c *Config) { c.IdleTimeout = 1500 * time.Millisecond; c.Registerer = reg })
	want := e.produce(t, spread(topic, 30, 10)...)
	group := kafkatest.Name("g")
	c1 := Request{Key: Key{Group: group, Topic: topic, Consumer: "c1"}, Max: 10, Wait: longPoll}

	b1 := pollOne(t, mg, c1)
	b1.Delivered()
	c1.Ack = b1.ID
	b2 := pollOne(t, mg, c1) // acknowledges b1
	b2.Delivered()           // never acknowledged
	acked := b1.Records
	if c, w := e.committed(t, group, topic), nextOffsets(acked); !equalOffsets(c, w) {
		t.Errorf("committed %v, want %v (batch 1)", c, w)
	}

	waitGone(t, mg, c1.Key)
	if v := counter(t, reg, "msgmesh_pollgroup_expirations_total"); v != 1 {
		t.Errorf("expirations metric %v, want 1", v)
	}
	c2 := Request{Key: Key{Group: group, Topic: topic, Consumer: "c2"}, Max: 100, Wait: longPoll}
	rest := without(want, acked)
	got := pollUntil(t, mg, &c2, len(rest))
	checkExactlyInOrder(t, got, rest)
	for _, r := range b2.Records {
		if !slices.ContainsFunc(got, func(g *kgo.Record) bool { return id(g) == id(r) }) {
			t.Errorf("unacknowledged %v not redelivered", id(r))
		}
	}
}

func TestCommitThenExpiryNotRedelivered(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, func(c *Config) { c.IdleTimeout = 1500 * time.Millisecond })
	want := e.produce(t, spread(topic, 30, 10)...)
	group := kafkatest.Name("g")
	c1 := Request{Key: Key{Group: group, Topic: topic, Consumer: "c1"}, Max: 10, Wait: longPoll}

	b1 := pollOne(t, mg, c1)
	b1.Delivered()
	var cursors []cursor.Cursor
	for _, r := range b1.Records {
		cursors = append(cursors, id(r))
	}
	cursors = append(cursors, cursor.Cursor{Partition: 0, Offset: 1 << 40}) // never delivered: skipped
	if err := mg.Commit(context.Background(), c1.Key, cursors); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if c, w := e.committed(t, group, topic), nextOffsets(b1.Records); !equalOffsets(c, w) {
		t.Errorf("committed %v, want %v", c, w)
	}

	waitGone(t, mg, c1.Key)
	c2 := Request{Key: Key{Group: group, Topic: topic, Consumer: "c2"}, Max: 100, Wait: longPoll}
	rest := without(want, b1.Records)
	checkExactlyInOrder(t, pollUntil(t, mg, &c2, len(rest)), rest)
}

func TestUndeliveredOfferedAgain(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, nil)
	want := e.produce(t, spread(topic, 20, 10)...)
	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	req := Request{Key: key, Max: 5, Wait: longPoll}

	b1 := pollOne(t, mg, req)
	b1.Undelivered()
	b1.Undelivered() // no-ops
	b1.Delivered()
	b2 := pollOne(t, mg, req)
	if !slices.EqualFunc(b1.Records, b2.Records, func(a, b *kgo.Record) bool { return id(a) == id(b) }) {
		t.Fatalf("after Undelivered got %v, want %v again", cursors(b2.Records), cursors(b1.Records))
	}
	if c := e.committed(t, key.Group, topic); len(c) != 0 {
		t.Errorf("committed %v after an undelivered batch, want nothing", c)
	}
	b2.Delivered()
	if b2.ID != b1.ID {
		t.Errorf("batch handed out again has id %q, want %q", b2.ID, b1.ID)
	}
	req.Ack = b2.ID
	rest := pollUntil(t, mg, &req, len(want)-len(b2.Records))
	checkExactlyInOrder(t, append(slices.Clone(b2.Records), rest...), want)
}

// A batch is committed only when the next poll names it: a poll without
// ack, or with another id, gets the same batch again (same id, same
// records) and nothing is committed; Commit of some of its cursors leaves
// the rest outstanding.
func TestPollWithoutAckDeliversTheBatchAgain(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	reg := prometheus.NewRegistry()
	mg := e.manager(t, func(c *Config) { c.Registerer = reg })
	want := e.produce(t, spread(topic, 20, 10)...)
	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	req := Request{Key: key, Max: 5, Wait: longPoll}
	same := func(a, b *kgo.Record) bool { return id(a) == id(b) }

	b1 := pollOne(t, mg, req)
	b1.Delivered()
	if b1.ID == "" {
		t.Fatal("non-empty batch without an id")
	}
	for i, ack := range []string{"", "not-" + b1.ID} {
		req.Ack = ack
		again := pollOne(t, mg, req)
		again.Delivered()
		if again.ID != b1.ID || !slices.EqualFunc(again.Records, b1.Records, same) {
			t.Fatalf("poll %d with ack %q: batch %s %v, want batch %s %v again", i, ack, again.ID, cursors(again.Records), b1.ID, cursors(b1.Records))
		}
	}
	if c := e.committed(t, key.Group, topic); len(c) != 0 {
		t.Errorf("committed %v without an acknowledgement, want nothing", c)
	}
	if v := counter(t, reg, "msgmesh_pollgroup_records_redelivered_total"); v != float64(2*len(b1.Records)) {
		t.Errorf("redelivered metric %v, want %d", v, 2*len(b1.Records))
	}

	req.Ack = b1.ID
	b2 := pollOne(t, mg, req)
	b2.Delivered()
	if b2.ID == b1.ID || slices.ContainsFunc(b2.Records, func(r *kgo.Record) bool {
		return slices.ContainsFunc(b1.Records, func(o *kgo.Record) bool { return same(r, o) })
	}) {
		t.Fatalf("after ack of %s got batch %s %v, want new records", b1.ID, b2.ID, cursors(b2.Records))
	}
	if c, w := e.committed(t, key.Group, topic), nextOffsets(b1.Records); !equalOffsets(c, w) {
		t.Errorf("committed %v after the ack, want %v (batch 1)", c, w)
	}

	// Commit the first record of b2: the next poll without ack gets the rest.
	if err := mg.Commit(context.Background(), key, []cursor.Cursor{id(b2.Records[0])}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	req.Ack = ""
	b3 := pollOne(t, mg, req)
	b3.Delivered()
	if b3.ID != b2.ID || !slices.EqualFunc(b3.Records, b2.Records[1:], same) {
		t.Fatalf("after Commit of %v got batch %s %v, want %s %v", id(b2.Records[0]), b3.ID, cursors(b3.Records), b2.ID, cursors(b2.Records[1:]))
	}
	req.Ack = b3.ID
	rest := pollUntil(t, mg, &req, len(want)-len(b1.Records)-len(b2.Records))
	checkExactlyInOrder(t, append(append(slices.Clone(b1.Records), b2.Records...), rest...), want)
}

func cursors(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = id(r).String()
	}
	return out
}

func TestTwoConsumersSplitPartitions(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg1, mg2 := e.manager(t, nil), e.manager(t, nil) // two gateway instances
	group := kafkatest.Name("g")
	reqs := []Request{
		{Key: Key{Group: group, Topic: topic, Consumer: "c1"}, Max: 50, Wait: time.Second},
		{Key: Key{Group: group, Topic: topic, Consumer: "c2"}, Max: 50, Wait: time.Second},
	}
	mgs := []*Manager{mg1, mg2}

	var (
		mu        sync.Mutex
		seen      = map[cursor.Cursor]bool{}
		perMember = [2]map[int32]int{{}, {}}
		total     = 0
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				b, err := mgs[i].Poll(ctx, reqs[i])
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Poll %s: %v", reqs[i].Key, err)
					}
					return
				}
				mu.Lock()
				for _, r := range b.Records {
					seen[id(r)] = true
					perMember[i][r.Partition]++
					total++
				}
				mu.Unlock()
				b.Delivered()
				if len(b.Records) > 0 {
					reqs[i].Ack = b.ID
				}
			}
		}()
	}

	// Produce once both members hold partitions.
	deadline := time.Now().Add(eventually)
	for !bothAssigned(t, e, group) {
		if time.Now().After(deadline) {
			t.Fatalf("group %s not split between two members within %v", group, eventually)
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := e.produce(t, spread(topic, 300, 10)...)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d records within %v", n, len(want), eventually)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("partitions → records: c1 %v, c2 %v; %d deliveries for %d records", perMember[0], perMember[1], total, len(want))
	if len(perMember[0]) == 0 || len(perMember[1]) == 0 {
		t.Errorf("one consumer got nothing: c1 %v, c2 %v", perMember[0], perMember[1])
	}
	for p := range perMember[0] {
		if _, ok := perMember[1][p]; ok {
			t.Errorf("partition %d consumed by both members of a stable group", p)
		}
	}
}

// bothAssigned reports whether group is stable with two members that each
// own at least one partition.
func bothAssigned(t *testing.T, e *env, group string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := e.adm.DescribeGroups(ctx, group)
	if err != nil {
		return false
	}
	g := gs[group]
	if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
		return false
	}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return false
		}
		n := 0
		for _, tp := range a.Topics {
			n += len(tp.Partitions)
		}
		if n == 0 {
			return false
		}
	}
	return true
}

func TestCloseCommitsNothingUnacknowledged(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	want := e.produce(t, spread(topic, 30, 10)...)
	group := kafkatest.Name("g")
	req := Request{Key: Key{Group: group, Topic: topic, Consumer: "c1"}, Max: 10, Wait: longPoll}

	mg1, err := New(Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, SessionTimeout: testSession, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b1 := pollOne(t, mg1, req)
	b1.Delivered()
	req.Ack = b1.ID
	b2 := pollOne(t, mg1, req) // acknowledges b1
	b2.Delivered()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mg1.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := mg1.Poll(ctx, req); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if c, w := e.committed(t, group, topic), nextOffsets(b1.Records); !equalOffsets(c, w) {
		t.Errorf("committed %v after Close, want %v (batch 1 only)", c, w)
	}

	mg2 := e.manager(t, nil) // the restarted gateway
	rest := without(want, b1.Records)
	checkExactlyInOrder(t, pollUntil(t, mg2, &req, len(rest)), rest)
}

func TestNoExpiryWhilePolling(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}

	start := time.Now()
	b, err := mg.Poll(context.Background(), Request{Key: key, Wait: 2 * time.Second}) // empty topic
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	if len(b.Records) != 0 || time.Since(start) < 2*time.Second {
		t.Errorf("Poll of an empty topic: %d records after %v, want none after 2s", len(b.Records), time.Since(start))
	}
	if err := mg.Commit(context.Background(), key, nil); err != nil {
		t.Errorf("Commit right after a long poll: %v (member expired during the poll?)", err)
	}
	waitGone(t, mg, key)
}

func TestCommitInterruptsWaitingPoll(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, nil)
	key := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	if _, err := mg.Poll(context.Background(), Request{Key: key}); err != nil { // create
		t.Fatalf("Poll: %v", err)
	}

	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		b, err := mg.Poll(context.Background(), Request{Key: key, Wait: 4 * time.Second})
		if err != nil {
			t.Errorf("waiting Poll: %v", err)
		}
		if b != nil {
			b.Delivered()
		}
		done <- time.Since(start)
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := mg.Commit(context.Background(), key, nil); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Commit waited %v behind a long poll", d)
	}
	if d := <-done; d < 4*time.Second {
		t.Errorf("interrupted Poll returned after %v, want its full 4s wait", d)
	}
}

func TestConcurrentPollsOfOneMemberTakeTurns(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, nil)
	want := e.produce(t, spread(topic, 200, 10)...)
	req := Request{Key: Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}, Max: 7, Wait: time.Second}

	// Concurrent polls of one consumer share its acknowledgement: a poll
	// that started before the last batch was handed out acknowledges an
	// older one and gets the outstanding batch again, a whole duplicate.
	// Every record arrives, none is skipped.
	var mu sync.Mutex
	var got []*kgo.Record
	seen := map[cursor.Cursor]bool{}
	ack := ""
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				r := req
				r.Ack = ack
				mu.Unlock()
				b, err := mg.Poll(ctx, r)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Poll: %v", err)
					}
					return
				}
				checkBatch(t, r, b)
				mu.Lock()
				for _, r := range b.Records {
					if !seen[id(r)] {
						seen[id(r)] = true
						got = append(got, r)
					}
				}
				if len(b.Records) > 0 {
					ack = b.ID
				}
				n := len(got)
				mu.Unlock()
				b.Delivered()
				if n >= len(want) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Order across goroutines is not defined; exactly-once is.
	slices.SortFunc(got, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	checkExactlyInOrder(t, got, want)
}

func TestErrors(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	mg := e.manager(t, func(c *Config) { c.MaxMembers = 1 })
	ctx := context.Background()
	k1 := Key{Group: kafkatest.Name("g"), Topic: topic, Consumer: "c1"}
	k2 := Key{Group: k1.Group, Topic: topic, Consumer: "c2"}

	if err := mg.Commit(ctx, k1, nil); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("Commit of an unknown member: %v, want ErrUnknownMember", err)
	}
	if _, err := mg.Poll(ctx, Request{Key: Key{Topic: topic}}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Poll without group: %v, want ErrInvalidRequest", err)
	}
	if _, err := mg.Poll(ctx, Request{Key: k1, Max: -1}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Poll with Max -1: %v, want ErrInvalidRequest", err)
	}
	if _, err := mg.Poll(ctx, Request{Key: k1}); err != nil {
		t.Fatalf("Poll: %v", err)
	}
	if _, err := mg.Poll(ctx, Request{Key: k2}); !errors.Is(err, ErrTooManyMembers) {
		t.Errorf("Poll beyond MaxMembers: %v, want ErrTooManyMembers", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := mg.Poll(cctx, Request{Key: k1, Wait: time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with a canceled context: %v, want context.Canceled", err)
	}
	if n := mg.CloseTopic(topic); n != 1 {
		t.Errorf("CloseTopic closed %d members, want 1", n)
	}
	if err := mg.Commit(ctx, k1, nil); !errors.Is(err, ErrUnknownMember) {
		t.Errorf("Commit after CloseTopic: %v, want ErrUnknownMember", err)
	}

	if _, err := New(Config{IdleTimeout: -1, MaxMembers: -1}); err == nil {
		t.Error("New accepted a negative idle timeout and max members")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Registerer: reg}); err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := New(Config{Registerer: reg}); err == nil {
		t.Error("New registered the same collectors twice without error")
	}
}

// A static member (InstanceIDPrefix) still leaves its group when closed:
// the group is empty at once, not after the session timeout.
func TestStaticMemberLeavesOnClose(t *testing.T) {
	e := newEnv(t)
	topic := e.topic(t)
	e.produce(t, spread(topic, 10, 10)...)
	group := kafkatest.Name("g")
	req := Request{Key: Key{Group: group, Topic: topic, Consumer: "c1"}, Wait: longPoll}
	mg, err := New(Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, SessionTimeout: 30 * time.Second, InstanceIDPrefix: "node-a", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	pollOne(t, mg, req).Delivered()
	members := func() (int, []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := e.adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		var ids []string
		for _, m := range gs[group].Members {
			if m.InstanceID != nil {
				ids = append(ids, *m.InstanceID)
			}
		}
		return len(gs[group].Members), ids
	}
	if n, ids := members(); n != 1 || !slices.Equal(ids, []string{"node-a-c1"}) {
		t.Fatalf("group has %d members with instance ids %v, want one static member node-a-c1", n, ids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closed := time.Now()
	if err := mg.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for {
		n, _ := members()
		if n == 0 {
			break
		}
		if time.Since(closed) > 10*time.Second {
			t.Fatalf("static member still in the group %v after Close (session timeout 30s)", time.Since(closed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := New(Config{InstanceIDPrefix: "bad prefix"}); err == nil {
		t.Error("New accepted an instance id prefix with a space")
	}
}
