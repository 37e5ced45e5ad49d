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
// groups (webhooks, dead letters).
var Reserved = map[string]bool{"wh": true, "dlq": true}

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
	if Reserved[name] {
		return fmt.Errorf("topic name %q is reserved", name)
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
