// Package realtime serves live delivery to browsers and dashboards:
//
//	GET /v1/topics/{topic}/events   Server-Sent Events (?room=, ?cursor=, ?from=, Last-Event-ID)
//	GET /v1/ws                      WebSocket, JSON frames (proto/ws/frames.schema.json)
//
// One Kafka reader per topic per process (a hub) feeds every subscriber of
// that topic. A subscriber that resumes reads what it missed from Kafka
// directly, streaming, then joins the live feed with no gap and at most a
// boundary duplicate; a subscriber too slow for the live feed drops out of
// it and catches up the same way, so it never slows the others nor grows
// memory. Every event carries a position (the SSE id) that resumes every
// partition exactly on any node. When a position cannot be served within
// the replay window (records and age, and Kafka's retention), the stream
// says msgmesh-resync and continues live: never a silent partial backfill
// (spec sections 2, 3 and 5). Every SSE stream starts with an id-only
// event carrying its position; a stream the server ends on purpose (topic
// deleted, token expired, credential revoked, shutdown) says why first:
// msgmesh-closed on SSE, a closed frame on WebSocket.
package realtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/tracing"
)

// Config configures a Service.
type Config struct {
	// Realtime holds the tunables (replay window, buffers, heartbeat...).
	Realtime config.Realtime
	// CORSOrigins may open WebSockets from a browser; ["*"] or empty
	// allows any origin (credentials are bearer tokens, never cookies).
	CORSOrigins []string
	// RequestTimeout bounds Kafka offset listings (kafka.request_timeout;
	// required).
	RequestTimeout time.Duration
	// TopicPrefix names Kafka topics (names.Mapper).
	TopicPrefix string
	// State is the control projection (topics, epochs).
	State *controlstate.State
	// ClientOpts reach Kafka.
	ClientOpts []kgo.Opt
	// Authenticate re-checks a stream's credential (revocation, expiry)
	// and authenticates WebSocket token refreshes.
	Authenticate func(cred string) (auth.Principal, error)
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Logger and Registerer receive logs and metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Tracer makes a delivery span per event of a traced record (one
	// whose traceparent header a traced publish wrote); nil: tracing off.
	Tracer *tracing.Tracer
}

// Service serves SSE and WebSocket delivery.
type Service struct {
	cfg            config.Realtime
	origins        []string
	requestTimeout time.Duration
	state          *controlstate.State
	mapper         names.Mapper
	clientOpts     []kgo.Opt
	authenticate   func(string) (auth.Principal, error)
	nowFn          func() time.Time
	log            *slog.Logger
	tracer         *tracing.Tracer
	admCl          *kgo.Client
	adm            *kadm.Client

	// ctx ends at Shutdown: every stream ends with it.
	ctx    context.Context
	cancel context.CancelFunc

	hubsMu   sync.Mutex
	hubs     map[string]*hub
	stopping bool

	subscribers atomic.Int64
	catchups    chan struct{}
	// catchupWait bounds the wait for a catch-up slot (then the stream
	// ends resumably); catchupPark is how long a catch-up waits for its
	// client on one event before it gives its slot back.
	catchupWait time.Duration
	catchupPark time.Duration
	conns       sync.WaitGroup

	metrics metrics
}

type metrics struct {
	subscribers *prometheus.GaugeVec
	sent        *prometheus.CounterVec
	resyncs     *prometheus.CounterVec
	slow        *prometheus.CounterVec
	hubs        prometheus.Gauge
	catchup     prometheus.Counter
	closed      *prometheus.CounterVec
	misplaced   prometheus.Counter
}

// New makes a Service; it starts hubs on demand.
func New(cfg Config) (*Service, error) {
	if cfg.State == nil || cfg.Authenticate == nil {
		return nil, errors.New("realtime: Config.State and Config.Authenticate are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The tunables' defaults are config.Defaults' (one place); a zero here
	// is a wiring mistake.
	if cfg.RequestTimeout <= 0 || cfg.Realtime.MaxCatchups <= 0 {
		return nil, errors.New("realtime: Config.RequestTimeout and Realtime.MaxCatchups must be positive (config.Defaults has them)")
	}
	cl, err := kgo.NewClient(cfg.ClientOpts...)
	if err != nil {
		return nil, fmt.Errorf("realtime: kafka client: %w", err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(cfg.RequestTimeout.Milliseconds()))
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		cfg: cfg.Realtime, origins: cfg.CORSOrigins, requestTimeout: cfg.RequestTimeout, state: cfg.State,
		mapper: names.Mapper{Prefix: cfg.TopicPrefix}, clientOpts: cfg.ClientOpts, authenticate: cfg.Authenticate,
		nowFn: cfg.Now, log: cfg.Logger, tracer: cfg.Tracer, admCl: cl, adm: adm, ctx: ctx, cancel: cancel,
		hubs: map[string]*hub{}, catchups: make(chan struct{}, cfg.Realtime.MaxCatchups),
		catchupWait: cmp.Or(max(cfg.Realtime.WriteTimeout, 0), 30*time.Second), catchupPark: 250 * time.Millisecond,
		metrics: metrics{
			subscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgmesh_realtime_subscribers", Help: "Open SSE streams and WebSocket subscriptions."}, []string{"transport"}),
			sent:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgmesh_realtime_events_sent_total", Help: "Messages written to SSE streams and WebSocket subscriptions."}, []string{"transport"}),
			resyncs:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgmesh_realtime_resyncs_total", Help: "msgmesh-resync signals sent, by reason."}, []string{"reason"}),
			slow:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgmesh_realtime_slow_consumers_total", Help: "Subscribers too slow for the live feed: caught up from Kafka (catchup) or disconnected (disconnect); catchup_busy: a catch-up found no free Kafka reader slot in time and its stream ended resumably."}, []string{"action"}),
			hubs:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgmesh_realtime_hubs", Help: "Topics with a live Kafka reader on this process."}),
			catchup:     prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_realtime_catchup_messages_total", Help: "Messages delivered from Kafka directly (resume backfill and slow-subscriber catch-up)."}),
			closed:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgmesh_realtime_closed_total", Help: "SSE streams, WebSocket subscriptions and connections the server ended on purpose (msgmesh-closed events and closed frames), by reason."}, []string{"transport", "reason"}),
			misplaced:   prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_realtime_room_misplaced_records_total", Help: "Records keyed with a subscribed room but stored on another partition than the room's (produced with another partitioner than murmur2, e.g. kcat's default): room subscriptions do not receive them."}),
		},
	}
	// Series for every transport and action exist from the start, so that
	// rate() and increase() in dashboards and alerts see the first event
	// (deployments/prometheus).
	for _, tr := range []string{"sse", "ws"} {
		s.metrics.subscribers.WithLabelValues(tr)
		s.metrics.sent.WithLabelValues(tr)
	}
	for _, a := range []string{"catchup", "disconnect", "catchup_busy"} {
		s.metrics.slow.WithLabelValues(a)
	}
	for _, r := range []string{ReasonEpoch, ReasonRetention, ReasonWindowRecords, ReasonWindowAge} {
		s.metrics.resyncs.WithLabelValues(r)
	}
	if cfg.Registerer != nil {
		m := s.metrics
		for _, c := range []prometheus.Collector{m.subscribers, m.sent, m.resyncs, m.slow, m.hubs, m.catchup, m.closed, m.misplaced} {
			if err := cfg.Registerer.Register(c); err != nil {
				cl.Close()
				cancel()
				return nil, fmt.Errorf("realtime: metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Routes registers the SSE and WebSocket routes on r (authenticated; the
// middleware must accept ?token= on both, as EventSource and browser
// WebSockets cannot set headers).
func (s *Service) Routes(r gin.IRouter) {
	r.GET("/v1/topics/:topic/events", s.sse)
	r.GET("/v1/ws", s.ws)
}

// OnControlEvent ends the streams of deleted topics; register it with
// controlstate.Log.OnApply.
func (s *Service) OnControlEvent(ev controlstate.Event, outcome error) {
	if outcome != nil || ev.Type != controlstate.TypeTopicDeleted {
		return
	}
	s.hubsMu.Lock()
	var gone []*hub
	for _, h := range s.hubs {
		if t, ok := s.topicOf(h.topic); !ok || shortEpoch(t.Epoch) != h.key[len(h.topic)+1:] {
			gone = append(gone, h)
		}
	}
	s.hubsMu.Unlock()
	for _, h := range gone {
		go h.close(errTopicDeleted)
	}
}

// topicOf finds the live topic behind a Kafka topic name.
func (s *Service) topicOf(kafkaTopic string) (controlstate.Topic, bool) {
	for _, t := range s.state.AllTopics() {
		if t.KafkaTopic == kafkaTopic {
			return t, true
		}
	}
	return controlstate.Topic{}, false
}

// Shutdown ends every stream: SSE responses finish after msgmesh-closed
// shutdown, WebSockets send closed shutdown and close with 1001. Register it with http.Server.RegisterOnShutdown so that graceful
// shutdown does not wait for streams that never end by themselves.
func (s *Service) Shutdown() {
	s.hubsMu.Lock()
	s.stopping = true
	hs := make([]*hub, 0, len(s.hubs))
	for _, h := range s.hubs {
		hs = append(hs, h)
	}
	s.hubsMu.Unlock()
	s.cancel()
	for _, h := range hs {
		h.close(errShutdown)
	}
}

// Run waits for ctx (hubs and streams run on their own).
func (s *Service) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Close ends every stream, waits (bounded by ctx) for WebSocket
// connections to finish closing, and releases the Kafka client.
func (s *Service) Close(ctx context.Context) {
	s.Shutdown()
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	s.admCl.Close()
}

func (s *Service) now() time.Time { return s.nowFn() }

func (s *Service) addSubscriber() bool {
	if s.subscribers.Add(1) > int64(s.cfg.MaxSubscribers) {
		s.subscribers.Add(-1)
		return false
	}
	return true
}

func (s *Service) removeSubscriber() { s.subscribers.Add(-1) }

// errCatchupBusy: no catch-up slot came free within catchupWait; the
// stream ends resumably (SSE: the client reconnects with Last-Event-ID;
// WebSocket: unsubscribed reason error, resubscribe from the position).
var errCatchupBusy = errors.New("every catch-up reader is busy; resume from the last position")

// acquireCatchup takes one of conn's slots (if conn is set: a WebSocket's
// own cap) and one of the realtime.max_catchups slots of direct Kafka
// readers, waiting at most catchupWait in all.
func (s *Service) acquireCatchup(ctx context.Context, conn chan struct{}) (func(), error) {
	// Fast path: free slots, no timer.
	if conn == nil || trySend(conn) {
		if trySend(s.catchups) {
			return s.releaser(conn), nil
		}
		if conn != nil {
			<-conn
		}
	}
	tm := time.NewTimer(s.catchupWait)
	defer tm.Stop()
	if conn != nil {
		select {
		case conn <- struct{}{}:
		case <-tm.C:
			return nil, errCatchupBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case s.catchups <- struct{}{}:
		return s.releaser(conn), nil
	case <-tm.C:
		err := errCatchupBusy
		if conn != nil {
			<-conn
		}
		return nil, err
	case <-ctx.Done():
		if conn != nil {
			<-conn
		}
		return nil, ctx.Err()
	}
}

func (s *Service) releaser(conn chan struct{}) func() {
	return func() {
		<-s.catchups
		if conn != nil {
			<-conn
		}
	}
}

func trySend(ch chan struct{}) bool {
	select {
	case ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// endOffsets lists the end offset of each of kafkaTopic's n partitions,
// retrying briefly while a new topic's metadata propagates.
func (s *Service) endOffsets(ctx context.Context, kafkaTopic string, n int32) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	return s.listOffsets(ctx, kafkaTopic, int(n), s.adm.ListEndOffsets)
}

// listOffsets runs list for kafkaTopic and returns one offset per
// partition 0..n-1, retrying retriable errors until ctx ends.
func (s *Service) listOffsets(ctx context.Context, kafkaTopic string, n int, list func(context.Context, ...string) (kadm.ListedOffsets, error)) ([]int64, error) {
	for {
		out, err := listOnce(ctx, kafkaTopic, n, list)
		if err == nil {
			return out, nil
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, errMissingPartition) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errMissingPartition = errors.New("partition missing from the offsets listing")

func listOnce(ctx context.Context, kafkaTopic string, n int, list func(context.Context, ...string) (kadm.ListedOffsets, error)) ([]int64, error) {
	lo, err := list(ctx, kafkaTopic)
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for p := range out {
		o, ok := lo.Lookup(kafkaTopic, int32(p))
		if !ok {
			return nil, fmt.Errorf("%w: %s/%d", errMissingPartition, kafkaTopic, p)
		}
		if o.Err != nil {
			return nil, o.Err
		}
		out[p] = o.Offset
	}
	return out, nil
}

// topicWatch tells a Kafka reader (the hub's or a catch-up's) that its
// topic is gone: records under another topic id than the reader's first
// fetch (or the hub's) had (the topic was deleted and made again under the
// same Kafka name), or a reader that gets nothing or unknown-topic errors
// while the broker's metadata says the topic does not exist, for
// goneGrace. Other fetch errors are logged (once per error text in a row).
// The id comes from fetches, not from metadata, which may lag behind a
// deletion on some brokers.
type topicWatch struct {
	s       *Service
	topic   string
	id      [16]byte
	learned func([16]byte) // told the id when the first fetch tells it
	what    string

	missingSince time.Time
	lastErr      string
}

// goneGrace is how long the metadata must keep saying a topic does not
// exist before a reader believes it (a new topic's metadata propagates).
var goneGrace = time.Second

// check returns errTopicDeleted when fs shows the topic gone.
func (w *topicWatch) check(ctx context.Context, fs kgo.Fetches) error {
	var zero [16]byte
	for _, f := range fs {
		for _, ft := range f.Topics {
			if ft.Topic != w.topic || ft.TopicID == zero {
				continue
			}
			if w.id == zero {
				w.id = ft.TopicID // the first fetch tells
				if w.learned != nil {
					w.learned(w.id)
				}
			} else if ft.TopicID != w.id {
				return fmt.Errorf("%w: %s now has another topic id", errTopicDeleted, w.topic)
			}
		}
	}
	unknown, failed := false, false
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return // a poll bounded by its context
		}
		failed = true
		if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID) {
			unknown = true
		}
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.s.log.Warn("realtime: "+w.what+" fetch", "topic", t, "partition", p, "err", err)
		}
	})
	if !failed {
		w.lastErr = ""
	}
	if !unknown && (failed || fs.NumRecords() > 0) {
		w.missingSince = time.Time{}
		return nil
	}
	// Nothing at all, or the topic unknown: it may be gone (franz-go
	// hides most fetch errors of a deleted topic and just waits).
	return w.idle(ctx)
}

// idle asks the broker whether the topic is gone; it must say so for
// goneGrace.
func (w *topicWatch) idle(ctx context.Context) error {
	if w.s.topicGone(ctx, w.topic) {
		if w.missingSince.IsZero() {
			w.missingSince = time.Now()
		}
		if time.Since(w.missingSince) >= goneGrace {
			return fmt.Errorf("%w: %s no longer exists", errTopicDeleted, w.topic)
		}
	} else {
		w.missingSince = time.Time{}
	}
	return nil
}

// topicGone asks the broker whether kafkaTopic is missing; false when it
// cannot tell.
func (s *Service) topicGone(ctx context.Context, kafkaTopic string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	tds, err := s.adm.ListTopics(ctx, kafkaTopic)
	if err != nil {
		return false
	}
	td, ok := tds[kafkaTopic]
	return !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) || errors.Is(td.Err, kerr.UnknownTopicID)
}
