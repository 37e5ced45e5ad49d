// Package webhookstore is what the webhook API (the control plane) and
// webhook delivery (the dispatcher) share: the SSRF guard and the TLS
// configuration of every webhook connection, the Kafka layout of a
// tenant's retry, dead-letter and attempt topics (TopicSpec,
// EnsureTopics), the record format of retries and dead letters (Letter),
// the dead-letter reader (inspection and replay), and disabling a
// webhook (a control event). Neither service imports the other: both
// import this package.
package webhookstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/ssrf"
)

// MaxReasonBytes caps a webhook's disabled reason (bytes).
const MaxReasonBytes = 500

// ControlLog is what the store needs of the control log: the projection
// and appending an event (controlstate.Log).
type ControlLog interface {
	State() *controlstate.State
	Append(ctx context.Context, typ string, data any) (controlstate.Event, error)
}

// Config configures a Store.
type Config struct {
	// Webhooks is the webhooks.* section.
	Webhooks config.Webhooks
	// Names maps webhooks onto Kafka names.
	Names names.Mapper
	// ClientOpts reach Kafka; Admin reads the webhooks' committed offsets.
	ClientOpts []kgo.Opt
	Admin      *kadm.Client
	// Log is the control log (required).
	Log ControlLog
	// ReplicationFactor and MinInsyncReplicas of the topics EnsureTopics
	// makes (kafka.*); -1 = broker default.
	ReplicationFactor int16
	MinInsyncReplicas int16
	// RequestTimeout bounds each Kafka call of the dead-letter reader.
	RequestTimeout time.Duration
	// MaxRecordBytes is the largest retry or dead-letter record (a whole
	// message plus its metadata), bytes.
	MaxRecordBytes int
	// Logger receives the loud warnings of the test-only settings.
	Logger *slog.Logger
}

// Store holds the shared webhook parts of one process. Open it once;
// Close releases the dead-letter reader's client.
type Store struct {
	cfg      Config
	resolver *switchResolver
	guard    *ssrf.Guard
	tls      *tls.Config
	dl       *DeadLetters
	spec     TopicSpec
}

// Open builds the store, logging loudly when a test-only setting is on.
// A CA file that cannot be read or holds no certificate is an error.
func Open(cfg Config) (*Store, error) {
	if cfg.Log == nil || cfg.Admin == nil {
		return nil, errors.New("webhookstore: Config.Log and Admin are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := cfg.Webhooks
	if w.UnsafeAllowPrivateTargets {
		log.Warn("UNSAFE: webhooks.unsafe_allow_private_targets (MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS) is set: " +
			"webhooks may target loopback and private addresses. TEST ONLY: never set it in production.")
	}
	if w.UnsafeTestHoldRetryCommit > 0 {
		log.Warn("UNSAFE: webhooks.unsafe_test_hold_retry_commit (MSGMESH_WEBHOOKS_UNSAFE_TEST_HOLD_RETRY_COMMIT) is set: "+
			"webhook retries stall before every commit. TEST ONLY: never set it in production.", "hold", w.UnsafeTestHoldRetryCommit)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if w.UnsafeCAFile != "" {
		log.Warn("UNSAFE: webhooks.unsafe_ca_file (MSGMESH_WEBHOOKS_UNSAFE_CA_FILE) is set: webhook TLS trusts extra CAs. TEST ONLY: never set it in production.",
			"file", w.UnsafeCAFile)
		pem, err := os.ReadFile(w.UnsafeCAFile)
		if err != nil {
			return nil, fmt.Errorf("webhooks.unsafe_ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("webhooks.unsafe_ca_file: no PEM certificate in it")
		}
		tc.RootCAs = pool
	}
	dl, err := NewDeadLetters(cfg.Names.Prefix, cfg.ClientOpts, cfg.MaxRecordBytes, cfg.RequestTimeout, log.With("component", "deadletters"))
	if err != nil {
		return nil, err
	}
	res := &switchResolver{}
	spec := SpecOf(w, cfg.ReplicationFactor, cfg.MaxRecordBytes)
	spec.MinInsyncReplicas = cfg.MinInsyncReplicas
	return &Store{
		cfg:      cfg,
		resolver: res,
		guard:    &ssrf.Guard{Resolver: res, AllowPrivate: w.UnsafeAllowPrivateTargets, DialTimeout: w.AttemptTimeout},
		tls:      tc,
		dl:       dl,
		spec:     spec,
	}, nil
}

// Close releases the dead-letter reader.
func (s *Store) Close() { s.dl.Close() }

// Guard is the SSRF guard of registration checks and of every delivery
// dial.
func (s *Store) Guard() *ssrf.Guard { return s.guard }

// TLS is the TLS configuration of webhook connections.
func (s *Store) TLS() *tls.Config { return s.tls }

// DeadLetters reads and replays dead letters.
func (s *Store) DeadLetters() *DeadLetters { return s.dl }

// Spec is how a tenant's retry, dead-letter and attempt topics are made.
func (s *Store) Spec() TopicSpec { return s.spec }

// Names maps webhooks onto Kafka names.
func (s *Store) Names() names.Mapper { return s.cfg.Names }

// EnsureTopics makes tenant's retry, dead-letter and attempt topics when
// missing, returning those it made.
func (s *Store) EnsureTopics(ctx context.Context, tenant string) ([]string, error) {
	return EnsureTopics(ctx, s.cfg.Admin, s.cfg.Names, tenant, s.spec)
}

// SetResolver makes the guard (registration and every delivery dial)
// resolve names with r; nil restores the system resolver. For tests that
// script DNS answers (a name turning private).
func (s *Store) SetResolver(r ssrf.Resolver) {
	if r == nil {
		s.resolver.r.Store(nil)
		return
	}
	s.resolver.r.Store(&r)
}

// Disable records that delivery to webhook id of tenant stopped (the SSRF
// guard refused it), with the reason (capped at MaxReasonBytes) and the
// group's committed offsets, and returns once the event is applied. A
// webhook deleted or already disabled (by another node) is left alone.
func (s *Store) Disable(ctx context.Context, tenant, id, reason string) error {
	w, ok := s.cfg.Log.State().Webhook(tenant, id)
	if !ok || !w.Enabled {
		return nil // deleted, or already disabled (by another node): nothing to append
	}
	offs := s.CommittedOffsets(ctx, w)
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes]
	}
	_, err := s.cfg.Log.Append(ctx, controlstate.TypeWebhookDisabled, controlstate.WebhookDisabledData{Tenant: tenant, ID: id, Reason: reason, Offsets: offs})
	if errors.Is(err, controlstate.ErrNotFound) {
		return nil // deleted meanwhile
	}
	return err
}

// CommittedOffsets is w's group's committed offsets on its Kafka topic
// (nil when Kafka cannot say): recorded in webhook.disabled, they are
// where delivery resumes if Kafka expires the empty group's offsets while
// the webhook is disabled.
func (s *Store) CommittedOffsets(ctx context.Context, w controlstate.Webhook) map[int32]int64 {
	resp, err := s.cfg.Admin.FetchOffsets(ctx, w.Group)
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Topic == w.KafkaTopic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// SpecOf is the TopicSpec of the webhooks.* section cfg.
func SpecOf(cfg config.Webhooks, rf int16, maxRecordBytes int) TopicSpec {
	return TopicSpec{RetryPartitions: int32(cfg.RetryPartitions), DLQPartitions: int32(cfg.DLQPartitions),
		ReplicationFactor: rf, Retention: cfg.DLQRetention, MaxMessageBytes: maxRecordBytes}
}

// switchResolver answers with net.DefaultResolver unless a test set
// another (SetResolver).
type switchResolver struct{ r atomic.Pointer[ssrf.Resolver] }

func (s *switchResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if p := s.r.Load(); p != nil {
		return (*p).LookupNetIP(ctx, network, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}
