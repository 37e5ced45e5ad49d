package controlplane

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/platform/keyring"
	"github.com/msgmesh/msgmesh/proto/openapitest"
)

const operatorKey = "op_" + "controlplane-handler-tests-operator-key"

// testAPI is the control plane's HTTP API over a MemoryLog and a real
// Kafka admin client (topics are Kafka topics), served by httptest with
// the middleware every node runs.
type testAPI struct {
	t    *testing.T
	url  string
	svc  *Service
	clog *controlstate.MemoryLog
	v    *openapitest.V
}

// newTestAPI is the one place this package's tests construct a Service.
func newTestAPI(t *testing.T) *testAPI { t.Helper(); return newTestAPIWith(t, nil) }

// newTestAPIWith is newTestAPI with setup run on the Service before it
// serves (SetWebhooks...).
func newTestAPIWith(t *testing.T, setup func(svc *Service, cfg config.Config, clog *controlstate.MemoryLog, adm *kadm.Client)) *testAPI {
	t.Helper()
	k, _, err := keyring.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keyring.New(k)
	if err != nil {
		t.Fatal(err)
	}
	brokers, _ := kafkatest.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := config.Defaults()
	cfg.Kafka.TopicPrefix = kafkatest.Name("cphttp")
	cfg.OperatorKey = operatorKey
	clog := controlstate.NewMemoryLog(kr)
	adm := kadm.NewClient(cl)
	svc := New(ConfigOf(cfg), clog, adm, slog.New(slog.DiscardHandler))
	if setup != nil {
		setup(svc, cfg, clog, adm)
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.NoRoute(httpapi.NoRoute)
	e.NoMethod(httpapi.NoMethod)
	e.Use(httpapi.RequestID(), httpapi.RenderErrors(nil))
	authn := &auth.Authenticator{State: clog.State(), OperatorKey: operatorKey, MaxTokenTTL: cfg.Tokens.MaxTTL}
	svc.Routes(e.Group("/", authn.Middleware(nil)))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &testAPI{t: t, url: srv.URL, svc: svc, clog: clog, v: openapitest.Validator(t)}
}

// do sends one request with cred as the bearer and body as JSON (nil:
// none), checks the exchange against proto/openapi.yaml and returns the
// status and the decoded body.
func (a *testAPI) do(method, path, cred string, body any) (int, map[string]any) {
	a.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			a.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, a.url+path, bytes.NewReader(raw))
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, _, m := a.v.Exchange(a.t, req, raw)
	return resp.StatusCode, m
}

// want fails unless the answer is status (and, for errors, code).
func (a *testAPI) want(what string, status int, code string, gotStatus int, body map[string]any) {
	a.t.Helper()
	if gotStatus != status || (code != "" && body["code"] != code) {
		a.t.Fatalf("%s: %d %v, want %d %s", what, gotStatus, body, status, code)
	}
}

// Tenants, keys and tokens through the handlers: who may do what, the
// codes of the refusals, and reads that follow writes.
func TestHandlersTenantsKeysTokens(t *testing.T) {
	a := newTestAPI(t)
	st, body := a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "free"})
	a.want("create tenant", 201, "", st, body)
	admin, _ := body["admin_key"].(string)
	if !auth.LooksLikeKey(admin) || body["id"] != "acme" {
		t.Fatalf("create tenant: %v", body)
	}
	st, body = a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "paid"})
	a.want("create the tenant again", 409, "conflict", st, body)
	st, body = a.do("POST", "/v1/tenants", admin, map[string]any{"id": "other", "plan": "free"})
	a.want("a tenant key creating a tenant", 403, "forbidden", st, body)
	st, body = a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "gold"})
	if st != 400 && st != 422 {
		t.Fatalf("unknown plan: %d %v, want 400 or 422", st, body)
	}
	st, body = a.do("GET", "/v1/tenant", admin, nil)
	a.want("GET /v1/tenant", 200, "", st, body)
	if body["id"] != "acme" || body["plan"] != "free" {
		t.Fatalf("GET /v1/tenant: %v", body)
	}

	st, body = a.do("POST", "/v1/keys", admin, map[string]any{"name": "backend", "role": "producer"})
	a.want("create a producer key", 201, "", st, body)
	producer, _ := body["key"].(string)
	producerID, _ := body["id"].(string)
	st, body = a.do("POST", "/v1/keys", producer, map[string]any{"name": "x", "role": "admin"})
	a.want("a producer creating a key", 403, "forbidden", st, body)
	if msg, _ := body["error"].(string); !strings.Contains(msg, "keys") {
		t.Errorf("the refusal does not name what was refused: %q", msg)
	}
	st, body = a.do("GET", "/v1/keys", admin, nil)
	a.want("list keys", 200, "", st, body)
	if keys, _ := body["keys"].([]any); len(keys) != 2 || strings.Contains(mustJSON(t, body), producer) {
		t.Fatalf("list keys: %v (two keys, never plaintext)", body)
	}
	st, body = a.do("POST", "/v1/keys", admin, map[string]any{"name": "x", "role": "wizard"})
	if st != 400 && st != 422 {
		t.Fatalf("unknown role: %d %v", st, body)
	}

	// Tokens need a signing key; a token never manages keys.
	st, body = a.do("POST", "/v1/tokens", admin, map[string]any{"ttl_seconds": 60})
	a.want("minting without a signing key", 503, "not_ready", st, body)
	st, body = a.do("POST", "/v1/signing-keys", operatorKey, nil)
	a.want("rotate signing key", 201, "", st, body)
	st, body = a.do("POST", "/v1/tokens", admin, map[string]any{"ttl_seconds": 60})
	a.want("mint a token", 200, "", st, body)
	tok, _ := body["token"].(string)
	st, body = a.do("GET", "/v1/keys", tok, nil)
	a.want("a token listing keys", 403, "forbidden", st, body)
	st, body = a.do("POST", "/v1/tokens", admin, map[string]any{"ttl_seconds": 1 << 30})
	a.want("a ttl over tokens.max_ttl", 422, "validation_failed", st, body)

	// Revocation: the key and its tokens stop at once (same projection).
	st, body = a.do("DELETE", "/v1/keys/"+producerID, admin, nil)
	a.want("revoke", 204, "", st, body)
	st, body = a.do("GET", "/v1/tenant", producer, nil)
	a.want("the revoked key", 401, "credential_revoked", st, body)
	st, body = a.do("DELETE", "/v1/keys/key_nope", admin, nil)
	a.want("revoke an unknown key", 404, "key_not_found", st, body)

	// Suspension: 403 tenant_suspended for the tenant's credentials.
	st, body = a.do("POST", "/v1/tenants/acme/suspend", operatorKey, map[string]any{"reason": "billing"})
	a.want("suspend", 200, "", st, body)
	st, body = a.do("GET", "/v1/tenant", admin, nil)
	a.want("a suspended tenant's key", 403, "tenant_suspended", st, body)
	st, body = a.do("POST", "/v1/tenants/acme/reinstate", operatorKey, nil)
	a.want("reinstate", 200, "", st, body)
	st, body = a.do("GET", "/v1/tenant", admin, nil)
	a.want("a reinstated tenant's key", 200, "", st, body)

	// Every command above is one event of the log, named with its actor.
	var actors []string
	for _, r := range a.clog.Records() {
		var ev controlstate.Event
		if err := json.Unmarshal(r, &ev); err != nil {
			t.Fatal(err)
		}
		actors = append(actors, ev.Type+" by "+ev.Actor)
	}
	if want := "tenant.created by operator"; len(actors) == 0 || actors[0] != want {
		t.Fatalf("events %v, want %q first", actors, want)
	}
}

// Topics: created in Kafka and the log, read back, listed, deleted; the
// refusals and the malformed bodies answer their catalog codes.
func TestHandlersTopics(t *testing.T) {
	a := newTestAPI(t)
	_, body := a.do("POST", "/v1/tenants", operatorKey, map[string]any{"id": "acme", "plan": "paid"})
	admin, _ := body["admin_key"].(string)
	st, body := a.do("POST", "/v1/keys", admin, map[string]any{"name": "c", "role": "consumer"})
	a.want("create a consumer key", 201, "", st, body)
	consumer, _ := body["key"].(string)

	st, body = a.do("POST", "/v1/topics", admin, map[string]any{"name": "orders", "partitions": 2})
	a.want("create topic", 201, "", st, body)
	if body["name"] != "orders" || body["partitions"] != float64(2) || body["kafka_topic"] != a.svc.cfg.Kafka.TopicPrefix+".acme.orders" {
		t.Fatalf("create topic: %v", body)
	}
	st, body = a.do("POST", "/v1/topics", admin, map[string]any{"name": "orders"})
	a.want("create it again", 409, "conflict", st, body)
	st, body = a.do("POST", "/v1/topics", consumer, map[string]any{"name": "mine"})
	a.want("a consumer creating a topic", 403, "forbidden", st, body)
	st, body = a.do("POST", "/v1/topics", admin, map[string]any{"name": "bad name!"})
	if st != 400 && st != 422 {
		t.Fatalf("a bad topic name: %d %v", st, body)
	}
	st, body = a.do("POST", "/v1/topics", admin, map[string]any{"name": "x", "colour": "red"})
	a.want("an unknown field", 400, "invalid_request", st, body)
	st, body = a.do("GET", "/v1/topics/orders", consumer, nil)
	a.want("get topic", 200, "", st, body)
	st, body = a.do("GET", "/v1/topics", consumer, nil)
	if topics, _ := body["topics"].([]any); st != 200 || len(topics) != 1 {
		t.Fatalf("list topics: %d %v", st, body)
	}
	st, body = a.do("DELETE", "/v1/topics/orders", admin, nil)
	a.want("delete topic", 204, "", st, body)
	st, body = a.do("GET", "/v1/topics/orders", consumer, nil)
	a.want("the deleted topic", 404, "topic_not_found", st, body)
	st, body = a.do("GET", "/v1/topics", "", nil)
	a.want("no credential", 401, "unauthenticated", st, body)
	st, body = a.do("PUT", "/v1/topics", admin, nil)
	a.want("a wrong method", 405, "method_not_allowed", st, body)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
