package kafkaclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// TestWaitTopicReady: right after a topic is created by any path (here
// kadm directly), WaitTopicReady returns once every partition is served:
// ListOffsets from another client answers for each without
// UNKNOWN_TOPIC_OR_PARTITION, and a produce succeeds with no unknown-topic
// retries. A ctx that ends first is the error.
func TestWaitTopicReady(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.UnknownTopicRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherAdm := kadm.NewClient(other)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 3 {
		topic := kafkatest.Name("ready")
		resp, err := adm.CreateTopic(ctx, 4, -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic) })
		if err := kafkaclient.WaitTopicReady(ctx, adm, topic); err != nil {
			t.Fatalf("WaitTopicReady(%s): %v", topic, err)
		}
		ends, err := otherAdm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("ListOffsets of %s right after WaitTopicReady: %v", topic, err)
		}
		n := 0
		ends.Each(func(kadm.ListedOffset) { n++ })
		if n != 4 {
			t.Fatalf("ListOffsets of %s answered %d partitions, want 4", topic, n)
		}
		if err := other.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s right after WaitTopicReady: %v", topic, err)
		}
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := kafkaclient.WaitTopicReady(done, adm, kafkatest.Name("never")); err == nil {
		t.Fatal("WaitTopicReady with an ended ctx on a missing topic answered no error")
	}
}
