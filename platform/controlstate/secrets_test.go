package controlstate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/keyring"
)

func testKeyring(t testing.TB) (*keyring.Keyring, []byte) {
	t.Helper()
	k, _, err := keyring.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keyring.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr, k
}

func sealWith(t *testing.T, w Wrapper, pt, aad []byte) *Sealed {
	t.Helper()
	s, err := seal(context.Background(), w, pt, aad)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func applyAll(t *testing.T, s *State, evs ...Event) []error {
	t.Helper()
	var out []error
	for _, ev := range evs {
		out = append(out, s.Apply(ev))
	}
	return out
}

func event(typ string, d any) Event {
	raw, _ := json.Marshal(d)
	return Event{V: SchemaVersion, Type: typ, ID: newID(), At: time.Now(), Data: raw}
}

func TestSealedSecretsOpenOnlyInTheirPlace(t *testing.T) {
	kr, _ := testKeyring(t)
	seed := []byte("0123456789abcdef0123456789abcdef")
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(seed)
	base := []Event{
		event(TypeTenantCreated, TenantCreatedData{Tenant: "t", Plan: PlanFree}),
		event(TypeTopicCreated, TopicCreatedData{Tenant: "t", Topic: "x", Partitions: 1, KafkaTopic: "k.t.x"}),
		event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_1", SealedSeed: sealWith(t, kr, seed, signingAAD("sk_1"))}),
		event(TypeWebhookCreated, WebhookCreatedData{Tenant: "t", ID: "wh_1", Topic: "x", URL: "https://e.example", SealedSecret: sealWith(t, kr, []byte(whsec), webhookAAD("t", "wh_1"))}),
	}
	s := NewStateWith(kr)
	for i, err := range applyAll(t, s, base...) {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if k, _ := s.SigningKey("sk_1"); k.Seed != base64.StdEncoding.EncodeToString(seed) || k.Exposed {
		t.Fatalf("seed not opened: %+v", k)
	}
	if w, _ := s.Webhook("t", "wh_1"); w.Secret != whsec {
		t.Fatalf("webhook secret not opened")
	}
	if err := s.Unreadable(); err != nil {
		t.Fatal(err)
	}
	// A ciphertext copied onto another kid does not open there.
	moved := event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_2", SealedSeed: sealWith(t, kr, seed, signingAAD("sk_1"))})
	if err := s.Apply(moved); err != nil {
		t.Fatal(err)
	}
	err := s.Unreadable()
	var ue *UnreadableError
	if !errors.As(err, &ue) || len(ue.Secrets) != 1 || ue.Secrets[0] != "signing key sk_2" || !errors.Is(err, keyring.ErrDecrypt) {
		t.Fatalf("moved ciphertext: %v", err)
	}
	// Retired, it is no longer needed.
	if err := s.Apply(event(TypeSigningKeyRetired, SigningKeyRetiredData{KID: "sk_2"})); err != nil {
		t.Fatal(err)
	}
	if err := s.Unreadable(); err != nil {
		t.Fatalf("a retired key's seed is not needed: %v", err)
	}

	// Another process without the key: every secret in use is named with
	// the KEK it needs.
	other, _ := testKeyring(t)
	s2 := NewStateWith(other)
	applyAll(t, s2, base...)
	err = s2.Unreadable()
	if !errors.As(err, &ue) || len(ue.Secrets) != 2 || len(ue.KEKs) != 1 || ue.KEKs[0] != kr.KeyID() ||
		!strings.Contains(err.Error(), kr.KeyID()) || !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("without the key: %v", err)
	}
	// A rewrap may not change the secret.
	other2 := sealWith(t, kr, []byte("ffffffffffffffffffffffffffffffff"), signingAAD("sk_1"))
	if err := s.Apply(event(TypeSigningKeyRewrapped, SigningKeyRewrappedData{KID: "sk_1", SealedSeed: other2})); !errors.Is(err, ErrConflict) {
		t.Fatalf("rewrap with another seed: %v", err)
	}
	// Both forms, or neither, is invalid.
	if err := s.Apply(event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_3", Seed: "x", SealedSeed: sealWith(t, kr, seed, signingAAD("sk_3"))})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("both forms: %v", err)
	}
	if err := s.Apply(event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_3"})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("neither form: %v", err)
	}
}

// Plaintext events of earlier versions are read, marked exposed, and a
// rewrap under a new key replaces them; a later replay needs only that key.
func TestPlaintextThenRewrap(t *testing.T) {
	kr, _ := testKeyring(t)
	seed := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	legacy := event(TypeSigningKeyCreated, SigningKeyCreatedData{KID: "sk_old", Seed: seed})
	s := NewStateWith(kr)
	if err := s.Apply(legacy); err != nil {
		t.Fatal(err)
	}
	k, _ := s.SigningKey("sk_old")
	if k.Seed != seed || !k.Exposed || k.Sealed != nil {
		t.Fatalf("legacy key: %+v", k)
	}
	raw, _ := base64.StdEncoding.DecodeString(seed)
	rw := event(TypeSigningKeyRewrapped, SigningKeyRewrappedData{KID: "sk_old", SealedSeed: sealWith(t, kr, raw, signingAAD("sk_old"))})
	if err := s.Apply(rw); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.SigningKey("sk_old"); k.Seed != seed || k.Sealed == nil || k.Sealed.KEK != kr.KeyID() {
		t.Fatalf("after rewrap: %+v", k)
	}
	if err := s.Apply(event(TypeSigningKeyRewrapped, SigningKeyRewrappedData{KID: "sk_none", SealedSeed: rw2(t, kr)})); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rewrap of an unknown kid: %v", err)
	}
}

func rw2(t *testing.T, kr *keyring.Keyring) *Sealed {
	return sealWith(t, kr, []byte("0123456789abcdef0123456789abcdef"), signingAAD("sk_none"))
}
