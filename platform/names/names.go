// Package names holds MsgMesh's naming rules and the mapping of MsgMesh
// names onto Kafka names.
//
//	tenant   [a-z0-9][a-z0-9-]{0,62}            e.g. acme
//	topic    [A-Za-z0-9_-]{1,100}, not reserved   e.g. orders
//	group    [A-Za-z0-9_-]{1,100}                e.g. billing
//	consumer [A-Za-z0-9_-]{1,100}                e.g. worker-1
//
// No dots, slashes or "..": the dot is Kafka's separator below, so every
// mapping is unambiguous and reversible.
//
//	Kafka topic     <prefix>.<tenant>.<topic>          msgmesh.acme.orders
//	consumer group  <prefix>.<tenant>.<topic>.<group>  msgmesh.acme.orders.billing
//	control topic   <prefix>.__control
//	usage topic     <prefix>.__usage
//
// MsgMesh's own per-tenant names live in the reserved namespaces "wh" and
// "dlq" (see Reserved):
//
//	webhook group   <prefix>.<tenant>.wh.<webhook id>
//	retry topic     <prefix>.<tenant>.wh.retry (and its group)
//	attempts topic  <prefix>.<tenant>.wh.attempts
//	attempt log     <prefix>.<tenant>.wh.attempt_log
//	dead letters    <prefix>.<tenant>.dlq
//	inspection      <prefix>.<tenant>.wh.<webhook id>.dlq-inspect (group; one-shot reads)
//	replay          <prefix>.<tenant>.wh.<webhook id>.dlq-replay  (group; replay watermark)
//
// Mapper is the one table of every Kafka topic and group name MsgMesh
// makes; no other package composes them.
//
// Kafka treats "." and "_" alike when it compares topic names (both become
// "_" in metric names, so it refuses a topic whose name differs from an
// existing one only there: Collide). A tenant topic "wh_retry" would thus
// take the place of the retry topic "<prefix>.<tenant>.wh.retry". Topic
// therefore refuses a reserved name and every name in a reserved namespace
// ("wh_…", "dlq_…"), so no tenant topic can collide with an internal topic,
// and no poll group (under a tenant topic) with an internal group.
package names

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	tenantRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
)

// Reserved topic names, kept for MsgMesh's own per-tenant Kafka topics and
// groups (webhooks, dead letters). Each is a namespace: the name itself and
// every name that starts with it and "_" are refused (see Topic).
var Reserved = map[string]bool{"wh": true, "dlq": true}

// reservedNamespace returns the reserved namespace name belongs to, or "".
func reservedNamespace(name string) string {
	ns, _, _ := strings.Cut(name, "_")
	if Reserved[ns] {
		return ns
	}
	return ""
}

// Collide reports whether Kafka considers topic names a and b the same:
// equal once every "." is read as "_" (Kafka refuses to create the second
// with INVALID_TOPIC_EXCEPTION, "collides with existing topic").
func Collide(a, b string) bool {
	return strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// Tenant checks a tenant id.
func Tenant(id string) error {
	if !tenantRE.MatchString(id) {
		return fmt.Errorf("tenant id %q: want 1-63 of [a-z0-9-], starting with a letter or digit", id)
	}
	return nil
}

// Topic checks a topic name.
func Topic(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("topic name %q: want 1-100 of [A-Za-z0-9_-] (no dots, slashes or spaces)", name)
	}
	if ns := reservedNamespace(name); ns != "" {
		if ns == name {
			return fmt.Errorf("topic name %q is reserved for MsgMesh's own topics", name)
		}
		return fmt.Errorf("topic name %q is reserved for MsgMesh's own topics: names starting with %q collide in Kafka (which reads \"_\" as \".\") with internal ones such as %s.<tenant>.%s", name, ns+"_", "<prefix>", strings.Replace(name, "_", ".", 1))
	}
	return nil
}

// Group checks a consumer group or consumer name; what says which.
func Group(what, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%s %q: want 1-100 of [A-Za-z0-9_-]", what, name)
	}
	return nil
}

// Mapper turns MsgMesh names into Kafka names under one prefix.
type Mapper struct{ Prefix string }

// KafkaTopic is <prefix>.<tenant>.<topic>.
func (m Mapper) KafkaTopic(tenant, topic string) string {
	return m.Prefix + "." + tenant + "." + topic
}

// Group is the Kafka consumer group of a poll group:
// <prefix>.<tenant>.<topic>.<group>.
func (m Mapper) Group(tenant, topic, group string) string {
	return m.Prefix + "." + tenant + "." + topic + "." + group
}

// ControlTopic is the single-partition control log, <prefix>.__control.
// No tenant id can start with "_", so it never collides with tenant topics.
func (m Mapper) ControlTopic() string { return m.Prefix + ".__control" }

// UsageTopic holds per-process message counts for monthly quotas,
// <prefix>.__usage.
func (m Mapper) UsageTopic() string { return m.Prefix + ".__usage" }

// WebhookGroup is a webhook's consumer group on its tenant topic,
// <prefix>.<tenant>.wh.<id>.
func (m Mapper) WebhookGroup(tenant, id string) string {
	return m.Prefix + "." + tenant + ".wh." + id
}

// InspectGroup tracks what one-shot inspection of a webhook's dead letters
// has already shown, <prefix>.<tenant>.wh.<id>.dlq-inspect.
func (m Mapper) InspectGroup(tenant, id string) string {
	return m.WebhookGroup(tenant, id) + ".dlq-inspect"
}

// ReplayGroup tracks how far "replay all" of a webhook's dead letters got,
// <prefix>.<tenant>.wh.<id>.dlq-replay.
func (m Mapper) ReplayGroup(tenant, id string) string {
	return m.WebhookGroup(tenant, id) + ".dlq-replay"
}

// RetryTopic holds a tenant's pending webhook retries, <prefix>.<tenant>.wh.retry;
// its consumer group has the same name.
func (m Mapper) RetryTopic(tenant string) string { return m.Prefix + "." + tenant + ".wh.retry" }

// DLQTopic holds a tenant's webhook dead letters, <prefix>.<tenant>.dlq.
func (m Mapper) DLQTopic(tenant string) string { return m.Prefix + "." + tenant + ".dlq" }

// AttemptsTopic counts a tenant's webhook POSTs in flight (compacted),
// <prefix>.<tenant>.wh.attempts.
func (m Mapper) AttemptsTopic(tenant string) string { return m.Prefix + "." + tenant + ".wh.attempts" }

// AttemptLogTopic holds every webhook delivery attempt of a tenant (the
// read model's source), <prefix>.<tenant>.wh.attempt_log. Unlike
// AttemptsTopic it is not compacted: one record per attempt.
func (m Mapper) AttemptLogTopic(tenant string) string {
	return m.Prefix + "." + tenant + ".wh.attempt_log"
}

// SplitAttemptLogTopic returns the tenant of an AttemptLogTopic name; ok
// is false for other names.
func (m Mapper) SplitAttemptLogTopic(kafkaTopic string) (tenant string, ok bool) {
	rest, found := strings.CutPrefix(kafkaTopic, m.Prefix+".")
	if !found {
		return "", false
	}
	tenant, found = strings.CutSuffix(rest, ".wh.attempt_log")
	if !found || Tenant(tenant) != nil {
		return "", false
	}
	return tenant, true
}

// InternalTopics lists every Kafka topic MsgMesh keeps for itself that a
// tenant topic of tenant could meet: the tenant's own ones and the
// process-wide ones.
func (m Mapper) InternalTopics(tenant string) []string {
	return []string{m.RetryTopic(tenant), m.DLQTopic(tenant), m.AttemptsTopic(tenant), m.AttemptLogTopic(tenant), m.ControlTopic(), m.UsageTopic()}
}

// SplitKafkaTopic reverses KafkaTopic; ok is false for other names.
func (m Mapper) SplitKafkaTopic(kafkaTopic string) (tenant, topic string, ok bool) {
	rest, found := strings.CutPrefix(kafkaTopic, m.Prefix+".")
	if !found {
		return "", "", false
	}
	tenant, topic, found = strings.Cut(rest, ".")
	if !found || Tenant(tenant) != nil || Topic(topic) != nil {
		return "", "", false
	}
	return tenant, topic, true
}
