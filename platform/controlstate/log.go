package controlstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
)

// Config configures a Log.
type Config struct {
	// Topic is the control topic's Kafka name (required).
	Topic string
	// ClientOpts reach Kafka (seed brokers and the like).
	ClientOpts []kgo.Opt
	// ReplicationFactor of the control topic when it is created; -1 uses
	// the broker default.
	ReplicationFactor int16
	// MinInsyncReplicas is the control topic's min.insync.replicas when it
	// is created; 0 or -1 uses the broker default.
	MinInsyncReplicas int16
	// Wrapper seals the secrets events carry (signing seeds, webhook
	// secrets) and opens them when they are applied (secrets.go). Without
	// one the log can neither write nor read sealed secrets.
	Wrapper Wrapper
	// Logger receives lifecycle logs; never event contents (they hold key
	// hashes and sealed secrets only, but still).
	Logger *slog.Logger
	// Registerer, if set, receives the log's metrics.
	Registerer prometheus.Registerer
	// AppendTimeout bounds how long Append waits for Kafka to acknowledge
	// an event; 0 = 10s. (The idempotent producer never gives up on a
	// record it sent by itself.)
	AppendTimeout time.Duration
}

// Log appends events to the control topic and keeps State following it.
type Log struct {
	cfg   Config
	log   *slog.Logger
	state *State
	prod  *kgo.Client
	adm   *kadm.Client

	ready   atomic.Bool
	readyCh chan struct{}
	// kafkaErr is why Run could not reach Kafka last time it tried (nil
	// once it did).
	kafkaErr atomic.Pointer[error]

	mu      sync.Mutex
	waiters map[string]chan error
	hooks   []func(Event, error)

	applied prometheus.Counter
	offset  prometheus.Gauge
	lag     prometheus.Gauge
}

// Open prepares the Kafka clients; it does not wait for Kafka, so a
// process starts (and answers /healthz) while the brokers are unreachable.
// Call Run to make sure the control topic exists (one partition,
// retention.ms=-1) and read it.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if cfg.Topic == "" {
		return nil, errors.New("controlstate: Config.Topic is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	prod, err := kgo.NewClient(kafkaclient.With(cfg.ClientOpts,
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("controlstate: client: %w", err)
	}
	l := &Log{
		cfg: cfg, log: cfg.Logger, state: NewStateWith(cfg.Wrapper), prod: prod, adm: kadm.NewClient(prod),
		readyCh: make(chan struct{}), waiters: map[string]chan error{},
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_control_events_applied_total", Help: "Control events applied to the in-memory projection (accepted or rejected)."}),
		offset:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgmesh_control_log_offset", Help: "Offset of the last control event applied."}),
		lag:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgmesh_control_log_lag_records", Help: "Control events in Kafka not yet applied to this process's projection (end offset at the last fetch minus the next offset to apply)."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{l.applied, l.offset, l.lag} {
			if err := cfg.Registerer.Register(c); err != nil {
				prod.Close()
				return nil, fmt.Errorf("controlstate: metrics: %w", err)
			}
		}
	}
	return l, nil
}

// KafkaErr reports why Kafka could not be reached the last time Run tried
// (the control topic could not be made or its end offset read), or nil
// once it was; for readiness checks.
func (l *Log) KafkaErr() error {
	if p := l.kafkaErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) ensureTopic(ctx context.Context) error {
	_, err := kafkaclient.EnsureTopic(ctx, l.adm, l.cfg.Topic, kafkaclient.TopicSpec{
		Partitions: 1, ReplicationFactor: l.cfg.ReplicationFactor, MinInsyncReplicas: l.cfg.MinInsyncReplicas,
		Configs: map[string]string{"retention.ms": "-1", "cleanup.policy": "delete"},
	})
	if err != nil {
		return fmt.Errorf("controlstate: control topic: %w", err)
	}
	return nil
}

// State is the projection. It is complete once Ready reports true.
func (l *Log) State() *State { return l.state }

// Ready reports whether the projection has caught up with the log as it
// was when Run started.
func (l *Log) Ready() bool { return l.ready.Load() }

// WaitReady blocks until Ready or ctx is done.
func (l *Log) WaitReady(ctx context.Context) error {
	select {
	case <-l.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OnApply registers fn, called after each event is applied with its
// outcome (nil = accepted), in log order, on the applying goroutine: keep it
// short and never block. Register before Run.
func (l *Log) OnApply(fn func(Event, error)) {
	l.mu.Lock()
	l.hooks = append(l.hooks, fn)
	l.mu.Unlock()
}

// Ping asks Kafka for the control topic's metadata; for readiness checks.
func (l *Log) Ping(ctx context.Context) error {
	_, err := l.adm.ListEndOffsets(ctx, l.cfg.Topic)
	return err
}

// Run makes sure the control topic exists, reads the control log from the
// start, then follows it until ctx is done. While Kafka is unreachable it
// retries with backoff (KafkaErr says why meanwhile). It returns nil on
// cancellation.
func (l *Log) Run(ctx context.Context) error {
	return kafkaclient.Follow{
		Name:       "control log",
		Topic:      l.cfg.Topic,
		ClientOpts: l.cfg.ClientOpts,
		Admin:      l.adm,
		Timeout:    l.appendTimeout(),
		Ensure:     l.ensureTopic,
		Logger:     l.log,
		KafkaErr: func(err error) {
			if err == nil {
				l.kafkaErr.Store(nil)
				return
			}
			l.kafkaErr.Store(&err)
		},
		Ends: func(ends map[int32]int64) { l.lag.Set(float64(ends[0])) },
		Apply: func(r *kgo.Record) error {
			// A node that cannot open a secret it needs (its KEK is not
			// configured) refuses to start rather than serve without it
			// (CaughtUp), and stops if one arrives later (another node
			// rotated to a KEK this one lacks).
			if secret := l.apply(r); secret && l.ready.Load() {
				return l.unreadable()
			}
			return nil
		},
		CaughtUp: func() error {
			if err := l.unreadable(); err != nil {
				return err
			}
			l.markReady()
			return nil
		},
		Fetched: func(p kgo.FetchTopicPartition) {
			if p.Err == nil && len(p.Records) > 0 {
				l.lag.Set(float64(max(0, p.HighWatermark-(p.Records[len(p.Records)-1].Offset+1))))
			}
		},
	}.Run(ctx)
}

// unreadable is the error of secrets this node cannot decrypt, logged.
func (l *Log) unreadable() error {
	err := l.state.Unreadable()
	if err != nil {
		l.log.Error("control log: secrets cannot be decrypted", "err", err)
	}
	return err
}

func (l *Log) markReady() {
	if l.ready.CompareAndSwap(false, true) {
		close(l.readyCh)
		l.log.Info("control log caught up", "topic", l.cfg.Topic)
	}
}

// apply applies r and reports whether it was an event carrying a secret.
func (l *Log) apply(r *kgo.Record) (secret bool) {
	var ev Event
	var outcome error
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		outcome = fmt.Errorf("%w: offset %d: %v", ErrInvalid, r.Offset, err)
	} else {
		outcome = l.state.Apply(ev)
	}
	if errors.Is(outcome, ErrInvalid) {
		l.log.Warn("control log: skipping invalid event", "offset", r.Offset, "err", outcome)
	}
	l.applied.Inc()
	l.offset.Set(float64(r.Offset))
	l.mu.Lock()
	w := l.waiters[ev.ID]
	delete(l.waiters, ev.ID)
	hooks := l.hooks
	l.mu.Unlock()
	for _, h := range hooks {
		h(ev, outcome)
	}
	if w != nil {
		w <- outcome
	}
	switch ev.Type {
	case TypeSigningKeyCreated, TypeSigningKeyRewrapped, TypeWebhookCreated, TypeWebhookSecretRewrapped:
		return true
	}
	return false
}

// Append writes an event of type typ with data, waits until this process
// has applied it, and returns its outcome: nil if accepted, or an error
// wrapping ErrConflict / ErrNotFound. Other errors (Kafka unreachable, ctx
// done) mean the outcome is unknown: the event may still be applied later.
func (l *Log) Append(ctx context.Context, typ string, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("controlstate: encode %s: %w", typ, err)
	}
	ev := Event{V: SchemaVersion, Type: typ, ID: newID(), At: time.Now().UTC(), Data: raw, Actor: ActorFrom(ctx)}
	val, err := json.Marshal(ev)
	if err != nil {
		return Event{}, err
	}
	w := make(chan error, 1)
	l.mu.Lock()
	l.waiters[ev.ID] = w
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiters, ev.ID)
		l.mu.Unlock()
	}()
	rec := &kgo.Record{Value: val, Headers: []kgo.RecordHeader{{Key: "type", Value: []byte(typ)}, {Key: "v", Value: []byte(strconv.Itoa(SchemaVersion))}}}
	tctx, cancel := context.WithTimeout(ctx, l.appendTimeout())
	defer cancel()
	produced := make(chan error, 1)
	go func() { produced <- l.prod.ProduceSync(tctx, rec).FirstErr() }()
	select {
	case err := <-produced:
		if err != nil {
			return ev, fmt.Errorf("controlstate: append %s: %w", typ, err)
		}
	case <-tctx.Done():
		return ev, fmt.Errorf("controlstate: append %s: no acknowledgement from Kafka: %w", typ, tctx.Err())
	}
	select {
	case err := <-w:
		return ev, err
	case <-tctx.Done():
		return ev, fmt.Errorf("controlstate: waiting for %s to apply: %w", typ, tctx.Err())
	}
}

func (l *Log) appendTimeout() time.Duration {
	if l.cfg.AppendTimeout <= 0 {
		return 10 * time.Second
	}
	return l.cfg.AppendTimeout
}

// Close releases the producer. Stop Run by cancelling its context.
func (l *Log) Close() { l.prod.Close() }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
