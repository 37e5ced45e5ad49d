package webhookstore

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
)

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

// EnsureTopics makes tenant's retry, dead-letter, attempts and attempt
// log topics (names.Mapper names them) when missing, and returns those it
// created. Safe to call repeatedly and from any node.
func EnsureTopics(ctx context.Context, adm *kadm.Client, n names.Mapper, tenant string, spec TopicSpec) (created []string, err error) {
	retention := strconv.FormatInt(spec.Retention.Milliseconds(), 10)
	hour := strconv.FormatInt(time.Hour.Milliseconds(), 10)
	topics := []struct {
		name string
		spec kafkaclient.TopicSpec
	}{
		{n.RetryTopic(tenant), kafkaclient.TopicSpec{Partitions: spec.RetryPartitions,
			Configs: map[string]string{"retention.ms": retention, "max.message.bytes": strconv.Itoa(spec.MaxMessageBytes)}}},
		{n.DLQTopic(tenant), kafkaclient.TopicSpec{Partitions: spec.DLQPartitions,
			Configs: map[string]string{"retention.ms": retention, "max.message.bytes": strconv.Itoa(spec.MaxMessageBytes)}}},
		// One key per message in flight, deleted when it is done with.
		{n.AttemptsTopic(tenant), kafkaclient.TopicSpec{Partitions: 1,
			Configs: map[string]string{"cleanup.policy": "compact", "segment.ms": hour, "delete.retention.ms": hour}}},
		// Every attempt, kept as long as the dead letters; keyed by
		// webhook id, so one webhook's attempts keep their order.
		{n.AttemptLogTopic(tenant), kafkaclient.TopicSpec{Partitions: spec.DLQPartitions,
			Configs: map[string]string{"retention.ms": retention}}},
	}
	for _, t := range topics {
		t.spec.ReplicationFactor, t.spec.MinInsyncReplicas = spec.ReplicationFactor, spec.MinInsyncReplicas
		made, err := kafkaclient.EnsureTopic(ctx, adm, t.name, t.spec)
		if made {
			created = append(created, t.name)
		}
		if err != nil {
			return created, err
		}
	}
	return created, nil
}
