package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/platform/limits"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/proto/openapitest"
)

// logTopics is the gateway's Topics over a MemoryLog and a real Kafka
// admin client: what the control plane does for it, in a few lines.
type logTopics struct {
	clog   *controlstate.MemoryLog
	adm    *kadm.Client
	mapper names.Mapper
}

func (l logTopics) CreateTopic(ctx context.Context, tenant, name string, partitions int) (controlstate.Topic, error) {
	if partitions == 0 {
		partitions = 1
	}
	_, err := l.clog.Append(ctx, controlstate.TypeTopicCreated, controlstate.TopicCreatedData{
		Tenant: tenant, Topic: name, Partitions: int32(partitions), KafkaTopic: l.mapper.KafkaTopic(tenant, name)})
	if errors.Is(err, controlstate.ErrConflict) {
		return controlstate.Topic{}, httpapi.Wrap(httpapi.CodeConflict, err, "topic exists")
	}
	if err != nil {
		return controlstate.Topic{}, err
	}
	t, _ := l.clog.State().Topic(tenant, name)
	return t, l.EnsureKafkaTopic(ctx, t)
}

func (l logTopics) EnsureKafkaTopic(ctx context.Context, t controlstate.Topic) error {
	// As the control plane: an existing topic is fine, and the call
	// returns once the topic is served (the tests publish right after).
	_, err := kafkaclient.EnsureTopic(ctx, l.adm, t.KafkaTopic, kafkaclient.TopicSpec{Partitions: t.Partitions})
	return err
}

// quotaLeft admits n messages in all, then refuses with the limits
// package's domain error (as limits.Limiter does past a monthly quota).
type quotaLeft struct {
	mu   sync.Mutex
	left int
}

func (q *quotaLeft) AllowMessages(_, _ string, n int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n > q.left {
		return &limits.Error{Kind: limits.ErrQuotaExceeded, Message: "monthly quota of 5 messages exceeded", RetryAfter: 42 * time.Second}
	}
	q.left -= n
	return nil
}

func (q *quotaLeft) Record(string, int) {}

// testGateway serves publish, poll and commit over httptest with the
// middleware every node runs.
type testGateway struct {
	t      *testing.T
	url    string
	clog   *controlstate.MemoryLog
	topics logTopics
	admin  string
	v      *openapitest.V
}

// newTestGateway is the one place this package's tests construct a
// Gateway: tenant "acme" with an admin key, a quota of quota messages.
func newTestGateway(t *testing.T, quota int) *testGateway {
	t.Helper()
	brokers, _ := kafkatest.Brokers(t)
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := config.Defaults()
	cfg.Kafka.TopicPrefix = kafkatest.Name("gwhttp")
	cfg.HTTP.Addr = "127.0.0.1:0"
	clog := controlstate.NewMemoryLog(nil)
	topics := logTopics{clog: clog, adm: kadm.NewClient(cl), mapper: names.Mapper{Prefix: cfg.Kafka.TopicPrefix}}
	log := slog.New(slog.DiscardHandler)
	g, err := New(ConfigOf(cfg), clog.State(), topics, &quotaLeft{left: quota}, opts, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	clog.OnApply(g.OnControlEvent)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()

	admin, hash, display, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clog.Append(ctx, controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "acme", Plan: controlstate.PlanFree,
		AdminKey: &controlstate.KeyCreatedData{Tenant: "acme", KeyID: "key_admin", Name: "admin", Role: "admin", Hash: hash, Prefix: display}}); err != nil {
		t.Fatal(err)
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(httpapi.RequestID(), httpapi.RenderErrors(log))
	authn := &auth.Authenticator{State: clog.State()}
	g.Routes(e.Group("/", authn.Middleware(nil)))
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		srv.Close()
		g.Drain()
		g.Close(context.Background())
		cancel()
		<-done
	})
	return &testGateway{t: t, url: srv.URL, clog: clog, topics: topics, admin: admin, v: openapitest.Validator(t)}
}

// do sends one request (body JSON unless contentType says otherwise),
// checks the exchange against proto/openapi.yaml and returns the status,
// headers and decoded body.
func (g *testGateway) do(method, path, cred string, body []byte, contentType string) (int, http.Header, map[string]any) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, _, m := g.v.Exchange(g.t, req, body)
	return resp.StatusCode, resp.Header, m
}

func (g *testGateway) createTopic(name string) {
	g.t.Helper()
	if _, err := g.topics.CreateTopic(context.Background(), "acme", name, 1); err != nil {
		g.t.Fatal(err)
	}
}

func (g *testGateway) want(what string, status int, code string, gotStatus int, body map[string]any) {
	g.t.Helper()
	if gotStatus != status || (code != "" && body["code"] != code) {
		g.t.Fatalf("%s: %d %v, want %d %s", what, gotStatus, body, status, code)
	}
}

// Publish (one, a batch, a raw body) and poll through the handlers: the
// cursors answered are where the messages are, a poll's batch is
// delivered again until acknowledged, and the refusals carry their codes.
func TestHandlersPublishPoll(t *testing.T) {
	g := newTestGateway(t, 1000)
	st, _, body := g.do("POST", "/v1/topics/orders/messages", g.admin, []byte(`{"data":{"n":1},"room":"r1"}`), "")
	g.want("publish to a topic never created (tenants start with the strict topic gate)", 404, "topic_not_found", st, body)
	g.createTopic("orders")
	st, _, body = g.do("POST", "/v1/topics/orders/messages", g.admin, []byte(`{"data":{"n":1},"room":"r1"}`), "")
	g.want("publish", 200, "", st, body)
	if c, _ := body["cursor"].(string); c != "0-0" {
		t.Fatalf("publish: %v, want cursor 0-0 (one partition)", body)
	}
	st, _, body = g.do("POST", "/v1/topics/orders/messages", g.admin, []byte(`{"messages":[{"data":2},{"data":"three","headers":{"k":"v"}}]}`), "")
	if cs, _ := body["cursors"].([]any); st != 200 || len(cs) != 2 || cs[0] != "0-1" || cs[1] != "0-2" {
		t.Fatalf("batch publish: %d %v", st, body)
	}
	st, _, body = g.do("POST", "/v1/topics/orders/messages?room=r2", g.admin, []byte("raw \xff bytes"), "application/octet-stream")
	g.want("raw publish", 200, "", st, body)

	poll := []byte(`{"group":"g1","consumer":"c1","max":10,"wait_ms":5000}`)
	var msgs []any
	var batch string
	for deadline := time.Now().Add(20 * time.Second); len(msgs) < 4 && time.Now().Before(deadline); {
		st, _, body = g.do("POST", "/v1/topics/orders/poll", g.admin, poll, "")
		g.want("poll", 200, "", st, body)
		got, _ := body["messages"].([]any)
		msgs = append(msgs, got...)
		if b, _ := body["batch"].(string); b != "" {
			batch = b
			poll = []byte(`{"group":"g1","consumer":"c1","max":10,"wait_ms":5000,"ack":"` + b + `"}`)
		}
	}
	if len(msgs) != 4 || batch == "" {
		t.Fatalf("polled %d messages (batch %q), want 4: %v", len(msgs), batch, msgs)
	}
	first, _ := msgs[0].(map[string]any)
	last, _ := msgs[3].(map[string]any)
	if first["room"] != "r1" || first["cursor"] != "0-0" || last["room"] != "r2" || last["data_base64"] == nil {
		t.Fatalf("messages: first %v, last %v", first, last)
	}

	st, _, body = g.do("POST", "/v1/topics/orders/poll", g.admin, []byte(`{"group":"g1","room":"r1"}`), "")
	g.want("poll with a room", 400, "room_not_supported", st, body)
	st, _, body = g.do("POST", "/v1/topics/orders/messages", g.admin, []byte(`{"data":`), "")
	g.want("a malformed body", 400, "invalid_request", st, body)
	st, _, body = g.do("POST", "/v1/topics/orders/messages", "mm_"+strings.Repeat("x", 43), []byte(`{"data":1}`), "")
	g.want("an unknown key", 401, "invalid_credential", st, body)
}

// A publish over the quota is refused by the limits package's domain
// error, answered 429 quota_exceeded with Retry-After by httpapi's mapping,
// and nothing is written.
func TestHandlersPublishOverQuota(t *testing.T) {
	g := newTestGateway(t, 2)
	g.createTopic("q")
	st, _, body := g.do("POST", "/v1/topics/q/messages", g.admin, []byte(`{"messages":[{"data":1},{"data":2}]}`), "")
	g.want("publish within the quota", 200, "", st, body)
	st, h, body := g.do("POST", "/v1/topics/q/messages", g.admin, []byte(`{"data":3}`), "")
	g.want("publish over the quota", 429, "quota_exceeded", st, body)
	if h.Get("Retry-After") != "42" {
		t.Fatalf("Retry-After %q, want 42", h.Get("Retry-After"))
	}
	tp, _ := g.clog.State().Topic("acme", "q")
	ends, err := g.topics.adm.ListEndOffsets(context.Background(), tp.KafkaTopic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(tp.KafkaTopic, 0); o.Offset != 2 {
		t.Fatalf("end offset %d, want 2 (the refused message was not written)", o.Offset)
	}
}
