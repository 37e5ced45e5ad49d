// Package mcp is MsgMesh's MCP server (spec section 8): tools that let
// an AI agent list, create and describe topics, publish, poll, inspect and
// replay webhooks' dead letters, and wait on watch_topic, which blocks
// until something new is published and resumes exactly from its cursor.
//
// One implementation, two ways to run it: over stdio with one API key
// (`msgmesh mcp`, `npx @msgmesh/mcp-server`: Run), and over streamable
// HTTP at /mcp of every node (Handler), where each call acts with the
// caller's own Bearer key or token. Every tool goes through MsgMesh's HTTP
// API with that credential (the Go client, sdks/go), so capabilities apply
// exactly as over HTTP; a refusal is a tool error the agent can read.
//
// It is built on the official Go SDK (github.com/modelcontextprotocol/go-sdk)
// and speaks the latest protocol (2026-07-28, stateless) and the older ones
// the SDK supports.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// URL is the MsgMesh API every tool calls (default
	// http://127.0.0.1:8080).
	URL string
	// APIKey, when set, is the credential of every call (stdio). When
	// empty, each call uses the Authorization header of its HTTP request
	// (streamable HTTP); a call without one is refused.
	APIKey string
	// HTTPClient sends the API requests (default: one without timeout;
	// every call is bounded by its context).
	HTTPClient *http.Client
	// Version is reported as the server's implementation version.
	Version string
	// DefaultWait is watch_topic's wait_ms when omitted (default 25 s,
	// well under the common 60 s client request timeout); MaxWait caps it
	// (default 50 s).
	DefaultWait, MaxWait time.Duration
	// Coalesce is how long watch_topic keeps gathering after its first
	// new event (default 20 ms), up to max_events.
	Coalesce time.Duration
	// ProgressInterval is how often a waiting watch_topic sends
	// notifications/progress when the call carried a progress token
	// (default 5 s).
	ProgressInterval time.Duration
	// Logger receives the server's logs (default: discarded).
	Logger *slog.Logger
	// Registerer, when set, gets the msgmesh_mcp_* metrics.
	Registerer prometheus.Registerer
}

// Server is the MCP server.
type Server struct {
	cfg     Config
	srv     *mcp.Server
	fixed   *msgmesh.Client
	waiters atomic.Int64
	metrics struct {
		waiters prometheus.GaugeFunc
		calls   *prometheus.CounterVec
	}
}

// New builds the server and its tools.
func New(cfg Config) (*Server, error) {
	if cfg.URL == "" {
		cfg.URL = msgmesh.DefaultURL
	}
	if cfg.DefaultWait <= 0 {
		cfg.DefaultWait = 25 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 50 * time.Second
	}
	if cfg.DefaultWait > cfg.MaxWait {
		cfg.DefaultWait = cfg.MaxWait
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 20 * time.Millisecond
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg}
	if cfg.APIKey != "" {
		c, err := msgmesh.New(msgmesh.Options{URL: cfg.URL, APIKey: cfg.APIKey, HTTPClient: cfg.HTTPClient, UserAgent: "msgmesh-mcp"})
		if err != nil {
			return nil, err
		}
		s.fixed = c
	} else if _, err := msgmesh.New(msgmesh.Options{URL: cfg.URL, APIKey: "x"}); err != nil {
		return nil, err
	}
	s.metrics.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "msgmesh_mcp_tool_calls_total", Help: "MCP tool calls by tool and outcome (ok, error).",
	}, []string{"tool", "outcome"})
	s.metrics.waiters = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "msgmesh_mcp_watch_waiters", Help: "watch_topic calls waiting for events now.",
	}, func() float64 { return float64(s.waiters.Load()) })
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.metrics.calls); err != nil {
			return nil, err
		}
		if err := cfg.Registerer.Register(s.metrics.waiters); err != nil {
			return nil, err
		}
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "msgmesh", Title: "MsgMesh", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       cfg.Logger,
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.addTools()
	return s, nil
}

const instructions = `MsgMesh is a durable event bus. To react to what is published on a topic, call watch_topic in a loop: ` +
	`it blocks until new events exist (or wait_ms passes with timed_out: true) and returns a cursor; pass that cursor to the next call ` +
	`to receive exactly what came after, nothing twice and nothing missed. resync: true means events were missed beyond the replay window: ` +
	`re-read your state, then keep watching with the returned cursor.`

// MCP is the underlying go-sdk server (to Run on any transport).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Waiters is how many watch_topic calls are waiting now (the gauge
// msgmesh_mcp_watch_waiters).
func (s *Server) Waiters() int64 { return s.waiters.Load() }

// Run serves one MCP session on t (e.g. &mcp.StdioTransport{}) until the
// client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error { return s.srv.Run(ctx, t) }

// Handler serves streamable HTTP (mount it at /mcp behind the API's
// authentication). Stateless, as the 2026-07-28 protocol wants (no
// session id: state lives in tool arguments such as watch_topic's
// cursor), and with request cancellation propagated: a client that
// aborts its POST ends the tool call, freeing a waiting watch_topic at
// once (go-sdk#1093).
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       s.cfg.Logger,
	})
}

// errNoCredential is a streamable HTTP call without a bearer.
var errNoCredential = errors.New("no credential: send Authorization: Bearer <MsgMesh key or token>")

// client is the API client of one call: the stdio key, or the caller's
// bearer over HTTP.
func (s *Server) client(req *mcp.CallToolRequest) (*msgmesh.Client, error) {
	if s.fixed != nil {
		return s.fixed, nil
	}
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if cred, ok := strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer "); ok && strings.TrimSpace(cred) != "" {
			return msgmesh.New(msgmesh.Options{URL: s.cfg.URL, APIKey: strings.TrimSpace(cred), HTTPClient: s.cfg.HTTPClient, UserAgent: "msgmesh-mcp"})
		}
	}
	return nil, errNoCredential
}

// toolError makes an API error readable by an agent: the status, the
// stable code and the server's message (a 403 names the missing
// capability).
func toolError(err error) error {
	var e *msgmesh.Error
	if errors.As(err, &e) {
		msg := fmt.Sprintf("MsgMesh answered %d %s: %s", e.Status, e.Code, e.Message)
		if e.RetryAfter > 0 {
			msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
		}
		if e.Status >= 500 && e.RequestID != "" {
			msg += " (request " + e.RequestID + ")"
		}
		return errors.New(msg)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("calling MsgMesh: %w", err)
}
