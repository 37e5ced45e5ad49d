package app

import (
	"context"

	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/ssrf"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
	"github.com/msgmesh/msgmesh/services/dispatcher"
)

// Dispatcher delivers webhooks (a target).
const Dispatcher = "dispatcher"

// SetWebhookResolver makes the SSRF guard of webhooks (registration and
// every delivery dial) resolve names with r; nil restores the system
// resolver. For tests that script DNS answers (a name turning private).
// A process without the webhook store (no control plane or dispatcher
// target) has no guard to change.
func (a *App) SetWebhookResolver(r ssrf.Resolver) {
	if a.webhooks != nil {
		a.webhooks.SetResolver(r)
	}
}

// maxRecordBytes bounds retry and dead-letter records: the largest
// message's batch plus their metadata headers.
func (a *App) maxRecordBytes() int { return a.cfg.Publish.RecordBatchBytes() + 16<<10 }

// initWebhookStore opens what the webhook API and the dispatcher share:
// the SSRF guard, webhook TLS (a bad webhooks.unsafe_ca_file fails the
// start), the dead-letter reader and disabling a webhook.
func (a *App) initWebhookStore(ctx context.Context) error {
	st, err := webhookstore.Open(webhookstore.Config{
		Webhooks:          a.cfg.Webhooks,
		Names:             names.Mapper{Prefix: a.cfg.Kafka.TopicPrefix},
		ClientOpts:        a.clientOpts,
		Admin:             a.adm,
		Log:               a.clog,
		ReplicationFactor: int16(a.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(a.cfg.Kafka.MinInsyncReplicas),
		RequestTimeout:    a.cfg.Kafka.RequestTimeout,
		MaxRecordBytes:    a.maxRecordBytes(),
		Logger:            a.log,
	})
	if err != nil {
		return err
	}
	a.webhooks = st
	a.add(modWebhookStore, part{close: func(context.Context) { st.Close() }})
	return nil
}

func (a *App) initDispatcher(ctx context.Context) error {
	d, err := dispatcher.New(dispatcher.Config{
		Webhooks:          a.cfg.Webhooks,
		TopicPrefix:       a.cfg.Kafka.TopicPrefix,
		ReplicationFactor: int16(a.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(a.cfg.Kafka.MinInsyncReplicas),
		RequestTimeout:    a.cfg.Kafka.RequestTimeout,
		MaxRecordBytes:    a.maxRecordBytes(),
		State:             a.clog.State(),
		ClientOpts:        a.clientOpts,
		Guard:             a.webhooks.Guard(),
		TLS:               a.webhooks.TLS(),
		WaitReady:         a.clog.WaitReady,
		Store:             a.webhooks,
		Logger:            a.log.With("component", "dispatcher"),
		Registerer:        a.reg,
		Tracer:            a.tracer,
	})
	if err != nil {
		return err
	}
	a.disp = d
	a.add(Dispatcher, part{onEvent: d.OnControlEvent, run: d.Run, close: d.Close})
	return nil
}
