package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// runRetry is a tenant's retry consumer: each record is a message waiting
// for attempt number N of one webhook no earlier than its not-before time.
// Records of a partition are handled in order (a partition's head waits
// at most backoff_max plus one attempt), partitions in parallel. A poll's
// next steps (nothing more when delivered, a dead letter, or a retry
// record for attempt N+1) are written and its offsets committed in one
// Kafka transaction (see runHook): a crash can repeat an attempt, never
// fork the sequence nor write a second dead letter.
//
// A record of a disabled webhook is parked once its not-before time has
// come: written again (in the same transaction as its commit) with the
// same attempt number and a not-before backoff_max later, so it is looked
// at again at most once per backoff_max while the webhook stays disabled,
// and delivered once it is enabled again. A record of a deleted webhook
// is dropped; one of a webhook the projection does not know yet waits for
// it (dropUnknown).
func (d *Dispatcher) runRetry(ctx context.Context, tenant string) error {
	for {
		aborted, err := d.retrySession(ctx, tenant)
		if !aborted || ctx.Err() != nil {
			return err
		}
		d.log.Info("webhook retries: transaction aborted after the consumer lost its partitions; starting a new session from the committed offsets, the poll's attempts will be made again", "tenant", tenant)
	}
}

// retrySession runs one session of runRetry's consumer until it ends (err,
// or nil when stopped) or a poll's transaction was aborted after the
// session lost its partitions meanwhile (aborted): the caller then starts
// a new session from the committed offsets, for the reason hookSession
// gives (such a session's positions may be past records whose next step
// was never committed).
func (d *Dispatcher) retrySession(ctx context.Context, tenant string) (aborted bool, err error) {
	topic := d.names.RetryTopic(tenant)
	// A poll takes up to retryPollRecords records; a partition's run
	// starts no new record after pollBudget (its first one excepted: it
	// may wait backoff_max, then make its attempt), the rest is read again.
	perPoll := retryPollRecords
	var assigned, lost, hurry atomic.Bool // hurry: unused
	sess, err := d.session(topic, topic, pollBudget+d.cfg.Webhooks.BackoffMax+d.cfg.Webhooks.AttemptTimeout, &assigned, &lost, &hurry)
	if err != nil {
		return false, fmt.Errorf("retry consumer %s: %w", tenant, err)
	}
	defer sess.CloseAllowingRebalance()
	for {
		fs := sess.PollRecords(ctx, perPoll)
		lost.Store(false)
		if ctx.Err() != nil {
			sess.AllowRebalance()
			return false, nil
		}
		var gone error
		fs.EachError(func(t string, p int32, err error) {
			if topicGone(err) {
				gone = fmt.Errorf("fetch %s: %w", t, err)
			} else if !errors.Is(err, context.Canceled) {
				d.log.Warn("webhook retries: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		if gone != nil {
			// Deleted under us: end, so that the dispatcher makes the
			// topic again and restarts this consumer after a backoff
			// (instead of fetching in a tight loop).
			sess.AllowRebalance()
			return false, fmt.Errorf("retry consumer %s: %w", tenant, gone)
		}
		byPart := map[int32][]*kgo.Record{}
		fs.EachRecord(func(r *kgo.Record) { byPart[r.Partition] = append(byPart[r.Partition], r) })
		if len(byPart) == 0 {
			sess.AllowRebalance()
			continue
		}
		if err := d.syncAttempts(ctx, tenant, &assigned); err != nil {
			sess.AllowRebalance()
			return false, fmt.Errorf("retry consumer %s: %w", tenant, err)
		}
		var mu sync.Mutex
		var failure error
		var out, unhandled []*kgo.Record
		var finished []string
		var wg sync.WaitGroup
		deadline := time.Now().Add(pollBudget)
		for _, recs := range byPart {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, r := range recs {
					if i > 0 && time.Now().After(deadline) {
						mu.Lock()
						unhandled = append(unhandled, r) // read again
						mu.Unlock()
						return
					}
					next, done, fin, err := d.retryOne(ctx, tenant, r)
					mu.Lock()
					if next != nil {
						out = append(out, next)
					}
					if fin != "" {
						finished = append(finished, fin)
					}
					if err != nil {
						failure = errors.Join(failure, err)
					}
					if !done {
						unhandled = append(unhandled, r)
					}
					mu.Unlock()
					if err != nil || !done {
						return
					}
				}
			}()
		}
		wg.Wait()
		committed, err := d.commitStep(ctx, sess, positions(byPart, unhandled), out, d.cfg.Webhooks.UnsafeTestHoldRetryCommit)
		sess.AllowRebalance()
		if err != nil {
			failure = errors.Join(failure, err)
		}
		if failure != nil {
			return false, fmt.Errorf("retry consumer %s: %w", tenant, failure)
		}
		if ctx.Err() != nil {
			if committed {
				d.attemptLog(tenant).forget(finished)
			}
			return false, nil
		}
		if !committed && lost.Load() {
			return true, nil
		}
		if committed {
			d.attemptLog(tenant).forget(finished)
		} else {
			d.log.Info("webhook retries: transaction aborted (rebalance); the poll's attempts will be made again", "tenant", tenant)
		}
	}
}

// retryPollRecords caps one poll of a tenant's retry consumer.
const retryPollRecords = 500

// topicGone reports whether err says a topic does not exist (any more).
func topicGone(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
}

// retryOne handles one retry record: next is the record that makes its
// next step durable (nil: none), done false that ctx ended first (leave
// the record where it is), finished the attempt log key of a message
// done with (delivered, dead-lettered or dropped).
func (d *Dispatcher) retryOne(ctx context.Context, tenant string, r *kgo.Record) (next *kgo.Record, done bool, finished string, err error) {
	l, err := webhookstore.ParseLetter(r)
	if err != nil {
		d.log.Warn("webhook retries: skipping a record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return nil, true, "", nil
	}
	l.Tenant = tenant
	if _, ok := d.state.Webhook(tenant, l.Webhook); !ok {
		if d.dropUnknown(ctx, l, r) {
			return nil, true, attemptKey(l), nil // deleted: its retries go with it
		}
		return nil, false, "", nil
	}
	// Wait for the not-before time first, whatever the webhook's state, so
	// that a parked record is looked at once per backoff_max and not in
	// a loop (capped: a clock far ahead must not stall the partition).
	if wait := min(time.Until(l.NotBefore), d.cfg.Webhooks.BackoffMax); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false, "", nil
		}
	}
	wh, ok := d.state.Webhook(tenant, l.Webhook)
	if !ok {
		if d.dropUnknown(ctx, l, r) {
			return nil, true, attemptKey(l), nil
		}
		return nil, false, "", nil
	}
	if !wh.Enabled {
		return d.park(l), true, "", nil
	}
	res, err := d.attempt(ctx, wh, &l)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("webhook retries: no attempt made", "tenant", tenant, "webhook", wh.ID, "err", err)
		}
		return nil, false, "", nil
	}
	if res.Outcome == Refused {
		if err := d.disable(ctx, wh, res); err != nil {
			return nil, false, "", err
		}
		return d.park(l), true, "", nil
	}
	next = d.nextStep(l, res)
	if next == nil || next.Topic == d.names.DLQTopic(tenant) {
		finished = attemptKey(l)
	}
	return next, true, finished, nil
}

// unknownGrace is how long a retry record of a webhook this process's
// control projection does not know (and did not see deleted) waits for
// the projection to catch up before it is dropped anyway (its webhook's
// events are gone from the control log, say).
const unknownGrace = time.Minute

// dropUnknown decides about retry record r (letter l) of a webhook the
// control projection does not have: true (drop it, logged) when the
// projection applied the webhook's deletion or r is older than
// unknownGrace; otherwise it waits a moment (at most a second, or until
// ctx ends) and returns false: the record is left where it is and read
// again, since the node that wrote it knew the webhook and this one's
// projection may merely be behind. Dropping it then would commit past a
// message that never got its next attempt nor a dead letter.
func (d *Dispatcher) dropUnknown(ctx context.Context, l letter, r *kgo.Record) bool {
	d.goneMu.Lock()
	deleted := d.gone[l.Tenant+"/"+l.Webhook]
	d.goneMu.Unlock()
	age := time.Since(r.Timestamp)
	switch {
	case deleted:
		d.log.Info("webhook retries: dropping a retry of a deleted webhook", "tenant", l.Tenant, "webhook", l.Webhook, "message", l.MessageID, "attempt", l.Attempt)
		return true
	case age > unknownGrace:
		d.log.Warn("webhook retries: dropping a retry of a webhook the control log does not know", "tenant", l.Tenant, "webhook", l.Webhook,
			"message", l.MessageID, "attempt", l.Attempt, "record_age", age.Round(time.Second))
		return true
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// park is l again, same attempt number, to be looked at after
// backoff_max: its webhook is disabled and the message must wait for it.
func (d *Dispatcher) park(l letter) *kgo.Record {
	l.NotBefore = time.Now().Add(d.cfg.Webhooks.BackoffMax)
	return l.Record(d.names.RetryTopic(l.Tenant))
}
