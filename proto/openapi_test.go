package proto

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/services/controlplane"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return doc
}

func TestOpenAPIValidates(t *testing.T) {
	doc := loadSpec(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi version %q, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is invalid: %v", err)
	}
}

// The ErrorCode enum is exactly the codes of httpapi.Catalog, in its order,
// and its description documents each one with its status and Doc.
func TestErrorCodesMatchCatalog(t *testing.T) {
	doc := loadSpec(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("components.schemas.ErrorCode is missing")
	}
	var enum []string
	for _, v := range ref.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("ErrorCode enum value %v is not a string", v)
		}
		enum = append(enum, s)
	}
	var want []string
	seen := map[string]bool{}
	for _, c := range httpapi.Catalog {
		if seen[c.Code] {
			t.Errorf("httpapi.Catalog lists %q twice", c.Code)
		}
		seen[c.Code] = true
		want = append(want, c.Code)
	}
	if !slices.Equal(enum, want) {
		t.Errorf("ErrorCode enum differs from httpapi.Catalog\n spec:    %v\n catalog: %v\n missing from spec: %v\n not in catalog:    %v",
			enum, want, minus(want, enum), minus(enum, want))
	}
	for _, c := range httpapi.Catalog {
		row := fmt.Sprintf("| `%s` | %d | %s |", c.Code, c.Status, c.Doc)
		if !strings.Contains(ref.Value.Description, row) {
			t.Errorf("ErrorCode description lacks the row\n  %s", row)
		}
	}
}

// statusResponse names the shared error response of each status.
var statusResponse = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
	409: "Conflict", 413: "PayloadTooLarge", 415: "UnsupportedMediaType", 422: "UnprocessableEntity",
	429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
	417: "ExpectationFailed", 431: "RequestHeaderFieldsTooLarge", 501: "NotImplemented", 505: "HTTPVersionNotSupported",
}

// Each shared error response narrows code to exactly the catalog codes of
// its status, and every operation's error status uses the shared response.
func TestErrorResponsesMatchStatuses(t *testing.T) {
	doc := loadSpec(t)
	byStatus := map[int][]string{}
	for _, c := range httpapi.Catalog {
		byStatus[c.Status] = append(byStatus[c.Status], c.Code)
	}
	for status, codes := range byStatus {
		name, ok := statusResponse[status]
		if !ok {
			t.Errorf("status %d (codes %v) has no shared response in the test's table", status, codes)
			continue
		}
		r := doc.Components.Responses[name]
		if r == nil || r.Value == nil {
			t.Errorf("components.responses.%s is missing", name)
			continue
		}
		got := responseCodes(t, name, r.Value)
		sort.Strings(got)
		sort.Strings(codes)
		if !slices.Equal(got, codes) {
			t.Errorf("components.responses.%s codes %v, want the catalog's %d codes %v", name, got, status, codes)
		}
		if r.Value.Headers["X-Request-Id"] == nil {
			t.Errorf("components.responses.%s lacks the X-Request-Id header", name)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Responses == nil || op.Responses.Len() == 0 {
				t.Errorf("%s %s: no responses", method, path)
				continue
			}
			for code, r := range op.Responses.Map() {
				st, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s %s: response %q: use explicit statuses", method, path, code)
					continue
				}
				if st >= 400 {
					if want := "#/components/responses/" + statusResponse[st]; r.Ref != want {
						t.Errorf("%s %s: %d should be $ref %s, is %q", method, path, st, want, r.Ref)
					}
					continue
				}
				if r.Value == nil || r.Value.Headers["X-Request-Id"] == nil {
					t.Errorf("%s %s: %d lacks the X-Request-Id header", method, path, st)
				}
			}
		}
	}
}

func responseCodes(t *testing.T, name string, r *openapi3.Response) []string {
	mt := r.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		t.Fatalf("components.responses.%s has no application/json schema", name)
	}
	var out []string
	for _, s := range mt.Schema.Value.AllOf {
		if s.Ref != "" || s.Value == nil || s.Value.Properties["code"] == nil {
			continue
		}
		for _, v := range s.Value.Properties["code"].Value.Enum {
			out = append(out, v.(string))
		}
	}
	if len(out) == 0 {
		t.Fatalf("components.responses.%s does not narrow code to an enum", name)
	}
	return out
}

// The documented operations are the routes the services register.
func TestOpenAPIOperations(t *testing.T) {
	doc := loadSpec(t)
	var got []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			got = append(got, method+" "+path)
			if op.OperationID == "" {
				t.Errorf("%s %s: no operationId", method, path)
			}
			public := op.Security != nil && len(*op.Security) == 0
			if !public {
				// The middleware answers these on every authenticated route.
				for _, st := range []string{"401", "403", "500", "503"} {
					if op.Responses.Value(st) == nil {
						t.Errorf("%s %s: no %s response (auth and readiness apply to every /v1 route)", method, path, st)
					}
				}
			}
			mayBePublic := slices.ContainsFunc([]string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/docs"}, func(p string) bool { return strings.HasPrefix(path, p) })
			if public && !mayBePublic {
				t.Errorf("%s %s: security override unexpected (public=%v)", method, path, public)
			}
		}
	}
	want := []string{
		"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.yaml", "GET /docs",
		"POST /v1/tenants", "GET /v1/tenants", "GET /v1/tenants/{id}", "PATCH /v1/tenants/{id}",
		"POST /v1/tenants/{id}/suspend", "POST /v1/tenants/{id}/reinstate",
		"GET /v1/signing-keys", "POST /v1/signing-keys", "POST /v1/signing-keys/{kid}/retire", "POST /v1/tokens",
		"GET /v1/tenant", "PATCH /v1/tenant",
		"POST /v1/keys", "GET /v1/keys", "DELETE /v1/keys/{id}",
		"POST /v1/topics", "GET /v1/topics", "GET /v1/topics/{topic}", "DELETE /v1/topics/{topic}",
		"POST /v1/topics/{topic}/messages", "POST /v1/topics/{topic}/poll", "POST /v1/topics/{topic}/commit",
		"GET /v1/topics/{topic}/events", "GET /v1/ws",
		"POST /v1/webhooks", "GET /v1/webhooks", "GET /v1/webhooks/{id}", "PATCH /v1/webhooks/{id}", "DELETE /v1/webhooks/{id}",
		"GET /v1/webhooks/{id}/dead-letters", "POST /v1/webhooks/{id}/dead-letters/replay",
		"GET /v1/audit", "GET /v1/webhooks/{id}/attempts",
		"POST /mcp", "GET /mcp", "DELETE /mcp",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("operations differ\n spec: %v\n want: %v\n missing: %v\n extra: %v", got, want, minus(want, got), minus(got, want))
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// eventTypeConstants parses every non-test file of platform/controlstate
// (events.go, webhooks.go, ...) for every exported Type* string constant,
// so a new event type fails this test until the schema names it.
func eventTypeConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../platform/controlstate/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in platform/controlstate (%v)", err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		collectTypeConstants(f, out)
	}
	if len(out) == 0 {
		t.Fatal("found no Type* constants in platform/controlstate")
	}
	return out
}

func collectTypeConstants(f *ast.File, out map[string]string) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Type") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				out[n.Name] = v
			}
		}
	}
}

func TestEventsSchemaNamesEveryType(t *testing.T) {
	var s struct {
		Schema     string `json:"$schema"`
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
		AllOf []struct {
			If struct {
				Properties struct {
					Type struct {
						Const string `json:"const"`
					} `json:"type"`
				} `json:"properties"`
			} `json:"if"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(ControlEventsSchema, &s); err != nil {
		t.Fatalf("events.schema.json is not JSON: %v", err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema %q, want draft 2020-12", s.Schema)
	}
	var ifs []string
	for _, a := range s.AllOf {
		ifs = append(ifs, a.If.Properties.Type.Const)
	}
	consts := eventTypeConstants(t)
	var values []string
	for name, v := range consts {
		values = append(values, v)
		if !slices.Contains(s.Properties.Type.Enum, v) {
			t.Errorf("controlstate.%s = %q is not in the schema's type enum", name, v)
		}
		if !slices.Contains(ifs, v) {
			t.Errorf("controlstate.%s = %q has no if/then rule for its data", name, v)
		}
	}
	for _, v := range s.Properties.Type.Enum {
		if !slices.Contains(values, v) {
			t.Errorf("schema type %q is not a controlstate Type* constant", v)
		}
	}
	// The constants the compiler knows agree with what the parser found.
	for _, v := range []string{controlstate.TypeTenantCreated, controlstate.TypeTenantSettingsChanged,
		controlstate.TypeKeyCreated, controlstate.TypeKeyRevoked, controlstate.TypeTopicCreated, controlstate.TypeTopicDeleted,
		controlstate.TypeTenantSuspended, controlstate.TypeTenantReinstated, controlstate.TypeSigningKeyCreated, controlstate.TypeSigningKeyRetired,
		controlstate.TypeWebhookCreated, controlstate.TypeWebhookEnabled, controlstate.TypeWebhookDisabled, controlstate.TypeWebhookDeleted} {
		if !slices.Contains(values, v) {
			t.Errorf("parser missed %q", v)
		}
	}
}

func compileEventsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ControlEventsSchema))
	if err != nil {
		t.Fatalf("events.schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "https://msgmesh.dev/schemas/control/v1/events.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile events.schema.json: %v", err)
	}
	return sch
}

// Events as controlstate writes them validate; malformed ones do not.
func TestEventsSchemaValidatesRealEvents(t *testing.T) {
	sch := compileEventsSchema(t)
	yes, no := true, false
	paid := controlstate.PlanPaid
	kd := controlstate.KeyCreatedData{Tenant: "acme", KeyID: "key_0123456789abcdef", Name: "admin", Role: "admin",
		Hash: strings.Repeat("ab", 32), Prefix: "mm_AbC-_9"}
	capKey := kd
	capKey.Role = ""
	capKey.Capabilities = []capability.Capability{{Ops: []capability.Op{capability.OpPublish, capability.OpTopicsRead}, Topics: []string{"orders", "chat-*"}, Rooms: []string{"r1"}}}
	capAdmin := capKey
	capAdmin.Role = "admin"
	sealed := &controlstate.Sealed{KEK: "kek_0123456789abcdef", Ciphertext: base64.StdEncoding.EncodeToString(make([]byte, 72))}
	ev := func(typ string, data any) []byte {
		raw, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(controlstate.Event{V: controlstate.SchemaVersion, Type: typ,
			ID: "0123456789abcdef0123456789abcdef", At: time.Date(2026, 11, 30, 11, 46, 0, 123456789, time.UTC), Data: raw})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	valid := map[string][]byte{
		"tenant.created":                  ev(controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "acme", Plan: "free"}),
		"tenant.created with key":         ev(controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "acme", Plan: "free", AdminKey: &kd}),
		"tenant.settings_changed strict":  ev(controlstate.TypeTenantSettingsChanged, controlstate.TenantSettingsChangedData{Tenant: "acme", StrictTopics: &no}),
		"tenant.settings_changed plan":    ev(controlstate.TypeTenantSettingsChanged, controlstate.TenantSettingsChangedData{Tenant: "acme", Plan: &paid, StrictTopics: &yes}),
		"key.created":                     ev(controlstate.TypeKeyCreated, kd),
		"key.revoked":                     ev(controlstate.TypeKeyRevoked, controlstate.KeyRevokedData{Tenant: "acme", KeyID: kd.KeyID}),
		"topic.created":                   ev(controlstate.TypeTopicCreated, controlstate.TopicCreatedData{Tenant: "acme", Topic: "orders", Partitions: 3, KafkaTopic: "msgmesh.acme.orders"}),
		"topic.deleted":                   ev(controlstate.TypeTopicDeleted, controlstate.TopicDeletedData{Tenant: "acme", Topic: "orders"}),
		"key.created bootstrap, no name":  ev(controlstate.TypeKeyCreated, controlstate.KeyCreatedData{Tenant: "default", KeyID: "key_00000000000000ff", Role: "consumer", Hash: strings.Repeat("0", 64), Prefix: "mm_000000"}),
		"tenant.settings_changed nothing": ev(controlstate.TypeTenantSettingsChanged, controlstate.TenantSettingsChangedData{Tenant: "acme"}),
		"key.created capability key":      ev(controlstate.TypeKeyCreated, capKey),
		"tenant.suspended":                ev(controlstate.TypeTenantSuspended, controlstate.TenantSuspendedData{Tenant: "acme", Reason: "unpaid"}),
		"tenant.reinstated":               ev(controlstate.TypeTenantReinstated, controlstate.TenantReinstatedData{Tenant: "acme"}),
		"signing_key.created":             ev(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: "sk_0123456789abcdef", Seed: base64.StdEncoding.EncodeToString(make([]byte, 32))}),
		"signing_key.retired":             ev(controlstate.TypeSigningKeyRetired, controlstate.SigningKeyRetiredData{KID: "sk_0123456789abcdef"}),
		"signing_key.created sealed":      ev(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: "sk_0123456789abcdef", SealedSeed: sealed}),
		"signing_key.rewrapped":           ev(controlstate.TypeSigningKeyRewrapped, controlstate.SigningKeyRewrappedData{KID: "sk_0123456789abcdef", SealedSeed: sealed}),
		"webhook.secret_rewrapped":        ev(controlstate.TypeWebhookSecretRewrapped, controlstate.WebhookSecretRewrappedData{Tenant: "acme", ID: "wh_0123456789abcdef", SealedSecret: sealed}),
	}
	for name, b := range webhookEvents(t, ev, true) {
		valid[name] = b
	}
	for name, b := range valid {
		if err := validateJSON(sch, b); err != nil {
			t.Errorf("%s should be valid: %v\n%s", name, err, b)
		}
	}
	invalid := map[string][]byte{
		"unknown type":               ev("tenant.deleted", controlstate.TopicDeletedData{Tenant: "acme", Topic: "orders"}),
		"data of other type":         ev(controlstate.TypeKeyRevoked, controlstate.TopicDeletedData{Tenant: "acme", Topic: "orders"}),
		"bad role":                   ev(controlstate.TypeKeyCreated, controlstate.KeyCreatedData{Tenant: "acme", KeyID: kd.KeyID, Role: "root", Hash: kd.Hash, Prefix: kd.Prefix}),
		"capability key with a role": ev(controlstate.TypeKeyCreated, capAdmin),
		"role key without a role":    ev(controlstate.TypeKeyCreated, controlstate.KeyCreatedData{Tenant: "acme", KeyID: kd.KeyID, Hash: kd.Hash, Prefix: kd.Prefix}),
		"short seed":                 ev(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: "sk_0123456789abcdef", Seed: "AAAA"}),
		"seed sealed and plaintext":  ev(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: "sk_0123456789abcdef", Seed: base64.StdEncoding.EncodeToString(make([]byte, 32)), SealedSeed: sealed}),
		"signing key without a seed": ev(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyRetiredData{KID: "sk_0123456789abcdef"}),
		"bad kek id":                 ev(controlstate.TypeSigningKeyRewrapped, controlstate.SigningKeyRewrappedData{KID: "sk_0123456789abcdef", SealedSeed: &controlstate.Sealed{KEK: "mykey", Ciphertext: sealed.Ciphertext}}),
		"rewrap without the seed":    ev(controlstate.TypeSigningKeyRewrapped, controlstate.SigningKeyRetiredData{KID: "sk_0123456789abcdef"}),
		"a 501-byte reason":          ev(controlstate.TypeTenantSuspended, controlstate.TenantSuspendedData{Tenant: "acme", Reason: strings.Repeat("r", 501)}),
		"zero partitions":            ev(controlstate.TypeTopicCreated, controlstate.TopicCreatedData{Tenant: "acme", Topic: "orders", KafkaTopic: "msgmesh.acme.orders"}),
		"dotted topic":               ev(controlstate.TypeTopicDeleted, controlstate.TopicDeletedData{Tenant: "acme", Topic: "a.b"}),
		"version 2":                  bytes.Replace(ev(controlstate.TypeTopicDeleted, controlstate.TopicDeletedData{Tenant: "acme", Topic: "o"}), []byte(`"v":1`), []byte(`"v":2`), 1),
		"bad time":                   bytes.Replace(ev(controlstate.TypeTopicDeleted, controlstate.TopicDeletedData{Tenant: "acme", Topic: "o"}), []byte(`"at":"2026-11-30T`), []byte(`"at":"2026-13-30T`), 1),
		"plaintext key":              []byte(`{"v":1,"type":"key.created","id":"0123456789abcdef0123456789abcdef","at":"2026-11-30T11:46:00Z","data":{"tenant":"acme","key_id":"key_0123456789abcdef","name":"","role":"admin","hash":"` + kd.Hash + `","prefix":"mm_abcdef","key":"mm_secret"}}`),
	}
	for name, b := range webhookEvents(t, ev, false) {
		invalid[name] = b
	}
	for name, b := range invalid {
		if err := validateJSON(sch, b); err == nil {
			t.Errorf("%s should be invalid:\n%s", name, b)
		}
	}
}

func validateJSON(sch *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// webhookEvents are webhook events as the control plane and the
// dispatcher write them (valid), or broken ones (invalid). The secret is
// made by the control plane's own generator.
func webhookEvents(t *testing.T, ev func(string, any) []byte, valid bool) map[string][]byte {
	t.Helper()
	created := controlstate.WebhookCreatedData{Tenant: "acme", ID: "wh_0123456789abcdef", Topic: "orders",
		KafkaTopic: "msgmesh.acme.orders", URL: "https://hooks.example.com/msgmesh?x=1", Secret: controlplane.NewWebhookSecret(),
		Group: "msgmesh.acme.wh.wh_0123456789abcdef", StartOffsets: map[int32]int64{0: 0, 1: 42, 2: 7}}
	withRoom := created
	withRoom.Room, withRoom.StartOffsets = "eu", nil
	sealedCreated := created
	sealedCreated.Secret, sealedCreated.SealedSecret = "", &controlstate.Sealed{KEK: "kek_0123456789abcdef", Ciphertext: "AAAA"}
	if valid {
		return map[string][]byte{
			"webhook.created":               ev(controlstate.TypeWebhookCreated, created),
			"webhook.created with room":     ev(controlstate.TypeWebhookCreated, withRoom),
			"webhook.created sealed":        ev(controlstate.TypeWebhookCreated, sealedCreated),
			"webhook.enabled":               ev(controlstate.TypeWebhookEnabled, controlstate.WebhookEnabledData{Tenant: "acme", ID: created.ID}),
			"webhook.enabled new url":       ev(controlstate.TypeWebhookEnabled, controlstate.WebhookEnabledData{Tenant: "acme", ID: created.ID, URL: "https://fixed.example.com/hook"}),
			"webhook.disabled by the guard": ev(controlstate.TypeWebhookDisabled, controlstate.WebhookDisabledData{Tenant: "acme", ID: created.ID, Reason: "the SSRF guard refused the delivery: ssrf: 10.0.0.1 is private"}),
			"webhook.disabled with a url":   ev(controlstate.TypeWebhookDisabled, controlstate.WebhookDisabledData{Tenant: "acme", ID: created.ID, Reason: "disabled through the API", URL: "https://other.example.com/"}),
			"webhook.deleted":               ev(controlstate.TypeWebhookDeleted, controlstate.WebhookDeletedData{Tenant: "acme", ID: created.ID}),
		}
	}
	httpURL := created
	httpURL.URL = "http://hooks.example.com/"
	badID := created
	badID.ID = "0123456789abcdef"
	badSecret := created
	badSecret.Secret = "c2VjcmV0"
	badOffsets := created
	noSecret := created
	noSecret.Secret = ""
	return map[string][]byte{
		"webhook.created http url":   ev(controlstate.TypeWebhookCreated, httpURL),
		"webhook.created bad id":     ev(controlstate.TypeWebhookCreated, badID),
		"webhook.created bad secret": ev(controlstate.TypeWebhookCreated, badSecret),
		"webhook.created no secret":  ev(controlstate.TypeWebhookCreated, noSecret),
		"webhook.created both secrets": ev(controlstate.TypeWebhookCreated, func() controlstate.WebhookCreatedData {
			b := created
			b.SealedSecret = sealedCreated.SealedSecret
			return b
		}()),
		"webhook.created empty room":   bytes.Replace(ev(controlstate.TypeWebhookCreated, created), []byte(`"secret":`), []byte(`"room":"","secret":`), 1),
		"webhook.created bad offsets":  bytes.Replace(ev(controlstate.TypeWebhookCreated, badOffsets), []byte(`"1":42`), []byte(`"x":42`), 1),
		"webhook.created negative":     bytes.Replace(ev(controlstate.TypeWebhookCreated, badOffsets), []byte(`"1":42`), []byte(`"1":-1`), 1),
		"webhook.disabled no reason":   ev(controlstate.TypeWebhookDisabled, controlstate.WebhookDisabledData{Tenant: "acme", ID: created.ID}),
		"webhook.enabled created data": ev(controlstate.TypeWebhookEnabled, created),
		"webhook.deleted extra field":  ev(controlstate.TypeWebhookDeleted, controlstate.WebhookDisabledData{Tenant: "acme", ID: created.ID, Reason: "x"}),
		"webhook.enabled ftp url":      ev(controlstate.TypeWebhookEnabled, controlstate.WebhookEnabledData{Tenant: "acme", ID: created.ID, URL: "ftp://example.com/"}),
	}
}
