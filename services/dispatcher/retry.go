package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runRetry is a tenant's retry consumer: each record is a message waiting
// for attempt number N of one webhook no earlier than its not-before time.
// Records of a partition are handled in order (a partition's head waits
// at most backoff_max plus one attempt), partitions in parallel; a
// record's offset is committed once its next step is durable: nothing
// more (delivered), a dead letter, or a retry record for attempt N+1.
//
// A record of a disabled webhook is parked: written again with the same
// attempt number and a later not-before, so it is delivered once the
// webhook is enabled again. A record of a deleted webhook is dropped.
func (d *Dispatcher) runRetry(ctx context.Context, tenant string) error {
	topic := d.names.RetryTopic(tenant)
	perPoll := d.cfg.Webhooks.RetryPartitions
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, d.cfg.ClientOpts...),
		kgo.ConsumerGroup(topic),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RebalanceTimeout(time.Duration(perPoll)*(d.cfg.Webhooks.BackoffMax+d.cfg.Webhooks.AttemptTimeout+d.cfg.RequestTimeout)+30*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("retry consumer %s: %w", tenant, err)
	}
	defer cl.CloseAllowingRebalance()
	for {
		fs := cl.PollRecords(ctx, perPoll)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				d.log.Warn("webhook retries: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		byPart := map[int32][]*kgo.Record{}
		fs.EachRecord(func(r *kgo.Record) { byPart[r.Partition] = append(byPart[r.Partition], r) })
		var mu sync.Mutex
		var failure error
		var wg sync.WaitGroup
		for _, recs := range byPart {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range recs {
					done, err := d.retryOne(ctx, tenant, r)
					if err == nil && done {
						cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RequestTimeout)
						err = cl.CommitRecords(cctx, r)
						cancel()
					}
					if err != nil {
						mu.Lock()
						failure = errors.Join(failure, err)
						mu.Unlock()
					}
					if err != nil || !done {
						return
					}
				}
			}()
		}
		wg.Wait()
		cl.AllowRebalance()
		if failure != nil {
			return fmt.Errorf("retry consumer %s: %w", tenant, failure)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// retryOne handles one retry record; done reports that its next step is
// durable (commit it), false that ctx ended first (leave it).
func (d *Dispatcher) retryOne(ctx context.Context, tenant string, r *kgo.Record) (done bool, err error) {
	l, err := parseLetter(r)
	if err != nil {
		d.log.Warn("webhook retries: skipping a record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return true, nil
	}
	l.tenant = tenant
	wh, ok := d.state.Webhook(tenant, l.Webhook)
	if !ok {
		return true, nil // deleted: its retries go with it
	}
	if !wh.Enabled {
		return true, d.park(ctx, l)
	}
	if wait := time.Until(l.NotBefore); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, nil
		}
	}
	if wh, ok = d.state.Webhook(tenant, l.Webhook); !ok {
		return true, nil
	}
	if !wh.Enabled {
		return true, d.park(ctx, l)
	}
	res, err := d.attempt(ctx, wh, l)
	if err != nil {
		return false, nil
	}
	if res.Outcome == Refused {
		if err := d.disable(ctx, wh, res); err != nil {
			return false, err
		}
		return true, d.park(ctx, l)
	}
	return true, d.settle(ctx, l, res)
}

// park writes l again, same attempt number, to be looked at after
// backoff_max: its webhook is disabled and the message must wait for it.
func (d *Dispatcher) park(ctx context.Context, l letter) error {
	l.NotBefore = time.Now().Add(d.cfg.Webhooks.BackoffMax)
	return d.produce(ctx, l.record(d.names.RetryTopic(l.tenant)))
}
