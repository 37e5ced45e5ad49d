// Package dispatcher delivers messages to webhooks (spec section 2,
// "Webhook"): one Kafka consumer group per webhook on its tenant topic,
// signed POSTs (Standard Webhooks), the nine permanent codes dead-lettered
// at once, everything else retried through a per-tenant retry topic, dead
// letters in a per-tenant DLQ topic kept 30 days, and the SSRF guard
// (platform/ssrf) checking the address of every connection. A delivery the
// guard stops disables the webhook and leaves the message where it is.
//
// Ordering: first attempts keep partition order (one in flight per
// partition); a retried message may be overtaken by later ones.
//
// Attempts: exactly Webhooks.MaxAttempts for a message that only gets
// temporary answers. The attempt number travels in the retry record, and
// a record's next step (nothing, a retry record or a dead letter) is
// written in the same Kafka transaction that commits the record's offset
// (GroupTransactSession; every reader of the retry and dead-letter topics
// reads committed), so a restart neither loses an attempt nor forks the
// sequence: exactly one dead letter. A crash after an attempt was made
// but before its transaction committed makes that attempt again (at
// least once: the receiver deduplicates by webhook-id). Every POST is
// recorded as started before it is sent (attemptLog), so the dead letter
// says how many POSTs were made, repeated ones included.
//
// Topics deleted under the dispatcher (retry, dead-letter, attempts) are
// made again: a metadata check every few seconds, and consumers that end
// on UNKNOWN_TOPIC_ID restart after an exponential backoff.
package dispatcher

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/ssrf"
	"github.com/msgmesh/msgmesh/platform/tracing"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// Config configures a Dispatcher.
type Config struct {
	Webhooks config.Webhooks
	// TopicPrefix is kafka.topic_prefix.
	TopicPrefix       string
	ReplicationFactor int16
	// MinInsyncReplicas of the topics it makes; 0 or -1 = broker default.
	MinInsyncReplicas int16
	// RequestTimeout bounds Kafka produces and admin calls.
	RequestTimeout time.Duration
	// MaxRecordBytes is the largest record produced (retry and dead-letter
	// records carry a whole message plus metadata), bytes.
	MaxRecordBytes int
	// State is the control projection (webhooks, topics).
	State *controlstate.State
	// ClientOpts reach Kafka.
	ClientOpts []kgo.Opt
	// Guard checks every address dialled for webhooks (required).
	Guard *ssrf.Guard
	// TLS is the webhook TLS configuration; nil uses the system roots.
	TLS *tls.Config
	// WaitReady blocks until the control projection has caught up.
	WaitReady func(ctx context.Context) error
	// Store records that a webhook is disabled (required).
	Store  Store
	Logger *slog.Logger
	// Registerer, if set, receives the dispatcher's metrics.
	Registerer prometheus.Registerer
	// Tracer makes a span per attempt of a traced message (a child of its
	// publish span) and sends its traceparent with the POST; nil: off.
	Tracer *tracing.Tracer
}

// Store is what the dispatcher needs of the webhook store
// (platform/webhookstore.Store): disabling a webhook whose target the
// SSRF guard refused, with the reason (a control event), returning once
// it is applied.
type Store interface {
	Disable(ctx context.Context, tenant, id, reason string) error
}

// Dispatcher runs every enabled webhook's consumer group member and every
// tenant's retry consumer on this process.
type Dispatcher struct {
	cfg    Config
	log    *slog.Logger
	names  names.Mapper
	state  *controlstate.State
	prod   *kgo.Client
	adm    *kadm.Client
	client atomic.Pointer[http.Client]
	kick   chan struct{}
	// instance makes the transactional ids of this process's consumers
	// unique (host, pid and random bits).
	instance string
	// running is set while Run runs; ran is closed when it returns.
	running atomic.Bool
	ran     chan struct{}

	mu      sync.Mutex
	hooks   map[string]*worker // by webhook id
	retries map[string]*worker // by tenant
	sems    map[string]chan struct{}
	backoff map[string]*restart // by "h"+webhook id, "r"+tenant

	// ensuredMu guards ensured; never held with mu (making topics waits
	// for Kafka, and deliveries need mu for their concurrency slot).
	ensuredMu sync.Mutex
	ensured   map[string]*ensured // by tenant
	// checked is when checkTopics last looked (reconcile's goroutine only).
	checked time.Time

	// alMu guards attemptLogs and runCtx (Run's context; the attempt
	// logs' followers run until it ends).
	alMu        sync.Mutex
	attemptLogs map[string]*attemptLog // by tenant
	runCtx      context.Context
	followers   sync.WaitGroup

	// goneMu guards gone: the webhooks ("tenant/id") whose deletion this
	// process's control projection applied (OnControlEvent), so that a
	// retry record of a webhook the projection does not have is dropped
	// only when the webhook was deleted, not while the projection is
	// behind the node that wrote the record.
	goneMu sync.Mutex
	gone   map[string]bool

	attempts    *prometheus.CounterVec
	deadLetters prometheus.Counter
	// events appends every attempt to the tenant's attempt log.
	events *attemptEvents
}

// worker is a running consumer (a webhook's member or a tenant's retry
// consumer).
type worker struct {
	tenant  string
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// restart is when a failed worker (or the making of a tenant's topics) may
// be tried again: consecutive failures back off exponentially.
type restart struct {
	until    time.Time
	failures int
	b        *backoff.ExponentialBackOff
}

// ensured is whether a tenant's retry and dead-letter topics are known to
// exist, and when making them may be tried again after failures.
type ensured struct {
	done bool
	// made: they were made once already (a topic made again was deleted).
	made bool
	restart
}

const (
	restartMin = 500 * time.Millisecond
	restartMax = 30 * time.Second
	// restartReset: a worker that ran this long before failing starts its
	// backoff over.
	restartReset = time.Minute
)

// fail records one more consecutive failure at now and returns the wait
// before the next try: from restartMin, doubling up to restartMax,
// jittered ±50% (so that nodes and tenants spread out).
func (r *restart) fail(now time.Time) time.Duration {
	if r.b == nil {
		r.b = backoff.NewExponentialBackOff()
		r.b.InitialInterval, r.b.MaxInterval, r.b.MaxElapsedTime = restartMin, restartMax, 0
		r.b.Reset()
	}
	r.failures++
	wait := r.b.NextBackOff()
	r.until = now.Add(wait)
	return wait
}

// New returns a Dispatcher; Run starts it.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Guard == nil || cfg.State == nil || cfg.Store == nil || cfg.WaitReady == nil {
		return nil, errors.New("dispatcher: Config.Guard, State, Store and WaitReady are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	prod, err := kgo.NewClient(kafkaclient.With(cfg.ClientOpts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxRecordBytes)),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.RequestTimeout),
	)...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: producer: %w", err)
	}
	d := &Dispatcher{
		cfg: cfg, log: cfg.Logger, names: names.Mapper{Prefix: cfg.TopicPrefix}, state: cfg.State, prod: prod, adm: kadm.NewClient(prod),
		kick: make(chan struct{}, 1), instance: instanceID(), ran: make(chan struct{}), hooks: map[string]*worker{}, retries: map[string]*worker{},
		sems: map[string]chan struct{}{}, gone: map[string]bool{}, ensured: map[string]*ensured{}, backoff: map[string]*restart{}, attemptLogs: map[string]*attemptLog{},
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgmesh_webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome (delivered, permanent, temporary, refused)."}, []string{"outcome"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_webhook_dead_letters_total",
			Help: "Messages dead-lettered by webhooks."}),
	}
	d.SetGuard(cfg.Guard)
	for o := Delivered; o <= Refused; o++ {
		d.attempts.WithLabelValues(o.String()) // every outcome's series exists from the start
	}
	if d.events, err = newAttemptEvents(cfg, d.names); err != nil {
		prod.Close()
		return nil, fmt.Errorf("dispatcher: attempt log producer: %w", err)
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{d.attempts, d.deadLetters, d.events.dropped, d.events.failed} {
			if err := cfg.Registerer.Register(c); err != nil {
				prod.Close()
				d.events.cl.Close()
				return nil, fmt.Errorf("dispatcher: metrics: %w", err)
			}
		}
	}
	return d, nil
}

// SetGuard replaces the SSRF guard used from the next connection on.
func (d *Dispatcher) SetGuard(g *ssrf.Guard) {
	c := g.Client(d.cfg.TLS, d.cfg.Webhooks.AttemptTimeout)
	if t, ok := c.Transport.(*http.Transport); ok {
		// Every webhook of every tenant shares this client, and many
		// webhooks often point at one receiver: keep as many idle
		// connections per host as may be in flight to it (without HTTP/2
		// each POST in flight is a connection; a smaller pool would close
		// and handshake connections again all the time).
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, idleConnsPerHost)
		t.MaxIdleConns = max(t.MaxIdleConns, 4*idleConnsPerHost)
	}
	d.client.Store(c)
}

// idleConnsPerHost is how many idle connections to one webhook host the
// dispatcher keeps.
const idleConnsPerHost = 256

func (d *Dispatcher) httpClient() *http.Client { return d.client.Load() }

// OnControlEvent wakes the dispatcher on webhook changes (register with
// controlstate.Log.OnApply; never blocks).
func (d *Dispatcher) OnControlEvent(ev controlstate.Event, outcome error) {
	if outcome != nil {
		return
	}
	if ev.Type == controlstate.TypeWebhookDeleted {
		var del controlstate.WebhookDeletedData
		if err := json.Unmarshal(ev.Data, &del); err == nil {
			d.goneMu.Lock()
			d.gone[del.Tenant+"/"+del.ID] = true
			d.goneMu.Unlock()
		}
	}
	switch ev.Type {
	case controlstate.TypeWebhookCreated, controlstate.TypeWebhookEnabled, controlstate.TypeWebhookDisabled,
		controlstate.TypeWebhookDeleted, controlstate.TypeTopicDeleted:
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// Run follows the control projection, starting and stopping consumers,
// until ctx ends; then it stops them (in-flight attempts finish and their
// outcome is recorded first).
func (d *Dispatcher) Run(ctx context.Context) error {
	d.running.Store(true)
	defer close(d.ran)
	defer d.followers.Wait()
	if err := d.cfg.WaitReady(ctx); err != nil {
		return nil
	}
	d.alMu.Lock()
	d.runCtx = ctx
	d.alMu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		d.reconcile(ctx)
		select {
		case <-ctx.Done():
			d.stopAll()
			return nil
		case <-d.kick:
		case <-tick.C:
		}
	}
}

// Close waits for Run to return (cancel its context first), then releases
// the producer.
func (d *Dispatcher) Close(context.Context) {
	if d.running.Load() {
		<-d.ran
	}
	d.stopAll()
	fctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	d.events.close(fctx)
	d.prod.Close()
}

func (d *Dispatcher) stopAll() {
	d.mu.Lock()
	var ws []*worker
	for id, w := range d.hooks {
		ws = append(ws, w)
		delete(d.hooks, id)
	}
	for t, w := range d.retries {
		ws = append(ws, w)
		delete(d.retries, t)
	}
	d.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		<-w.done
	}
}

// reconcile makes the running consumers match the projection: a member
// per enabled webhook, a retry consumer per tenant with webhooks.
func (d *Dispatcher) reconcile(ctx context.Context) {
	all := d.state.AllWebhooks()
	wantHook := map[string]controlstate.Webhook{}
	wantRetry := map[string]bool{}
	for _, wh := range all {
		wantRetry[wh.Tenant] = true
		if wh.Enabled {
			if _, ok := d.state.Topic(wh.Tenant, wh.Topic); ok {
				wantHook[wh.ID] = wh
			}
		}
	}
	// Make topics first, without d.mu: CreateTopics can take up to
	// RequestTimeout and deliveries need d.mu (sem).
	d.checkTopics(ctx, wantRetry)
	ready := map[string]bool{}
	for t := range wantRetry {
		ready[t] = d.ensure(ctx, t)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, w := range d.hooks {
		select {
		case <-w.done:
			delete(d.hooks, id)
			if w.err != nil {
				d.failed("h"+id, w)
			}
			continue
		default:
		}
		if _, ok := wantHook[id]; !ok {
			w.cancel()
			delete(d.hooks, id)
			if w.tenant != "" {
				if _, exists := d.state.Webhook(w.tenant, id); !exists {
					go d.forget(w, w.tenant, id)
				}
			}
		}
	}
	for t, w := range d.retries {
		select {
		case <-w.done:
			delete(d.retries, t)
			if w.err != nil {
				d.failed("r"+t, w)
			}
			continue
		default:
		}
		if !wantRetry[t] {
			w.cancel()
			delete(d.retries, t)
		}
	}
	for k := range d.backoff {
		if k[0] == 'r' && !wantRetry[k[1:]] || k[0] == 'h' && wantHook[k[1:]].ID == "" {
			delete(d.backoff, k)
		}
	}
	for t := range wantRetry {
		if _, ok := d.retries[t]; ok || d.backingOff("r"+t) || !ready[t] {
			continue
		}
		w := d.spawn(ctx, func(ctx context.Context) error { return d.runRetry(ctx, t) })
		w.tenant = t
		d.retries[t] = w
	}
	for id, wh := range wantHook {
		if _, ok := d.hooks[id]; ok || d.backingOff("h"+id) || !ready[wh.Tenant] {
			continue
		}
		w := d.spawn(ctx, func(ctx context.Context) error { return d.runHook(ctx, wh) })
		w.tenant = wh.Tenant
		d.hooks[id] = w
	}
}

// failed records that worker w (key "h"+webhook id or "r"+tenant) ended
// with an error: it is started again after a backoff, and its tenant's
// retry and dead-letter topics are made again first (one of them may
// have been deleted: a produce or fetch then fails with
// UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID). The caller holds d.mu.
func (d *Dispatcher) failed(key string, w *worker) {
	now := time.Now()
	r := d.backoff[key]
	if r == nil || now.Sub(w.started) > restartReset {
		r = &restart{}
		d.backoff[key] = r
	}
	wait := r.fail(now)
	d.log.Warn("webhooks: consumer failed; restarting after a backoff", "consumer", key[1:], "tenant", w.tenant,
		"failures", r.failures, "backoff", wait.Round(time.Millisecond), "err", w.err)
	if w.tenant != "" {
		d.ensuredMu.Lock()
		if e := d.ensured[w.tenant]; e != nil {
			e.done = false
		}
		d.ensuredMu.Unlock()
	}
}

// backingOff reports whether key's worker must not start yet. The caller
// holds d.mu.
func (d *Dispatcher) backingOff(key string) bool {
	r := d.backoff[key]
	return r != nil && time.Now().Before(r.until)
}

// forget deletes a deleted webhook's consumer groups once its member has
// left (best effort: a member on another node keeps the main group alive
// a little longer, and Kafka drops empty groups' offsets after
// offsets.retention.minutes anyway).
func (d *Dispatcher) forget(w *worker, tenant, id string) {
	<-w.done
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	_, _ = d.adm.DeleteGroups(ctx, d.names.WebhookGroup(tenant, id), d.names.InspectGroup(tenant, id), d.names.ReplayGroup(tenant, id))
}

// ensure makes the tenant's retry and DLQ topics: once, and again after
// one of the tenant's consumers failed (a topic may have been deleted;
// see failed). Failures back off like workers. Called by reconcile only
// (one at a time), without d.mu.
func (d *Dispatcher) ensure(ctx context.Context, tenant string) bool {
	d.ensuredMu.Lock()
	e := d.ensured[tenant]
	if e == nil {
		e = &ensured{}
		d.ensured[tenant] = e
	}
	done, wait := e.done, time.Now().Before(e.until)
	d.ensuredMu.Unlock()
	if done {
		return true
	}
	if wait {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	created, err := webhookstore.EnsureTopics(ctx, d.adm, d.names, tenant, d.TopicSpec())
	d.ensuredMu.Lock()
	defer d.ensuredMu.Unlock()
	if err != nil {
		wait := e.fail(time.Now())
		d.log.Warn("webhooks: making the retry and dead-letter topics", "tenant", tenant, "failures", e.failures, "backoff", wait.Round(time.Millisecond), "err", err)
		return false
	}
	for _, topic := range created {
		if e.made {
			d.log.Warn("webhooks: made a missing retry or dead-letter topic again (it had been deleted)", "tenant", tenant, "topic", topic)
		}
	}
	e.done, e.made, e.restart = true, true, restart{}
	return true
}

// topicCheckEvery is how often the dispatcher looks whether the retry and
// dead-letter topics it made still exist (one metadata request for all).
const topicCheckEvery = 5 * time.Second

// checkTopics marks the tenants whose retry or dead-letter topic is gone
// (deleted with a Kafka tool, say) as not ensured, at most every
// topicCheckEvery, so that ensure makes them again. Called by reconcile
// only, without d.mu.
func (d *Dispatcher) checkTopics(ctx context.Context, tenants map[string]bool) {
	if time.Since(d.checked) < topicCheckEvery {
		return
	}
	d.checked = time.Now()
	var topics []string
	d.ensuredMu.Lock()
	for t := range tenants {
		if e := d.ensured[t]; e != nil && e.done {
			topics = append(topics, d.names.RetryTopic(t), d.names.DLQTopic(t), d.names.AttemptsTopic(t), d.names.AttemptLogTopic(t))
		}
	}
	d.ensuredMu.Unlock()
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	details, err := d.adm.ListTopics(ctx, topics...)
	if err != nil {
		return // Kafka unreachable: the consumers say so
	}
	d.ensuredMu.Lock()
	defer d.ensuredMu.Unlock()
	for t := range tenants {
		for _, topic := range []string{d.names.RetryTopic(t), d.names.DLQTopic(t), d.names.AttemptsTopic(t), d.names.AttemptLogTopic(t)} {
			if td, ok := details[topic]; !ok || topicGone(td.Err) {
				if e := d.ensured[t]; e != nil && e.done {
					e.done = false
					d.log.Warn("webhooks: a retry or dead-letter topic is missing; making it again", "tenant", t, "topic", topic)
				}
			}
		}
	}
}

// instanceID is host-pid-random: unique to this process.
func instanceID() string {
	host, _ := os.Hostname()
	if len(host) > 32 {
		host = host[:32]
	}
	return fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
}

// TopicSpec is how the dispatcher makes retry and dead-letter topics.
func (d *Dispatcher) TopicSpec() webhookstore.TopicSpec {
	spec := webhookstore.SpecOf(d.cfg.Webhooks, d.cfg.ReplicationFactor, d.cfg.MaxRecordBytes)
	spec.MinInsyncReplicas = d.cfg.MinInsyncReplicas
	return spec
}

func (d *Dispatcher) spawn(ctx context.Context, run func(context.Context) error) *worker {
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{started: time.Now(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = run(ctx)
		if w.err != nil && ctx.Err() == nil {
			select {
			case d.kick <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// sem is the webhook's per-process concurrency limit.
func (d *Dispatcher) sem(id string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sems[id]
	if !ok {
		s = make(chan struct{}, d.cfg.Webhooks.Concurrency)
		d.sems[id] = s
	}
	return s
}

// attempt makes one delivery attempt of l to wh, first recording in the
// tenant's attempts topic that it starts (l.Posts is then the number of
// this POST; see attemptLog). It is not cut short by ctx (shutdown lets it
// finish so that its outcome is recorded) beyond waiting for a concurrency
// slot. An error means no attempt was made.
func (d *Dispatcher) attempt(ctx context.Context, wh controlstate.Webhook, l *letter) (res attemptResult, err error) {
	s := d.sem(wh.ID)
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return attemptResult{}, ctx.Err()
	}
	defer func() { <-s }()
	n, err := d.attemptLog(l.Tenant).start(ctx, *l)
	if err != nil {
		return attemptResult{}, err
	}
	l.Posts = n
	return d.post1(ctx, wh, l), nil
}

// attemptCounted is attempt for a letter whose POST is already counted
// (attemptLog.startAll): it waits for a concurrency slot and POSTs. An
// error (ctx ended first) means no attempt was made.
func (d *Dispatcher) attemptCounted(ctx context.Context, wh controlstate.Webhook, l *letter) (attemptResult, error) {
	s := d.sem(wh.ID)
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return attemptResult{}, ctx.Err()
	}
	defer func() { <-s }()
	return d.post1(ctx, wh, l), nil
}

// post1 makes the POST of an attempt already counted, and records it.
func (d *Dispatcher) post1(ctx context.Context, wh controlstate.Webhook, l *letter) (res attemptResult) {
	pctx := context.WithoutCancel(ctx)
	if d.cfg.Tracer.Traced(l.Headers) {
		var span trace.Span
		pctx, span = d.startAttemptSpan(pctx, wh, l)
		defer func() { endAttemptSpan(span, res) }()
	}
	at := time.Now()
	res = d.post(pctx, wh.URL, wh.Secret, l.MessageID, body(*l))
	if d.cfg.Webhooks.AttemptLog {
		d.events.record(*l, res, at, time.Since(at))
	}
	d.attempts.WithLabelValues(res.Outcome.String()).Inc()
	if res.Outcome != Delivered {
		d.log.Debug("webhook attempt failed", "webhook", wh.ID, "message", l.MessageID, "attempt", l.Attempt,
			"status", res.Status, "err", res.describe(), "outcome", res.Outcome)
	}
	return res
}

// startAttemptSpan starts the span of one POST of a traced message, a
// child of the publish span its traceparent header names.
func (d *Dispatcher) startAttemptSpan(ctx context.Context, wh controlstate.Webhook, l *letter) (context.Context, trace.Span) {
	c, _ := cursor.Parse(l.Cursor)
	ctx, span, _ := d.cfg.Tracer.StartDelivery(ctx, l.Headers, c.Partition, c.Offset,
		tracing.Delivery{Op: tracing.OpWebhook, Topic: l.Topic, Consumer: wh.ID, Attempt: l.Attempt})
	if u, err := url.Parse(wh.URL); err == nil && span.IsRecording() {
		// The host only: a path or query may hold the receiver's secret.
		span.SetAttributes(attribute.String("server.address", u.Hostname()))
	}
	return ctx, span
}

// endAttemptSpan ends an attempt's span with its answer and outcome.
func endAttemptSpan(span trace.Span, res attemptResult) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("msgmesh.webhook.outcome", res.Outcome.String()))
		if res.Status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", res.Status))
		}
	}
	var err error
	if res.Outcome != Delivered {
		err = fmt.Errorf("%w: %s", tracing.ErrDeliveryFailed, res.describe())
	}
	tracing.EndDelivery(span, err)
}

// nextStep is the record that makes the next step of l after attempt
// number l.Attempt got res durable: nil (delivered), a dead letter, or a
// retry record for the next attempt. The caller writes it in the same
// transaction as the commit of the record l came from. Refused has no
// next step: the caller disables the webhook and leaves the message where
// it is.
func (d *Dispatcher) nextStep(l letter, res attemptResult) *kgo.Record {
	switch res.Outcome {
	case Delivered, Refused:
		return nil
	case Temporary:
		if l.Attempt < d.cfg.Webhooks.MaxAttempts {
			next := l
			next.Attempt++
			next.NotBefore = time.Now().Add(d.backoffFor(l.Attempt))
			next.LastStatus, next.LastError = res.Status, res.describe()
			return next.Record(d.names.RetryTopic(l.Tenant))
		}
	}
	dead := l
	dead.NotBefore = time.Time{}
	dead.LastStatus, dead.LastError = res.Status, res.describe()
	return dead.Record(d.names.DLQTopic(l.Tenant))
}

// backoffFor is the wait after attempt n failed: BackoffBase·2^(n-1),
// capped at BackoffMax, less up to 20% jitter.
func (d *Dispatcher) backoffFor(n int) time.Duration {
	b := d.cfg.Webhooks.BackoffBase
	for i := 1; i < n && b < d.cfg.Webhooks.BackoffMax; i++ {
		b *= 2
	}
	b = min(b, d.cfg.Webhooks.BackoffMax)
	return b - time.Duration(rand.Float64()*0.2*float64(b))
}

// disable records that the guard stopped a delivery to wh.
func (d *Dispatcher) disable(ctx context.Context, wh controlstate.Webhook, res attemptResult) error {
	reason := "the SSRF guard refused the delivery: " + res.describe()
	d.log.Warn("webhook disabled by the SSRF guard", "tenant", wh.Tenant, "webhook", wh.ID, "reason", reason)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.RequestTimeout)
	defer cancel()
	return d.cfg.Store.Disable(ctx, wh.Tenant, wh.ID, reason)
}
