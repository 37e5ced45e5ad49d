package readmodel

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/msgmesh/msgmesh/platform/controlstate"
)

// auditOf is the audit event of a control event, or nil when it has none
// for a tenant (signing keys are the operator's). Details are picked field
// by field: key hashes, sealed and plaintext secrets never appear, and
// URLs lose their userinfo, query and fragment.
func auditOf(ev controlstate.Event, pos Position) *AuditEvent {
	var d map[string]json.RawMessage
	_ = json.Unmarshal(ev.Data, &d)
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(d[k], &s)
		return s
	}
	tenant := str("tenant")
	details := map[string]any{}
	keep := func(keys ...string) {
		for _, k := range keys {
			if raw, ok := d[k]; ok {
				var v any
				if json.Unmarshal(raw, &v) == nil {
					details[k] = v
				}
			}
		}
	}
	keepURL := func() {
		if u := str("url"); u != "" {
			details["url"] = redactURL(u)
		}
	}
	var summary string
	switch ev.Type {
	case controlstate.TypeTenantCreated:
		keep("plan")
		summary = fmt.Sprintf("tenant %s created (plan %s)", tenant, str("plan"))
		var k struct {
			AdminKey *controlstate.KeyCreatedData `json:"admin_key"`
		}
		if json.Unmarshal(ev.Data, &k) == nil && k.AdminKey != nil {
			details["admin_key"] = map[string]any{"key_id": k.AdminKey.KeyID, "name": k.AdminKey.Name, "role": k.AdminKey.Role, "prefix": k.AdminKey.Prefix}
			summary += ", with admin key " + k.AdminKey.KeyID
		}
	case controlstate.TypeTenantSettingsChanged:
		keep("plan", "strict_topics")
		summary = "tenant settings changed"
	case controlstate.TypeTenantSuspended:
		keep("reason")
		summary = "tenant suspended: " + str("reason")
	case controlstate.TypeTenantReinstated:
		summary = "tenant reinstated"
	case controlstate.TypeKeyCreated:
		keep("key_id", "name", "role", "prefix", "capabilities")
		role := str("role")
		if role == "" {
			role = "capabilities"
		}
		summary = fmt.Sprintf("key %s %q created (%s)", str("key_id"), str("name"), role)
	case controlstate.TypeKeyRevoked:
		keep("key_id")
		summary = "key " + str("key_id") + " revoked"
	case controlstate.TypeTopicCreated:
		keep("topic", "partitions", "kafka_topic")
		summary = "topic " + str("topic") + " created"
	case controlstate.TypeTopicDeleted:
		keep("topic")
		summary = "topic " + str("topic") + " deleted"
	case controlstate.TypeWebhookCreated:
		keep("id", "topic", "room")
		keepURL()
		summary = fmt.Sprintf("webhook %s created on topic %s", str("id"), str("topic"))
	case controlstate.TypeWebhookEnabled:
		keep("id")
		keepURL()
		summary = "webhook " + str("id") + " enabled"
	case controlstate.TypeWebhookDisabled:
		keep("id", "reason")
		keepURL()
		summary = "webhook " + str("id") + " disabled"
		if r := str("reason"); r != "" {
			summary += ": " + r
		}
	case controlstate.TypeWebhookDeleted:
		keep("id")
		summary = "webhook " + str("id") + " deleted"
	case controlstate.TypeWebhookSecretRewrapped:
		keep("id")
		summary = "webhook " + str("id") + " secret re-encrypted under the current key-encryption key"
	case controlstate.TypePanelSessionEnded:
		// The session id stays out: the audit says who logged out when.
		summary = "panel session ended (logged out)"
	default:
		// Process-wide events (signing keys) and types of later versions:
		// nothing a tenant reads.
		if tenant == "" {
			return nil
		}
		summary = ev.Type
	}
	if tenant == "" {
		return nil
	}
	actor := ev.Actor
	if actor == "" {
		actor = "unknown"
	}
	return &AuditEvent{ID: idOf(pos), Time: ev.At.UTC().Truncate(time.Microsecond), Type: ev.Type, Actor: actor, Summary: summary,
		Details: details, Tenant: tenant, Pos: pos}
}

// redactURL is raw without userinfo, query and fragment (they may carry
// credentials).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#@"); i >= 0 {
			return raw[:i]
		}
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
