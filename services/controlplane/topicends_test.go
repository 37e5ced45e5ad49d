package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic the broker does not know yet (KRaft propagates a new topic a
// moment after the controller answers) is waited for, not answered 503.
func TestTopicEndsWaitsForATopicTheBrokerDoesNotKnowYet(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := &Service{adm: kadm.NewClient(cl)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	go func() {
		time.Sleep(400 * time.Millisecond) // the topic appears after the first answers
		if _, err := s.adm.CreateTopic(ctx, 3, 1, nil, "late"); err != nil {
			t.Errorf("create: %v", err)
		}
	}()
	ends, err := s.topicEnds(ctx, "late")
	if err != nil {
		t.Fatalf("topicEnds: %v", err)
	}
	if n := len(ends["late"]); n != 3 {
		t.Fatalf("end offsets of %d partitions, want 3: %v", n, ends)
	}

	// A topic that never appears ends with the broker's answer when ctx ends.
	short, cancel2 := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel2()
	if _, err := s.topicEnds(short, "never"); err == nil {
		t.Fatal("topicEnds of a topic that never exists answered no error")
	}
}
