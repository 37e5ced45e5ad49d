package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/readmodel"
	"github.com/msgmesh/msgmesh/proto/openapitest"
)

// readAPI sends a GET and checks the exchange against proto/openapi.yaml.
func readAPI(t *testing.T, v *openapitest.V, base, path, key string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	v.Check(t, req, nil, resp, body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return resp.StatusCode, m
}

func list(m map[string]any, field string) []map[string]any {
	var out []map[string]any
	for _, x := range m[field].([]any) {
		out = append(out, x.(map[string]any))
	}
	return out
}

// Without postgres.url: every attempt (delivered, temporary, permanent)
// and every control change is readable from the in-memory window, with
// filters, answers that match the contract, no secret, and no tenant
// reading another's.
func TestReadModelMemoryAttemptsAndAudit(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 2, 2*time.Second, 100*time.Millisecond)
	v := openapitest.Validator(t)
	rc.Answer("/down", http.StatusServiceUnavailable)
	rc.Answer("/gone", http.StatusGone)
	h.CreateTopic(t, n.URL, c.AdminKey, "orders", 2)
	ok := h.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/ok?token=querysecret"), "")
	down := h.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/down"), "")
	gone := h.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/gone"), "")
	cur := publishJSON(t, n, c.AdminKey, "orders", "r1", map[string]any{"n": 1})
	waitDeliveries(t, rc, "/down", 2, 30*time.Second)

	wait := func(id string, want int) []map[string]any {
		t.Helper()
		var got []map[string]any
		done, _ := h.PollUntil(10*time.Second, 50*time.Millisecond, func() bool {
			st, m := readAPI(t, v, n.URL, "/v1/webhooks/"+id+"/attempts", c.AdminKey)
			if st != 200 || m["source"] != "memory" {
				t.Fatalf("attempts: %d %v", st, m)
			}
			got = list(m, "attempts")
			return len(got) >= want
		})
		if !done {
			t.Fatalf("webhook %s: %d attempts, want %d: %v", id, len(got), want, got)
		}
		return got
	}
	a := wait(ok.ID, 1)[0]
	if a["outcome"] != "delivered" || a["status"] != float64(200) || a["cursor"] != cur || a["attempt"] != float64(1) || a["webhook_id"] != ok.ID || a["error"] != "" {
		t.Errorf("delivered attempt: %v", a)
	}
	ds := wait(down.ID, 2)
	if ds[0]["attempt"] != float64(2) || ds[1]["attempt"] != float64(1) || ds[0]["outcome"] != "temporary" || ds[0]["status"] != float64(503) {
		t.Errorf("temporary attempts, newest first: %v", ds)
	}
	if ds[0]["message_id"] != ds[1]["message_id"] || ds[0]["message_id"] == "" {
		t.Errorf("both attempts are of one message: %v", ds)
	}
	if g := wait(gone.ID, 1)[0]; g["outcome"] != "permanent" || g["status"] != float64(410) {
		t.Errorf("permanent attempt: %v", g)
	}
	// Filters and pages.
	if _, m := readAPI(t, v, n.URL, "/v1/webhooks/"+down.ID+"/attempts?outcome=delivered", c.AdminKey); len(list(m, "attempts")) != 0 {
		t.Errorf("outcome=delivered of a failing webhook: %v", m)
	}
	_, m := readAPI(t, v, n.URL, "/v1/webhooks/"+down.ID+"/attempts?status=503&cursor="+cur+"&limit=1", c.AdminKey)
	if got := list(m, "attempts"); len(got) != 1 || got[0]["attempt"] != float64(2) || m["next"] == nil {
		t.Fatalf("page 1: %v", m)
	}
	_, m = readAPI(t, v, n.URL, "/v1/webhooks/"+down.ID+"/attempts?status=503&limit=1&after="+url.QueryEscape(m["next"].(string)), c.AdminKey)
	if got := list(m, "attempts"); len(got) != 1 || got[0]["attempt"] != float64(1) || m["next"] != nil {
		t.Fatalf("page 2: %v", m)
	}
	if st, m := readAPI(t, v, n.URL, "/v1/webhooks/"+down.ID+"/attempts?outcome=lost", c.AdminKey); st != 400 || m["code"] != "invalid_request" {
		t.Errorf("bad outcome: %d %v", st, m)
	}

	// The audit log names who did what, and holds no secret.
	key := h.Must(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "ci", "role": "producer"}, http.StatusCreated).JSON(t)
	var events []map[string]any
	done, _ := h.PollUntil(10*time.Second, 50*time.Millisecond, func() bool {
		_, m := readAPI(t, v, n.URL, "/v1/audit?type=key.created", c.AdminKey)
		events = list(m, "events")
		return len(events) >= 1 && events[0]["details"].(map[string]any)["key_id"] == key["id"]
	})
	if !done {
		t.Fatalf("key.created of %s not in the audit log: %v", key["id"], events)
	}
	if e := events[0]; !strings.HasPrefix(e["actor"].(string), "key:key_") || e["details"].(map[string]any)["name"] != "ci" {
		t.Errorf("key.created: %v", e)
	}
	raw := h.Must(t, n.URL, "GET", "/v1/audit?limit=1000", c.AdminKey, nil, http.StatusOK).Body
	for _, secret := range []string{ok.Secret, "querysecret", `"hash"`, `"sealed_secret"`, `"ct"`, key["key"].(string)} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log shows %q: %s", secret, raw)
		}
	}
	if !strings.Contains(string(raw), `"webhook.created"`) || !strings.Contains(string(raw), `"topic.created"`) {
		t.Errorf("audit log lacks the topic and webhooks: %s", raw)
	}

	// Tenant isolation.
	acme := h.CreateTenant(t, n.URL, c.OperatorKey, "acme", "free")
	done, _ = h.PollUntil(10*time.Second, 50*time.Millisecond, func() bool {
		st, m := readAPI(t, v, n.URL, "/v1/audit", acme)
		return st == 200 && len(list(m, "events")) >= 1
	})
	if !done {
		t.Fatal("acme's audit log stays empty")
	}
	_, m = readAPI(t, v, n.URL, "/v1/audit?limit=1000", acme)
	for _, e := range list(m, "events") {
		if e["type"] != "tenant.created" && e["type"] != "key.created" {
			t.Errorf("acme reads an event that is not its own: %v", e)
		}
	}
	if st, m := readAPI(t, v, n.URL, "/v1/webhooks/"+ok.ID+"/attempts", acme); st != 404 || m["code"] != "webhook_not_found" {
		t.Errorf("acme reads default's attempts: %d %v", st, m)
	}
}

// pgCluster starts a PostgreSQL of the test's own with scripts/postgres.sh
// (so that the test may stop and restart it) and returns its URL and the
// script's environment.
func pgCluster(t *testing.T) (string, []string) {
	t.Helper()
	if os.Getenv("MSGMESH_TEST_POSTGRES_URL") == "" && os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") != "1" {
		t.Skip("no PostgreSQL for tests (scripts/test.sh starts one: MSGMESH_TEST_POSTGRES_URL)")
	}
	dir, err := os.MkdirTemp("", "msgmesh-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // the cluster's owner is another user when we are root
	env := append(os.Environ(), "MSGMESH_POSTGRES_HOME="+filepath.Join(dir, "pg"), "MSGMESH_POSTGRES_PORT=")
	script, _ := filepath.Abs("../scripts/postgres.sh")
	run := func(args ...string) string {
		cmd := exec.Command(script, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("postgres.sh %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	lines := strings.Split(run("start"), "\n")
	t.Cleanup(func() { run("stop"); _ = os.RemoveAll(dir) })
	return lines[len(lines)-1], append(env, "_PGSCRIPT="+script)
}

func pgScript(t *testing.T, env []string, arg string) {
	t.Helper()
	var script string
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, "_PGSCRIPT="); ok {
			script = s
		}
	}
	cmd := exec.Command(script, arg)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("postgres.sh %s: %v\n%s", arg, err, out)
	}
}

// attemptRows reads (partition, offset) → the row's attempt fields.
func attemptRows(t *testing.T, pgURL, topic string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT partition, "offset", webhook_id, cursor, attempt, outcome, status FROM webhook_attempts WHERE topic = $1`, topic)
	if err != nil {
		return nil // not migrated yet
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var p, attempt, status int
		var o int64
		var hook, cur, outcome string
		if err := rows.Scan(&p, &o, &hook, &cur, &attempt, &outcome, &status); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%d-%d", p, o)
		if _, dup := out[k]; dup {
			t.Fatalf("row %s twice", k)
		}
		out[k] = fmt.Sprintf("%s %s %d %s %d", hook, cur, attempt, outcome, status)
	}
	return out
}

// With postgres.url: rows match the attempt log exactly (no gap, no
// duplicate) after a PostgreSQL outage and restart, during which publish
// and webhook delivery went on, and after a kill -9 of msgmesh in the
// middle of projecting.
func TestReadModelPostgresOutageAndKill9(t *testing.T) {
	pgURL, pgEnv := pgCluster(t)
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	ca := rc.CAFile(t)
	env := func(addr string) []string {
		return c.EnvFor(addr, "MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS=true", "MSGMESH_WEBHOOKS_UNSAFE_CA_FILE="+ca,
			"MSGMESH_POSTGRES_URL="+pgURL)
	}
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, env(addr))
	n := &h.Node{URL: p.URL}
	h.CreateTopic(t, p.URL, c.AdminKey, "orders", 2)
	wh := h.CreateWebhook(t, p.URL, c.AdminKey, "orders", rc.URLFor("", "/ok"), "")
	logTopic := names.Mapper{Prefix: c.Prefix}.AttemptLogTopic("default")
	publish := func(from, count int) {
		for i := from; i < from+count; i++ {
			publishJSON(t, n, c.AdminKey, "orders", fmt.Sprintf("r%d", i%5), map[string]any{"n": i})
		}
	}
	waitRows := func(want int, timeout time.Duration) {
		t.Helper()
		var got int
		ok, _ := h.PollUntil(timeout, 100*time.Millisecond, func() bool { got = len(attemptRows(t, pgURL, logTopic)); return got >= want })
		if !ok {
			t.Fatalf("%d attempt rows after %v, want %d\n%s", got, timeout, want, p.Output())
		}
	}
	publish(0, 30)
	waitDeliveries(t, rc, "/ok", 30, 30*time.Second)
	waitRows(30, 15*time.Second)
	st, m := readAPI(t, openapitest.Validator(t), p.URL, "/v1/webhooks/"+wh.ID+"/attempts?limit=1000", c.AdminKey)
	if st != 200 || m["source"] != "postgres" || len(list(m, "attempts")) != 30 {
		t.Fatalf("attempts from postgres: %d %v", st, m)
	}

	// PostgreSQL down: publish and delivery go on; /readyz stays 200 and
	// says why the read model is paused; the read API answers 503.
	pgScript(t, pgEnv, "halt")
	start := time.Now()
	publish(30, 30)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("30 publishes took %v with PostgreSQL down", took)
	}
	waitDeliveries(t, rc, "/ok", 60, 30*time.Second)
	ok, _ := h.PollUntil(20*time.Second, 100*time.Millisecond, func() bool {
		r := h.Do(t, p.URL, "GET", "/readyz", "", nil)
		rm, _ := r.JSON(t)["read_model"].(map[string]any)
		return r.Status == 200 && rm != nil && rm["error"] != nil && rm["error"] != "" && rm["lag"].(float64) > 0
	})
	if !ok {
		t.Errorf("/readyz does not report the paused read model: %s", h.Do(t, p.URL, "GET", "/readyz", "", nil).Body)
	}
	if r := h.Do(t, p.URL, "GET", "/v1/audit", c.AdminKey, nil); r.Status != 503 || r.JSON(t)["code"] != "read_model_unavailable" {
		t.Errorf("audit with PostgreSQL down: %d %s", r.Status, r.Body)
	}
	pgScript(t, pgEnv, "start")
	waitRows(60, 30*time.Second)

	// kill -9 while attempts are being projected, then a new process.
	publish(60, 60)
	waitDeliveries(t, rc, "/ok", 80, 30*time.Second)
	p.Kill()
	killedAt := len(attemptRows(t, pgURL, logTopic))
	addr2 := h.FreeAddr(t)
	p2 := h.StartProcess(t, addr2, env(addr2))
	waitDeliveries(t, rc, "/ok", 120, 60*time.Second)

	// Rows equal the attempt log's records, field for field. (The attempt
	// log may lack the last attempts of the killed process: they are
	// appended asynchronously, and those Kafka had not acknowledged died
	// with it. The rows must match the log as it is.)
	var want map[string]string
	last := -1
	ok, _ = h.PollUntil(60*time.Second, 500*time.Millisecond, func() bool {
		want = map[string]string{}
		for part, recs := range h.ReadCommitted(t, c.Brokers, logTopic) {
			for off, r := range recs {
				if r.Attrs.IsControl() {
					continue
				}
				var a readmodel.AttemptRecord
				if err := json.Unmarshal(r.Value, &a); err != nil {
					t.Fatal(err)
				}
				want[fmt.Sprintf("%d-%d", part, off)] = fmt.Sprintf("%s %s %d %s %d", a.WebhookID, a.Cursor, a.Attempt, a.Outcome, a.Status)
			}
		}
		got := attemptRows(t, pgURL, logTopic)
		stable := len(want) == last
		last = len(want)
		return stable && len(want) >= 100 && len(got) == len(want)
	})
	got := attemptRows(t, pgURL, logTopic)
	if !ok {
		t.Fatalf("%d rows, %d attempt records\n%s", len(got), len(want), p2.Output())
	}
	var diff []string
	for k, w := range want {
		if got[k] != w {
			diff = append(diff, fmt.Sprintf("%s: row %q, record %q", k, got[k], w))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("rows differ from the attempt log:\n%s", strings.Join(diff, "\n"))
	}
	t.Logf("%d rows when killed, %d after the restart, %d attempt records, %d POSTs received", killedAt, len(got), len(want), len(rc.Got("/ok")))

	// The summary counts each attempt once; the audit log has every
	// control change of the tenant.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var attempts, delivered int
	if err := conn.QueryRow(ctx, "SELECT attempts, delivered FROM webhook_summary WHERE tenant = 'default' AND webhook_id = $1", wh.ID).Scan(&attempts, &delivered); err != nil {
		t.Fatal(err)
	}
	if attempts != len(want) || delivered != len(want) {
		t.Errorf("summary: %d attempts, %d delivered; want %d each", attempts, delivered, len(want))
	}
	control := names.Mapper{Prefix: c.Prefix}.ControlTopic()
	wantAudit := map[string]string{}
	for _, recs := range h.ReadCommitted(t, c.Brokers, control) {
		for off, r := range recs {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					Tenant string `json:"tenant"`
				} `json:"data"`
			}
			if r.Attrs.IsControl() || json.Unmarshal(r.Value, &ev) != nil || ev.Data.Tenant != "default" {
				continue
			}
			wantAudit[fmt.Sprintf("0-%d", off)] = ev.Type
		}
	}
	rows, err := conn.Query(ctx, `SELECT partition, "offset", type FROM audit_events WHERE tenant = 'default' AND topic = $1`, control)
	if err != nil {
		t.Fatal(err)
	}
	gotAudit := map[string]string{}
	for rows.Next() {
		var part int
		var off int64
		var typ string
		if err := rows.Scan(&part, &off, &typ); err != nil {
			t.Fatal(err)
		}
		gotAudit[fmt.Sprintf("%d-%d", part, off)] = typ
	}
	rows.Close()
	if fmt.Sprint(gotAudit) != fmt.Sprint(wantAudit) || len(wantAudit) < 3 {
		t.Errorf("audit rows %v, control events of tenant default %v", gotAudit, wantAudit)
	}
}

// webhooks.attempt_log=false: deliveries go on, and no attempt is appended
// to the attempt log topic (checked after a graceful stop, which sends
// whatever attempt records were buffered).
func TestWebhookAttemptLogOff(t *testing.T) {
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	mut := h.WebhookConfig(t, rc, 2, 2*time.Second, 100*time.Millisecond)
	n := c.Start(t, func(cfg *config.Config) {
		mut(cfg)
		cfg.Webhooks.AttemptLog = false
	})
	h.CreateTopic(t, n.URL, c.AdminKey, "orders", 2)
	wh := h.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/ok"), "")
	for i := range 3 {
		publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"n": i})
	}
	waitDeliveries(t, rc, "/ok", 3, 30*time.Second)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	topic := c.Prefix + ".default.wh.attempt_log"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("%s partition %d holds %d attempt records of webhook %s with webhooks.attempt_log=false", topic, o.Partition, o.Offset, wh.ID)
		}
	})
}
