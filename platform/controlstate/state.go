package controlstate

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/msgmesh/msgmesh/platform/capability"
)

// Errors an applied event can be rejected with; match with errors.Is.
var (
	// ErrConflict: the thing already exists (an earlier event won).
	ErrConflict = errors.New("conflict")
	// ErrNotFound: the event refers to a tenant, key or topic that does
	// not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the event cannot be decoded or has an unknown type.
	ErrInvalid = errors.New("invalid event")
)

// Plans.
const (
	PlanFree = "free"
	PlanPaid = "paid"
)

// Tenant is a tenant as the projection holds it.
type Tenant struct {
	ID           string    `json:"id"`
	Plan         string    `json:"plan"`
	StrictTopics bool      `json:"strict_topics"`
	CreatedAt    time.Time `json:"created_at"`
	// Suspended is set while the tenant is suspended for billing, with the
	// operator's reason.
	Suspended       bool   `json:"suspended"`
	SuspendedReason string `json:"suspended_reason,omitempty"`
}

// SigningKey is a token signing key.
type SigningKey struct {
	KID string
	// Seed is the base64 (std) Ed25519 seed in plaintext (in memory only;
	// "" when it could not be decrypted, see State.Unreadable).
	Seed      string
	CreatedAt time.Time
	Retired   bool
	// Sealed is the seed's sealed form in the log (nil: plaintext from an
	// earlier version).
	Sealed *Sealed
	// Exposed: the seed was written to the log in plaintext by an earlier
	// version, so the topic's history still shows it. Rotate and retire
	// such a key.
	Exposed    bool
	unreadable error
}

// Key is an API key's metadata (never the key itself).
type Key struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Prefix string `json:"prefix"`
	Hash   string `json:"-"`
	// Capabilities of a capability key (Role is then "").
	Capabilities []capability.Capability `json:"capabilities,omitempty"`
	CreatedAt    time.Time               `json:"created_at"`
	RevokedAt    *time.Time              `json:"revoked_at,omitempty"`
}

// Topic is a tenant topic.
type Topic struct {
	Tenant     string    `json:"-"`
	Name       string    `json:"name"`
	KafkaTopic string    `json:"kafka_topic"`
	Partitions int32     `json:"partitions"`
	CreatedAt  time.Time `json:"created_at"`
	// Epoch is the id of the event that created the topic: it changes when
	// a topic is deleted and made again.
	Epoch string `json:"epoch"`
	// Recreated is true when a topic of this name was deleted before this
	// one was made: its offsets restart at 0, so a message cursor that
	// carries no epoch may be of the earlier topic.
	Recreated bool `json:"-"`
}

type topicKey struct{ tenant, name string }

// State is the in-memory projection of the control log. Reads are safe
// from any goroutine; Apply is called by one goroutine in log order.
type State struct {
	mu      sync.RWMutex
	tenants map[string]*Tenant
	keys    map[string]*Key // by key id
	byHash  map[string]*Key
	topics  map[topicKey]*Topic
	// deleted holds the names of topics deleted once (Topic.Recreated).
	deleted map[topicKey]bool
	signing []*SigningKey // in creation order
	// webhooks by id (webhooks.go).
	webhooks map[string]*Webhook
	// wrapper opens sealed secrets (secrets.go); nil opens none.
	wrapper Wrapper
	// ended holds the panel sessions logged out, until they expire
	// (sessions.go).
	ended       map[string]time.Time
	endedPruned time.Time
}

// NewState returns an empty projection that opens no sealed secret (they
// are unreadable; plaintext ones of earlier versions are read).
func NewState() *State { return NewStateWith(nil) }

// NewStateWith returns an empty projection that opens sealed secrets with w.
func NewStateWith(w Wrapper) *State {
	return &State{
		wrapper: w,
		tenants: map[string]*Tenant{},
		keys:    map[string]*Key{},
		byHash:  map[string]*Key{},
		topics:  map[topicKey]*Topic{},
		deleted: map[topicKey]bool{},
	}
}

// Apply decides ev against the state and applies it if accepted. The
// returned error (wrapping ErrConflict, ErrNotFound or ErrInvalid) is the
// event's outcome; a rejected event changes nothing.
func (s *State) Apply(ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case TypeTenantCreated:
		var d TenantCreatedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		if _, ok := s.tenants[d.Tenant]; ok {
			return fmt.Errorf("%w: tenant %q already exists", ErrConflict, d.Tenant)
		}
		if d.AdminKey != nil {
			if err := s.checkKeyLocked(*d.AdminKey); err != nil {
				return err
			}
		}
		s.tenants[d.Tenant] = &Tenant{ID: d.Tenant, Plan: d.Plan, StrictTopics: true, CreatedAt: ev.At}
		if d.AdminKey != nil {
			s.addKeyLocked(*d.AdminKey, ev.At)
		}
	case TypeTenantSettingsChanged:
		var d TenantSettingsChangedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		t, ok := s.tenants[d.Tenant]
		if !ok {
			return fmt.Errorf("%w: tenant %q", ErrNotFound, d.Tenant)
		}
		if d.Plan != nil {
			t.Plan = *d.Plan
		}
		if d.StrictTopics != nil {
			t.StrictTopics = *d.StrictTopics
		}
	case TypeKeyCreated:
		var d KeyCreatedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		if _, ok := s.tenants[d.Tenant]; !ok {
			return fmt.Errorf("%w: tenant %q", ErrNotFound, d.Tenant)
		}
		if err := s.checkKeyLocked(d); err != nil {
			return err
		}
		s.addKeyLocked(d, ev.At)
	case TypeKeyRevoked:
		var d KeyRevokedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		k, ok := s.keys[d.KeyID]
		if !ok || k.Tenant != d.Tenant {
			return fmt.Errorf("%w: key %q", ErrNotFound, d.KeyID)
		}
		if k.RevokedAt == nil {
			at := ev.At
			k.RevokedAt = &at
		}
	case TypeTenantSuspended, TypeTenantReinstated:
		var d TenantSuspendedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		t, ok := s.tenants[d.Tenant]
		if !ok {
			return fmt.Errorf("%w: tenant %q", ErrNotFound, d.Tenant)
		}
		t.Suspended = ev.Type == TypeTenantSuspended
		t.SuspendedReason = ""
		if t.Suspended {
			t.SuspendedReason = d.Reason
		}
	case TypeSigningKeyCreated:
		var d SigningKeyCreatedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		for _, k := range s.signing {
			if k.KID == d.KID {
				return fmt.Errorf("%w: signing key %q", ErrConflict, d.KID)
			}
		}
		pt, unreadable, err := s.openSecretLocked(d.Seed, d.SealedSeed, signingAAD(d.KID))
		if err != nil {
			return err
		}
		sk := &SigningKey{KID: d.KID, CreatedAt: ev.At, Sealed: d.SealedSeed, Exposed: d.Seed != "", unreadable: unreadable}
		if unreadable == nil {
			sk.Seed = string(pt)
			if d.SealedSeed != nil {
				sk.Seed = base64.StdEncoding.EncodeToString(pt)
			}
		}
		s.signing = append(s.signing, sk)
	case TypeSigningKeyRetired:
		var d SigningKeyRetiredData
		if err := decode(ev, &d); err != nil {
			return err
		}
		found := false
		for _, k := range s.signing {
			if k.KID == d.KID {
				k.Retired, found = true, true
			}
		}
		if !found {
			return fmt.Errorf("%w: signing key %q", ErrNotFound, d.KID)
		}
	case TypeTopicCreated:
		var d TopicCreatedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		if _, ok := s.tenants[d.Tenant]; !ok {
			return fmt.Errorf("%w: tenant %q", ErrNotFound, d.Tenant)
		}
		k := topicKey{d.Tenant, d.Topic}
		if _, ok := s.topics[k]; ok {
			return fmt.Errorf("%w: topic %q already exists", ErrConflict, d.Topic)
		}
		s.topics[k] = &Topic{Tenant: d.Tenant, Name: d.Topic, KafkaTopic: d.KafkaTopic,
			Partitions: d.Partitions, CreatedAt: ev.At, Epoch: ev.ID, Recreated: s.deleted[k]}
	case TypeTopicDeleted:
		var d TopicDeletedData
		if err := decode(ev, &d); err != nil {
			return err
		}
		k := topicKey{d.Tenant, d.Topic}
		if _, ok := s.topics[k]; !ok {
			return fmt.Errorf("%w: topic %q", ErrNotFound, d.Topic)
		}
		delete(s.topics, k)
		s.deleted[k] = true
	default:
		if handled, err := s.applyWebhookLocked(ev); handled {
			return err
		}
		if handled, err := s.applySecretLocked(ev); handled {
			return err
		}
		if handled, err := s.applySessionLocked(ev); handled {
			return err
		}
		return fmt.Errorf("%w: unknown type %q", ErrInvalid, ev.Type)
	}
	return nil
}

func decode(ev Event, v any) error {
	if ev.V != SchemaVersion {
		return fmt.Errorf("%w: schema version %d", ErrInvalid, ev.V)
	}
	if err := json.Unmarshal(ev.Data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, ev.Type, err)
	}
	return nil
}

func (s *State) checkKeyLocked(d KeyCreatedData) error {
	if _, ok := s.keys[d.KeyID]; ok {
		return fmt.Errorf("%w: key id %q already exists", ErrConflict, d.KeyID)
	}
	if _, ok := s.byHash[d.Hash]; ok || d.Hash == "" {
		return fmt.Errorf("%w: key already registered", ErrConflict)
	}
	return nil
}

func (s *State) addKeyLocked(d KeyCreatedData, at time.Time) {
	k := &Key{ID: d.KeyID, Tenant: d.Tenant, Name: d.Name, Role: d.Role, Prefix: d.Prefix, Hash: d.Hash, Capabilities: d.Capabilities, CreatedAt: at}
	s.keys[k.ID] = k
	s.byHash[k.Hash] = k
}

// Tenant returns a copy of the tenant, or false.
func (s *State) Tenant(id string) (Tenant, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tenants[id]
	if !ok {
		return Tenant{}, false
	}
	return *t, true
}

// KeyByHash returns a copy of the key whose SHA-256 hex is hash, revoked
// or not, or false.
func (s *State) KeyByHash(hash string) (Key, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.byHash[hash]
	if !ok {
		return Key{}, false
	}
	return *k, true
}

// Key returns a copy of key id of tenant, or false.
func (s *State) Key(tenant, id string) (Key, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[id]
	if !ok || k.Tenant != tenant {
		return Key{}, false
	}
	return *k, true
}

// Keys lists a tenant's keys (revoked ones included), oldest first.
func (s *State) Keys(tenant string) []Key {
	s.mu.RLock()
	out := []Key{}
	for _, k := range s.keys {
		if k.Tenant == tenant {
			out = append(out, *k)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreatedAt.Before(out[j].CreatedAt) || (out[i].CreatedAt.Equal(out[j].CreatedAt) && out[i].ID < out[j].ID)
	})
	return out
}

// Topic returns a copy of a tenant's topic, or false.
func (s *State) Topic(tenant, name string) (Topic, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.topics[topicKey{tenant, name}]
	if !ok {
		return Topic{}, false
	}
	return *t, true
}

// Topics lists a tenant's topics by name.
func (s *State) Topics(tenant string) []Topic {
	s.mu.RLock()
	out := []Topic{}
	for k, t := range s.topics {
		if k.tenant == tenant {
			out = append(out, *t)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AllTopics lists every tenant's topics.
func (s *State) AllTopics() []Topic {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, *t)
	}
	return out
}

// SigningKey returns the signing key kid, or false.
func (s *State) SigningKey(kid string) (SigningKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range s.signing {
		if k.KID == kid {
			return *k, true
		}
	}
	return SigningKey{}, false
}

// CurrentSigningKey returns the newest unretired signing key, or false.
func (s *State) CurrentSigningKey() (SigningKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := len(s.signing) - 1; i >= 0; i-- {
		if !s.signing[i].Retired {
			return *s.signing[i], true
		}
	}
	return SigningKey{}, false
}

// SigningKeys lists every signing key, oldest first.
func (s *State) SigningKeys() []SigningKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]SigningKey, len(s.signing))
	for i, k := range s.signing {
		out[i] = *k
	}
	return out
}

// Tenants lists every tenant by id.
func (s *State) Tenants() []Tenant {
	s.mu.RLock()
	out := make([]Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, *t)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
