package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/names"
	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
	"github.com/msgmesh/msgmesh/services/mcp"
	"github.com/msgmesh/msgmesh/services/panel"

	"github.com/gin-gonic/gin"
)

// DemoTopic is the demo tenant's one topic.
const DemoTopic = "live"

// initPanel mounts /panel/ and /demo. The panel calls this node's own API
// with each session's key; sessions are sealed under the control log's
// keyring, which every node shares, so a login works on every node.
func (a *App) initPanel(ctx context.Context) error {
	self, err := a.selfURL()
	if err != nil {
		return err
	}
	client := loopbackClient("")
	client.Timeout = 60 * time.Second
	demo := &demoKeys{a: a}
	p, err := panel.New(panel.Config{
		APIURL:     self,
		HTTPClient: client,
		Sealer:     a.keyring,
		SessionTTL: a.cfg.Panel.SessionTTL,
		Admin:      a.adm,
		Names:      names.Mapper{Prefix: a.cfg.Kafka.TopicPrefix},
		Usage:      a.limiter.Usage,
		Limits:     a.cfg.Limits,
		Suspension: a.suspension,
		Sessions:   panelSessions{a},
		Now:        a.now,
		Logger:     a.log.With("component", "panel"),
		Demo: panel.Demo{
			Demo:  a.cfg.Demo,
			Topic: DemoTopic,
			Key:   demo.get,
			Watch: func(ctx context.Context, key, cursor string) (any, error) {
				c, err := msgmesh.New(msgmesh.Options{URL: self, APIKey: key, HTTPClient: loopbackClient("")})
				if err != nil {
					return nil, err
				}
				return a.mcp.Watch(ctx, c, mcp.WatchIn{Topic: DemoTopic, Cursor: cursor, MaxEvents: 50, WaitMs: 15000})
			},
		},
	})
	if err != nil {
		return err
	}
	a.panel = p
	a.add(Panel, part{
		// The panel has its own login: it mounts on the engine, outside the
		// API's authentication.
		routes: func(gin.IRouter) { p.Routes(a.engine) },
		close: func(ctx context.Context) {
			p.Close()
			demo.revoke(ctx)
		},
	})
	return nil
}

// demoKeys makes the demo's tenant, topic and this node's key on first
// use. The key may publish to, subscribe to and read the demo topic and
// mint tokens (narrower still), nothing else and in no other tenant; it
// is revoked when the node stops.
type demoKeys struct {
	a     *App
	mu    sync.Mutex
	key   string
	keyID string
}

func (d *demoKeys) caller() auth.Principal {
	return auth.Principal{Tenant: d.a.cfg.Demo.Tenant, Caps: capability.ForRole(capability.RoleAdmin)}
}

func (d *demoKeys) get(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.a.clog.State()
	if d.key != "" {
		if k, ok := st.Key(d.a.cfg.Demo.Tenant, d.keyID); ok && k.RevokedAt == nil {
			return d.key, nil
		}
		d.key = "" // revoked by someone: make another
	}
	if !d.a.ready() {
		return "", errors.New("the node is starting; retry shortly")
	}
	tenant := d.a.cfg.Demo.Tenant
	if _, ok := st.Tenant(tenant); !ok {
		if _, _, err := d.a.cp.CreateTenant(ctx, tenant, controlstate.PlanFree); err != nil {
			if _, ok := st.Tenant(tenant); !ok {
				return "", err
			}
		}
	}
	if _, ok := st.Topic(tenant, DemoTopic); !ok {
		if _, err := d.a.cp.CreateTopic(ctx, tenant, DemoTopic, 1); err != nil {
			if _, ok := st.Topic(tenant, DemoTopic); !ok {
				return "", err
			}
		}
	}
	caps := []capability.Capability{
		{Ops: []capability.Op{capability.OpPublish, capability.OpSubscribe, capability.OpTopicsRead}, Topics: []string{DemoTopic}},
		{Ops: []capability.Op{capability.OpTokensMint}, Topics: []string{"*"}},
	}
	k, plaintext, err := d.a.cp.CreateKey(ctx, d.caller(), "live demo (node "+d.a.limiter.NodeID()+")", "", caps)
	if err != nil {
		return "", err
	}
	d.key, d.keyID = plaintext, k.ID
	return d.key, nil
}

func (d *demoKeys) revoke(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keyID == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.a.cp.RevokeKey(rctx, d.caller(), d.keyID); err != nil {
		d.a.log.Warn("could not revoke the demo's key", "key_id", d.keyID, "err", err)
	}
	d.key, d.keyID = "", ""
}

// panelSessions records panel logouts in the control log, so that every
// node refuses the session's cookie from then on.
type panelSessions struct{ a *App }

func (ps panelSessions) End(ctx context.Context, tenant, key, id string, until time.Time) error {
	actor := "panel"
	if k, ok := ps.a.clog.State().KeyByHash(auth.HashKey(key)); ok {
		actor = auth.Principal{Tenant: k.Tenant, KeyID: k.ID}.Actor()
	}
	ctx, cancel := context.WithTimeout(controlstate.WithActor(ctx, actor), 5*time.Second)
	defer cancel()
	_, err := ps.a.clog.Append(ctx, controlstate.TypePanelSessionEnded,
		controlstate.PanelSessionEndedData{Tenant: tenant, SessionID: id, Until: until.UTC()})
	return err
}

func (ps panelSessions) Ended(id string) bool { return ps.a.clog.State().SessionEnded(id) }

// suspension: for a valid, unrevoked key of a suspended tenant, the
// tenant and the operator's reason (shown on the panel's overview).
func (a *App) suspension(key string) (string, string, bool) {
	if !auth.LooksLikeKey(key) {
		return "", "", false
	}
	st := a.clog.State()
	h := auth.HashKey(key)
	k, ok := st.KeyByHash(h)
	if !ok || !auth.EqualHash(k.Hash, h) || k.RevokedAt != nil {
		return "", "", false
	}
	t, ok := st.Tenant(k.Tenant)
	if !ok || !t.Suspended {
		return "", "", false
	}
	return t.ID, t.SuspendedReason, true
}
