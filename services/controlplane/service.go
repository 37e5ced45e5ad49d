// Package controlplane serves tenants, keys and topics: the commands that
// change the control log (platform/controlstate) and the Kafka topics that
// back tenant topics.
package controlplane

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/readmodel"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// DefaultTenant is the tenant the bootstrap admin key belongs to.
const DefaultTenant = "default"

// Config is what the control plane reads of the configuration: its
// sections, validated by config.Config.Validate.
type Config struct {
	// Kafka names and makes topics (topic_prefix, replication, timeouts).
	Kafka config.Kafka
	// Topics bounds partitions and sets retention per plan.
	Topics config.Topics
	// Tokens bounds minted tokens' lifetimes.
	Tokens config.Tokens
	// Publish gives the room length bound and the record size of topics.
	Publish config.Publish
}

// ConfigOf picks the control plane's sections out of c.
func ConfigOf(c config.Config) Config {
	return Config{Kafka: c.Kafka, Topics: c.Topics, Tokens: c.Tokens, Publish: c.Publish}
}

// ControlLog is what the control plane needs of the control log:
// *controlstate.Log in every process, *controlstate.MemoryLog in handler
// tests.
type ControlLog interface {
	// State is the projection commands are checked against.
	State() *controlstate.State
	// Append writes an event and returns its outcome once applied.
	Append(ctx context.Context, typ string, data any) (controlstate.Event, error)
	SealSigningSeed(ctx context.Context, kid string, seed []byte) (*controlstate.Sealed, error)
	SealWebhookSecret(ctx context.Context, tenant, id, secret string) (*controlstate.Sealed, error)
	RewrapSecrets(ctx context.Context) (rewrapped, plaintext int, err error)
}

// Service runs control-plane commands.
type Service struct {
	// Now is the clock for minting tokens; nil = time.Now.
	Now    func() time.Time
	cfg    Config
	log    *slog.Logger
	clog   ControlLog
	adm    *kadm.Client
	mapper names.Mapper
	// webhooks serves /v1/webhooks once SetWebhooks is called (webhooks.go).
	webhooks *webhookstore.Store
	// readModel serves the audit log and webhook attempts (readmodel.go).
	readModel readmodel.Store
}

// New returns a Service appending to clog and managing Kafka topics with adm.
func New(cfg Config, clog ControlLog, adm *kadm.Client, log *slog.Logger) *Service {
	return &Service{cfg: cfg, log: log, clog: clog, adm: adm, mapper: names.Mapper{Prefix: cfg.Kafka.TopicPrefix}}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// State is the control projection.
func (s *Service) State() *controlstate.State { return s.clog.State() }

// Length limits of the free-text fields the control log stores (bytes);
// over them: 400 invalid_request, and nothing is appended.
const (
	// MaxNameBytes caps a key's name.
	MaxNameBytes = 200
	// MaxReasonBytes caps a suspension's or a webhook's disabled reason.
	MaxReasonBytes = webhookstore.MaxReasonBytes
	// MaxURLBytes caps a webhook URL.
	MaxURLBytes = 2048
)

// tooLong is the 400 for a free-text field over its limit.
func tooLong(field string, v string, max int) error {
	if len(v) <= max {
		return nil
	}
	return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s is %d bytes, over the limit of %d", field, len(v), max)
}

// appendErr maps a control-log outcome onto the HTTP error catalog.
func appendErr(err error, notFound httpapi.Code, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controlstate.ErrConflict):
		return httpapi.Errorf(httpapi.CodeConflict, "%s already exists", what)
	case errors.Is(err, controlstate.ErrNotFound):
		return httpapi.Errorf(notFound, "%s not found", what)
	default:
		return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "the control log did not confirm the change in time; it may still apply")
	}
}

// RetentionMs is the retention.ms of a tenant's topics on plan.
func (s *Service) RetentionMs(plan string) int64 {
	if plan == controlstate.PlanPaid {
		return s.cfg.Topics.PaidRetention.Milliseconds()
	}
	return s.cfg.Topics.FreeRetention.Milliseconds()
}

// CreateTenant creates tenant id on plan with a first admin key, returned in
// plaintext (the only time it is shown).
func (s *Service) CreateTenant(ctx context.Context, id, plan string) (controlstate.Tenant, string, error) {
	if err := names.Tenant(id); err != nil {
		return controlstate.Tenant{}, "", httpapi.Errorf(httpapi.CodeValidation, "%v", err)
	}
	if plan == "" {
		plan = controlstate.PlanFree
	}
	if plan != controlstate.PlanFree && plan != controlstate.PlanPaid {
		return controlstate.Tenant{}, "", httpapi.Errorf(httpapi.CodeValidation, "plan %q: want free or paid", plan)
	}
	if _, ok := s.State().Tenant(id); ok {
		return controlstate.Tenant{}, "", httpapi.Errorf(httpapi.CodeConflict, "tenant %q already exists", id)
	}
	key, hash, display, err := auth.NewKey()
	if err != nil {
		return controlstate.Tenant{}, "", err
	}
	_, err = s.clog.Append(ctx, controlstate.TypeTenantCreated, controlstate.TenantCreatedData{
		Tenant: id, Plan: plan,
		AdminKey: &controlstate.KeyCreatedData{Tenant: id, KeyID: auth.NewID("key_"), Name: "admin", Role: capability.RoleAdmin, Hash: hash, Prefix: display},
	})
	if err := appendErr(err, httpapi.CodeTenantNotFound, "tenant "+strconv.Quote(id)); err != nil {
		return controlstate.Tenant{}, "", err
	}
	t, _ := s.State().Tenant(id)
	return t, key, nil
}

// SetStrictTopics turns a tenant's strict topic gate on or off.
func (s *Service) SetStrictTopics(ctx context.Context, tenant string, on bool) (controlstate.Tenant, error) {
	t, ok := s.State().Tenant(tenant)
	if !ok {
		return controlstate.Tenant{}, httpapi.Errorf(httpapi.CodeTenantNotFound, "tenant not found")
	}
	if t.StrictTopics == on {
		return t, nil
	}
	_, err := s.clog.Append(ctx, controlstate.TypeTenantSettingsChanged, controlstate.TenantSettingsChangedData{Tenant: tenant, StrictTopics: &on})
	if err := appendErr(err, httpapi.CodeTenantNotFound, "tenant"); err != nil {
		return controlstate.Tenant{}, err
	}
	t, _ = s.State().Tenant(tenant)
	return t, nil
}

// CreateKey makes a key in tenant and returns it with its plaintext: a
// role key (role set, caps nil) or a capability key (caps set, role "").
// caller is who asks: a capability key may only narrow the caller's
// capabilities (403 otherwise).
func (s *Service) CreateKey(ctx context.Context, caller auth.Principal, name, role string, caps []capability.Capability) (controlstate.Key, string, error) {
	tenant := caller.Tenant
	switch {
	case role != "" && caps != nil:
		return controlstate.Key{}, "", httpapi.Errorf(httpapi.CodeInvalidRequest, "send either \"role\" or \"capabilities\", not both")
	case role == "" && caps == nil:
		return controlstate.Key{}, "", httpapi.Errorf(httpapi.CodeInvalidRequest, "send \"role\" (admin, producer, consumer) or \"capabilities\"")
	case role != "" && !capability.ValidRole(role):
		return controlstate.Key{}, "", httpapi.Errorf(httpapi.CodeValidation, "role %q: want admin, producer or consumer", role)
	case caps != nil:
		if err := capability.Validate(caps); err != nil {
			return controlstate.Key{}, "", httpapi.Errorf(httpapi.CodeValidation, "%v", err)
		}
	}
	want := caps
	if role != "" {
		want = capability.ForRole(role)
	}
	if err := capability.Subset(want, caller.Caps); err != nil {
		return controlstate.Key{}, "", httpapi.Errorf(httpapi.CodeForbidden, "the new key may only narrow your capabilities: %v", err)
	}
	if err := tooLong("name", name, MaxNameBytes); err != nil {
		return controlstate.Key{}, "", err
	}
	key, hash, display, err := auth.NewKey()
	if err != nil {
		return controlstate.Key{}, "", err
	}
	id := auth.NewID("key_")
	_, err = s.clog.Append(ctx, controlstate.TypeKeyCreated, controlstate.KeyCreatedData{Tenant: tenant, KeyID: id, Name: name, Role: role, Hash: hash, Prefix: display, Capabilities: caps})
	if err := appendErr(err, httpapi.CodeTenantNotFound, "key"); err != nil {
		return controlstate.Key{}, "", err
	}
	k, _ := s.State().Key(tenant, id)
	return k, key, nil
}

// RevokeKey revokes key id of tenant on every node.
//
// A caller may only revoke keys it could have created (their capabilities
// within its own): a narrow keys.manage key cannot lock out the admin.
func (s *Service) RevokeKey(ctx context.Context, caller auth.Principal, id string) error {
	tenant := caller.Tenant
	k, ok := s.State().Key(tenant, id)
	if !ok {
		return httpapi.Errorf(httpapi.CodeKeyNotFound, "key %q not found", id)
	}
	target := k.Capabilities
	if k.Role != "" {
		target = capability.ForRole(k.Role)
	}
	if err := capability.Subset(target, caller.Caps); err != nil {
		return httpapi.Errorf(httpapi.CodeForbidden, "this credential may not revoke a key broader than itself: %v", err)
	}
	if k.RevokedAt != nil {
		return nil // already revoked: nothing to append
	}
	_, err := s.clog.Append(ctx, controlstate.TypeKeyRevoked, controlstate.KeyRevokedData{Tenant: tenant, KeyID: id})
	return appendErr(err, httpapi.CodeKeyNotFound, "key "+strconv.Quote(id))
}

// CreateTopic records topic name in tenant and makes its Kafka topic.
// partitions 0 takes the configured default.
func (s *Service) CreateTopic(ctx context.Context, tenant, name string, partitions int) (controlstate.Topic, error) {
	if err := names.Topic(name); err != nil {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeValidation, "%v", err)
	}
	kafkaTopic := s.mapper.KafkaTopic(tenant, name)
	for _, internal := range s.mapper.InternalTopics(tenant) {
		if names.Collide(kafkaTopic, internal) {
			return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeValidation,
				"topic name %q is reserved: its Kafka topic %s would collide with MsgMesh's own %s (Kafka reads \"_\" as \".\")", name, kafkaTopic, internal)
		}
	}
	if partitions == 0 {
		partitions = s.cfg.Topics.DefaultPartitions
	}
	if partitions < 1 || partitions > s.cfg.Topics.MaxPartitions {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeValidation, "partitions %d: want 1..%d", partitions, s.cfg.Topics.MaxPartitions)
	}
	if _, ok := s.State().Topic(tenant, name); ok {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeConflict, "topic %q already exists", name)
	}
	_, err := s.clog.Append(ctx, controlstate.TypeTopicCreated, controlstate.TopicCreatedData{
		Tenant: tenant, Topic: name, Partitions: int32(partitions), KafkaTopic: kafkaTopic,
	})
	if err := appendErr(err, httpapi.CodeTenantNotFound, "topic "+strconv.Quote(name)); err != nil {
		return controlstate.Topic{}, err
	}
	t, ok := s.State().Topic(tenant, name)
	if !ok {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeConflict, "topic %q was deleted meanwhile", name)
	}
	if err := s.EnsureKafkaTopic(ctx, t); err != nil {
		return t, err
	}
	return t, nil
}

// EnsureKafkaTopic makes t's Kafka topic if it is missing, with the
// tenant plan's retention.ms. Safe to call repeatedly and from any node.
func (s *Service) EnsureKafkaTopic(ctx context.Context, t controlstate.Topic) error {
	tenant, _ := s.State().Tenant(t.Tenant)
	retention := strconv.FormatInt(s.RetentionMs(tenant.Plan), 10)
	// The broker's default message.max.bytes (1048588) would refuse a
	// payload of exactly publish.max_message_bytes once key and headers
	// are added: raise it to what the producer may send.
	spec := kafkaclient.TopicSpec{Partitions: int32(t.Partitions), ReplicationFactor: int16(s.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(s.cfg.Kafka.MinInsyncReplicas),
		Configs:           map[string]string{"retention.ms": retention, "max.message.bytes": strconv.Itoa(s.cfg.Publish.RecordBatchBytes())}}
	deadline := time.Now().Add(s.cfg.Kafka.RequestTimeout)
	for {
		_, err := kafkaclient.EnsureTopic(ctx, s.adm, t.KafkaTopic, spec)
		if err == nil {
			return nil
		}
		// A topic deleted moments ago may still be going away.
		if time.Now().After(deadline) || ctx.Err() != nil {
			return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, fmt.Sprintf("could not create Kafka topic %s", t.KafkaTopic))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// DeleteTopic removes topic name from tenant and deletes its Kafka topic
// (and with it every record).
func (s *Service) DeleteTopic(ctx context.Context, tenant, name string) error {
	t, ok := s.State().Topic(tenant, name)
	if !ok {
		return httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q not found", name)
	}
	_, err := s.clog.Append(ctx, controlstate.TypeTopicDeleted, controlstate.TopicDeletedData{Tenant: tenant, Topic: name})
	if err := appendErr(err, httpapi.CodeTopicNotFound, "topic "+strconv.Quote(name)); err != nil {
		return err
	}
	resp, err := s.adm.DeleteTopic(ctx, t.KafkaTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		s.log.Warn("deleting Kafka topic failed; the MsgMesh topic is gone", "kafka_topic", t.KafkaTopic, "err", err)
	}
	return nil
}

// Bootstrap makes sure tenant "default" can be reached: with adminKey set,
// the tenant exists and holds that key; with none and embedded true, a
// first start creates the tenant with a generated key and returns it (the
// caller prints it once). It returns "" when nothing was generated.
func (s *Service) Bootstrap(ctx context.Context, adminKey string, embedded bool) (string, error) {
	st := s.State()
	if err := s.RewrapSecrets(ctx); err != nil {
		return "", err
	}
	if err := s.EnsureSigningKey(ctx); err != nil {
		return "", fmt.Errorf("token signing key: %w", err)
	}
	if adminKey == "" {
		if !embedded {
			return "", nil
		}
		if _, ok := st.Tenant(DefaultTenant); ok {
			return "", nil
		}
		_, key, err := s.CreateTenant(ctx, DefaultTenant, controlstate.PlanFree)
		if err != nil {
			var he *httpapi.Error
			if errors.As(err, &he) && he.Code == httpapi.CodeConflict {
				return "", nil // another node made it first
			}
			return "", err
		}
		return key, nil
	}
	hash := auth.HashKey(adminKey)
	for attempt := 0; attempt < 3; attempt++ {
		if k, ok := st.KeyByHash(hash); ok {
			if k.Tenant != DefaultTenant {
				return "", fmt.Errorf("bootstrap admin key belongs to tenant %q, not %q", k.Tenant, DefaultTenant)
			}
			if k.RevokedAt != nil {
				s.log.Warn("the bootstrap admin key was revoked; it stays revoked")
			}
			return "", nil
		}
		kd := controlstate.KeyCreatedData{Tenant: DefaultTenant, KeyID: auth.NewID("key_"), Name: "bootstrap", Role: capability.RoleAdmin, Hash: hash, Prefix: adminKey[:9]}
		var err error
		if _, ok := st.Tenant(DefaultTenant); !ok {
			_, err = s.clog.Append(ctx, controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: DefaultTenant, Plan: controlstate.PlanFree, AdminKey: &kd})
		} else {
			_, err = s.clog.Append(ctx, controlstate.TypeKeyCreated, kd)
		}
		if err == nil {
			return "", nil
		}
		if !errors.Is(err, controlstate.ErrConflict) {
			return "", fmt.Errorf("bootstrap: %w", err)
		}
		// Lost a race with another node: look again.
	}
	return "", errors.New("bootstrap: could not register the admin key")
}

// RewrapSecrets seals the secrets of the control log under the current
// key-encryption key: those an earlier version wrote in plaintext (a
// one-time migration) and those sealed under a previous key (rotation).
func (s *Service) RewrapSecrets(ctx context.Context) error {
	n, plain, err := s.clog.RewrapSecrets(ctx)
	if err != nil {
		return fmt.Errorf("re-wrapping the control log's secrets: %w", err)
	}
	if n > 0 {
		s.log.Info("re-wrapped the control log's secrets under the current key-encryption key", "secrets", n, "were_plaintext", plain)
	}
	if plain > 0 {
		var exposed []string
		for _, k := range s.State().SigningKeys() {
			if k.Exposed && !k.Retired {
				exposed = append(exposed, k.KID)
			}
		}
		s.log.Warn("migrated secrets an earlier version wrote to the control topic in plaintext; the old records stay in the topic's history: "+
			"rotate the signing key (POST /v1/signing-keys), retire the exposed ones (GET /v1/signing-keys shows \"exposed\": true) after tokens.max_ttl, "+
			"and re-create the webhooks registered before the upgrade (see README, Secrets at rest)", "plaintext_secrets", plain, "exposed_signing_keys", strings.Join(exposed, ","))
	}
	return nil
}

// MintToken mints a token for caller (a key, not a token) with caps (nil
// = the caller's own) for ttl (0 = tokens.default_ttl; over
// tokens.max_ttl is 422). Overreach is 403 naming what was refused.
func (s *Service) MintToken(caller auth.Principal, ttl time.Duration, caps []capability.Capability, now time.Time) (string, time.Time, error) {
	if caller.TokenID != "" {
		return "", time.Time{}, httpapi.Errorf(httpapi.CodeForbidden, "a token cannot mint tokens; mint from a key on your backend")
	}
	if ttl == 0 {
		ttl = s.cfg.Tokens.DefaultTTL
	}
	if ttl < time.Second || ttl > s.cfg.Tokens.MaxTTL {
		return "", time.Time{}, httpapi.Errorf(httpapi.CodeValidation, "ttl_seconds must be between 1 and %d", int(s.cfg.Tokens.MaxTTL.Seconds()))
	}
	if caps == nil {
		caps = caller.Caps
	} else if err := capability.Validate(caps); err != nil {
		return "", time.Time{}, httpapi.Errorf(httpapi.CodeValidation, "%v", err)
	}
	if err := capability.Subset(caps, caller.Caps); err != nil {
		return "", time.Time{}, httpapi.Errorf(httpapi.CodeForbidden, "a token may only narrow the key's capabilities: %v", err)
	}
	tok, exp, err := auth.MintToken(s.State(), now, caller.Tenant, caller.KeyID, caps, ttl)
	if errors.Is(err, auth.ErrNoSigningKey) {
		return "", time.Time{}, httpapi.Wrap(httpapi.CodeNotReady, err, "no token signing key yet; retry shortly")
	}
	return tok, exp, err
}

// EnsureSigningKey makes a token signing key when none is current.
func (s *Service) EnsureSigningKey(ctx context.Context) error {
	if _, ok := s.State().CurrentSigningKey(); ok {
		return nil
	}
	_, err := s.RotateSigningKey(ctx)
	return err
}

// RotateSigningKey adds a new signing key, which signs from now on; older
// keys keep verifying until retired.
func (s *Service) RotateSigningKey(ctx context.Context) (string, error) {
	kid, seed, err := auth.NewSigningKey()
	if err != nil {
		return "", err
	}
	raw, err := base64.StdEncoding.DecodeString(seed)
	if err != nil {
		return "", err
	}
	// Only the sealed seed enters Kafka (secrets at rest).
	sealed, err := s.clog.SealSigningSeed(ctx, kid, raw)
	if err != nil {
		return "", err
	}
	_, err = s.clog.Append(ctx, controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: kid, SealedSeed: sealed})
	return kid, appendErr(err, httpapi.CodeNotFound, "signing key")
}

// RetireSigningKey stops kid verifying: its tokens are refused at once.
//
// The last unretired key cannot be retired (409): rotate first.
func (s *Service) RetireSigningKey(ctx context.Context, kid string) error {
	k, ok := s.State().SigningKey(kid)
	if !ok {
		return httpapi.Errorf(httpapi.CodeNotFound, "signing key %q not found", kid)
	}
	if k.Retired {
		return nil // already retired: nothing to append
	}
	if cur, ok := s.State().CurrentSigningKey(); ok && cur.KID == kid {
		live := 0
		for _, k := range s.State().SigningKeys() {
			if !k.Retired {
				live++
			}
		}
		if live == 1 {
			return httpapi.Errorf(httpapi.CodeConflict, "%s is the only signing key: rotate first (POST /v1/signing-keys), then retire it", kid)
		}
	}
	_, err := s.clog.Append(ctx, controlstate.TypeSigningKeyRetired, controlstate.SigningKeyRetiredData{KID: kid})
	return appendErr(err, httpapi.CodeNotFound, "signing key "+strconv.Quote(kid))
}

// SetSuspended suspends (with a reason) or reinstates a tenant.
//
// An unknown tenant is 404 and a reason over MaxReasonBytes 400, with
// nothing appended; a tenant already in the asked state (and reason) is
// answered as it is, appending nothing.
func (s *Service) SetSuspended(ctx context.Context, tenant string, suspended bool, reason string) (controlstate.Tenant, error) {
	if err := tooLong("reason", reason, MaxReasonBytes); err != nil {
		return controlstate.Tenant{}, err
	}
	cur, ok := s.State().Tenant(tenant)
	if !ok {
		return controlstate.Tenant{}, httpapi.Errorf(httpapi.CodeTenantNotFound, "tenant %q not found", tenant)
	}
	if cur.Suspended == suspended && (!suspended || cur.SuspendedReason == reason) {
		return cur, nil
	}
	var err error
	if suspended {
		_, err = s.clog.Append(ctx, controlstate.TypeTenantSuspended, controlstate.TenantSuspendedData{Tenant: tenant, Reason: reason})
	} else {
		_, err = s.clog.Append(ctx, controlstate.TypeTenantReinstated, controlstate.TenantReinstatedData{Tenant: tenant})
	}
	if err := appendErr(err, httpapi.CodeTenantNotFound, "tenant "+strconv.Quote(tenant)); err != nil {
		return controlstate.Tenant{}, err
	}
	t, _ := s.State().Tenant(tenant)
	return t, nil
}

// SetPlan changes a tenant's plan and then the retention.ms of every one
// of its Kafka topics to the new plan's.
func (s *Service) SetPlan(ctx context.Context, tenant, plan string) (controlstate.Tenant, error) {
	if plan != controlstate.PlanFree && plan != controlstate.PlanPaid {
		return controlstate.Tenant{}, httpapi.Errorf(httpapi.CodeValidation, "plan %q: want free or paid", plan)
	}
	cur, ok := s.State().Tenant(tenant)
	if !ok {
		return controlstate.Tenant{}, httpapi.Errorf(httpapi.CodeTenantNotFound, "tenant %q not found", tenant)
	}
	if cur.Plan != plan {
		_, err := s.clog.Append(ctx, controlstate.TypeTenantSettingsChanged, controlstate.TenantSettingsChangedData{Tenant: tenant, Plan: &plan})
		if err := appendErr(err, httpapi.CodeTenantNotFound, "tenant "+strconv.Quote(tenant)); err != nil {
			return controlstate.Tenant{}, err
		}
	}
	if err := s.applyRetention(ctx, tenant); err != nil {
		return controlstate.Tenant{}, err
	}
	t, _ := s.State().Tenant(tenant)
	return t, nil
}

// applyRetention sets retention.ms of tenant's Kafka topics from its plan.
func (s *Service) applyRetention(ctx context.Context, tenant string) error {
	t, _ := s.State().Tenant(tenant)
	ms := strconv.FormatInt(s.RetentionMs(t.Plan), 10)
	var topics []string
	for _, tp := range s.State().Topics(tenant) {
		topics = append(topics, tp.KafkaTopic)
	}
	if len(topics) == 0 {
		return nil
	}
	resp, err := s.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &ms}}, topics...)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "the plan changed but updating the topics' retention.ms failed; retry the change")
	}
	return nil
}
