package controlstate

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

func openLog(t *testing.T, brokers []string, topic string) *Log {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Open(ctx, Config{Topic: topic, ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, ReplicationFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; l.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := l.WaitReady(wctx); err != nil {
		t.Fatalf("not ready: %v", err)
	}
	return l
}

func TestTwoReplicasDecideInLogOrder(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	topic := kafkatest.Name("control")
	a, b := openLog(t, brokers, topic), openLog(t, brokers, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Append(ctx, TypeTenantCreated, TenantCreatedData{Tenant: "acme", Plan: PlanFree}); err != nil {
		t.Fatal(err)
	}
	// Read follows write on the appending replica.
	if _, ok := a.State().Tenant("acme"); !ok {
		t.Fatal("tenant not visible on the appending replica right after Append")
	}
	// Both replicas race to create the same topic: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, l := range []*Log{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Append(ctx, TypeTopicCreated, TopicCreatedData{Tenant: "acme", Topic: "orders", Partitions: int32(i + 1), KafkaTopic: "x"})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrConflict):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners, want exactly 1 (errors %v)", won, errs)
	}
	// Both replicas agree on the winner.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ta, oka := a.State().Topic("acme", "orders")
		tb, okb := b.State().Topic("acme", "orders")
		if oka && okb {
			if ta.Partitions != tb.Partitions || ta.Epoch != tb.Epoch {
				t.Fatalf("replicas disagree: %+v vs %+v", ta, tb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica b never saw the topic")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A third process started later rebuilds the same state from the log.
	c := openLog(t, brokers, topic)
	if _, ok := c.State().Topic("acme", "orders"); !ok {
		t.Fatal("rebuilt projection lacks the topic")
	}
	if _, err := c.Append(ctx, TypeTopicDeleted, TopicDeletedData{Tenant: "acme", Topic: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown topic: %v, want ErrNotFound", err)
	}
}

func TestKeyRevocation(t *testing.T) {
	s := NewState()
	must := func(typ string, d any) error {
		raw, _ := json.Marshal(d)
		return s.Apply(Event{V: SchemaVersion, Type: typ, ID: newID(), At: time.Now(), Data: raw})
	}
	if err := must(TypeKeyCreated, KeyCreatedData{Tenant: "t", KeyID: "k1", Hash: "h1"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key for missing tenant: %v", err)
	}
	if err := must(TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanFree, AdminKey: &KeyCreatedData{Tenant: "t", KeyID: "k1", Hash: "h1", Role: "admin"}}); err != nil {
		t.Fatal(err)
	}
	if err := must(TypeKeyCreated, KeyCreatedData{Tenant: "t", KeyID: "k2", Hash: "h1"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
	if err := must(TypeKeyRevoked, KeyRevokedData{Tenant: "other", KeyID: "k1"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke across tenants: %v", err)
	}
	if err := must(TypeKeyRevoked, KeyRevokedData{Tenant: "t", KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	k, ok := s.KeyByHash("h1")
	if !ok || k.RevokedAt == nil {
		t.Fatalf("key not revoked: %+v", k)
	}
	if t0, _ := s.Tenant("t"); !t0.StrictTopics {
		t.Fatal("strict topic gate must default on")
	}
}

// With the brokers unreachable, Open still succeeds (the process starts
// and answers /healthz) and Run keeps retrying, saying why in KafkaErr.
func TestOpenWithoutKafkaRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l, err := Open(context.Background(), Config{Topic: "never", ClientOpts: []kgo.Opt{kgo.SeedBrokers(addr)}, AppendTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open with Kafka unreachable: %v", err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for l.KafkaErr() == nil {
		if time.Now().After(deadline) {
			t.Fatal("KafkaErr still nil after 10s with Kafka unreachable")
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned with Kafka unreachable: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if l.Ready() {
		t.Fatal("ready without Kafka")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
