// Package app assembles msgmesh's modules (Loki-style targets with a
// dependency graph) and runs them under one lifecycle. The msgmesh binary
// and the integration tests both boot it, in-process, the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/gin-contrib/cors"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/embedkafka"
	"github.com/msgmesh/msgmesh/platform/grouplag"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/keyring"
	"github.com/msgmesh/msgmesh/platform/limits"
	"github.com/msgmesh/msgmesh/platform/logging"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/readmodel"
	"github.com/msgmesh/msgmesh/platform/tracing"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
	"github.com/msgmesh/msgmesh/services/controlplane"
	"github.com/msgmesh/msgmesh/services/dispatcher"
	"github.com/msgmesh/msgmesh/services/gateway"
	"github.com/msgmesh/msgmesh/services/mcp"
	"github.com/msgmesh/msgmesh/services/msgmesh/apidocs"
	"github.com/msgmesh/msgmesh/services/panel"
	"github.com/msgmesh/msgmesh/services/realtime"
)

// Targets and internal modules. A target is what --target names; each
// module declares its dependencies and all run under one lifecycle: the
// first to fail stops the rest.
const (
	All          = "all"
	ControlPlane = "controlplane"
	Gateway      = "gateway"
	Realtime     = "realtime"
	Panel        = "panel"

	modKafka          = "kafka"
	modControlLog     = "controllog"
	modLimits         = "limits"
	modServer         = "server"
	modControlService = "controlservice"
	modWebhookStore   = "webhookstore"
)

// deps is the dependency graph: every module a module uses is named here,
// and a module starts after its dependencies. Internal modules:
//
//	kafka           the embedded broker (if any), the client options, the admin client
//	controllog      the control log's projection (and the keyring sealing its secrets)
//	limits          tenant rate limits and monthly quotas (the usage topic)
//	server          the HTTP listener, authentication, the rate limit, /mcp
//	controlservice  the control plane's commands without its routes: the
//	                gateway creates topics through it, the panel tenants and keys
//	webhookstore    the SSRF guard, webhook TLS, the dead-letter reader,
//	                disabling a webhook: the webhook API and the dispatcher share it
//
// The dispatcher has no API of its own, but its HTTP listener serves
// /healthz, /readyz and /metrics (Kubernetes probes, Prometheus).
var deps = map[string][]string{
	All:               {ControlPlane, Gateway, Realtime, Dispatcher, Panel},
	Panel:             {ControlPlane, Gateway, Realtime, modControlService, modLimits, modServer, modControlLog, modKafka},
	ControlPlane:      {modControlService, modWebhookStore, modServer, modControlLog, modKafka},
	Gateway:           {modControlService, modLimits, modServer, modControlLog, modKafka},
	Realtime:          {modServer, modControlLog, modKafka},
	Dispatcher:        {modWebhookStore, modServer, modControlLog, modKafka},
	modControlService: {modControlLog, modKafka},
	modWebhookStore:   {modControlLog, modKafka},
	modServer:         {modControlLog, modLimits, modKafka},
	modControlLog:     {modKafka},
	modLimits:         {modKafka},
	modKafka:          nil,
}

// Targets lists what --target accepts, with what each serves.
var Targets = map[string]string{
	All:          "every API on one listener (default)",
	ControlPlane: "tenants, keys and topics (/v1/tenants, /v1/keys, /v1/topics)",
	Gateway:      "publish, poll and commit (/v1/topics/{topic}/messages|poll|commit)",
	Realtime:     "SSE and WebSocket delivery (/v1/topics/{topic}/events, /v1/ws)",
	Dispatcher:   "webhook delivery: retries, dead letters, the SSRF guard (HTTP serves /healthz, /readyz and /metrics only; /v1/webhooks is the control plane's)",
	Panel:        "the browser panel (/panel/) and the public live demo (/demo), acting through this node's own API",
}

// Module is one running part of a process as the wiring sees it. Each
// init function builds one (every setup failure is returned, and New
// fails with it); the App mounts its routes and registers its control
// event hook before anything runs.
type Module interface {
	// Routes mounts the module's handlers on api, the authenticated and
	// rate-limited group (the panel mounts on the engine: it has its own
	// login).
	Routes(api gin.IRouter)
	// OnControlEvent sees every control event once it is applied, in log
	// order, on the control log's goroutine: keep it short.
	OnControlEvent(ev controlstate.Event, outcome error)
	// Run blocks until ctx ends (then nil) or the module fails.
	Run(ctx context.Context) error
	// Drain is called when shutdown begins, as the HTTP server stops
	// accepting: long polls and streams end now rather than at their
	// timeouts.
	Drain()
	// Close releases the module, after the HTTP server has finished its
	// requests, in reverse start order.
	Close(ctx context.Context)
}

// part is a Module made of functions; a nil one does nothing.
type part struct {
	routes  func(api gin.IRouter)
	onEvent func(ev controlstate.Event, outcome error)
	run     func(ctx context.Context) error
	drain   func()
	close   func(ctx context.Context)
}

func (p part) Routes(api gin.IRouter) {
	if p.routes != nil {
		p.routes(api)
	}
}

func (p part) OnControlEvent(ev controlstate.Event, outcome error) {
	if p.onEvent != nil {
		p.onEvent(ev, outcome)
	}
}

func (p part) Run(ctx context.Context) error {
	if p.run == nil {
		<-ctx.Done()
		return nil
	}
	return p.run(ctx)
}

func (p part) Drain() {
	if p.drain != nil {
		p.drain()
	}
}

func (p part) Close(ctx context.Context) {
	if p.close != nil {
		p.close(ctx)
	}
}

// running is a started module and the name it reports errors with.
type running struct {
	name string
	Module
}

// App is one msgmesh process.
type App struct {
	cfg     config.Config
	log     *slog.Logger
	reg     *prometheus.Registry
	targets []string

	broker     *embedkafka.Broker
	clientOpts []kgo.Opt
	admClient  *kgo.Client
	adm        *kadm.Client
	clog       *controlstate.Log
	limiter    *limits.Limiter
	engine     *gin.Engine
	api        *gin.RouterGroup
	server     *http.Server
	listener   net.Listener
	cp         *controlplane.Service
	gw         *gateway.Gateway
	rt         *realtime.Service
	webhooks   *webhookstore.Store    // dispatcher.go
	disp       *dispatcher.Dispatcher // dispatcher.go
	mcp        *mcp.Server            // mcp.go
	toolKey    string                 // mcp.go: marks the /mcp tools' own API calls
	projector  *readmodel.Projector   // readmodel.go
	authn      *auth.Authenticator
	keyring    *keyring.Keyring
	panel      *panel.Panel    // panel.go
	tracer     *tracing.Tracer // nil: tracing off

	// modules run in start order; http is the HTTP server's, stopped
	// first.
	modules []running
	http    Module
	// pending holds readiness back until set false (bootstrap done).
	pending atomic.Bool
	// kafkaRefused is why the brokers refused MsgMesh at startup, if so.
	kafkaRefused atomic.Pointer[error]
	// bootstrapErr is the last bootstrap failure while it is retried.
	bootstrapErr atomic.Pointer[error]
	clock        atomic.Pointer[func() time.Time]
	// Addr is the HTTP listener's address once started.
	Addr string
	// BootstrapKey is the admin key generated on a first embedded start
	// (printed once), or "".
	BootstrapKey string
}

// Resolve returns the modules targets need, dependencies first.
func Resolve(targets []string) ([]string, error) {
	var order []string
	seen := map[string]int{} // 1 visiting, 2 done
	var visit func(string) error
	visit = func(m string) error {
		d, ok := deps[m]
		if !ok {
			return fmt.Errorf("unknown target %q (see --list-targets)", m)
		}
		switch seen[m] {
		case 1:
			return fmt.Errorf("dependency cycle at %q", m)
		case 2:
			return nil
		}
		seen[m] = 1
		for _, x := range d {
			if err := visit(x); err != nil {
				return err
			}
		}
		seen[m] = 2
		order = append(order, m)
		return nil
	}
	for _, t := range targets {
		if _, ok := Targets[t]; !ok {
			return nil, fmt.Errorf("unknown target %q (see --list-targets)", t)
		}
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Option adjusts how New builds an App.
type Option func(*options)

type options struct {
	tracerProvider trace.TracerProvider
}

// WithTracerProvider makes the App's spans with tp, whatever
// tracing.enabled says (tests pass an in-process span recorder's
// provider); tp is not shut down by the App.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// New builds every module the targets need (starting the embedded
// broker and catching up with the control log). Call Run, then it stops
// on ctx cancellation.
func New(ctx context.Context, cfg config.Config, targets []string, log *slog.Logger, opts ...Option) (*App, error) {
	mods, err := Resolve(targets)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// Repeated warnings (a fetch error in a tight loop) are logged once per
	// interval with a count, whoever set up the logger.
	log = slog.New(logging.LimitRepeats(log.Handler(), logging.DefaultRepeatInterval))
	a := &App{cfg: cfg, log: log, reg: prometheus.NewRegistry(), targets: targets}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.tracerProvider != nil {
		a.tracer = tracing.NewWithProvider(o.tracerProvider)
	} else if a.tracer, err = tracing.New(ctx, cfg.Tracing); err != nil {
		return nil, err
	} else if a.tracer != nil {
		// Added first, so stopped last: spans of the final deliveries are
		// flushed to the collector.
		t := a.tracer
		a.add("tracing", part{close: func(ctx context.Context) {
			if err := t.Shutdown(ctx); err != nil {
				a.log.Warn("tracing: flushing spans at exit failed", "err", err)
			}
		}})
	}
	inits := map[string]func(context.Context) error{
		modKafka: a.initKafka, modControlLog: a.initControlLog, modLimits: a.initLimits, modServer: a.initServer,
		modControlService: a.initControlService, modWebhookStore: a.initWebhookStore,
		ControlPlane: a.initControlPlane, Gateway: a.initGateway, Realtime: a.initRealtime, Dispatcher: a.initDispatcher, Panel: a.initPanel, All: func(context.Context) error { return nil },
	}
	for _, m := range mods {
		if err := inits[m](ctx); err != nil {
			a.stopAll(context.Background())
			return nil, fmt.Errorf("%s: %w", m, err)
		}
	}
	// Every module's routes, control event hook and drain are wired the
	// same way, before anything runs.
	for _, m := range a.modules {
		m.Routes(a.api)
		a.clog.OnApply(m.OnControlEvent)
		a.server.RegisterOnShutdown(m.Drain)
	}
	return a, nil
}

// add appends a started module; name prefixes its errors.
func (a *App) add(name string, m Module) {
	a.modules = append(a.modules, running{name: name, Module: m})
}

func (a *App) initKafka(ctx context.Context) error {
	brokers := a.cfg.Kafka.Brokers
	if a.cfg.Embedded() {
		b, err := embedkafka.Start(embedkafka.Config{Addr: a.cfg.Kafka.EmbeddedAddr, DataDir: a.cfg.DataDir, Logger: a.log})
		if err != nil {
			return err
		}
		a.broker = b
		brokers = b.Addrs()
		a.add("embedded broker", part{close: func(context.Context) { b.Close() }})
	}
	// The one place client options are made: every Kafka client of the
	// process (admin, control log, limits, gateway, poll groups,
	// realtime, dispatcher) starts from a.clientOpts, so TLS and SASL
	// reach all of them.
	opts, err := kafkaclient.Options(a.cfg.Kafka, brokers)
	if err != nil {
		return err
	}
	a.clientOpts = opts
	cl, err := kgo.NewClient(a.clientOpts...)
	if err != nil {
		return err
	}
	a.admClient, a.adm = cl, kadm.NewClient(cl)
	a.adm.SetTimeoutMillis(int32(a.cfg.Kafka.RequestTimeout.Milliseconds()))
	a.add("kafka", part{run: a.checkKafka, close: func(context.Context) { cl.Close() }})
	return nil
}

// checkKafka asks the brokers for metadata until they answer. Brokers that
// refuse MsgMesh (wrong password, untrusted certificate, plaintext vs TLS
// listener, missing ACL on the control topic) end the process at once
// with the cause and the setting to fix, since retrying cannot help;
// unreachable brokers are retried (readiness and the control log report
// them). Refusals that start later (a rotated password) do not end the
// process: /readyz and the log name them.
func (a *App) checkKafka(ctx context.Context) error {
	topic := names.Mapper{Prefix: a.cfg.Kafka.TopicPrefix}.ControlTopic()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 250*time.Millisecond, 10*time.Second, 0
	b.Reset()
	timeout := min(a.cfg.Kafka.RequestTimeout, 5*time.Second)
	for {
		err := kafkaclient.Check(ctx, a.clientOpts, a.cfg.Kafka.TLS.Enabled, topic, timeout)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if _, ok := errors.AsType[*kafkaclient.RefusedError](err); ok {
			a.log.Error("kafka refused the connection; stopping", "brokers", strings.Join(a.cfg.Kafka.Brokers, ","), "err", err)
			a.kafkaRefused.Store(&err)
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(b.NextBackOff()):
		}
	}
}

func (a *App) initControlLog(ctx context.Context) error {
	kr, err := a.loadKeyring()
	if err != nil {
		return err
	}
	a.keyring = kr
	octx, cancel := context.WithTimeout(ctx, 2*a.cfg.Kafka.RequestTimeout)
	defer cancel()
	l, err := controlstate.Open(octx, controlstate.Config{
		Wrapper:           kr,
		AppendTimeout:     a.cfg.Kafka.RequestTimeout,
		Topic:             names.Mapper{Prefix: a.cfg.Kafka.TopicPrefix}.ControlTopic(),
		ClientOpts:        a.clientOpts,
		ReplicationFactor: int16(a.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(a.cfg.Kafka.MinInsyncReplicas),
		Logger:            a.log.With("component", "controllog"),
		Registerer:        a.reg,
	})
	if err != nil {
		return err
	}
	a.clog = l
	a.add("control log", part{run: l.Run, close: func(context.Context) { l.Close() }})
	return nil
}

func (a *App) initLimits(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, 2*a.cfg.Kafka.RequestTimeout)
	defer cancel()
	l, err := limits.New(octx, limits.Config{
		Limits:            a.cfg.Limits,
		ClientOpts:        a.clientOpts,
		UsageTopic:        names.Mapper{Prefix: a.cfg.Kafka.TopicPrefix}.UsageTopic(),
		ReplicationFactor: int16(a.cfg.Kafka.ReplicationFactor),
		MinInsyncReplicas: int16(a.cfg.Kafka.MinInsyncReplicas),
		Now:               a.now,
		Logger:            a.log.With("component", "limits"),
		Registerer:        a.reg,
	})
	if err != nil {
		return err
	}
	a.limiter = l
	a.add("limits", part{run: l.Run, close: func(context.Context) { l.Close() }})
	return nil
}

// rateLimit applies the tenant's request rate limit (429 with Retry-After)
// to every authenticated call but the operator's. A call an MCP tool makes
// through this node's API is not counted again: the /mcp request that made
// it was (the messages it publishes are, against the message rate).
func (a *App) rateLimit(c *gin.Context) {
	p := auth.PrincipalOf(c)
	if p.Operator || a.toolCall(c) {
		c.Next()
		return
	}
	t, _ := a.clog.State().Tenant(p.Tenant)
	if err := a.limiter.AllowRequest(p.Tenant, t.Plan); err != nil {
		httpapi.Abort(c, nil, err)
		return
	}
	c.Next()
}

// SetClock replaces the clock used for token expiry, minting and limits
// (tests); nil restores time.Now.
func (a *App) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	a.clock.Store(&now)
}

func (a *App) now() time.Time {
	if f := a.clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

func (a *App) initServer(ctx context.Context) error {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	// No redirects for a trailing slash or a cleaned path (they would answer
	// HTML without X-Request-Id); match on the raw path so an encoded slash
	// stays inside its segment.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.UseRawPath = true
	e.ContextWithFallback = true
	e.Use(httpapi.RequestID(), httpapi.Recover(a.log), httpapi.AccessLog(a.log), httpapi.RenderErrors(a.log), httpapi.LimitBody(a.cfg.HTTP.MaxBodyBytes))
	if origins := a.cfg.HTTP.CORSOrigins; len(origins) > 0 && !(len(origins) == 1 && origins[0] == "none") {
		cc := cors.Config{
			AllowMethods:  []string{"GET", "POST", "PATCH", "DELETE"},
			AllowHeaders:  []string{"Authorization", "Content-Type", "Last-Event-ID", "X-Request-Id"},
			ExposeHeaders: []string{"X-Request-Id", "Retry-After"},
			MaxAge:        10 * time.Minute,
		}
		if len(origins) == 1 && origins[0] == "*" {
			cc.AllowAllOrigins = true
		} else {
			cc.AllowOrigins = origins
		}
		e.Use(cors.New(cc))
	}
	e.NoRoute(httpapi.NoRoute)
	e.NoMethod(httpapi.NoMethod)
	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", a.readyz)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg})))
	// The contract (GET /openapi.yaml) and the API page (GET /docs).
	apidocs.Routes(e, apidocs.Bundle())
	authn := &auth.Authenticator{State: a.clog.State(), OperatorKey: a.cfg.OperatorKey, Now: a.now, MaxTokenTTL: a.cfg.Tokens.MaxTTL}
	a.authn = authn
	// EventSource and browser WebSockets cannot set headers: SSE and
	// /v1/ws take ?token= too.
	sse := func(c *gin.Context) bool {
		return strings.HasSuffix(c.FullPath(), "/events") || c.FullPath() == "/v1/ws"
	}
	a.api = e.Group("/", a.requireReady, authn.Middleware(sse), a.rateLimit)
	a.engine = e
	ln, err := net.Listen("tcp", a.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.cfg.HTTP.Addr, err)
	}
	a.listener, a.Addr = ln, ln.Addr().String()
	if err := a.mountMCP(); err != nil {
		return err
	}
	a.server = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: a.cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       a.cfg.HTTP.ReadTimeout,
		IdleTimeout:       a.cfg.HTTP.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	a.http = part{
		run: func(ctx context.Context) error {
			// net/http's own answers to unparsable requests in the error format.
			err := a.server.Serve(httpapi.ErrorFormatListener(ln, a.log))
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		},
		close: func(ctx context.Context) {
			sctx, cancel := context.WithTimeout(ctx, a.cfg.HTTP.ShutdownTimeout)
			defer cancel()
			if err := a.server.Shutdown(sctx); err != nil {
				a.log.Warn("http shutdown", "err", err)
			}
		},
	}
	return nil
}

// readyz answers 200 once the node serves (Kafka reachable, control log
// caught up, bootstrap done), else 503 with the reason: kafka_unavailable
// with the last error while the brokers cannot be reached (the node keeps
// retrying with backoff), not_ready while it catches up.
func (a *App) readyz(c *gin.Context) {
	if !a.ready() {
		if err := a.kafkaErr(); err != nil {
			if refused, ok := errors.AsType[*kafkaclient.RefusedError](kafkaclient.Classify(err, a.cfg.Kafka.TLS.Enabled)); ok {
				httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeKafkaUnavailable, "%v", refused))
				return
			}
			httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeKafkaUnavailable, "Kafka is not reachable (retrying): %v", err))
			return
		}
		if p := a.bootstrapErr.Load(); p != nil {
			httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeNotReady, "bootstrap failed (retrying): %v", *p))
			return
		}
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeNotReady, "catching up with the control log"))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	if err := a.clog.Ping(ctx); err != nil {
		if refused, ok := errors.AsType[*kafkaclient.RefusedError](kafkaclient.Classify(err, a.cfg.Kafka.TLS.Enabled)); ok {
			httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeKafkaUnavailable, "%v", refused))
			return
		}
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeKafkaUnavailable, "Kafka is not reachable"))
		return
	}
	body := gin.H{"status": "ready"}
	if a.projector != nil {
		// The read model never holds readiness back (a database outage
		// pauses it and nothing else): its state is detail.
		body["read_model"] = a.projector.Status()
	}
	c.JSON(http.StatusOK, body)
}

// kafkaErr is why the control log or the usage topic could not be read
// yet, or nil.
func (a *App) kafkaErr() error {
	if p := a.kafkaRefused.Load(); p != nil {
		return *p
	}
	if a.clog != nil && !a.clog.Ready() {
		if err := a.clog.KafkaErr(); err != nil {
			return err
		}
	}
	if a.limiter != nil && !a.limiter.Ready() {
		return a.limiter.KafkaErr()
	}
	return nil
}

// ready: the control log has caught up and bootstrap is done.
func (a *App) ready() bool {
	return a.clog != nil && a.clog.Ready() && !a.pending.Load() && (a.limiter == nil || a.limiter.Ready())
}

func (a *App) requireReady(c *gin.Context) {
	if !a.ready() {
		httpapi.Abort(c, nil, &httpapi.Error{Code: httpapi.CodeNotReady, Message: "catching up with the control log; retry shortly", RetryAfter: 1})
		return
	}
	c.Next()
}

// initControlService builds the control plane's commands (topics, keys,
// tenants) for the modules that act through them; the ControlPlane target
// adds the routes.
func (a *App) initControlService(ctx context.Context) error {
	a.cp = controlplane.New(controlplane.ConfigOf(a.cfg), a.clog, a.adm, a.log.With("component", "controlplane"))
	a.cp.Now = a.now
	return nil
}

func (a *App) initControlPlane(ctx context.Context) error {
	cp := a.cp
	cp.SetWebhooks(a.webhooks)
	if err := a.initReadModel(ctx); err != nil {
		return err
	}
	a.add(ControlPlane, part{routes: cp.Routes})
	if iv := a.cfg.Metrics.GroupLagInterval; iv > 0 {
		lag := grouplag.New(a.adm, a.cfg.Kafka.TopicPrefix, iv, a.cfg.Kafka.RequestTimeout, a.log.With("component", "grouplag"))
		if err := a.reg.Register(lag); err != nil {
			return fmt.Errorf("group lag metrics: %w", err)
		}
		a.add("group lag", part{run: lag.Run})
	}
	a.pending.Store(true)
	a.add("controlplane bootstrap", part{run: func(ctx context.Context) error {
		if err := a.clog.WaitReady(ctx); err != nil {
			return nil
		}
		// Kafka may go away again between catching up and bootstrap:
		// retry with backoff (readiness says why) rather than exit.
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 250*time.Millisecond, 10*time.Second, 0
		b.Reset()
		var key string
		for {
			bctx, cancel := context.WithTimeout(ctx, 3*a.cfg.Kafka.RequestTimeout)
			k, err := cp.Bootstrap(bctx, a.cfg.BootstrapAdminKey, a.cfg.Embedded())
			cancel()
			if err == nil {
				key = k
				a.bootstrapErr.Store(nil)
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			a.bootstrapErr.Store(&err)
			wait := b.NextBackOff()
			a.log.Warn("bootstrap failed; retrying", "err", err, "backoff", wait.Round(time.Millisecond))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		if key != "" {
			a.BootstrapKey = key
			fmt.Fprintf(os.Stdout, "\n  MsgMesh created tenant %q with this admin key. It is shown once; store it now:\n\n    %s\n\n", controlplane.DefaultTenant, key)
		}
		a.pending.Store(false)
		<-ctx.Done()
		return nil
	}})
	return nil
}

func (a *App) initGateway(ctx context.Context) error {
	g, err := gateway.New(gateway.ConfigOf(a.cfg), a.clog.State(), a.cp, a.limiter, a.clientOpts, a.log.With("component", "gateway"), a.reg)
	if err != nil {
		return err
	}
	g.SetTracer(a.tracer)
	a.gw = g
	// Long polls end at once when shutdown begins (Drain), not after their
	// wait_ms.
	a.add(Gateway, g)
	return nil
}

func (a *App) initRealtime(ctx context.Context) error {
	rt, err := realtime.New(realtime.Config{
		Realtime:       a.cfg.Realtime,
		CORSOrigins:    a.cfg.HTTP.CORSOrigins,
		RequestTimeout: a.cfg.Kafka.RequestTimeout,
		TopicPrefix:    a.cfg.Kafka.TopicPrefix,
		State:          a.clog.State(),
		ClientOpts:     a.clientOpts,
		Authenticate:   a.authn.Authenticate,
		Now:            a.now,
		Logger:         a.log.With("component", "realtime"),
		Registerer:     a.reg,
		Tracer:         a.tracer,
	})
	if err != nil {
		return err
	}
	a.rt = rt
	// Streams never end by themselves: end them when shutdown starts
	// (Drain) so that the server's graceful shutdown does not wait for
	// them.
	a.add(Realtime, part{routes: rt.Routes, onEvent: rt.OnControlEvent, run: rt.Run, drain: rt.Shutdown, close: rt.Close})
	return nil
}

// Run runs every module until ctx ends or one fails, then stops all in
// reverse order: the HTTP server stops accepting and finishes in-flight
// requests first, publishes are flushed, poll consumers leave their
// groups committing only acknowledged offsets, then Kafka clients close.
func (a *App) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	all := a.modules
	if a.http != nil {
		all = append([]running{{name: "http server", Module: a.http}}, all...)
	}
	errc := make(chan error, len(all))
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Run(ctx); err != nil {
				errc <- fmt.Errorf("%s: %w", m.name, err)
				cancel()
			}
		}()
	}
	a.log.Info("msgmesh serving", "targets", strings.Join(a.targets, ","), "http", a.Addr, "embedded_kafka", a.cfg.Embedded())
	<-ctx.Done()
	a.log.Info("msgmesh stopping")
	a.stopAll(context.Background())
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopAll stops the HTTP server first (no new requests; every module's
// Drain runs as it begins; in-flight requests finish), then closes the
// modules in reverse start order.
func (a *App) stopAll(ctx context.Context) {
	if a.http != nil {
		a.http.Close(ctx)
		a.http = nil
	}
	for i := len(a.modules) - 1; i >= 0; i-- {
		a.modules[i].Close(ctx)
	}
	a.modules = nil
}

// TargetList describes the targets for --list-targets.
func TargetList() string {
	names := make([]string, 0, len(Targets))
	for t := range Targets {
		names = append(names, t)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, t := range names {
		fmt.Fprintf(&b, "%-13s %s (needs: %s)\n", t, Targets[t], strings.Join(deps[t], ", "))
	}
	return b.String()
}
