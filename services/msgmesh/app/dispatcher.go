package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/msgmesh/msgmesh/platform/ssrf"
	"github.com/msgmesh/msgmesh/services/controlplane"
	"github.com/msgmesh/msgmesh/services/dispatcher"
)

// Dispatcher delivers webhooks (a target).
const Dispatcher = "dispatcher"

// webhookParts is what the webhook API and the dispatcher share on one
// process: the SSRF guard (with a resolver tests can replace), the TLS
// configuration and the dead-letter reader.
type webhookParts struct {
	resolver *switchResolver
	guard    *ssrf.Guard
	tls      *tls.Config
	dl       *dispatcher.DeadLetters
	disp     *dispatcher.Dispatcher
}

// switchResolver answers with net.DefaultResolver unless a test set
// another (SetWebhookResolver).
type switchResolver struct{ r atomic.Pointer[ssrf.Resolver] }

func (s *switchResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if p := s.r.Load(); p != nil {
		return (*p).LookupNetIP(ctx, network, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// SetWebhookResolver makes the SSRF guard of webhooks (registration and
// every delivery dial) resolve names with r; nil restores the system
// resolver. For tests that script DNS answers (a name turning private).
func (a *App) SetWebhookResolver(r ssrf.Resolver) {
	parts, err := a.webhookParts()
	if err != nil {
		return
	}
	if r == nil {
		parts.resolver.r.Store(nil)
		return
	}
	parts.resolver.r.Store(&r)
}

// webhookParts builds the shared webhook parts once, logging loudly when a
// test-only setting is on.
func (a *App) webhookParts() (*webhookParts, error) {
	if a.wh != nil {
		return a.wh, nil
	}
	w := a.cfg.Webhooks
	if w.UnsafeAllowPrivateTargets {
		a.log.Warn("UNSAFE: webhooks.unsafe_allow_private_targets (MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS) is set: " +
			"webhooks may target loopback and private addresses. TEST ONLY: never set it in production.")
	}
	if w.UnsafeTestHoldRetryCommit > 0 {
		a.log.Warn("UNSAFE: webhooks.unsafe_test_hold_retry_commit (MSGMESH_WEBHOOKS_UNSAFE_TEST_HOLD_RETRY_COMMIT) is set: "+
			"webhook retries stall before every commit. TEST ONLY: never set it in production.", "hold", w.UnsafeTestHoldRetryCommit)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if w.UnsafeCAFile != "" {
		a.log.Warn("UNSAFE: webhooks.unsafe_ca_file (MSGMESH_WEBHOOKS_UNSAFE_CA_FILE) is set: webhook TLS trusts extra CAs. TEST ONLY: never set it in production.",
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
	res := &switchResolver{}
	dl, err := dispatcher.NewDeadLetters(a.cfg.Kafka.TopicPrefix, a.clientOpts, a.maxRecordBytes(), a.cfg.Kafka.RequestTimeout, a.log.With("component", "deadletters"))
	if err != nil {
		return nil, err
	}
	a.add(service{name: "dead letters", stop: func(context.Context) { dl.Close() }})
	a.wh = &webhookParts{
		resolver: res,
		guard:    &ssrf.Guard{Resolver: res, AllowPrivate: w.UnsafeAllowPrivateTargets, DialTimeout: w.AttemptTimeout},
		tls:      tc,
		dl:       dl,
	}
	return a.wh, nil
}

// maxRecordBytes bounds retry and dead-letter records: the largest
// message's batch plus their metadata headers.
func (a *App) maxRecordBytes() int { return a.cfg.Publish.RecordBatchBytes() + 16<<10 }

// setupWebhookAPI gives the control plane what /v1/webhooks needs.
func (a *App) setupWebhookAPI(cp *controlplane.Service) error {
	parts, err := a.webhookParts()
	if err != nil {
		return err
	}
	spec := dispatcher.SpecOf(a.cfg.Webhooks, int16(a.cfg.Kafka.ReplicationFactor), a.maxRecordBytes())
	spec.MinInsyncReplicas = int16(a.cfg.Kafka.MinInsyncReplicas)
	cp.SetWebhooks(func() *ssrf.Guard { return parts.guard }, parts.dl, spec)
	return nil
}

func (a *App) initDispatcher(ctx context.Context) error {
	parts, err := a.webhookParts()
	if err != nil {
		return err
	}
	cp := a.controlPlane()
	d, err := dispatcher.New(dispatcher.Config{
		Webhooks:          a.cfg.Webhooks,
		TopicPrefix:       a.cfg.Kafka.TopicPrefix,
		ReplicationFactor: int16(a.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(a.cfg.Kafka.MinInsyncReplicas),
		RequestTimeout:    a.cfg.Kafka.RequestTimeout,
		MaxRecordBytes:    a.maxRecordBytes(),
		State:             a.clog.State(),
		ClientOpts:        a.clientOpts,
		Guard:             parts.guard,
		TLS:               parts.tls,
		WaitReady:         a.clog.WaitReady,
		Disable:           cp.DisableWebhook,
		Logger:            a.log.With("component", "dispatcher"),
		Registerer:        a.reg,
		Tracer:            a.tracer,
	})
	if err != nil {
		return err
	}
	a.clog.OnApply(d.OnControlEvent)
	parts.disp = d
	a.add(service{name: "dispatcher", run: d.Run, stop: d.Close})
	return nil
}
