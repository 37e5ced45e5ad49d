package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Follow reads a topic that a process projects into memory (the control
// log, the usage counts): it makes the topic when missing, reads it from
// the start up to the end offsets it had when Run began, reports that it
// caught up, then follows it live. The control log and the usage counts
// both read this way.
type Follow struct {
	// Name starts every log line ("control log", "limits").
	Name string
	// Topic is read whole: every partition, from its start offset.
	Topic string
	// ClientOpts reach Kafka; Admin lists the offsets.
	ClientOpts []kgo.Opt
	Admin      *kadm.Client
	// Timeout bounds making the topic and each offset listing.
	Timeout time.Duration
	// Ensure makes the topic when it is missing; nil: it must exist.
	Ensure func(ctx context.Context) error
	// Apply takes one record, in offset order per partition, on Run's
	// goroutine. An error ends Run with it.
	Apply func(r *kgo.Record) error
	// CaughtUp is called once, when every record below the starting end
	// offsets was applied (at once when the topic held none). An error
	// ends Run with it.
	CaughtUp func() error
	// KafkaErr, if set, receives why Kafka could not be reached while Run
	// makes the topic or lists its offsets (Run retries with backoff
	// meanwhile), then nil once it answered: for readiness checks.
	KafkaErr func(err error)
	// Ends, if set, receives the starting end offset of each partition
	// that holds records (lag metrics).
	Ends func(ends map[int32]int64)
	// Fetched, if set, sees every fetched partition (lag metrics).
	Fetched func(p kgo.FetchTopicPartition)
	Logger  *slog.Logger
}

// RetryBackOff is the retry timing while Kafka is unreachable: from
// 250ms, doubling, jittered ±50%, capped at 10s, never giving up.
func RetryBackOff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 250*time.Millisecond, 10*time.Second, 0
	b.Reset()
	return b
}

// Run makes the topic, reads it to its starting end offsets (CaughtUp),
// then follows it until ctx ends. Kafka errors before that are retried
// with backoff; fetch errors are logged and retried by the client. It
// returns nil when ctx ends, or the error of Apply or CaughtUp.
func (f Follow) Run(ctx context.Context) error {
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := RetryBackOff()
	retry := func(what string, err error) bool {
		if f.KafkaErr != nil {
			f.KafkaErr(err)
		}
		wait := b.NextBackOff()
		log.Warn(f.Name+": "+what+"; retrying", "topic", f.Topic, "err", err, "backoff", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for f.Ensure != nil {
		tctx, cancel := context.WithTimeout(ctx, f.Timeout)
		err := f.Ensure(tctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !retry("making the topic", err) {
			return nil
		}
	}
	var ends map[int32]int64
	for {
		var err error
		ends, err = f.toRead(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !retry("reading the topic's offsets", err) {
			return nil
		}
	}
	if f.KafkaErr != nil {
		f.KafkaErr(nil)
	}
	if f.Ends != nil {
		f.Ends(ends)
	}
	caughtUp := false
	catchUp := func() error {
		caughtUp = true
		if f.CaughtUp != nil {
			return f.CaughtUp()
		}
		return nil
	}
	if len(ends) == 0 {
		if err := catchUp(); err != nil {
			return err
		}
	}
	cons, err := kgo.NewClient(With(f.ClientOpts,
		kgo.ConsumeTopics(f.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("%s: consumer: %w", f.Name, err)
	}
	defer cons.Close()
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			log.Warn(f.Name+": fetch", "topic", t, "partition", p, "err", err)
		})
		var fatal error
		fs.EachRecord(func(r *kgo.Record) {
			if fatal != nil {
				return
			}
			if fatal = f.Apply(r); fatal != nil {
				return
			}
			if end, ok := ends[r.Partition]; ok && r.Offset+1 >= end {
				delete(ends, r.Partition)
				if len(ends) == 0 && !caughtUp {
					fatal = catchUp()
				}
			}
		})
		if fatal != nil {
			return fatal
		}
		if f.Fetched != nil {
			fs.EachPartition(f.Fetched)
		}
	}
}

// toRead returns, per partition that holds records, the end offset to
// read up to before catching up.
func (f Follow) toRead(ctx context.Context) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	starts, err := f.Admin.ListStartOffsets(ctx, f.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, err
	}
	endOffs, err := f.Admin.ListEndOffsets(ctx, f.Topic)
	if err == nil {
		err = endOffs.Error()
	}
	if err != nil {
		return nil, err
	}
	if len(endOffs[f.Topic]) == 0 {
		return nil, errors.New("topic " + f.Topic + " has no partitions yet")
	}
	ends := map[int32]int64{}
	endOffs.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(f.Topic, o.Partition); o.Offset > 0 && (!ok || s.Offset < o.Offset) {
			ends[o.Partition] = o.Offset
		}
	})
	return ends, nil
}
