// Package harness boots MsgMesh for the integration tests: in-process
// nodes (the same app.New the binary uses) and real msgmesh processes
// (for restarts and kill -9), all against the broker kafkatest chooses
// (a real Apache Kafka in CI). Every test gets its own topic prefix, so
// its control log, topics and groups are its own even on a shared broker.
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/proto/openapitest"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// Cluster is one test's MsgMesh deployment: a broker, a topic prefix and
// the bootstrap keys shared by every node it starts.
type Cluster struct {
	Brokers     []string
	Kind        kafkatest.Kind
	Prefix      string
	AdminKey    string // admin key of tenant "default"
	OperatorKey string
	// SecretsKey is the key-encryption key (base64) every node of the
	// cluster shares (secrets.key), so that nodes with different data
	// directories read each other's sealed secrets.
	SecretsKey string
}

// NewCluster picks the broker (kafkatest.Brokers) and fresh keys.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	brokers, kind := kafkatest.Brokers(t)
	return &Cluster{
		Brokers:     brokers,
		Kind:        kind,
		Prefix:      strings.ReplaceAll(kafkatest.Name("it"), "-", ""),
		AdminKey:    NewKey(),
		OperatorKey: "op_" + NewKey(),
		SecretsKey:  NewSecretsKey(),
	}
}

// NewSecretsKey returns a fresh key-encryption key (secrets.key).
func NewSecretsKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// NewKey returns a valid random MsgMesh key.
func NewKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "mm_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Config is the base configuration of a node of c: loopback port 0, the
// cluster's broker and prefix, short poll timeouts suited to tests.
func (c *Cluster) Config(t testing.TB) config.Config {
	cfg := config.Defaults()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.ShutdownTimeout = 10 * time.Second
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Brokers = c.Brokers
	cfg.Kafka.TopicPrefix = c.Prefix
	cfg.BootstrapAdminKey = c.AdminKey
	cfg.OperatorKey = c.OperatorKey
	cfg.Secrets.Key = c.SecretsKey
	cfg.Poll.SessionTimeout = 10 * time.Second
	cfg.Poll.ConsumerIdleTimeout = 8 * time.Second
	cfg.Poll.DefaultWait = 2 * time.Second
	return cfg
}

// Node is an in-process msgmesh.
type Node struct {
	App  *app.App
	URL  string
	Cfg  config.Config
	stop context.CancelFunc
	done chan error
}

// Start boots an in-process node running targets ("all" when none), with
// mutate applied to the base config, and waits until /readyz is 200. It is
// stopped when t ends (if not before).
func (c *Cluster) Start(t testing.TB, mutate func(*config.Config), targets ...string) *Node {
	t.Helper()
	return c.StartWith(t, mutate, nil, targets...)
}

// StartWith is Start with app options (e.g. app.WithTracerProvider).
func (c *Cluster) StartWith(t testing.TB, mutate func(*config.Config), opts []app.Option, targets ...string) *Node {
	t.Helper()
	cfg := c.Config(t)
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("harness: config: %v", err)
	}
	if len(targets) == 0 {
		targets = []string{app.All}
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	a, err := app.New(sctx, cfg, targets, log, opts...)
	scancel()
	if err != nil {
		cancel()
		t.Fatalf("harness: start node: %v", err)
	}
	n := &Node{App: a, URL: "http://" + a.Addr, Cfg: cfg, stop: cancel, done: make(chan error, 1)}
	go func() { n.done <- a.Run(ctx) }()
	t.Cleanup(func() { _ = n.Stop() })
	WaitReady(t, n.URL)
	return n
}

// Stop shuts the node down gracefully and returns Run's error. Safe to
// call twice.
func (n *Node) Stop() error {
	if n.stop == nil {
		return nil
	}
	n.stop()
	n.stop = nil
	select {
	case err := <-n.done:
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("node did not stop within 60s")
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// WaitReady polls base+"/readyz" until it answers 200 (60 s at most).
func WaitReady(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: %s not ready after 60s (last err %v)", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client is a tiny HTTP client for the API.
var Client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map (failing the test if it is not
// a JSON object).
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object (status %d): %q", r.Status, r.Body)
	}
	return m
}

// Do sends method path with a bearer key (none if empty). body may be nil,
// []byte (sent as is with contentType) or anything JSON-encodable.
//
// Every exchange of the HTTP API (paths under /v1/ and the others
// proto/openapi.yaml describes) is checked against the spec
// (CheckContract): a handler that drifts from the contract fails the test
// that called it.
func Do(t testing.TB, base, method, path, key string, body any, contentType ...string) Response {
	t.Helper()
	var reqBody []byte
	ct := "application/json"
	if len(contentType) > 0 {
		ct = contentType[0]
	}
	switch b := body.(type) {
	case nil:
	case []byte:
		reqBody = b
	case string:
		reqBody = []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		reqBody = raw
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", ct)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	CheckContract(t, req, reqBody, resp, raw)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// CheckContract checks one exchange against proto/openapi.yaml
// (openapitest), failing t on a mismatch, when req is one of the HTTP
// API's: a path under /v1/ or one the spec lists. The panel, the demo and
// the other pages outside the contract are left alone.
func CheckContract(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	v := openapitest.Validator(t)
	if p := req.URL.Path; !strings.HasPrefix(p, "/v1/") && v.Doc().Paths.Find(p) == nil {
		return
	}
	v.Check(t, req, reqBody, resp, respBody)
}

// Must is Do that fails the test unless the status is want.
func Must(t testing.TB, base, method, path, key string, body any, want int) Response {
	t.Helper()
	r := Do(t, base, method, path, key, body)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// Env returns os.Environ plus kv pairs, for msgmesh subprocesses.
func Env(kv ...string) []string { return append(os.Environ(), kv...) }
