package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/tracing"
	"github.com/msgmesh/msgmesh/services/gateway/pollgroup"
)

// Topics is what the gateway needs of the control plane: creating a topic
// when the strict topic gate is off, and re-making a Kafka topic that is
// missing.
type Topics interface {
	CreateTopic(ctx context.Context, tenant, name string, partitions int) (controlstate.Topic, error)
	EnsureKafkaTopic(ctx context.Context, t controlstate.Topic) error
}

// Quota is what the gateway needs of the tenant limits: message rate and
// monthly quota checks before a publish, and counting after Kafka acked.
type Quota interface {
	AllowMessages(tenant, plan string, n int) error
	Record(tenant string, n int)
}

// Config is what the gateway reads of the configuration: its sections,
// validated by config.Config.Validate.
type Config struct {
	// HTTP gives the listener address (part of poll consumers' instance
	// ids).
	HTTP config.HTTP
	// Kafka names topics and bounds produce and admin calls.
	Kafka config.Kafka
	// Publish bounds publish bodies; Poll bounds long polls and consumers.
	Publish config.Publish
	Poll    config.Poll
}

// ConfigOf picks the gateway's sections out of c.
func ConfigOf(c config.Config) Config {
	return Config{HTTP: c.HTTP, Kafka: c.Kafka, Publish: c.Publish, Poll: c.Poll}
}

// Gateway serves publish and poll.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	state    *controlstate.State
	topics   Topics
	quota    Quota
	mapper   names.Mapper
	producer *kgo.Client
	polls    *pollgroup.Manager
	metrics  metrics
	tracer   *tracing.Tracer // nil: tracing off
	// draining is closed by Drain: long polls end at once.
	draining  chan struct{}
	drainOnce sync.Once
}

type metrics struct {
	published      prometheus.Counter
	publishSeconds prometheus.Histogram
	polled         prometheus.Counter
}

// New makes a Gateway. clientOpts reach Kafka; reg receives metrics.
func New(cfg Config, state *controlstate.State, topics Topics, quota Quota, clientOpts []kgo.Opt, log *slog.Logger, reg prometheus.Registerer) (*Gateway, error) {
	maxBatch := int32(cfg.Publish.RecordBatchBytes())
	producer, err := kgo.NewClient(kafkaclient.With(clientOpts,
		kgo.RequiredAcks(kgo.AllISRAcks()), // with the idempotent producer (franz-go's default)
		kgo.ProducerBatchMaxBytes(maxBatch),
		kgo.RecordDeliveryTimeout(cfg.Kafka.RequestTimeout),
		kgo.MaxBufferedRecords(100_000),
		kgo.UnknownTopicRetries(2),
	)...)
	if err != nil {
		return nil, fmt.Errorf("gateway: producer: %w", err)
	}
	polls, err := pollgroup.New(pollgroup.Config{
		// A partition handed over in a rebalance is first fetched when the
		// fetch in flight ends: 1 s bounds that delay (franz-go's default is
		// 5 s) at the cost of one idle fetch per member per second.
		ClientOpts:  kafkaclient.With(clientOpts, kgo.FetchMaxWait(time.Second)),
		IdleTimeout: cfg.Poll.ConsumerIdleTimeout,
		// Static members: a node restarted after a crash gets its poll
		// consumers' partitions back at once (issue 18 item 7).
		InstanceIDPrefix: nodeInstancePrefix(cfg.HTTP.Addr),
		SessionTimeout:   cfg.Poll.SessionTimeout,
		MaxMembers:       cfg.Poll.MaxConsumers,
		// No tenant may hold more than a quarter of the process's slots.
		MaxMembersPerOwner: max(1, cfg.Poll.MaxConsumers/4),
		Logger:             log,
		Registerer:         reg,
	})
	if err != nil {
		producer.Close()
		return nil, fmt.Errorf("gateway: poll groups: %w", err)
	}
	g := &Gateway{
		cfg: cfg, log: log, state: state, topics: topics, quota: quota, mapper: names.Mapper{Prefix: cfg.Kafka.TopicPrefix},
		producer: producer, polls: polls, draining: make(chan struct{}),
		metrics: metrics{
			published: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_published_messages_total", Help: "Messages acknowledged by Kafka through publish."}),
			publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgmesh_publish_duration_seconds", Help: "Publish request time until Kafka acknowledged.",
				Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
			polled: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgmesh_polled_messages_total", Help: "Messages written to poll responses."}),
		},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{g.metrics.published, g.metrics.publishSeconds, g.metrics.polled} {
			if err := reg.Register(c); err != nil {
				g.Close(context.Background())
				return nil, fmt.Errorf("gateway: metrics: %w", err)
			}
		}
	}
	return g, nil
}

// SetTracer makes publish spans and poll delivery spans with t (nil:
// tracing off, the default). Call it before Routes.
func (g *Gateway) SetTracer(t *tracing.Tracer) { g.tracer = t }

// OnControlEvent closes poll consumers of deleted topics and forgets the
// topic's Kafka metadata (a topic made again gets a new topic id, which the
// producer would otherwise never learn); register it with
// controlstate.Log.OnApply.
func (g *Gateway) OnControlEvent(ev controlstate.Event, outcome error) {
	if outcome != nil || ev.Type != controlstate.TypeTopicDeleted {
		return
	}
	var d controlstate.TopicDeletedData
	if jsonUnmarshal(ev.Data, &d) == nil {
		kt := g.mapper.KafkaTopic(d.Tenant, d.Topic)
		go func() {
			g.producer.PurgeTopicsFromClient(kt)
			g.polls.CloseTopic(kt)
		}()
	}
}

// Run runs background work (expiring idle poll consumers) until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	g.polls.Run(ctx)
	return nil
}

// Routes registers publish, poll and commit on r (already authenticated).
func (g *Gateway) Routes(r gin.IRouter) {
	r.POST("/v1/topics/:topic/messages", g.publish)
	r.POST("/v1/topics/:topic/poll", g.poll)
	r.POST("/v1/topics/:topic/commit", g.commit)
}

// Drain ends the waits of long polls in flight (they answer 503
// shutting_down without delivering anything); the HTTP server calls it when
// shutdown begins, so SIGTERM does not wait out every wait_ms.
func (g *Gateway) Drain() { g.drainOnce.Do(func() { close(g.draining) }) }

// Close flushes publishes in flight, then closes every poll consumer
// without committing anything unacknowledged. The HTTP server must have
// stopped first.
func (g *Gateway) Close(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, g.cfg.Kafka.RequestTimeout)
	if err := g.producer.Flush(fctx); err != nil {
		g.log.Warn("flushing publishes at shutdown", "err", err)
	}
	cancel()
	g.producer.Close()
	g.polls.Close(ctx)
}

func (g *Gateway) fail(c *gin.Context, err error) { httpapi.Abort(c, g.log, err) }

// nodeInstancePrefix names this node's poll members for static group
// membership: a hash of the host name and the HTTP listen address, the same
// after a restart of this node and different on any other (two nodes
// cannot listen on one address of one host). With port 0 the address
// changes on every start, so the prefix is random.
func nodeInstancePrefix(httpAddr string) string {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(httpAddr)
	var b [8]byte
	if port == "" || port == "0" {
		_, _ = rand.Read(b[:])
	} else {
		sum := sha256.Sum256([]byte("msgmesh-poll\x00" + host + "\x00" + httpAddr))
		copy(b[:], sum[:])
	}
	return "msgmesh-" + hex.EncodeToString(b[:])
}
