package dispatcher

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/names"
)

// The attempts follower applies other processes' counts and skips this
// process's own records: those were applied when written, and a count
// given back since (unstart: counted for a poll's run that stopped before
// the POST) must not come back when the follower reads the record that
// counted it; it did, and a dead letter then said one POST more than the
// endpoint saw.
func TestAttemptLogFollowerSkipsOwnRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "mm.acme.wh.attempts"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{cfg: Config{ClientOpts: opts, RequestTimeout: 5 * time.Second}, names: names.Mapper{Prefix: "mm"}, instance: "me",
		prod: prod, adm: kadm.NewClient(prod), attemptLogs: map[string]*attemptLog{}, log: slog.New(slog.DiscardHandler), runCtx: ctx}
	defer func() { cancel(); d.followers.Wait() }()
	a := d.attemptLog("acme")

	mine := letter{Tenant: "acme", Webhook: "wh_1", MessageID: "m1", Attempt: 1}
	if err := a.startAll(ctx, []*letter{&mine}); err != nil || mine.Posts != 1 {
		t.Fatalf("startAll: posts %d, %v", mine.Posts, err)
	}
	a.unstart([]*letter{&mine}) // not attempted after all
	other := &kgo.Record{Topic: a.topic, Key: []byte("wh_1/m2"), Value: []byte("3"),
		Headers: []kgo.RecordHeader{{Key: hInstance, Value: []byte("someone-else")}}}
	// The follower reads the counting record of m1 again, as it does when it
	// lags behind unstart's tombstone.
	again := a.record(attemptKey(mine), []byte("1"))
	if err := prod.ProduceSync(ctx, other, again).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := a.sync(ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	m1, m2 := a.posts["wh_1/m1"], a.posts["wh_1/m2"]
	a.mu.Unlock()
	if m2 != 3 {
		t.Errorf("another process's count of m2: %d, want 3", m2)
	}
	if m1 != 0 {
		t.Errorf("m1's count given back came back from this process's own record: %d", m1)
	}
	retry := letter{Tenant: "acme", Webhook: "wh_1", MessageID: "m1", Attempt: 1}
	if err := a.startAll(ctx, []*letter{&retry}); err != nil || retry.Posts != 1 {
		t.Fatalf("m1 counted again: POST number %d (%v), want 1", retry.Posts, err)
	}
}
