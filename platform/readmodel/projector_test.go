package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/platform/names"
)

func waitFor(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

// A projector started before its control topic exists (a node's first
// start) follows it once it is made, looking for partitions every 5 ms
// while it applies: every event becomes an audit entry and the lag
// reaches 0.
func TestProjectorStartedBeforeItsControlTopic(t *testing.T) {
	brokers, _ := kafkatest.Brokers(t)
	prefix := kafkatest.Name("rmproj")
	control := names.Mapper{Prefix: prefix}.ControlTopic()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(control), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(i int) {
		data, _ := json.Marshal(controlstate.TenantCreatedData{Tenant: fmt.Sprintf("t%d", i), Plan: controlstate.PlanFree})
		ev, _ := json.Marshal(controlstate.Event{V: controlstate.SchemaVersion, Type: controlstate.TypeTenantCreated,
			ID: fmt.Sprintf("ev%d", i), At: time.Now().UTC(), Data: data, Actor: "operator"})
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: ev}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	store := NewMemory(1000, 1000)
	p, err := NewProjector(ProjectorConfig{TopicPrefix: prefix, ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)},
		Store: store, DiscoverEvery: 5 * time.Millisecond, MaxBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { stop(); <-done }()

	// The control topic is made once the projector runs (as on a node's
	// first start): its first looks find nothing.
	if ok := waitFor(5*time.Second, func() bool { return p.Status().Error == "" }); !ok {
		t.Fatalf("projector status %+v", p.Status())
	}
	// EnsureTopic waits until the new topic is served: produce below
	// writes at once.
	if _, err := kafkaclient.EnsureTopic(ctx, kadm.NewClient(cl), control, kafkaclient.TopicSpec{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kadm.NewClient(cl).DeleteTopics(context.Background(), control) })
	const events = 300
	for i := range events {
		produce(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := store.Audit(ctx, fmt.Sprintf("t%d", events-1), AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Status(); len(page.Events) == 1 && st.Lag == 0 && st.Error == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: the last tenant's audit %+v, status %+v", page.Events, p.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range events {
		page, _ := store.Audit(ctx, fmt.Sprintf("t%d", i), AuditQuery{})
		if len(page.Events) != 1 || page.Events[0].Type != controlstate.TypeTenantCreated {
			t.Fatalf("tenant t%d: audit %+v, want its tenant.created", i, page.Events)
		}
	}
}
