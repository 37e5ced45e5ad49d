package kafkaclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// TestFollowCatchesUpThenFollows: records written before Run are all
// applied before CaughtUp, later ones after it; an Apply error ends Run.
func TestFollowCatchesUpThenFollows(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	topic := kafkatest.Name("follow")
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	cl, err := kgo.NewClient(kafkaclient.With(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ensure := func(ctx context.Context) error {
		_, err := kafkaclient.EnsureTopic(ctx, adm, topic, kafkaclient.TopicSpec{Partitions: 2, ReplicationFactor: -1})
		return err
	}
	if err := ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if created, err := kafkaclient.EnsureTopic(ctx, adm, topic, kafkaclient.TopicSpec{Partitions: 2}); err != nil || created {
		t.Fatalf("second EnsureTopic: created %v, err %v; want an existing topic left alone", created, err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var applied []string
	atCatchUp := -1
	caught := make(chan struct{})
	stop := errors.New("stop")
	done := make(chan error, 1)
	go func() {
		done <- kafkaclient.Follow{
			Name: "test", Topic: topic, ClientOpts: opts, Admin: adm, Timeout: 5 * time.Second, Ensure: ensure,
			Apply: func(r *kgo.Record) error {
				mu.Lock()
				defer mu.Unlock()
				applied = append(applied, string(r.Value))
				if string(r.Value) == "stop" {
					return stop
				}
				return nil
			},
			CaughtUp: func() error {
				mu.Lock()
				atCatchUp = len(applied)
				mu.Unlock()
				close(caught)
				return nil
			},
		}.Run(ctx)
	}()
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("never caught up")
	}
	mu.Lock()
	if atCatchUp != 3 {
		t.Fatalf("caught up after %d records (%v), want the 3 written before Run", atCatchUp, applied)
	}
	mu.Unlock()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("stop")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want Apply's error", err)
	}
}

// TestFollowEmptyTopicCatchesUpAtOnce: a topic without records is caught
// up as soon as its offsets are listed.
func TestFollowEmptyTopicCatchesUpAtOnce(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	topic := kafkatest.Name("follow-empty")
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caught := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- kafkaclient.Follow{
			Name: "test", Topic: topic, ClientOpts: opts, Admin: adm, Timeout: 5 * time.Second,
			Ensure: func(ctx context.Context) error {
				_, err := kafkaclient.EnsureTopic(ctx, adm, topic, kafkaclient.TopicSpec{Partitions: 1})
				return err
			},
			Apply:    func(*kgo.Record) error { return nil },
			CaughtUp: func() error { close(caught); return nil },
		}.Run(ctx)
	}()
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("never caught up")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after cancellation, want nil", err)
	}
}

func TestWithCopies(t *testing.T) {
	base := make([]kgo.Opt, 1, 4)
	base[0] = kgo.ClientID("x")
	a := kafkaclient.With(base, kgo.ClientID("a"))
	b := kafkaclient.With(base, kgo.ClientID("b"))
	if len(a) != 2 || len(b) != 2 || len(base) != 1 {
		t.Fatalf("lengths %d %d %d", len(a), len(b), len(base))
	}
	if &a[1] == &b[1] {
		t.Fatal("With shares the caller's backing array")
	}
}
