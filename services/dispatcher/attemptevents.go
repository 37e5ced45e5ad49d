package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/readmodel"
)

// attemptEventsBuffer caps the attempt records waiting to be sent; beyond
// it a record is dropped (and counted) rather than slowing delivery.
const attemptEventsBuffer = 50_000

// attemptEventsLinger is how long the attempt log producer waits to fill
// a batch: few, large produce requests, so that the attempt log adds
// little work for the brokers that deliveries also wait on.
const attemptEventsLinger = 100 * time.Millisecond

// attemptEvents appends every delivery attempt to its tenant's attempt
// log topic (Names.AttemptLogTopic): batched (its own producer lingers)
// and asynchronous (TryProduce, never waited on), so delivery never waits
// for it. While Kafka cannot take them, up to attemptEventsBuffer records
// wait; more are dropped and counted in
// msgmesh_webhook_attempt_log_dropped_total.
type attemptEvents struct {
	cl      *kgo.Client
	names   names.Mapper
	dropped prometheus.Counter
	failed  prometheus.Counter
}

func newAttemptEvents(cfg Config, n names.Mapper) (*attemptEvents, error) {
	cl, err := kgo.NewClient(kafkaclient.With(cfg.ClientOpts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(attemptEventsLinger),
		kgo.MaxBufferedRecords(attemptEventsBuffer),
		kgo.RecordDeliveryTimeout(max(cfg.RequestTimeout, 30*time.Second)),
	)...)
	if err != nil {
		return nil, err
	}
	return &attemptEvents{cl: cl, names: n,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_webhook_attempt_log_dropped_total",
			Help: "Webhook attempt records not appended to the attempt log because too many were waiting for Kafka."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_webhook_attempt_log_failed_total",
			Help: "Webhook attempt records Kafka did not take (delivery timeout, topic missing)."}),
	}, nil
}

// outcomeName is the attempt log's name of an outcome.
func outcomeName(o Outcome) string {
	switch o {
	case Delivered:
		return readmodel.OutcomeDelivered
	case Permanent:
		return readmodel.OutcomePermanent
	case Refused:
		return readmodel.OutcomeGuardRefused
	default:
		return readmodel.OutcomeTemporary
	}
}

// record appends attempt number l.Attempt of l, which took took and got
// res. It never blocks.
func (e *attemptEvents) record(l letter, res attemptResult, at time.Time, took time.Duration) {
	v, err := json.Marshal(readmodel.AttemptRecord{
		Tenant: l.Tenant, WebhookID: l.Webhook, Topic: l.Topic, Cursor: l.Cursor, MessageID: l.MessageID,
		Attempt: l.Attempt, Outcome: outcomeName(res.Outcome), Status: res.Status, Error: res.describe(),
		DurationMs: took.Milliseconds(), Time: at.UTC(),
	})
	if err != nil {
		return
	}
	r := &kgo.Record{Topic: e.names.AttemptLogTopic(l.Tenant), Key: []byte(l.Webhook), Value: v}
	e.cl.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) {
		switch {
		case err == nil:
		case errors.Is(err, kgo.ErrMaxBuffered):
			e.dropped.Inc()
		default:
			e.failed.Inc()
		}
	})
}

// close sends what is buffered (within ctx), then releases the producer.
func (e *attemptEvents) close(ctx context.Context) {
	_ = e.cl.Flush(ctx)
	e.cl.Close()
}
