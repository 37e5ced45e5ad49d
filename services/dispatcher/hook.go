package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
)

// errRefused ends a webhook's member after the guard stopped a delivery
// and the webhook was disabled.
var errRefused = errors.New("delivery refused by the SSRF guard; webhook disabled")

// partitionStep is how each partition's run of first attempts ended.
type partitionStep struct {
	refused *attemptResult
	err     error
}

// runHook is one webhook's consumer group member on its tenant topic. Each
// poll takes up to Concurrency records; each partition's records are
// attempted in order, one in flight per partition, partitions in
// parallel. A record's offset is committed once its first attempt's
// outcome is durable. Rebalances wait for the poll's records
// (BlockRebalanceOnPoll), so a commit never crosses a rebalance.
func (d *Dispatcher) runHook(ctx context.Context, wh controlstate.Webhook) error {
	topic, ok := d.state.Topic(wh.Tenant, wh.Topic)
	if !ok {
		return nil
	}
	perPoll := d.cfg.Webhooks.Concurrency
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, d.cfg.ClientOpts...),
		kgo.ConsumerGroup(wh.Group),
		kgo.ConsumeTopics(topic.KafkaTopic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// The group's offsets were committed at registration; a partition
		// without one (added later) starts at its beginning.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RebalanceTimeout(time.Duration(perPoll)*(d.cfg.Webhooks.AttemptTimeout+d.cfg.RequestTimeout)+30*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("webhook %s: client: %w", wh.ID, err)
	}
	defer cl.CloseAllowingRebalance()
	log := d.log.With("webhook", wh.ID, "tenant", wh.Tenant)
	for {
		fs := cl.PollRecords(ctx, perPoll)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Warn("webhook: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		byPart := map[int32][]*kgo.Record{}
		fs.EachRecord(func(r *kgo.Record) { byPart[r.Partition] = append(byPart[r.Partition], r) })
		steps := make(chan partitionStep, len(byPart))
		var stop sync.Once
		halt := make(chan struct{})
		var wg sync.WaitGroup
		for _, recs := range byPart {
			wg.Add(1)
			go func() {
				defer wg.Done()
				step := d.firstAttempts(ctx, cl, wh, topic.Epoch, recs, halt)
				if step.refused != nil || step.err != nil {
					stop.Do(func() { close(halt) })
					steps <- step
				}
			}()
		}
		wg.Wait()
		close(steps)
		var refused *attemptResult
		var failure error
		for s := range steps {
			if s.refused != nil && refused == nil {
				refused = s.refused
			}
			if s.err != nil && failure == nil {
				failure = s.err
			}
		}
		cl.AllowRebalance()
		if refused != nil {
			if err := d.disable(ctx, wh, *refused); err != nil {
				return fmt.Errorf("webhook %s: recording that it is disabled: %w", wh.ID, err)
			}
			return errRefused
		}
		if failure != nil {
			// Leave the group and start over from the committed offsets.
			return fmt.Errorf("webhook %s: %w", wh.ID, failure)
		}
	}
}

// firstAttempts attempts recs (one partition, in order) until done, halt
// closes, ctx ends, the guard refuses or Kafka fails.
func (d *Dispatcher) firstAttempts(ctx context.Context, cl *kgo.Client, wh controlstate.Webhook, epoch string, recs []*kgo.Record, halt chan struct{}) partitionStep {
	for _, r := range recs {
		select {
		case <-halt:
			return partitionStep{}
		case <-ctx.Done():
			return partitionStep{}
		default:
		}
		if wh.Room == "" || (r.Key != nil && string(r.Key) == wh.Room) {
			cur, ok := d.state.Webhook(wh.Tenant, wh.ID)
			if !ok || !cur.Enabled {
				return partitionStep{} // deleted or disabled meanwhile: stop here
			}
			l := letterOf(wh.Tenant, wh.ID, wh.Topic, epoch, r)
			res, err := d.attempt(ctx, cur, l)
			if err != nil {
				return partitionStep{}
			}
			if res.Outcome == Refused {
				return partitionStep{refused: &res}
			}
			if err := d.settle(ctx, l, res); err != nil {
				return partitionStep{err: err}
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RequestTimeout)
		err := cl.CommitRecords(cctx, r)
		cancel()
		if err != nil {
			return partitionStep{err: fmt.Errorf("commit: %w", err)}
		}
	}
	return partitionStep{}
}
