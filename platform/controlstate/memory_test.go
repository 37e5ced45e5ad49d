package controlstate

import (
	"context"
	"errors"
	"testing"
)

// A MemoryLog decides commands as Log does (first event wins, outcomes
// returned to the appender and shown to hooks), skips a poison record with
// ErrInvalid and carries on, and seals and re-wraps secrets.
func TestMemoryLogDecidesInOrder(t *testing.T) {
	kr, _ := testKeyring(t)
	m := NewMemoryLog(kr)
	var seen []error
	m.OnApply(func(_ Event, outcome error) { seen = append(seen, outcome) })
	ctx := WithActor(context.Background(), "operator")
	ev, err := m.Append(ctx, TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanFree})
	if err != nil || ev.Actor != "operator" {
		t.Fatalf("first tenant.created: %v (actor %q)", err, ev.Actor)
	}
	if _, err := m.Append(ctx, TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanPaid}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second tenant.created: %v, want ErrConflict", err)
	}
	if err := m.ApplyRecord([]byte(`{"v":1,"type":`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("poison record: %v, want ErrInvalid", err)
	}
	if _, err := m.Append(ctx, TypeKeyRevoked, KeyRevokedData{Tenant: "t", KeyID: "key_nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking an unknown key: %v, want ErrNotFound", err)
	}
	if tn, ok := m.State().Tenant("t"); !ok || tn.Plan != PlanFree {
		t.Fatalf("tenant t: %+v %v, want plan free (first event wins)", tn, ok)
	}
	if len(seen) != 4 || seen[0] != nil || !errors.Is(seen[2], ErrInvalid) {
		t.Fatalf("hooks saw %v", seen)
	}
	if n := len(m.Records()); n != 4 {
		t.Fatalf("%d records, want 4", n)
	}

	seed := []byte("0123456789abcdef0123456789abcdef")
	sealed, err := m.SealSigningSeed(ctx, "sk_1", seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(ctx, TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_1", SealedSeed: sealed}); err != nil {
		t.Fatal(err)
	}
	if k, ok := m.State().CurrentSigningKey(); !ok || k.KID != "sk_1" || k.Seed == "" {
		t.Fatalf("signing key: %+v %v", k, ok)
	}
	if n, plain, err := m.RewrapSecrets(ctx); err != nil || n != 0 || plain != 0 {
		t.Fatalf("RewrapSecrets with everything under the current KEK: %d %d %v", n, plain, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Append(cancelled, TypeTenantCreated, TenantCreatedData{Tenant: "u", Plan: PlanFree}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with ctx done: %v", err)
	}
}
