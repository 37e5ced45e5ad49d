package controlstate

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// A poison record on the control topic reaches every node: whatever its
// bytes, applying it never panics, is accepted or refused with
// ErrInvalid, ErrConflict or ErrNotFound, and leaves the projection
// serving: a tenant is still created after it, and every read works.
func FuzzApplyControlRecord(f *testing.F) {
	kr, _ := testKeyring(f)
	ctx := context.Background()
	seedLog := NewMemoryLog(kr)
	sealed, err := seedLog.SealWebhookSecret(ctx, "t", "wh_1", "whsec_x")
	if err != nil {
		f.Fatal(err)
	}
	for _, ev := range []Event{
		event(TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanFree, AdminKey: &KeyCreatedData{Tenant: "t", KeyID: "k", Role: "admin", Hash: "h"}}),
		event(TypeTenantSettingsChanged, TenantSettingsChangedData{Tenant: "t"}),
		event(TypeKeyCreated, KeyCreatedData{Tenant: "t", KeyID: "k2", Role: "producer", Hash: "h2"}),
		event(TypeKeyRevoked, KeyRevokedData{Tenant: "t", KeyID: "k"}),
		event(TypeTopicCreated, TopicCreatedData{Tenant: "t", Topic: "x", Partitions: 3, KafkaTopic: "p.t.x"}),
		event(TypeTopicDeleted, TopicDeletedData{Tenant: "t", Topic: "x"}),
		event(TypeTenantSuspended, TenantSuspendedData{Tenant: "t", Reason: "billing"}),
		event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk", Seed: "AAAA"}),
		event(TypeWebhookCreated, WebhookCreatedData{Tenant: "t", ID: "wh_1", Topic: "x", URL: "https://e.example", SealedSecret: sealed}),
	} {
		raw, _ := json.Marshal(ev)
		f.Add(raw)
	}
	f.Add([]byte(`{"v":1,"type":"topic.created","data":null}`))
	f.Add([]byte(`{"v":99,"type":"tenant.created","data":{"tenant":"t"}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, value []byte) {
		m := NewMemoryLog(kr)
		if _, err := m.Append(ctx, TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanFree}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Append(ctx, TypeTopicCreated, TopicCreatedData{Tenant: "t", Topic: "x", Partitions: 1, KafkaTopic: "p.t.x"}); err != nil {
			t.Fatal(err)
		}
		if err := m.ApplyRecord(value); err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("outcome %v wraps none of ErrInvalid, ErrConflict, ErrNotFound", err)
		}
		st := m.State()
		for _, tn := range st.Tenants() {
			st.Keys(tn.ID)
			st.Topics(tn.ID)
			st.Webhooks(tn.ID)
		}
		st.AllTopics()
		st.AllWebhooks()
		st.SigningKeys()
		st.CurrentSigningKey()
		if _, err := m.Append(ctx, TypeTenantCreated, TenantCreatedData{Tenant: "after-the-poison", Plan: PlanPaid}); err != nil {
			t.Fatalf("the log stopped after %q: %v", value, err)
		}
		if _, ok := st.Tenant("after-the-poison"); !ok {
			t.Fatal("the event after the poison record was not applied")
		}
	})
}
