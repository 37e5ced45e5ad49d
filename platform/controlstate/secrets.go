package controlstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Secrets at rest. The control log holds two kinds of secret: the Ed25519
// seeds of token signing keys and the webhook signing secrets. Events
// written by this version carry them only sealed (Sealed) under a
// key-encryption key (KEK) that never enters Kafka; the projection opens
// them when it applies the event and keeps the plaintext in memory only.
// Each ciphertext is bound to its place by additional data (the signing
// key's kid; the webhook's tenant and id), so a ciphertext copied onto
// another secret does not open.
//
// Events of earlier versions carry the secret in plaintext ("seed",
// "secret"): they are still applied, and RewrapSecrets seals them with new
// events (a one-time migration). RewrapSecrets also moves every secret
// sealed under an older KEK to the current one (rotation), after which the
// older KEK is no longer needed.

// Event types that replace the sealed form of a secret without changing
// the secret itself (KEK rotation, migration of plaintext events).
const (
	TypeSigningKeyRewrapped    = "signing_key.rewrapped"
	TypeWebhookSecretRewrapped = "webhook.secret_rewrapped"
)

// Wrapper seals and opens secrets under key-encryption keys. The keyring
// (platform/keyring) serves it from local keys; a KMS could serve it too.
type Wrapper interface {
	// KeyID is the id of the key Wrap seals under now.
	KeyID() string
	// Wrap seals plaintext bound to aad; it returns the sealing key's id
	// and the ciphertext.
	Wrap(ctx context.Context, plaintext, aad []byte) (keyID string, ciphertext []byte, err error)
	// Unwrap opens ciphertext sealed under keyID with aad; it fails when
	// it does not hold that key or the ciphertext does not open.
	Unwrap(ctx context.Context, keyID string, ciphertext, aad []byte) ([]byte, error)
}

// Sealed is a secret as the control log stores it.
type Sealed struct {
	// KEK is the id of the key-encryption key that sealed it (an id only,
	// never the key).
	KEK string `json:"kek"`
	// Ciphertext is base64 (std) of the Wrapper's ciphertext.
	Ciphertext string `json:"ct"`
}

// SigningKeyRewrappedData carries signing key kid's seed sealed anew. The
// seed itself does not change.
type SigningKeyRewrappedData struct {
	KID        string  `json:"kid"`
	SealedSeed *Sealed `json:"sealed_seed"`
}

// WebhookSecretRewrappedData carries webhook id's secret sealed anew. The
// secret itself does not change.
type WebhookSecretRewrappedData struct {
	Tenant       string  `json:"tenant"`
	ID           string  `json:"id"`
	SealedSecret *Sealed `json:"sealed_secret"`
}

// ErrNoWrapper: the log was opened without a Wrapper, so it can neither
// write nor read sealed secrets.
var ErrNoWrapper = errors.New("controlstate: no key-encryption key configured (Config.Wrapper)")

// signingAAD and webhookAAD are the additional data binding a sealed
// secret to its place. NUL separates the parts (ids never contain it).
func signingAAD(kid string) []byte { return []byte("msgmesh.signing_key.seed\x00" + kid) }

func webhookAAD(tenant, id string) []byte {
	return []byte("msgmesh.webhook.secret\x00" + tenant + "\x00" + id)
}

func seal(ctx context.Context, w Wrapper, plaintext, aad []byte) (*Sealed, error) {
	if w == nil {
		return nil, ErrNoWrapper
	}
	kek, ct, err := w.Wrap(ctx, plaintext, aad)
	if err != nil {
		return nil, fmt.Errorf("controlstate: seal: %w", err)
	}
	return &Sealed{KEK: kek, Ciphertext: base64.StdEncoding.EncodeToString(ct)}, nil
}

func open(w Wrapper, s *Sealed, aad []byte) ([]byte, error) {
	if w == nil {
		return nil, ErrNoWrapper
	}
	ct, err := base64.StdEncoding.DecodeString(s.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("ciphertext is not base64: %v", err)
	}
	// A KMS-backed Wrapper bounds its own calls; the projection applies
	// events on one goroutine and has no request context here.
	return w.Unwrap(context.Background(), s.KEK, ct, aad)
}

// SealSigningSeed seals the Ed25519 seed of signing key kid for a
// signing_key.created or signing_key.rewrapped event.
func (l *Log) SealSigningSeed(ctx context.Context, kid string, seed []byte) (*Sealed, error) {
	return seal(ctx, l.cfg.Wrapper, seed, signingAAD(kid))
}

// SealWebhookSecret seals the secret of webhook id of tenant for a
// webhook.created or webhook.secret_rewrapped event.
func (l *Log) SealWebhookSecret(ctx context.Context, tenant, id, secret string) (*Sealed, error) {
	return seal(ctx, l.cfg.Wrapper, []byte(secret), webhookAAD(tenant, id))
}

// UnreadableError reports the secrets a process needs but cannot open:
// their KEK is not configured (or the ciphertext does not open under it).
type UnreadableError struct {
	// KEKs are the ids of the keys the secrets are sealed under.
	KEKs []string
	// Secrets name them ("signing key sk_...", "webhook wh_... of tenant t").
	Secrets []string
	// Err is the first decryption error.
	Err error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("%d secret(s) in the control log cannot be decrypted with the configured key-encryption keys: "+
		"they are sealed under %s; configure that key (secrets.key_file, MSGMESH_SECRETS_KEY or secrets.previous_key_files) "+
		"on this node: %s (%v)", len(e.Secrets), strings.Join(e.KEKs, ", "), strings.Join(e.Secrets, ", "), e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// Unreadable returns an *UnreadableError naming every secret in use (an
// unretired signing key, a webhook) whose plaintext this process could not
// open, or nil when it holds them all.
func (s *State) Unreadable() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var e UnreadableError
	keks := map[string]bool{}
	add := func(what string, sealed *Sealed, err error) {
		e.Secrets = append(e.Secrets, what)
		if sealed != nil && !keks[sealed.KEK] {
			keks[sealed.KEK] = true
			e.KEKs = append(e.KEKs, sealed.KEK)
		}
		if e.Err == nil {
			e.Err = err
		}
	}
	for _, k := range s.signing {
		if !k.Retired && k.unreadable != nil {
			add("signing key "+k.KID, k.Sealed, k.unreadable)
		}
	}
	for _, w := range s.webhooks {
		if w.unreadable != nil {
			add("webhook "+w.ID+" of tenant "+w.Tenant, w.SealedSecret, w.unreadable)
		}
	}
	if len(e.Secrets) == 0 {
		return nil
	}
	sort.Strings(e.Secrets)
	sort.Strings(e.KEKs)
	return &e
}

// openSecretLocked gives the plaintext of a secret event: sealed opened
// with the state's wrapper, or the plaintext of an earlier version's
// event. unreadable is set (and pt nil) when sealed does not open; err is
// an invalid event (both or neither form present).
func (s *State) openSecretLocked(plain string, sealed *Sealed, aad []byte) (pt []byte, unreadable, err error) {
	switch {
	case plain != "" && sealed != nil:
		return nil, nil, fmt.Errorf("%w: a secret is either sealed or (from an earlier version) plaintext, not both", ErrInvalid)
	case plain != "":
		return []byte(plain), nil, nil
	case sealed == nil || sealed.KEK == "" || sealed.Ciphertext == "":
		return nil, nil, fmt.Errorf("%w: the sealed secret is missing", ErrInvalid)
	}
	pt, uerr := open(s.wrapper, sealed, aad)
	if uerr != nil {
		return nil, fmt.Errorf("sealed under %s: %w", sealed.KEK, uerr), nil
	}
	return pt, nil, nil
}

// applySecretLocked applies the two rewrap event types; handled is false
// for any other type. s.mu is held.
//
// A rewrap never changes a secret: one that opens to another plaintext
// than the one held is rejected (ErrConflict). One this process cannot
// open is still recorded as the secret's sealed form and makes the secret
// unreadable here, even if an older form opened: the newest sealed form is
// what every node must be able to open (a node lacking the KEK of a
// rotation refuses to start, or stops, rather than seal new secrets under
// a key the others may no longer hold).
func (s *State) applySecretLocked(ev Event) (handled bool, err error) {
	switch ev.Type {
	case TypeSigningKeyRewrapped:
		var d SigningKeyRewrappedData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		var k *SigningKey
		for _, sk := range s.signing {
			if sk.KID == d.KID {
				k = sk
			}
		}
		if k == nil {
			return true, fmt.Errorf("%w: signing key %q", ErrNotFound, d.KID)
		}
		if d.SealedSeed == nil {
			return true, fmt.Errorf("%w: sealed_seed is missing", ErrInvalid)
		}
		pt, unreadable, err := s.openSecretLocked("", d.SealedSeed, signingAAD(d.KID))
		if err != nil {
			return true, err
		}
		seed := ""
		if unreadable == nil {
			seed = base64.StdEncoding.EncodeToString(pt)
			if k.Seed != "" && k.Seed != seed {
				return true, fmt.Errorf("%w: a rewrap of signing key %q carries another seed", ErrConflict, d.KID)
			}
		}
		k.Sealed, k.unreadable = d.SealedSeed, unreadable
		if seed != "" {
			k.Seed = seed
		}
	case TypeWebhookSecretRewrapped:
		var d WebhookSecretRewrappedData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		w, ok := s.webhooks[d.ID]
		if !ok || w.Tenant != d.Tenant {
			return true, fmt.Errorf("%w: webhook %q", ErrNotFound, d.ID)
		}
		if d.SealedSecret == nil {
			return true, fmt.Errorf("%w: sealed_secret is missing", ErrInvalid)
		}
		pt, unreadable, err := s.openSecretLocked("", d.SealedSecret, webhookAAD(d.Tenant, d.ID))
		if err != nil {
			return true, err
		}
		if unreadable == nil && w.Secret != "" && w.Secret != string(pt) {
			return true, fmt.Errorf("%w: a rewrap of webhook %q carries another secret", ErrConflict, d.ID)
		}
		w.SealedSecret, w.unreadable = d.SealedSecret, unreadable
		if unreadable == nil {
			w.Secret = string(pt)
		}
	default:
		return false, nil
	}
	return true, nil
}

// RewrapSecrets seals every secret in use (unretired signing keys,
// webhooks) that the log holds in plaintext (events of earlier versions)
// or under another KEK than the current one, with one new event each. It
// returns how many it re-wrapped and how many of those were plaintext.
// Safe to run on several nodes at once (a rewrap never changes a secret).
func (l *Log) RewrapSecrets(ctx context.Context) (rewrapped, plaintext int, err error) {
	return rewrapSecrets(ctx, l.cfg.Wrapper, l.state, l.Append)
}

// rewrapSecrets is RewrapSecrets over st, sealing with w and appending with
// appendEvent (Log's and MemoryLog's).
func rewrapSecrets(ctx context.Context, w Wrapper, st *State, appendEvent func(context.Context, string, any) (Event, error)) (rewrapped, plaintext int, err error) {
	if w == nil {
		return 0, 0, ErrNoWrapper
	}
	cur := w.KeyID()
	sealSeed := func(kid string, seed []byte) (*Sealed, error) { return seal(ctx, w, seed, signingAAD(kid)) }
	sealSecret := func(tenant, id, secret string) (*Sealed, error) {
		return seal(ctx, w, []byte(secret), webhookAAD(tenant, id))
	}
	for _, k := range st.SigningKeys() {
		if k.Retired || k.Seed == "" || (k.Sealed != nil && k.Sealed.KEK == cur) {
			continue
		}
		seed, derr := base64.StdEncoding.DecodeString(k.Seed)
		if derr != nil {
			return rewrapped, plaintext, fmt.Errorf("controlstate: signing key %s: bad seed", k.KID)
		}
		sealed, err := sealSeed(k.KID, seed)
		if err != nil {
			return rewrapped, plaintext, err
		}
		if _, err := appendEvent(ctx, TypeSigningKeyRewrapped, SigningKeyRewrappedData{KID: k.KID, SealedSeed: sealed}); err != nil && !errors.Is(err, ErrNotFound) {
			return rewrapped, plaintext, err
		}
		rewrapped++
		if k.Sealed == nil {
			plaintext++
		}
	}
	for _, wh := range st.AllWebhooks() {
		if wh.Secret == "" || (wh.SealedSecret != nil && wh.SealedSecret.KEK == cur) {
			continue
		}
		sealed, err := sealSecret(wh.Tenant, wh.ID, wh.Secret)
		if err != nil {
			return rewrapped, plaintext, err
		}
		// ErrNotFound: deleted meanwhile.
		if _, err := appendEvent(ctx, TypeWebhookSecretRewrapped, WebhookSecretRewrappedData{Tenant: wh.Tenant, ID: wh.ID, SealedSecret: sealed}); err != nil && !errors.Is(err, ErrNotFound) {
			return rewrapped, plaintext, err
		}
		rewrapped++
		if wh.SealedSecret == nil {
			plaintext++
		}
	}
	return rewrapped, plaintext, nil
}
