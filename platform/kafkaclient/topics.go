package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With returns a copy of opts followed by more: the one way a package
// adds its own options to the process's client options without writing
// into the caller's slice.
func With(opts []kgo.Opt, more ...kgo.Opt) []kgo.Opt {
	out := make([]kgo.Opt, 0, len(opts)+len(more))
	return append(append(out, opts...), more...)
}

// TopicSpec says how EnsureTopic makes a topic.
type TopicSpec struct {
	Partitions int32
	// ReplicationFactor; -1 (or 0) uses the broker's default.
	ReplicationFactor int16
	// MinInsyncReplicas is the topic's min.insync.replicas; 0 or -1 leaves
	// the broker's default.
	MinInsyncReplicas int16
	// Configs are further topic configs (retention.ms, cleanup.policy...).
	Configs map[string]string
}

// EnsureTopic makes topic with spec when it is missing; created reports
// whether this call made it. A topic that exists already is left as it
// is (its configs are not compared). Safe to call from any node at once.
func EnsureTopic(ctx context.Context, adm *kadm.Client, topic string, spec TopicSpec) (created bool, err error) {
	configs := make(map[string]*string, len(spec.Configs)+1)
	for k, v := range spec.Configs {
		configs[k] = &v
	}
	if spec.MinInsyncReplicas > 0 {
		isr := strconv.Itoa(int(spec.MinInsyncReplicas))
		configs["min.insync.replicas"] = &isr
	}
	rf := spec.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	resp, err := adm.CreateTopic(ctx, spec.Partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		created = true
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return false, fmt.Errorf("create %s: %w", topic, err)
	}
	// A topic the controller has just made (here or on another node at the
	// same moment) can stay unknown to the broker that leads a partition
	// for a moment; a producer that writes then fails after its few unknown
	// topic retries. Wait until it is ready, bounded so a slow broker delays
	// the start rather than stops it. A topic that existed already is
	// given a shorter wait: it is usually ready, and a partition without a
	// leader (a broker down) must not hold a request for long.
	if !created {
		ctx2, cancel := context.WithTimeout(ctx, existingWait)
		defer cancel()
		if err := WaitTopicReady(ctx2, adm, topic); err != nil && ctx.Err() != nil {
			return false, err
		}
		return false, nil
	}
	return created, WaitTopicReady(ctx, adm, topic)
}

// existingWait bounds EnsureTopic's wait for a topic that existed already.
const existingWait = 2 * time.Second

// ReadyWait bounds how long WaitTopicReady waits for a topic's partitions
// to be served; past it the topic is left to the producers' own retries.
const ReadyWait = 10 * time.Second

// WaitTopicReady waits until every partition of topic has a leader in the
// metadata and that leader answers ListOffsets for it: a broker publishes
// a new topic to its metadata cache before its replica manager has made
// the partition's log, and in between a Produce or ListOffsets there is
// UNKNOWN_TOPIC_OR_PARTITION. Call it after creating a topic by any path
// (EnsureTopic calls it) and before writing to it. It gives up without an
// error after ReadyWait (the producers' retries take over) and returns
// ctx's error if ctx ends first.
func WaitTopicReady(ctx context.Context, adm *kadm.Client, topic string) error {
	ctx2, cancel := context.WithTimeout(ctx, ReadyWait)
	defer cancel()
	backoff := 20 * time.Millisecond
	for !topicReady(ctx2, adm, topic) {
		select {
		case <-ctx2.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("wait for %s: %w", topic, ctx.Err())
			}
			return nil
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
	return nil
}

// topicReady: the metadata lists topic with every partition led, and each
// leader answers ListOffsets for every partition without an error.
func topicReady(ctx context.Context, adm *kadm.Client, topic string) bool {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 || !allLed(td) {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		return false
	}
	n := 0
	ends.Each(func(kadm.ListedOffset) { n++ })
	return n == len(td.Partitions)
}

func allLed(td kadm.TopicDetail) bool {
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}
