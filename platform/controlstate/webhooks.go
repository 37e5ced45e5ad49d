package controlstate

import (
	"fmt"
	"sort"
	"time"
)

// Webhook event types (spec section 2, "Webhook"). A webhook is created
// enabled; the dispatcher disables it when the SSRF guard stops a delivery
// (webhook.disabled with the reason), a user re-enables it (optionally with
// a corrected URL) and deletes it. Deleting is final: registering the same
// URL again makes a new webhook with a new id and a new consumer group.
const (
	TypeWebhookCreated  = "webhook.created"
	TypeWebhookEnabled  = "webhook.enabled"
	TypeWebhookDisabled = "webhook.disabled"
	TypeWebhookDeleted  = "webhook.deleted"
)

// WebhookCreatedData registers a webhook on a tenant topic.
type WebhookCreatedData struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	Topic  string `json:"topic"`
	// KafkaTopic is the tenant topic's Kafka topic at registration.
	KafkaTopic string `json:"kafka_topic"`
	URL        string `json:"url"`
	// Room, when set, delivers only that room's messages.
	Room string `json:"room,omitempty"`
	// SealedSecret is the Standard Webhooks signing secret ("whsec_" +
	// base64 (std) of 32 random bytes) sealed under the key-encryption key
	// (secrets.go), bound to Tenant and ID.
	SealedSecret *Sealed `json:"sealed_secret,omitempty"`
	// Secret is the secret in plaintext: written only by versions before
	// secrets at rest, read for their events (and re-wrapped at start),
	// never written any more.
	Secret string `json:"secret,omitempty"`
	// Group is the webhook's Kafka consumer group.
	Group string `json:"group"`
	// StartOffsets are the end offsets of KafkaTopic when the webhook was
	// registered, by partition: delivery starts there (messages published
	// before registration are not delivered). The group's offsets are
	// committed to them before this event is appended.
	StartOffsets map[int32]int64 `json:"start_offsets,omitempty"`
}

// WebhookEnabledData (re-)enables a webhook, optionally changing its URL.
type WebhookEnabledData struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	// URL, when set, replaces the webhook's URL.
	URL string `json:"url,omitempty"`
}

// WebhookDisabledData disables a webhook: delivery stops where it is (the
// group does not advance) until it is enabled again.
type WebhookDisabledData struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	// Reason says why (for example the SSRF guard's refusal).
	Reason string `json:"reason"`
	// URL, when set, replaces the webhook's URL.
	URL string `json:"url,omitempty"`
	// Offsets are the webhook group's committed offsets on KafkaTopic
	// when it was disabled, by partition: where delivery resumes if Kafka
	// expired the empty group's offsets (offsets.retention.minutes)
	// before it is enabled again.
	Offsets map[int32]int64 `json:"offsets,omitempty"`
}

// WebhookDeletedData deletes a webhook.
type WebhookDeletedData struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
}

// Webhook is a webhook as the projection holds it.
type Webhook struct {
	Tenant     string `json:"-"`
	ID         string `json:"id"`
	Topic      string `json:"topic"`
	KafkaTopic string `json:"kafka_topic"`
	URL        string `json:"url"`
	Room       string `json:"room,omitempty"`
	// Secret is the plaintext secret (in memory only; "" when it could not
	// be decrypted, see State.Unreadable).
	Secret string `json:"-"`
	// SealedSecret is the secret's sealed form in the log (nil: plaintext
	// from an earlier version).
	SealedSecret *Sealed `json:"-"`
	unreadable   error
	Group        string          `json:"group"`
	StartOffsets map[int32]int64 `json:"-"`
	// StopOffsets are the group's offsets recorded by the last
	// webhook.disabled event (kept after enabling): the resume position
	// when Kafka has expired the group's own offsets.
	StopOffsets    map[int32]int64 `json:"-"`
	Enabled        bool            `json:"enabled"`
	DisabledReason string          `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	// UpdatedAt is when it was last enabled or disabled.
	UpdatedAt time.Time `json:"updated_at"`
}

// applyWebhookLocked applies the webhook event types; handled is false
// for any other type. s.mu is held.
func (s *State) applyWebhookLocked(ev Event) (handled bool, err error) {
	if s.webhooks == nil {
		s.webhooks = map[string]*Webhook{}
	}
	switch ev.Type {
	case TypeWebhookCreated:
		var d WebhookCreatedData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		if _, ok := s.tenants[d.Tenant]; !ok {
			return true, fmt.Errorf("%w: tenant %q", ErrNotFound, d.Tenant)
		}
		if _, ok := s.topics[topicKey{d.Tenant, d.Topic}]; !ok {
			return true, fmt.Errorf("%w: topic %q", ErrNotFound, d.Topic)
		}
		if _, ok := s.webhooks[d.ID]; ok {
			return true, fmt.Errorf("%w: webhook %q already exists", ErrConflict, d.ID)
		}
		pt, unreadable, err := s.openSecretLocked(d.Secret, d.SealedSecret, webhookAAD(d.Tenant, d.ID))
		if err != nil {
			return true, err
		}
		s.webhooks[d.ID] = &Webhook{Tenant: d.Tenant, ID: d.ID, Topic: d.Topic, KafkaTopic: d.KafkaTopic, URL: d.URL,
			Room: d.Room, Secret: string(pt), SealedSecret: d.SealedSecret, unreadable: unreadable, Group: d.Group,
			StartOffsets: d.StartOffsets, Enabled: true, CreatedAt: ev.At, UpdatedAt: ev.At}
	case TypeWebhookEnabled:
		var d WebhookEnabledData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		w, ok := s.webhooks[d.ID]
		if !ok || w.Tenant != d.Tenant {
			return true, fmt.Errorf("%w: webhook %q", ErrNotFound, d.ID)
		}
		w.Enabled, w.DisabledReason, w.UpdatedAt = true, "", ev.At
		if d.URL != "" {
			w.URL = d.URL
		}
	case TypeWebhookDisabled:
		var d WebhookDisabledData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		w, ok := s.webhooks[d.ID]
		if !ok || w.Tenant != d.Tenant {
			return true, fmt.Errorf("%w: webhook %q", ErrNotFound, d.ID)
		}
		w.Enabled, w.DisabledReason, w.UpdatedAt = false, d.Reason, ev.At
		if len(d.Offsets) > 0 {
			w.StopOffsets = d.Offsets
		}
		if d.URL != "" {
			w.URL = d.URL
		}
	case TypeWebhookDeleted:
		var d WebhookDeletedData
		if err := decode(ev, &d); err != nil {
			return true, err
		}
		w, ok := s.webhooks[d.ID]
		if !ok || w.Tenant != d.Tenant {
			return true, fmt.Errorf("%w: webhook %q", ErrNotFound, d.ID)
		}
		delete(s.webhooks, d.ID)
	default:
		return false, nil
	}
	return true, nil
}

// Webhook returns a copy of webhook id of tenant, or false.
func (s *State) Webhook(tenant, id string) (Webhook, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.webhooks[id]
	if !ok || w.Tenant != tenant {
		return Webhook{}, false
	}
	return *w, true
}

// Webhooks lists a tenant's webhooks, oldest first.
func (s *State) Webhooks(tenant string) []Webhook {
	s.mu.RLock()
	out := []Webhook{}
	for _, w := range s.webhooks {
		if w.Tenant == tenant {
			out = append(out, *w)
		}
	}
	s.mu.RUnlock()
	sortWebhooks(out)
	return out
}

// AllWebhooks lists every tenant's webhooks, oldest first.
func (s *State) AllWebhooks() []Webhook {
	s.mu.RLock()
	out := make([]Webhook, 0, len(s.webhooks))
	for _, w := range s.webhooks {
		out = append(out, *w)
	}
	s.mu.RUnlock()
	sortWebhooks(out)
	return out
}

func sortWebhooks(ws []Webhook) {
	sort.Slice(ws, func(i, j int) bool {
		return ws[i].CreatedAt.Before(ws[j].CreatedAt) || (ws[i].CreatedAt.Equal(ws[j].CreatedAt) && ws[i].ID < ws[j].ID)
	})
}
