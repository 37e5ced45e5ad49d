// Package controlstate is MsgMesh's event-sourced control plane.
//
// Tenants, keys and topics are changed only by appending an Event to one
// single-partition Kafka topic (the control log, kept forever). Every
// process reads that log from the start into an in-memory State and then
// follows it live. A command is decided when its event is applied: the
// first event wins, a later conflicting one is rejected in log order on
// every replica alike, and the process that appended it answers only after
// applying it (reads follow writes). The JSON schema of events is
// proto/control/v1/events.schema.json.
package controlstate

import (
	"context"
	"encoding/json"
	"time"

	"github.com/msgmesh/msgmesh/platform/capability"
)

// SchemaVersion is the version written in every event's "v".
const SchemaVersion = 1

// Event types.
const (
	TypeTenantCreated         = "tenant.created"
	TypeTenantSettingsChanged = "tenant.settings_changed"
	TypeKeyCreated            = "key.created"
	TypeKeyRevoked            = "key.revoked"
	TypeTopicCreated          = "topic.created"
	TypeTopicDeleted          = "topic.deleted"
	TypeTenantSuspended       = "tenant.suspended"
	TypeTenantReinstated      = "tenant.reinstated"
	TypeSigningKeyCreated     = "signing_key.created"
	TypeSigningKeyRetired     = "signing_key.retired"
)

// Event is one record of the control log (its value, JSON).
type Event struct {
	// V is the schema version (SchemaVersion).
	V int `json:"v"`
	// Type is one of the Type* constants.
	Type string `json:"type"`
	// ID is unique per event (random); the appender waits for it.
	ID string `json:"id"`
	// At is when the appender made the event (UTC).
	At time.Time `json:"at"`
	// Data is the type's payload (one of the *Data structs).
	Data json.RawMessage `json:"data"`
	// Actor says who caused the event (the audit log shows it): "key:<key
	// id>" or "token:<jti> (key <key id>)" for a tenant credential,
	// "operator" for the operator key, "system" for MsgMesh itself
	// (bootstrap, the dispatcher). Empty in events of earlier versions.
	Actor string `json:"actor,omitempty"`
}

type actorKey struct{}

// WithActor returns ctx carrying actor, which Log.Append writes into the
// events appended with it (Event.Actor).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom is the actor ctx carries (WithActor), or "system".
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "system"
}

// TenantCreatedData creates a tenant, optionally with its first admin key.
type TenantCreatedData struct {
	Tenant   string          `json:"tenant"`
	Plan     string          `json:"plan"`
	AdminKey *KeyCreatedData `json:"admin_key,omitempty"`
}

// TenantSettingsChangedData changes settings; nil fields are unchanged.
type TenantSettingsChangedData struct {
	Tenant       string  `json:"tenant"`
	Plan         *string `json:"plan,omitempty"`
	StrictTopics *bool   `json:"strict_topics,omitempty"`
}

// KeyCreatedData adds an API key. Only the SHA-256 of the key is stored.
type KeyCreatedData struct {
	Tenant string `json:"tenant"`
	KeyID  string `json:"key_id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	// Hash is the lowercase hex SHA-256 of the whole key.
	Hash string `json:"hash"`
	// Prefix is the key's first characters, shown in listings to tell keys
	// apart (not enough to use it).
	Prefix string `json:"prefix"`
	// Capabilities, when set, replace the role's capability set (a
	// capability key); Role is then "".
	Capabilities []capability.Capability `json:"capabilities,omitempty"`
}

// TenantSuspendedData suspends a tenant (billing): its credentials get 403
// tenant_suspended until it is reinstated.
type TenantSuspendedData struct {
	Tenant string `json:"tenant"`
	Reason string `json:"reason"`
}

// TenantReinstatedData lifts a suspension (for example after a top-up).
type TenantReinstatedData struct {
	Tenant string `json:"tenant"`
}

// SigningKeyCreatedData adds an Ed25519 token signing key. The newest
// unretired key signs; every unretired key verifies.
type SigningKeyCreatedData struct {
	KID string `json:"kid"`
	// SealedSeed is the 32-byte Ed25519 private key seed sealed under the
	// key-encryption key (secrets.go), bound to KID.
	SealedSeed *Sealed `json:"sealed_seed,omitempty"`
	// Seed is the base64 (std) seed in plaintext: written only by
	// versions before secrets at rest, read for their events (and
	// re-wrapped at start), never written any more.
	Seed string `json:"seed,omitempty"`
}

// SigningKeyRetiredData retires a signing key: tokens it signed stop
// verifying at once.
type SigningKeyRetiredData struct {
	KID string `json:"kid"`
}

// KeyRevokedData revokes a key.
type KeyRevokedData struct {
	Tenant string `json:"tenant"`
	KeyID  string `json:"key_id"`
}

// TopicCreatedData creates a tenant topic.
type TopicCreatedData struct {
	Tenant     string `json:"tenant"`
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
	KafkaTopic string `json:"kafka_topic"`
}

// TopicDeletedData deletes a tenant topic.
type TopicDeletedData struct {
	Tenant string `json:"tenant"`
	Topic  string `json:"topic"`
}
