package webhookstore

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/platform/names"
)

// memLog is an in-memory control log: Append applies at once.
type memLog struct {
	mu       sync.Mutex
	state    *controlstate.State
	appended []controlstate.Event
}

func (m *memLog) State() *controlstate.State { return m.state }

func (m *memLog) Append(_ context.Context, typ string, data any) (controlstate.Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return controlstate.Event{}, err
	}
	ev := controlstate.Event{V: controlstate.SchemaVersion, Type: typ, ID: typ, At: time.Now(), Data: raw}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appended = append(m.appended, ev)
	return ev, m.state.Apply(ev)
}

func openStore(t *testing.T, wh config.Webhooks) (*Store, *memLog) {
	t.Helper()
	brokers, _ := kafkatest.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	log := &memLog{state: controlstate.NewState()}
	st, err := Open(Config{Webhooks: wh, Names: names.Mapper{Prefix: "mm"}, ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)},
		Admin: kadm.NewClient(cl), Log: log, ReplicationFactor: -1, MinInsyncReplicas: -1, RequestTimeout: 5 * time.Second, MaxRecordBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, log
}

// Disable appends webhook.disabled once, with the reason capped; a
// webhook that is gone or already disabled appends nothing.
func TestDisable(t *testing.T) {
	st, log := openStore(t, config.Defaults().Webhooks)
	ctx := context.Background()
	for _, ev := range []struct {
		typ  string
		data any
	}{
		{controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "t", Plan: controlstate.PlanFree}},
		{controlstate.TypeTopicCreated, controlstate.TopicCreatedData{Tenant: "t", Topic: "x", Partitions: 1, KafkaTopic: "mm.t.x"}},
		{controlstate.TypeWebhookCreated, controlstate.WebhookCreatedData{Tenant: "t", ID: "wh_1", Topic: "x", KafkaTopic: "mm.t.x",
			URL: "https://e.example/h", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", Group: "mm.t.wh.wh_1"}},
	} {
		if _, err := log.Append(ctx, ev.typ, ev.data); err != nil {
			t.Fatalf("%s: %v", ev.typ, err)
		}
	}
	before := len(log.appended)
	if err := st.Disable(ctx, "t", "wh_1", strings.Repeat("r", 2*MaxReasonBytes)); err != nil {
		t.Fatal(err)
	}
	w, ok := log.State().Webhook("t", "wh_1")
	if !ok || w.Enabled || len(w.DisabledReason) != MaxReasonBytes {
		t.Fatalf("after Disable: found %v, enabled %v, reason of %d bytes (want %d)", ok, w.Enabled, len(w.DisabledReason), MaxReasonBytes)
	}
	if err := st.Disable(ctx, "t", "wh_1", "again"); err != nil {
		t.Fatal(err)
	}
	if err := st.Disable(ctx, "t", "wh_gone", "x"); err != nil {
		t.Fatal(err)
	}
	if got := len(log.appended) - before; got != 1 {
		t.Fatalf("%d events appended, want 1 (disabled once; nothing for an already disabled or unknown webhook)", got)
	}
}

func TestOpenRefusesBadCAFile(t *testing.T) {
	wh := config.Defaults().Webhooks
	wh.UnsafeCAFile = filepath.Join(t.TempDir(), "missing.pem")
	_, err := Open(Config{Webhooks: wh, Log: &memLog{state: controlstate.NewState()}, Admin: kadm.NewClient(nil)})
	if err == nil || !strings.Contains(err.Error(), "webhooks.unsafe_ca_file") {
		t.Fatalf("Open = %v, want the unsafe_ca_file error", err)
	}
}
