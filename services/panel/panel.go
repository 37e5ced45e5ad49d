// Package panel is MsgMesh's browser panel (/panel/) and public live demo
// (/demo), served by msgmesh itself (target panel): server-rendered pages
// (html/template, assets embedded with go:embed) with as little JavaScript
// as serves (the live tail is the browser's EventSource).
//
// Login takes a key once (POST /panel/login, form field key) and answers
// with an HttpOnly, SameSite=Strict session cookie (Secure behind TLS)
// holding the session sealed under the control log's keyring, so it works
// on every node and expires (panel.session_ttl). The key never reaches a
// page, a URL, a log or the browser's storage. Every page calls this
// node's own HTTP API with the session's key: the panel can do exactly
// what the key can. Every state-changing form carries the session's CSRF
// token and must come from this origin.
package panel

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/time/rate"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/names"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config wires the panel into a node.
type Config struct {
	// APIURL is this node's own API (http://127.0.0.1:port).
	APIURL string
	// HTTPClient sends the API calls.
	HTTPClient *http.Client
	// Sealer seals sessions under the keyring every node shares.
	Sealer Sealer
	// SessionTTL is how long a login lasts (panel.session_ttl).
	SessionTTL time.Duration
	// Admin reads end offsets and consumer group lag for the topic pages
	// (shown only after the session's key was allowed to read the topic).
	Admin *kadm.Client
	// Names maps topics and groups onto Kafka's names.
	Names names.Mapper
	// Usage is a tenant's messages this month (limits); Limits the plans'.
	Usage  func(tenant string) (month string, used int64)
	Limits config.Limits
	// Suspension reports, for a valid key of a suspended tenant, the tenant
	// and the operator's reason (the API refuses such keys with 403
	// tenant_suspended, without the reason). Nil: suspension is shown only
	// as the API's error.
	Suspension func(key string) (tenant, reason string, suspended bool)
	// Sessions, when set, ends a logged-out session on every node (the
	// control log); without it a logout ends the session on this node only.
	Sessions Sessions
	// Demo is the live demo's configuration and its server-side parts.
	Demo Demo
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Sessions ends panel sessions across nodes.
type Sessions interface {
	// End records that session id of tenant (its key is key) was logged
	// out; it would have expired at until.
	End(ctx context.Context, tenant, key, id string, until time.Time) error
	// Ended reports whether session id was logged out on any node.
	Ended(id string) bool
}

// Demo configures /demo.
type Demo struct {
	config.Demo
	// Topic is the demo tenant's one topic.
	Topic string
	// Key returns the demo's server-side key (a key of the demo tenant that
	// may only publish to, subscribe to and read Topic, and mint tokens),
	// making the tenant, the topic and the key on first use.
	Key func(ctx context.Context) (string, error)
	// Watch is what an agent's watch_topic returns for Topic after cursor
	// (the MCP server's own watch), acting with key.
	Watch func(ctx context.Context, key, cursor string) (any, error)
}

// Panel serves /panel/ and /demo.
type Panel struct {
	cfg       Config
	log       *slog.Logger
	pages     map[string]*template.Template
	loggedOut logouts

	demoMu       sync.Mutex
	demoVisitors map[string]*rate.Limiter
	logins       map[string]*rate.Limiter // sign-in attempts per address
	demoSeen     time.Time
	demoRunning  bool
	demoSeq      int64
	stopDemo     context.CancelFunc
	demoCtx      context.Context
}

// New parses the templates and returns the panel.
func New(cfg Config) (*Panel, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.SessionTTL <= 0 {
		// Its default is config.Defaults' panel.session_ttl (one place).
		return nil, errors.New("panel: Config.SessionTTL must be positive (panel.session_ttl)")
	}
	p := &Panel{cfg: cfg, log: cfg.Logger, pages: map[string]*template.Template{}, demoVisitors: map[string]*rate.Limiter{}, logins: map[string]*rate.Limiter{}}
	p.demoCtx, p.stopDemo = context.WithCancel(context.Background())
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, f := range pages {
		name := f[len("templates/") : len(f)-len(".html")]
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", f)
		if err != nil {
			return nil, err
		}
		p.pages[name] = t
	}
	return p, nil
}

// Close stops the demo's sample producer.
func (p *Panel) Close() { p.stopDemo() }

func (p *Panel) now() time.Time { return p.cfg.Now() }

// Routes registers /panel/ and /demo on r (no API authentication: the
// panel has its own sessions; /demo is public).
func (p *Panel) Routes(r gin.IRouter) {
	static, _ := fs.Sub(staticFS, "static")
	sh := http.StripPrefix("/panel/static/", http.FileServer(http.FS(static)))
	r.GET("/panel/static/*file", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		sh.ServeHTTP(c.Writer, c.Request)
	})
	r.GET("/panel", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/panel/") })
	g := r.Group("/panel", securityHeaders)
	g.GET("/login", p.loginPage)
	g.POST("/login", p.login)
	a := g.Group("", p.requireSession)
	a.POST("/logout", p.logout)
	a.GET("/", p.overview)
	a.GET("/topics", p.topics)
	a.POST("/topics", p.createTopic)
	a.GET("/topics/:topic", p.topic)
	a.POST("/topics/:topic/delete", p.deleteTopic)
	a.POST("/topics/:topic/publish", p.publish)
	a.POST("/topics/:topic/token", p.tailToken)
	a.GET("/keys", p.keys)
	a.POST("/keys", p.createKey)
	a.POST("/keys/:id/revoke", p.revokeKey)
	a.GET("/webhooks", p.webhooks)
	a.POST("/webhooks", p.createWebhook)
	a.GET("/webhooks/:id", p.webhook)
	a.POST("/webhooks/:id/enable", p.enableWebhook)
	a.POST("/webhooks/:id/delete", p.deleteWebhook)
	a.GET("/webhooks/:id/dlq", p.dlq)
	a.POST("/webhooks/:id/dlq/inspect", p.inspect)
	a.POST("/webhooks/:id/dlq/replay", p.replay)
	a.GET("/audit", p.audit)

	d := r.Group("/demo", securityHeaders, p.requireDemo)
	d.GET("", p.demoPage)
	d.GET("/token", p.demoToken)
	d.GET("/watch", p.demoWatch)
	d.POST("/publish", p.demoPublish)
}

// securityHeaders: no caching (a page may show a key once), no framing,
// scripts and styles only from /panel/static/.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	c.Next()
}
