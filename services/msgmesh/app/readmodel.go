package app

import (
	"context"

	"github.com/msgmesh/msgmesh/platform/readmodel"
)

// initReadModel builds the read model the control plane serves GET
// /v1/audit and GET /v1/webhooks/{id}/attempts from: PostgreSQL with
// postgres.url, else the bounded in-memory window, and the projector that
// fills it from the control topic and the attempt log topics. A database
// that is down pauses projection (and those two reads answer 503
// read_model_unavailable); nothing else waits for it.
func (a *App) initReadModel(ctx context.Context) error {
	var store readmodel.Store
	if url := a.cfg.Postgres.URL; url != "" {
		pg, err := readmodel.OpenPostgres(ctx, url)
		if err != nil {
			return err
		}
		a.add("read model database", part{close: func(context.Context) { pg.Close() }})
		store = pg
	} else {
		store = readmodel.NewMemory(0, 0)
	}
	p, err := readmodel.NewProjector(readmodel.ProjectorConfig{
		TopicPrefix: a.cfg.Kafka.TopicPrefix,
		ClientOpts:  a.clientOpts,
		Store:       store,
		Logger:      a.log.With("component", "readmodel"),
		Registerer:  a.reg,
	})
	if err != nil {
		return err
	}
	a.projector = p
	a.cp.SetReadModel(store)
	a.add("read model projector", part{run: p.Run})
	return nil
}

// ReadModelStatus is the projector's state (tests; /readyz shows it).
func (a *App) ReadModelStatus() (readmodel.Status, bool) {
	if a.projector == nil {
		return readmodel.Status{}, false
	}
	return a.projector.Status(), true
}
