package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgmesh/msgmesh/platform/names"
)

// Names maps webhooks onto Kafka names under one prefix (platform/names
// defines them). "wh" and "dlq" are reserved namespaces of tenant topic
// names (platform/names.Topic refuses "wh", "dlq", "wh_…" and "dlq_…"), so
// none of these collides with a tenant topic (not even as Kafka compares
// them, "." read as "_") or a poll group:
//
//	webhook group   <prefix>.<tenant>.wh.<id>               msgmesh.acme.wh.wh_1a2b
//	retry topic     <prefix>.<tenant>.wh.retry (and its group of the same name)
//	dead letters    <prefix>.<tenant>.dlq                   retention.ms 30 days
//	attempts        <prefix>.<tenant>.wh.attempts           compacted; POSTs in flight
//	attempt log     <prefix>.<tenant>.wh.attempt_log        every attempt (platform/readmodel)
//	inspection      <prefix>.<tenant>.wh.<id>.dlq-inspect   (group; one-shot reads)
//	replay          <prefix>.<tenant>.wh.<id>.dlq-replay    (group; replay watermark)
type Names struct{ Prefix string }

// Group is the webhook's consumer group on its tenant topic.
func (n Names) Group(tenant, id string) string { return n.mapper().WebhookGroup(tenant, id) }

// RetryTopic holds a tenant's pending retries; its consumer group has the
// same name.
func (n Names) RetryTopic(tenant string) string { return n.mapper().RetryTopic(tenant) }

// DLQTopic holds a tenant's dead letters.
func (n Names) DLQTopic(tenant string) string { return n.mapper().DLQTopic(tenant) }

// AttemptsTopic counts the tenant's POSTs in flight (see attemptLog).
func (n Names) AttemptsTopic(tenant string) string { return n.mapper().AttemptsTopic(tenant) }

// AttemptLogTopic holds every attempt of the tenant's webhooks (see
// attemptEvents), read by the read model.
func (n Names) AttemptLogTopic(tenant string) string { return n.mapper().AttemptLogTopic(tenant) }

func (n Names) mapper() names.Mapper { return names.Mapper{Prefix: n.Prefix} }

// InspectGroup tracks what one-shot inspection of a webhook's dead letters
// has already shown.
func (n Names) InspectGroup(tenant, id string) string { return n.Group(tenant, id) + ".dlq-inspect" }

// ReplayGroup tracks how far "replay all" of a webhook's dead letters got.
func (n Names) ReplayGroup(tenant, id string) string { return n.Group(tenant, id) + ".dlq-replay" }

// TopicSpec says how EnsureTopics makes a tenant's retry and dead-letter
// topics.
type TopicSpec struct {
	RetryPartitions   int32
	DLQPartitions     int32
	ReplicationFactor int16
	// MinInsyncReplicas is their min.insync.replicas; 0 or -1 = broker default.
	MinInsyncReplicas int16
	// Retention is the retention.ms of both (the dead letters' 30 days,
	// whatever the tenant's plan).
	Retention time.Duration
	// MaxMessageBytes is their max.message.bytes: a dead letter is the
	// largest message plus its metadata headers.
	MaxMessageBytes int
}

// EnsureTopics makes tenant's retry, dead-letter, attempts and attempt log
// topics when missing.
// Safe to call repeatedly and from any node.
func EnsureTopics(ctx context.Context, adm *kadm.Client, n Names, tenant string, spec TopicSpec) error {
	_, err := ensureTopics(ctx, adm, n, tenant, spec)
	return err
}

// ensureTopics is EnsureTopics, also returning the topics it created.
func ensureTopics(ctx context.Context, adm *kadm.Client, n Names, tenant string, spec TopicSpec) (created []string, err error) {
	retention := strconv.FormatInt(spec.Retention.Milliseconds(), 10)
	maxMessage := strconv.Itoa(spec.MaxMessageBytes)
	cfg := map[string]*string{"retention.ms": &retention, "max.message.bytes": &maxMessage}
	var isr *string
	if spec.MinInsyncReplicas > 0 {
		v := strconv.Itoa(int(spec.MinInsyncReplicas))
		isr, cfg["min.insync.replicas"] = &v, &v
	}
	for topic, parts := range map[string]int32{n.RetryTopic(tenant): spec.RetryPartitions, n.DLQTopic(tenant): spec.DLQPartitions} {
		resp, err := adm.CreateTopic(ctx, parts, spec.ReplicationFactor, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			created = append(created, topic)
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return created, fmt.Errorf("create %s: %w", topic, err)
		}
	}
	// One key per message in flight, deleted when it is done with.
	compact, segment, tombstones := "compact", strconv.FormatInt(time.Hour.Milliseconds(), 10), strconv.FormatInt(time.Hour.Milliseconds(), 10)
	topic := n.AttemptsTopic(tenant)
	attemptsCfg := map[string]*string{"cleanup.policy": &compact, "segment.ms": &segment, "delete.retention.ms": &tombstones}
	if isr != nil {
		attemptsCfg["min.insync.replicas"] = isr
	}
	resp, err := adm.CreateTopic(ctx, 1, spec.ReplicationFactor, attemptsCfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err == nil {
		created = append(created, topic)
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return created, fmt.Errorf("create %s: %w", topic, err)
	}
	return ensureAttemptLog(ctx, adm, n, tenant, spec, created)
}
