package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Suspension is seen by every process within a second: the operator
// suspends through process A and the tenant's keys and tokens get 403
// tenant_suspended on process B; reinstating through A lifts it on B.
// Other tenants are never affected.
func TestCredentialsSuspensionAcrossProcesses(t *testing.T) {
	c := h.NewCluster(t)
	addrA, addrB := h.FreeAddr(t), h.FreeAddr(t)
	a := h.StartProcess(t, addrA, c.EnvFor(addrA))
	b := h.StartProcess(t, addrB, c.EnvFor(addrB))
	op := c.OperatorKey

	acme := h.CreateTenant(t, a.URL, op, "acme", "free")
	h.CreateTopic(t, a.URL, acme, "chat", 1)
	h.CreateTopic(t, a.URL, c.AdminKey, "chat", 1)
	_, acmeProducer := h.RoleKey(t, a.URL, acme, "backend", "producer")
	acmeToken, _ := h.MintToken(t, a.URL, acme, 600, []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}})
	otherToken, _ := h.MintToken(t, a.URL, c.AdminKey, 600, nil)

	creds := []struct{ what, cred string }{{"admin key", acme}, {"producer key", acmeProducer}, {"token", acmeToken}}
	pubB := func(cred string) h.Response {
		return h.Do(t, b.URL, "POST", "/v1/topics/chat/messages", cred, credMsg("room-42", "x"))
	}
	for _, cr := range creds {
		if ok, _ := h.PollUntil(10*time.Second, 20*time.Millisecond, func() bool { return pubB(cr.cred).Status == 200 }); !ok {
			t.Fatalf("process B never accepted acme's %s: %s", cr.what, pubB(cr.cred).Body)
		}
	}

	// Suspend via A.
	sr := h.Must(t, a.URL, "POST", "/v1/tenants/acme/suspend", op, map[string]any{"reason": "card declined"}, 200).JSON(t)
	if sr["suspended"] != true || sr["suspended_reason"] != "card declined" {
		t.Errorf("suspend answered %v, want suspended with the reason", sr)
	}
	suspendedAt := time.Now()
	for _, cr := range creds {
		var last h.Response
		ok, _ := h.PollUntil(5*time.Second, 20*time.Millisecond, func() bool {
			last = pubB(cr.cred)
			return last.Status == 403
		})
		took := time.Since(suspendedAt)
		if !ok {
			t.Fatalf("process B still serves acme's %s 5 s after the suspension: %d %s", cr.what, last.Status, last.Body)
		}
		h.WantError(t, "suspended tenant's "+cr.what+" on B", last, 403, "tenant_suspended")
		if took > time.Second {
			t.Errorf("process B refused acme's %s %v after the suspension, want ≤ 1s", cr.what, took)
		}
	}
	t.Logf("suspension reached process B within %v", time.Since(suspendedAt).Round(time.Millisecond))
	// Every route, on both processes, including minting and reading.
	for _, p := range []string{a.URL, b.URL} {
		h.WantError(t, "suspended GET /v1/topics", h.Do(t, p, "GET", "/v1/topics", acme, nil), 403, "tenant_suspended")
		h.WantError(t, "suspended token minting", h.Do(t, p, "POST", "/v1/tokens", acme, h.TokenBody(60, nil)), 403, "tenant_suspended")
		h.WantError(t, "suspended key creation", h.Do(t, p, "POST", "/v1/keys", acme, map[string]any{"name": "x", "role": "consumer"}), 403, "tenant_suspended")
		h.WantError(t, "suspended token publish", h.Do(t, p, "POST", "/v1/topics/chat/messages", acmeToken, credMsg("room-42", 1)), 403, "tenant_suspended")
		// Other tenants go on.
		if r := h.Do(t, p, "POST", "/v1/topics/chat/messages", c.AdminKey, credMsg("room-42", "default")); r.Status != 200 {
			t.Errorf("default tenant's key on %s while acme is suspended: %d %s", p, r.Status, r.Body)
		}
		if r := h.Do(t, p, "POST", "/v1/topics/chat/messages", otherToken, credMsg("room-42", "default")); r.Status != 200 {
			t.Errorf("default tenant's token on %s while acme is suspended: %d %s", p, r.Status, r.Body)
		}
	}
	gt := h.Must(t, b.URL, "GET", "/v1/tenants/acme", op, nil, 200).JSON(t)
	if gt["suspended"] != true {
		t.Errorf("operator GET /v1/tenants/acme on B: %v, want suspended", gt)
	}
	acmeKT := c.TenantKafkaTopic("acme", "chat")
	during := h.TotalRecords(t, c.Brokers, acmeKT)

	// Reinstate via A.
	rr := h.Must(t, a.URL, "POST", "/v1/tenants/acme/reinstate", op, nil, 200).JSON(t)
	if rr["suspended"] != false {
		t.Errorf("reinstate answered %v, want suspended false", rr)
	}
	reinstatedAt := time.Now()
	for _, cr := range creds {
		var last h.Response
		ok, _ := h.PollUntil(5*time.Second, 20*time.Millisecond, func() bool {
			last = pubB(cr.cred)
			return last.Status == 200
		})
		took := time.Since(reinstatedAt)
		if !ok {
			t.Fatalf("process B still refuses acme's %s 5 s after reinstatement: %d %s", cr.what, last.Status, last.Body)
		}
		if took > time.Second {
			t.Errorf("process B accepted acme's %s %v after reinstatement, want ≤ 1s", cr.what, took)
		}
	}
	if got := h.TotalRecords(t, c.Brokers, acmeKT); got != during+3 {
		t.Errorf("acme's chat holds %d records, want %d (nothing while suspended, 3 after)", got, during+3)
	}
	// Only the operator suspends; unknown tenants are 404.
	h.WantError(t, "admin suspending its own tenant", h.Do(t, a.URL, "POST", "/v1/tenants/acme/suspend", acme, nil), 403, "forbidden")
	h.WantError(t, "suspend unknown tenant", h.Do(t, a.URL, "POST", "/v1/tenants/nope/suspend", op, nil), 404, "tenant_not_found")
}

// A plan change rewrites retention.ms of the tenant's existing Kafka
// topics (free 1 day, paid 30 days) and of topics created later; other
// tenants keep theirs.
func TestCredentialsPlanChangeRetention(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	op := c.OperatorKey
	key := h.CreateTenant(t, n.URL, op, "planco", "free")
	for _, tp := range []string{"a", "b"} {
		h.CreateTopic(t, n.URL, key, tp, 1)
	}
	h.CreateTopic(t, n.URL, c.AdminKey, "a", 1)
	free, paid := strconv.Itoa(credFreeRetMs), strconv.Itoa(credPaidRetMs)
	want := func(when, tenant, topic, ms string) {
		t.Helper()
		if got := h.TopicConfigEventually(t, c.Brokers, c.TenantKafkaTopic(tenant, topic), "retention.ms", ms); got != ms {
			t.Errorf("%s: Kafka retention.ms of %s/%s = %s, want %s", when, tenant, topic, got, ms)
		}
	}
	want("free at creation", "planco", "a", free)

	r := h.Must(t, n.URL, "PATCH", "/v1/tenants/planco", op, map[string]any{"plan": "paid"}, 200).JSON(t)
	if r["plan"] != "paid" || r["retention_ms"] != float64(credPaidRetMs) {
		t.Errorf("PATCH plan paid answered %v", r)
	}
	want("after paid", "planco", "a", paid)
	want("after paid", "planco", "b", paid)
	want("other tenant after planco went paid", "default", "a", free)
	h.CreateTopic(t, n.URL, key, "c", 1)
	want("created on paid", "planco", "c", paid)
	if tv := h.Must(t, n.URL, "GET", "/v1/topics/a", key, nil, 200).JSON(t); tv["retention_ms"] != float64(credPaidRetMs) {
		t.Errorf("GET /v1/topics/a on paid: %v", tv)
	}

	h.Must(t, n.URL, "PATCH", "/v1/tenants/planco", op, map[string]any{"plan": "free"}, 200)
	for _, tp := range []string{"a", "b", "c"} {
		want("back to free", "planco", tp, free)
	}
	if tv := h.Must(t, n.URL, "GET", "/v1/tenant", key, nil, 200).JSON(t); tv["plan"] != "free" || tv["retention_ms"] != float64(credFreeRetMs) {
		t.Errorf("GET /v1/tenant after going back to free: %v", tv)
	}
	h.WantError(t, "unknown plan", h.Do(t, n.URL, "PATCH", "/v1/tenants/planco", op, map[string]any{"plan": "gold"}), 422, "validation_failed")
	h.WantError(t, "plan of an unknown tenant", h.Do(t, n.URL, "PATCH", "/v1/tenants/nope", op, map[string]any{"plan": "paid"}), 404, "tenant_not_found")
	h.WantError(t, "tenant admin changing its plan", h.Do(t, n.URL, "PATCH", "/v1/tenants/planco", key, map[string]any{"plan": "paid"}), 403, "forbidden")
	want("after refused changes", "planco", "a", free)
}

// The strict topic gate is a tenant setting an admin changes: on (the
// default) publishing to an unknown topic is 404; off, it creates the
// topic; a key without tenant.settings may not change it.
func TestCredentialsStrictTopicGate(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := h.CreateTenant(t, n.URL, c.OperatorKey, "gate", "free")
	if tv := h.Must(t, n.URL, "GET", "/v1/tenant", key, nil, 200).JSON(t); tv["strict_topics"] != true {
		t.Fatalf("new tenant: %v, want strict_topics true", tv)
	}
	h.WantError(t, "publish to unknown topic, gate on", h.Do(t, n.URL, "POST", "/v1/topics/auto/messages", key, credMsg("", 1)), 404, "topic_not_found")
	_, prod := h.RoleKey(t, n.URL, key, "prod", "producer")
	h.WantForbidden(t, "producer turning the gate off", h.Do(t, n.URL, "PATCH", "/v1/tenant", prod, map[string]any{"strict_topics": false}), "tenant.settings")

	r := h.Must(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{"strict_topics": false}, 200).JSON(t)
	if r["strict_topics"] != false {
		t.Errorf("PATCH strict_topics false answered %v", r)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/auto/messages", prod, credMsg("", "first"), 200)
	if tv := h.Must(t, n.URL, "GET", "/v1/topics/auto", key, nil, 200).JSON(t); tv["name"] != "auto" {
		t.Errorf("auto-created topic: %v", tv)
	}
	if got := h.TotalRecords(t, c.Brokers, c.TenantKafkaTopic("gate", "auto")); got != 1 {
		t.Errorf("auto-created Kafka topic holds %d records, want 1", got)
	}
	// Another tenant's gate is its own.
	h.WantError(t, "default tenant still strict", h.Do(t, n.URL, "POST", "/v1/topics/auto/messages", c.AdminKey, credMsg("", 1)), 404, "topic_not_found")

	h.Must(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{"strict_topics": true}, 200)
	h.WantError(t, "publish to unknown topic, gate back on", h.Do(t, n.URL, "POST", "/v1/topics/auto2/messages", key, credMsg("", 1)), 404, "topic_not_found")
	h.WantError(t, "PATCH with nothing", h.Do(t, n.URL, "PATCH", "/v1/tenant", key, map[string]any{}), 400, "invalid_request")
}

const (
	credFreeRetMs = 24 * 60 * 60 * 1000
	credPaidRetMs = 30 * credFreeRetMs
)

// Keys belong to their tenant: another tenant's admin neither lists nor
// revokes them.
func TestCredentialsKeysAreTenantScoped(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	otherAdmin := h.CreateTenant(t, n.URL, c.OperatorKey, "other", "free")
	otherID, otherKey := h.RoleKey(t, n.URL, otherAdmin, "their-producer", "producer")
	h.WantError(t, "revoking another tenant's key", h.Do(t, n.URL, "DELETE", "/v1/keys/"+otherID, c.AdminKey, nil), 404, "key_not_found")
	if l := h.Must(t, n.URL, "GET", "/v1/keys", c.AdminKey, nil, 200); strings.Contains(string(l.Body), otherID) {
		t.Errorf("default's key listing shows other's key %s", otherID)
	}
	h.Must(t, n.URL, "GET", "/v1/topics", otherKey, nil, 200)
	// Tokens carry their tenant: default's token sees default's topics only.
	h.CreateTopic(t, n.URL, otherAdmin, "private", 1)
	tok, _ := h.MintToken(t, n.URL, c.AdminKey, 60, nil)
	h.WantError(t, "default token reading other's topic", h.Do(t, n.URL, "GET", "/v1/topics/private", tok, nil), 404, "topic_not_found")
}
