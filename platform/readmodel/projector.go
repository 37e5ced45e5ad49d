package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
)

// ProjectorConfig configures a Projector.
type ProjectorConfig struct {
	// TopicPrefix is kafka.topic_prefix.
	TopicPrefix string
	// ClientOpts reach Kafka.
	ClientOpts []kgo.Opt
	// Store receives the projection (required).
	Store Store
	// DiscoverEvery is how often new attempt log topics and partitions are
	// looked for and the lag measured; 0 = 2s.
	DiscoverEvery time.Duration
	// MaxBatch is the most records one Store.Apply takes; 0 = 1000.
	MaxBatch int
	Logger   *slog.Logger
	// Registerer, if set, receives the projector's metrics.
	Registerer prometheus.Registerer
}

// migrator is a Store that prepares its schema first (Postgres).
type migrator interface {
	Migrate(ctx context.Context) error
}

// Projector follows the control topic and every tenant's attempt log topic
// into a Store. Each Apply makes a batch's rows and the next offsets of
// its partitions durable together, and the projector resumes from the
// stored offsets, so rows match the records exactly (no gap, no
// duplicate) across restarts of either side. While the Store fails (a
// PostgreSQL outage) projection pauses, retrying the same batch with
// backoff; nothing else waits for it.
//
// The control topic is always read from its start into a private
// controlstate.State, so that only applied events (not those the control
// plane rejected) become audit events; records before the stored offset
// are applied to that state only.
type Projector struct {
	cfg    ProjectorConfig
	log    *slog.Logger
	mapper names.Mapper

	lag     *prometheus.GaugeVec
	applied prometheus.Counter
	stalls  prometheus.Counter

	mu      sync.Mutex
	next    map[string]map[int32]int64 // applied next offsets
	ends    map[string]map[int32]int64 // last known end offsets
	lastErr error                      // last Store or Kafka failure, nil once it worked again
	started bool                       // positions loaded
}

// NewProjector returns a Projector; Run runs it.
func NewProjector(cfg ProjectorConfig) (*Projector, error) {
	if cfg.Store == nil {
		return nil, errors.New("readmodel: ProjectorConfig.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DiscoverEvery <= 0 {
		cfg.DiscoverEvery = 2 * time.Second
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1000
	}
	p := &Projector{cfg: cfg, log: cfg.Logger, mapper: names.Mapper{Prefix: cfg.TopicPrefix},
		next: map[string]map[int32]int64{}, ends: map[string]map[int32]int64{},
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgmesh_readmodel_lag_records",
			Help: "Records of the control topic or the attempt log topics not projected into the read model yet."}, []string{"source"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_readmodel_records_applied_total",
			Help: "Records projected into the read model."}),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_readmodel_store_failures_total",
			Help: "Read model writes that failed (projection paused and retried)."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.lag, p.applied, p.stalls} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("readmodel: metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Status is the projector's state for /readyz.
type Status struct {
	Source string `json:"source"`
	// Lag is how many records are not projected yet (as of the last
	// look at the end offsets, every DiscoverEvery).
	Lag int64 `json:"lag"`
	// Error is why projection is paused, if it is.
	Error string `json:"error,omitempty"`
}

// Status reports the lag and any failure.
func (p *Projector) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{Source: p.cfg.Store.Source(), Lag: p.lagLocked()}
	if p.lastErr != nil {
		s.Error = p.lastErr.Error()
	} else if !p.started {
		s.Error = "starting"
	}
	return s
}

func (p *Projector) lagLocked() int64 {
	var lag int64
	for t, ps := range p.ends {
		for part, end := range ps {
			if n := end - p.next[t][part]; n > 0 {
				lag += n
			}
		}
	}
	return lag
}

func (p *Projector) setErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

// retry waits the next backoff after err; false when ctx ended.
func (p *Projector) retry(ctx context.Context, b *backoff.ExponentialBackOff, what string, err error) bool {
	p.setErr(fmt.Errorf("%s: %w", what, err))
	wait := b.NextBackOff()
	p.log.Warn("read model: "+what+"; retrying", "err", err, "backoff", wait.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

func newBackOff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 200*time.Millisecond, 5*time.Second, 0
	b.Reset()
	return b
}

// Run projects until ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	b := newBackOff()
	if m, ok := p.cfg.Store.(migrator); ok {
		for {
			err := m.Migrate(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil || !p.retry(ctx, b, "applying migrations", err) {
				return nil
			}
		}
		b.Reset()
	}
	var stored map[string]map[int32]int64
	for {
		var err error
		if stored, err = p.cfg.Store.Positions(ctx); err == nil {
			break
		}
		if ctx.Err() != nil || !p.retry(ctx, b, "reading the stored offsets", err) {
			return nil
		}
	}
	p.mu.Lock()
	for t, ps := range stored {
		p.next[t] = map[int32]int64{}
		for part, o := range ps {
			p.next[t][part] = o
		}
	}
	p.started, p.lastErr = true, nil
	p.mu.Unlock()

	control := p.mapper.ControlTopic()
	cl, err := kgo.NewClient(kafkaclient.With(p.cfg.ClientOpts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{control: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Few, large fetches (the read model may lag by FetchMaxWait):
		// the brokers serve deliveries too.
		kgo.FetchMinBytes(256<<10),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("read model: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	state := controlstate.NewState()
	added := map[string]map[int32]bool{control: {0: true}}

	dctx, stop := context.WithCancel(ctx)
	defer stop()
	go p.discover(dctx, adm, state, func(ends map[string]map[int32]int64) { p.addPartitions(cl, ends, added, stored) })
	for {
		fs := cl.PollRecords(ctx, p.cfg.MaxBatch)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) {
				p.log.Warn("read model: fetch", "topic", t, "partition", part, "err", err)
			}
		})
		batch := Batch{Next: map[string]map[int32]int64{}}
		fs.EachRecord(func(r *kgo.Record) {
			if batch.Next[r.Topic] == nil {
				batch.Next[r.Topic] = map[int32]int64{}
			}
			batch.Next[r.Topic][r.Partition] = r.Offset + 1
			pos := Position{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			skip := r.Offset < stored[r.Topic][r.Partition]
			if r.Topic == control {
				var ev controlstate.Event
				outcome := json.Unmarshal(r.Value, &ev)
				if outcome == nil {
					outcome = state.Apply(ev)
				}
				if outcome == nil && !skip {
					if a := auditOf(ev, pos); a != nil {
						batch.Entries = append(batch.Entries, Entry{Pos: pos, Audit: a})
					}
				}
				return
			}
			if skip {
				return
			}
			if a := p.attemptOf(r, pos); a != nil {
				batch.Entries = append(batch.Entries, Entry{Pos: pos, Attempt: a})
			}
		})
		if len(batch.Next) == 0 {
			continue
		}
		if !p.apply(ctx, batch) {
			return nil
		}
	}
}

// apply writes batch, retrying with backoff while the Store fails
// (projection is paused meanwhile); false when ctx ended first.
func (p *Projector) apply(ctx context.Context, batch Batch) bool {
	b := newBackOff()
	for {
		err := p.cfg.Store.Apply(ctx, batch)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		p.stalls.Inc()
		if !p.retry(ctx, b, "writing the read model (projection paused)", err) {
			return false
		}
	}
	p.mu.Lock()
	for t, ps := range batch.Next {
		if p.next[t] == nil {
			p.next[t] = map[int32]int64{}
		}
		for part, o := range ps {
			if o > p.next[t][part] {
				p.next[t][part] = o
			}
			if p.ends[t] == nil {
				p.ends[t] = map[int32]int64{}
			}
			if o > p.ends[t][part] {
				p.ends[t][part] = o
			}
		}
	}
	p.lastErr = nil
	p.lag.WithLabelValues(p.cfg.Store.Source()).Set(float64(p.lagLocked()))
	p.mu.Unlock()
	p.applied.Add(float64(len(batch.Entries)))
	return true
}

// addPartitions starts consuming the partitions in ends not consumed yet,
// from their stored offset (or their start). Called by discover only
// (added is its own).
func (p *Projector) addPartitions(cl *kgo.Client, ends map[string]map[int32]int64, added map[string]map[int32]bool, stored map[string]map[int32]int64) {
	add := map[string]map[int32]kgo.Offset{}
	for t, ps := range ends {
		for part := range ps {
			if added[t][part] {
				continue
			}
			if added[t] == nil {
				added[t] = map[int32]bool{}
			}
			added[t][part] = true
			at := kgo.NewOffset().AtStart()
			if o, ok := stored[t][part]; ok {
				at = kgo.NewOffset().At(o)
			}
			if add[t] == nil {
				add[t] = map[int32]kgo.Offset{}
			}
			add[t][part] = at
		}
	}
	if len(add) > 0 {
		cl.AddConsumePartitions(add)
	}
}

func cloneOffsets(m map[string]map[int32]int64) map[string]map[int32]int64 {
	out := make(map[string]map[int32]int64, len(m))
	for t, ps := range m {
		out[t] = make(map[int32]int64, len(ps))
		for part, o := range ps {
			out[t][part] = o
		}
	}
	return out
}

// discover looks up, every DiscoverEvery, the end offsets of the control
// topic and every attempt log topic: it records them for the lag and
// passes them to found (which starts consuming new partitions; the
// client's AddConsumePartitions may be called while it polls).
func (p *Projector) discover(ctx context.Context, adm *kadm.Client, state *controlstate.State, found func(map[string]map[int32]int64)) {
	t := time.NewTicker(p.cfg.DiscoverEvery)
	defer t.Stop()
	for {
		if ends, err := p.endOffsets(ctx, adm, state); err == nil {
			p.mu.Lock()
			// A copy: apply raises p.ends under mu while found reads ends
			// without it (a data race found by go test -race).
			p.ends = cloneOffsets(ends)
			p.lag.WithLabelValues(p.cfg.Store.Source()).Set(float64(p.lagLocked()))
			p.mu.Unlock()
			found(ends)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// endOffsets lists the end offsets of the control topic and the attempt
// log topic of every tenant the control log knows (by name: the metadata
// of a cluster's other topics is never fetched).
func (p *Projector) endOffsets(ctx context.Context, adm *kadm.Client, state *controlstate.State) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want := []string{p.mapper.ControlTopic()}
	for _, t := range state.Tenants() {
		want = append(want, p.mapper.AttemptLogTopic(t.ID))
	}
	topics, err := adm.ListTopics(ctx, want...)
	if err != nil {
		return nil, err
	}
	want = want[:0]
	for name, d := range topics {
		if d.Err == nil {
			want = append(want, name)
		}
	}
	if len(want) == 0 {
		return map[string]map[int32]int64{}, nil
	}
	listed, err := adm.ListEndOffsets(ctx, want...)
	if err != nil {
		return nil, err
	}
	ends := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if ends[o.Topic] == nil {
			ends[o.Topic] = map[int32]int64{}
		}
		ends[o.Topic][o.Partition] = o.Offset
	})
	return ends, nil
}

// attemptOf decodes an attempt log record. The tenant is the topic's
// (never what the record says); nil for a record that is not an attempt.
func (p *Projector) attemptOf(r *kgo.Record, pos Position) *Attempt {
	var a AttemptRecord
	tenant, ok := p.mapper.SplitAttemptLogTopic(r.Topic)
	if !ok || json.Unmarshal(r.Value, &a) != nil || a.WebhookID == "" {
		return nil
	}
	a.Tenant = tenant
	return &Attempt{WebhookID: a.WebhookID, Cursor: a.Cursor, MessageID: a.MessageID, Attempt: a.Attempt, Outcome: a.Outcome,
		Status: a.Status, Error: a.Error, DurationMs: a.DurationMs, Time: a.Time.UTC().Truncate(time.Microsecond),
		Tenant: a.Tenant, Topic: a.Topic, Pos: pos}
}
