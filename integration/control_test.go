package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

const (
	ctlDayMs     = 24 * 60 * 60 * 1000
	ctlFreeRetMs = 1 * ctlDayMs
	ctlPaidRetMs = 30 * ctlDayMs
)

// pollUntil polls topic with group until it has seen want messages (or
// timeout) and returns every message it got, keyed by cursor, as raw data.
func ctlPollUntil(t *testing.T, base, key, topic, group string, want int, timeout time.Duration) map[string]string {
	t.Helper()
	got := map[string]string{}
	deadline := time.Now().Add(timeout)
	for len(got) < want && time.Now().Before(deadline) {
		r := h.Must(t, base, "POST", "/v1/topics/"+topic+"/poll", key, map[string]any{"group": group, "wait_ms": 1000}, 200).JSON(t)
		msgs, _ := r["messages"].([]any)
		for _, m := range msgs {
			mm := m.(map[string]any)
			raw, _ := json.Marshal(mm["data"])
			got[mm["cursor"].(string)] = string(raw)
		}
	}
	return got
}

func ctlValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Tenants are isolated: same topic name in two tenants, messages never
// cross, one tenant cannot see the other's topics; only the operator
// creates tenants, and the operator cannot publish; retention follows the
// plan in the API and in Kafka itself.
func TestTenantIsolation(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)

	// Operator creates tenant acme (paid); the answer has its admin key once.
	r := h.Must(t, n.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": "acme", "plan": "paid"}, 201).JSON(t)
	acmeKey, _ := r["admin_key"].(string)
	if !strings.HasPrefix(acmeKey, "mm_") || r["id"] != "acme" || r["plan"] != "paid" {
		t.Fatalf("create tenant answered %v, want id acme, plan paid and an mm_ admin_key", r)
	}
	ten := h.Must(t, n.URL, "GET", "/v1/tenant", acmeKey, nil, 200).JSON(t)
	if ten["id"] != "acme" {
		t.Errorf("acme's admin key belongs to tenant %v", ten["id"])
	}

	// Who may create tenants, duplicates, bad ids.
	h.WantError(t, "admin key creates a tenant", h.Do(t, n.URL, "POST", "/v1/tenants", c.AdminKey, map[string]any{"id": "evil", "plan": "free"}), 403, "forbidden")
	h.WantError(t, "acme key creates a tenant", h.Do(t, n.URL, "POST", "/v1/tenants", acmeKey, map[string]any{"id": "evil2", "plan": "free"}), 403, "forbidden")
	h.WantError(t, "duplicate tenant", h.Do(t, n.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": "acme", "plan": "free"}), 409, "conflict")
	for _, bad := range []string{"Acme", "ac.me", "ac/me", "-acme", "", strings.Repeat("a", 64), "ac me"} {
		h.WantError(t, fmt.Sprintf("tenant id %q", bad), h.Do(t, n.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": bad, "plan": "free"}), 422, "validation_failed")
	}
	h.WantError(t, "unknown plan", h.Do(t, n.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": "plan-x", "plan": "platinum"}), 422, "validation_failed")

	// The operator key manages tenants only.
	h.WantError(t, "operator publishes", h.Do(t, n.URL, "POST", "/v1/topics/orders/messages", c.OperatorKey, map[string]any{"data": 1}), 403, "forbidden")
	h.WantError(t, "operator creates a topic", h.Do(t, n.URL, "POST", "/v1/topics", c.OperatorKey, map[string]any{"name": "orders"}), 403, "forbidden")

	// Both tenants create "orders".
	acmeTopic := h.Must(t, n.URL, "POST", "/v1/topics", acmeKey, map[string]any{"name": "orders", "partitions": 2}, 201).JSON(t)
	defTopic := h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "orders", "partitions": 2}, 201).JSON(t)
	h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "invoices"}, 201)
	if acmeTopic["kafka_topic"] == defTopic["kafka_topic"] {
		t.Fatalf("both tenants' orders map to Kafka topic %v", acmeTopic["kafka_topic"])
	}

	// Retention follows the plan: in the API...
	if acmeTopic["retention_ms"] != float64(ctlPaidRetMs) {
		t.Errorf("acme (paid) orders retention_ms %v, want %d (30 days)", acmeTopic["retention_ms"], ctlPaidRetMs)
	}
	if defTopic["retention_ms"] != float64(ctlFreeRetMs) {
		t.Errorf("default (free) orders retention_ms %v, want %d (1 day)", defTopic["retention_ms"], ctlFreeRetMs)
	}
	// ... and in Kafka.
	if v := h.TopicConfigEventually(t, c.Brokers, c.TenantKafkaTopic("acme", "orders"), "retention.ms", fmt.Sprint(ctlPaidRetMs)); v != fmt.Sprint(ctlPaidRetMs) {
		t.Errorf("Kafka retention.ms of acme's orders is %q, want %d", v, ctlPaidRetMs)
	}
	if v := h.TopicConfigEventually(t, c.Brokers, c.TenantKafkaTopic("default", "orders"), "retention.ms", fmt.Sprint(ctlFreeRetMs)); v != fmt.Sprint(ctlFreeRetMs) {
		t.Errorf("Kafka retention.ms of default's orders is %q, want %d", v, ctlFreeRetMs)
	}

	// Messages never cross tenants.
	for i := 0; i < 5; i++ {
		h.Must(t, n.URL, "POST", "/v1/topics/orders/messages", acmeKey, []byte(fmt.Sprintf(`{"data":"acme-%d"}`, i)), 200)
		h.Must(t, n.URL, "POST", "/v1/topics/orders/messages", c.AdminKey, []byte(fmt.Sprintf(`{"data":"default-%d"}`, i)), 200)
	}
	gotAcme := ctlPollUntil(t, n.URL, acmeKey, "orders", "g", 5, 30*time.Second)
	gotDef := ctlPollUntil(t, n.URL, c.AdminKey, "orders", "g", 5, 30*time.Second)
	// One more short poll each: nothing foreign arrives late either.
	for k, v := range ctlPollUntil(t, n.URL, acmeKey, "orders", "g", 1, time.Second) {
		gotAcme[k] = v
	}
	for k, v := range ctlPollUntil(t, n.URL, c.AdminKey, "orders", "g", 1, time.Second) {
		gotDef[k] = v
	}
	check := func(who string, got map[string]string, own string) {
		if len(got) != 5 {
			t.Errorf("%s polled %d messages, want its 5: %v", who, len(got), ctlValues(got))
		}
		for _, v := range got {
			if !strings.HasPrefix(v, `"`+own+`-`) {
				t.Errorf("%s polled %s, which it never published", who, v)
			}
		}
	}
	check("acme", gotAcme, "acme")
	check("default", gotDef, "default")

	// acme cannot see default's topics.
	h.WantError(t, "acme GET default's topic", h.Do(t, n.URL, "GET", "/v1/topics/invoices", acmeKey, nil), 404, "topic_not_found")
	h.WantError(t, "acme publishes to default's topic", h.Do(t, n.URL, "POST", "/v1/topics/invoices/messages", acmeKey, map[string]any{"data": 1}), 404, "topic_not_found")
	h.WantError(t, "acme polls default's topic", h.Do(t, n.URL, "POST", "/v1/topics/invoices/poll", acmeKey, map[string]any{"group": "g", "wait_ms": 100}), 404, "topic_not_found")
	h.WantError(t, "acme deletes default's topic", h.Do(t, n.URL, "DELETE", "/v1/topics/invoices", acmeKey, nil), 404, "topic_not_found")
	list := h.Must(t, n.URL, "GET", "/v1/topics", acmeKey, nil, 200).JSON(t)
	for _, tp := range list["topics"].([]any) {
		if name := tp.(map[string]any)["name"]; name != "orders" {
			t.Errorf("acme lists topic %v", name)
		}
	}
	if n := h.TotalRecords(t, c.Brokers, c.TenantKafkaTopic("default", "invoices")); n != 0 {
		t.Errorf("default's invoices holds %d records after acme's attempts, want 0", n)
	}
	// acme's key list holds none of default's keys.
	keys := h.Must(t, n.URL, "GET", "/v1/keys", acmeKey, nil, 200).JSON(t)
	if ks := keys["keys"].([]any); len(ks) != 1 {
		t.Errorf("acme lists %d keys, want only its own admin key: %v", len(ks), ks)
	}
}

// ctlWant2xx fails unless r succeeded (commit answers 204 since f2d7993).
func ctlWant2xx(t *testing.T, what string, r h.Response) {
	t.Helper()
	if r.Status/100 != 2 {
		t.Fatalf("%s: status %d, want 2xx: %s", what, r.Status, r.Body)
	}
}

// createKey makes a role key and returns its id and plaintext.
func ctlCreateKey(t *testing.T, base, admin, name, role string) (string, string) {
	t.Helper()
	r := h.Must(t, base, "POST", "/v1/keys", admin, map[string]any{"name": name, "role": role}, 201).JSON(t)
	id, _ := r["id"].(string)
	key, _ := r["key"].(string)
	if id == "" || !strings.HasPrefix(key, "mm_") || r["role"] != role || r["name"] != name {
		t.Fatalf("create key answered %v", r)
	}
	return id, key
}

// Roles: producer publishes and reads topics, consumer polls and commits,
// admin does everything; the rest is 403 forbidden. Listing keys never
// shows a plaintext key.
func TestRoleChecks(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	admin := c.AdminKey
	h.Must(t, n.URL, "POST", "/v1/topics", admin, map[string]any{"name": "jobs", "partitions": 1}, 201)
	prodID, prod := ctlCreateKey(t, n.URL, admin, "svc-producer", "producer")
	consID, cons := ctlCreateKey(t, n.URL, admin, "svc-consumer", "consumer")
	_, admin2 := ctlCreateKey(t, n.URL, admin, "second-admin", "admin")
	h.WantError(t, "unknown role", h.Do(t, n.URL, "POST", "/v1/keys", admin, map[string]any{"name": "x", "role": "root"}), 422, "validation_failed")

	// GET /v1/keys never holds a plaintext key.
	lr := h.Must(t, n.URL, "GET", "/v1/keys", admin, nil, 200)
	for _, k := range []string{admin, prod, cons, admin2} {
		if strings.Contains(string(lr.Body), k) {
			t.Errorf("GET /v1/keys contains a plaintext key (%s…)", k[:8])
		}
	}
	var listed struct {
		Keys []map[string]any `json:"keys"`
	}
	_ = json.Unmarshal(lr.Body, &listed)
	ids := map[string]bool{}
	for _, k := range listed.Keys {
		ids[fmt.Sprint(k["id"])] = true
		if v, has := k["key"]; has {
			t.Errorf("GET /v1/keys entry has a \"key\" field %v", v)
		}
	}
	if !ids[prodID] || !ids[consID] || len(listed.Keys) != 4 {
		t.Errorf("GET /v1/keys lists %d keys %v, want 4 including %s and %s", len(listed.Keys), ids, prodID, consID)
	}

	forbidden := func(who, key, method, path string, body any) {
		t.Helper()
		h.WantError(t, who+" "+method+" "+path, h.Do(t, n.URL, method, path, key, body), 403, "forbidden")
	}

	// Producer.
	pub := h.Must(t, n.URL, "POST", "/v1/topics/jobs/messages", prod, map[string]any{"data": "from-producer"}, 200).JSON(t)
	h.Must(t, n.URL, "GET", "/v1/topics", prod, nil, 200)
	h.Must(t, n.URL, "GET", "/v1/topics/jobs", prod, nil, 200)
	forbidden("producer", prod, "POST", "/v1/topics/jobs/poll", map[string]any{"group": "g"})
	forbidden("producer", prod, "POST", "/v1/topics/jobs/commit", map[string]any{"group": "g", "cursors": []string{pub["cursor"].(string)}})
	forbidden("producer", prod, "POST", "/v1/topics", map[string]any{"name": "prod-topic"})
	forbidden("producer", prod, "DELETE", "/v1/topics/jobs", nil)
	forbidden("producer", prod, "POST", "/v1/keys", map[string]any{"name": "x", "role": "admin"})
	forbidden("producer", prod, "GET", "/v1/keys", nil)
	forbidden("producer", prod, "DELETE", "/v1/keys/"+consID, nil)
	forbidden("producer", prod, "PATCH", "/v1/tenant", map[string]any{"strict_topics": false})
	forbidden("producer", prod, "POST", "/v1/tenants", map[string]any{"id": "x", "plan": "free"})

	// Consumer.
	got := h.Must(t, n.URL, "POST", "/v1/topics/jobs/poll", cons, map[string]any{"group": "workers", "consumer": "c1", "wait_ms": 10000}, 200).JSON(t)
	msgs, _ := got["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["data"] != "from-producer" {
		t.Fatalf("consumer polled %v, want the producer's message", got)
	}
	ctlWant2xx(t, "consumer commits", h.Do(t, n.URL, "POST", "/v1/topics/jobs/commit", cons, map[string]any{"group": "workers", "consumer": "c1", "cursors": []string{msgs[0].(map[string]any)["cursor"].(string)}}))
	h.Must(t, n.URL, "GET", "/v1/topics", cons, nil, 200)
	forbidden("consumer", cons, "POST", "/v1/topics/jobs/messages", map[string]any{"data": 1})
	forbidden("consumer", cons, "POST", "/v1/topics", map[string]any{"name": "cons-topic"})
	forbidden("consumer", cons, "DELETE", "/v1/topics/jobs", nil)
	forbidden("consumer", cons, "POST", "/v1/keys", map[string]any{"name": "x", "role": "consumer"})
	forbidden("consumer", cons, "GET", "/v1/keys", nil)
	forbidden("consumer", cons, "PATCH", "/v1/tenant", map[string]any{"strict_topics": false})
	if n := h.TotalRecords(t, c.Brokers, c.TenantKafkaTopic("default", "jobs")); n != 1 {
		t.Errorf("jobs holds %d records, want only the producer's 1", n)
	}
	h.WantError(t, "producer-created topic", h.Do(t, n.URL, "GET", "/v1/topics/prod-topic", admin, nil), 404, "topic_not_found")

	// Admin (a created one) does all of it.
	h.Must(t, n.URL, "POST", "/v1/topics", admin2, map[string]any{"name": "admin-topic"}, 201)
	ap := h.Must(t, n.URL, "POST", "/v1/topics/admin-topic/messages", admin2, map[string]any{"data": "a"}, 200).JSON(t)
	ag := h.Must(t, n.URL, "POST", "/v1/topics/admin-topic/poll", admin2, map[string]any{"group": "g", "wait_ms": 10000}, 200).JSON(t)
	if ms, _ := ag["messages"].([]any); len(ms) != 1 {
		t.Errorf("admin polled %v", ag)
	}
	ctlWant2xx(t, "admin commits", h.Do(t, n.URL, "POST", "/v1/topics/admin-topic/commit", admin2, map[string]any{"group": "g", "cursors": []string{ap["cursor"].(string)}}))
	h.Must(t, n.URL, "GET", "/v1/keys", admin2, nil, 200)
	h.Must(t, n.URL, "PATCH", "/v1/tenant", admin2, map[string]any{"strict_topics": true}, 200)
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+prodID, admin2, nil, 204)
	h.WantError(t, "revoked producer publishes", h.Do(t, n.URL, "POST", "/v1/topics/jobs/messages", prod, map[string]any{"data": 1}), 401, "credential_revoked")
	h.Must(t, n.URL, "DELETE", "/v1/topics/admin-topic", admin2, nil, 204)
	h.WantError(t, "revoke unknown key", h.Do(t, n.URL, "DELETE", "/v1/keys/key_doesnotexist", admin2, nil), 404, "key_not_found")
}

// A key revoked through node A is rejected by node B within a second;
// a topic created on A is visible on B; two nodes racing to create the
// same topic: exactly one wins.
func TestRevocationAndTopicsAcrossNodes(t *testing.T) {
	c := h.NewCluster(t)
	a := c.Start(t, nil)
	b := c.Start(t, nil)

	for i := 0; i < 3; i++ {
		id, key := ctlCreateKey(t, a.URL, c.AdminKey, fmt.Sprintf("victim-%d", i), "producer")
		// B learns the key (reads follow writes on A; B follows the log).
		if ok, _ := h.PollUntil(10*time.Second, 20*time.Millisecond, func() bool {
			return h.Do(t, b.URL, "GET", "/v1/topics", key, nil).Status == 200
		}); !ok {
			t.Fatalf("node B never accepted the key created on node A")
		}
		h.Must(t, a.URL, "DELETE", "/v1/keys/"+id, c.AdminKey, nil, 204)
		revokedAt := time.Now()
		var last h.Response
		ok, took := h.PollUntil(5*time.Second, 20*time.Millisecond, func() bool {
			last = h.Do(t, b.URL, "GET", "/v1/topics", key, nil)
			return last.Status == 401
		})
		took = time.Since(revokedAt)
		if !ok {
			t.Fatalf("node B still accepts the revoked key 5s after the 204 (last %d %s)", last.Status, last.Body)
		}
		h.WantError(t, "revoked key on node B", last, 401, "credential_revoked")
		if took > time.Second {
			t.Errorf("node B rejected the revoked key %v after the 204, want ≤ 1s", took)
		}
		t.Logf("revocation %d reached node B in %v", i, took.Round(time.Millisecond))
		// And on A, immediately.
		h.WantError(t, "revoked key on node A", h.Do(t, a.URL, "GET", "/v1/topics", key, nil), 401, "credential_revoked")
	}

	// A topic created on A is visible on B promptly.
	h.Must(t, a.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "shared"}, 201)
	ok, took := h.PollUntil(5*time.Second, 20*time.Millisecond, func() bool {
		return h.Do(t, b.URL, "GET", "/v1/topics/shared", c.AdminKey, nil).Status == 200
	})
	if !ok || took > time.Second {
		t.Errorf("topic created on A visible on B: %v after %v, want within 1s", ok, took)
	}
	h.Must(t, b.URL, "POST", "/v1/topics/shared/messages", c.AdminKey, map[string]any{"data": "via-b"}, 200)

	// Two nodes race to create the same name: one 201, one 409.
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("race-%d", i)
		var wg sync.WaitGroup
		var rs [2]h.Response
		start := make(chan struct{})
		for j, node := range []*h.Node{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := h.RawRequest(h.Client, "POST", node.URL+"/v1/topics", []byte(`{"name":"`+name+`"}`),
					map[string]string{"Authorization": "Bearer " + c.AdminKey, "Content-Type": "application/json"})
				if err != nil {
					t.Errorf("race create on node %d: %v", j, err)
				}
				rs[j] = r
			}()
		}
		close(start)
		wg.Wait()
		st := []int{rs[0].Status, rs[1].Status}
		if !(st[0] == 201 && st[1] == 409 || st[0] == 409 && st[1] == 201) {
			t.Errorf("racing creates of %s answered %v, want one 201 and one 409 (%s | %s)", name, st, rs[0].Body, rs[1].Body)
		}
		for j := range rs {
			if rs[j].Status == 409 {
				h.WantError(t, "losing create of "+name, rs[j], 409, "conflict")
			}
		}
	}
}

// Keys, tokens and payloads never reach the logs, even at debug level.
func TestKeysAndPayloadsAreNeverLogged(t *testing.T) {
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr, "MSGMESH_LOG_LEVEL=debug", "MSGMESH_LOG_FORMAT=json"))
	secrets := map[string]string{"bootstrap admin key": c.AdminKey, "operator key": c.OperatorKey}
	marker := "PAYLOAD-MARKER-" + strings.TrimPrefix(h.NewKey(), "mm_")[:16]

	r := h.Must(t, p.URL, "POST", "/v1/tenants", c.OperatorKey, map[string]any{"id": "logcheck", "plan": "free"}, 201).JSON(t)
	secrets["tenant admin key"] = r["admin_key"].(string)
	kr := h.Must(t, p.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "p", "role": "producer"}, 201).JSON(t)
	secrets["producer key"] = kr["key"].(string)
	h.Must(t, p.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "logged"}, 201)
	h.Must(t, p.URL, "POST", "/v1/topics/logged/messages", secrets["producer key"], map[string]any{"data": marker + "-json", "room": marker + "-room"}, 200)
	h.Must(t, p.URL, "POST", "/v1/topics/logged/messages", c.AdminKey, map[string]any{"messages": []any{map[string]any{"data": marker + "-batch", "headers": map[string]string{"x-m": marker + "-hdr"}}}}, 200)
	raw := h.Do(t, p.URL, "POST", "/v1/topics/logged/messages?room="+marker+"-qroom", c.AdminKey, []byte(marker+"-raw"), "text/plain")
	if raw.Status != 200 {
		t.Fatalf("raw publish: %d %s", raw.Status, raw.Body)
	}
	h.Must(t, p.URL, "POST", "/v1/topics/logged/poll", c.AdminKey, map[string]any{"group": "g", "wait_ms": 5000}, 200)

	// Auth failures with real-looking and garbage credentials.
	wrong := h.NewKey()
	secrets["wrong key"] = wrong
	h.WantError(t, "wrong key", h.Do(t, p.URL, "GET", "/v1/topics", wrong, nil), 401, "invalid_credential")
	garbage := "not-a-key-" + strings.TrimPrefix(h.NewKey(), "mm_")
	secrets["garbage credential"] = garbage
	h.WantError(t, "garbage credential", h.Do(t, p.URL, "GET", "/v1/topics", garbage, nil), 401, "invalid_credential")
	h.Must(t, p.URL, "DELETE", "/v1/keys/"+kr["id"].(string), c.AdminKey, nil, 204)
	h.WantError(t, "revoked key", h.Do(t, p.URL, "POST", "/v1/topics/logged/messages", secrets["producer key"], map[string]any{"data": marker + "-revoked"}), 401, "credential_revoked")
	h.WantError(t, "bad body", h.Do(t, p.URL, "POST", "/v1/topics/logged/messages", c.AdminKey, []byte(`{"data":"`+marker+`-bad",`)), 400, "invalid_request")
	h.WantError(t, "wrong key on operator route", h.Do(t, p.URL, "POST", "/v1/tenants", wrong, map[string]any{"id": "x"}), 401, "invalid_credential")

	if err := p.Terminate(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	out := p.Output()
	if !strings.Contains(out, `"level":"DEBUG"`) || !strings.Contains(out, `"msg":"http"`) {
		t.Fatalf("the process did not log at debug level in JSON (the check would be empty):\n%.2000s", out)
	}
	for what, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the log contains the %s", what)
		}
	}
	if strings.Contains(out, marker) {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, marker) {
				t.Errorf("the log contains a payload, room or header value: %.300s", line)
			}
		}
	}
	t.Logf("checked %d bytes of debug log for %d secrets and the payload marker", len(out), len(secrets))
}

// A revoked bootstrap admin key stays revoked when nodes restart with it
// still configured: configuration never resurrects a revoked key.
func TestRevokedBootstrapKeyStaysRevoked(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	_, admin2 := ctlCreateKey(t, n.URL, c.AdminKey, "replacement", "admin")
	var listed struct {
		Keys []struct{ ID, Name string } `json:"keys"`
	}
	if err := json.Unmarshal(h.Must(t, n.URL, "GET", "/v1/keys", admin2, nil, 200).Body, &listed); err != nil {
		t.Fatal(err)
	}
	var bootID string
	for _, k := range listed.Keys {
		if k.Name == "bootstrap" {
			bootID = k.ID
		}
	}
	if bootID == "" {
		t.Fatalf("GET /v1/keys lists no bootstrap key: %+v", listed.Keys)
	}
	h.Must(t, n.URL, "DELETE", "/v1/keys/"+bootID, admin2, nil, 204)
	h.WantError(t, "revoked bootstrap key", h.Do(t, n.URL, "GET", "/v1/topics", c.AdminKey, nil), 401, "credential_revoked")
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	n2 := c.Start(t, nil) // same MSGMESH_BOOTSTRAP_ADMIN_KEY
	h.WantError(t, "revoked bootstrap key after restart", h.Do(t, n2.URL, "GET", "/v1/topics", c.AdminKey, nil), 401, "credential_revoked")
	h.Must(t, n2.URL, "GET", "/v1/topics", admin2, nil, 200)
}
