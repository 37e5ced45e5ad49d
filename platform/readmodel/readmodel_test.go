package readmodel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgmesh/msgmesh/platform/controlstate"
)

// postgresURL is a fresh database on MSGMESH_TEST_POSTGRES_URL's server
// (scripts/postgres.sh start; scripts/test.sh exports it), dropped when t
// ends. Without it the test is skipped, or fails under
// MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 (CI, where make test starts one).
func postgresURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv("MSGMESH_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1" {
			t.Fatal("MSGMESH_TEST_POSTGRES_URL is not set (scripts/postgres.sh start prints one)")
		}
		t.Skip("MSGMESH_TEST_POSTGRES_URL is not set: run scripts/postgres.sh start")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "rm_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}

func stores(t *testing.T) map[string]Store {
	out := map[string]Store{"memory": NewMemory(0, 0)}
	if os.Getenv("MSGMESH_TEST_POSTGRES_URL") != "" || os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1" {
		pg, err := OpenPostgres(context.Background(), postgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pg.Close)
		if err := pg.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := pg.Migrate(context.Background()); err != nil { // idempotent
			t.Fatalf("second Migrate: %v", err)
		}
		out["postgres"] = pg
	} else {
		t.Log("postgres store not tested: MSGMESH_TEST_POSTGRES_URL is not set")
	}
	return out
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func attempt(tenant, hook string, off int64, outcome string, status int) Entry {
	pos := Position{Topic: "mm." + tenant + ".wh.attempt_log", Partition: int32(off % 2), Offset: off}
	return Entry{Pos: pos, Attempt: &Attempt{WebhookID: hook, Cursor: fmt.Sprintf("0-%d", off), MessageID: "m" + fmt.Sprint(off),
		Attempt: 1, Outcome: outcome, Status: status, Error: "", DurationMs: 3, Time: t0.Add(time.Duration(off) * time.Second),
		Tenant: tenant, Topic: "orders", Pos: pos}}
}

func next(es ...Entry) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for _, e := range es {
		if out[e.Pos.Topic] == nil {
			out[e.Pos.Topic] = map[int32]int64{}
		}
		if e.Pos.Offset+1 > out[e.Pos.Topic][e.Pos.Partition] {
			out[e.Pos.Topic][e.Pos.Partition] = e.Pos.Offset + 1
		}
	}
	return out
}

// Pages go newest first, cover everything once, filters combine, a
// batch applied again adds nothing, and tenants never see each other's
// rows.
func TestStoresPageFilterAndIsolate(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var es []Entry
			for i := int64(0); i < 25; i++ {
				outcome, status := OutcomeDelivered, 200
				if i%5 == 0 {
					outcome, status = OutcomeTemporary, 503
				}
				es = append(es, attempt("a", "wh_1", i, outcome, status))
			}
			es = append(es, attempt("b", "wh_1", 100, OutcomeDelivered, 200)) // same webhook id, other tenant
			b := Batch{Entries: es, Next: next(es...)}
			for range 2 {
				if err := s.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			var seen []int64
			var after *Key
			for {
				page, err := s.Attempts(ctx, "a", "wh_1", AttemptQuery{Limit: 7, After: after, Status: -1})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range page.Attempts {
					seen = append(seen, a.Pos.Offset)
					if a.Tenant != "a" {
						t.Fatalf("tenant b's attempt in a's list: %+v", a)
					}
				}
				if page.Next == nil {
					break
				}
				k, err := ParseKey(page.Next.Encode())
				if err != nil {
					t.Fatal(err)
				}
				after = k
			}
			if len(seen) != 25 {
				t.Fatalf("paged through %d attempts, want 25 (once each): %v", len(seen), seen)
			}
			for i, o := range seen {
				if o != int64(24-i) {
					t.Fatalf("not newest first: %v", seen)
				}
			}
			page, err := s.Attempts(ctx, "a", "wh_1", AttemptQuery{Outcome: OutcomeTemporary, Status: 503, Since: t0.Add(5 * time.Second), Until: t0.Add(20 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Attempts) != 3 || page.Attempts[0].Pos.Offset != 15 || page.Attempts[2].Pos.Offset != 5 {
				t.Fatalf("filtered: %+v", page.Attempts)
			}
			page, _ = s.Attempts(ctx, "a", "wh_1", AttemptQuery{Cursor: "0-7", Status: -1})
			if len(page.Attempts) != 1 || page.Attempts[0].MessageID != "m7" {
				t.Fatalf("by cursor: %+v", page.Attempts)
			}
			page, _ = s.Attempts(ctx, "b", "wh_1", AttemptQuery{Status: -1})
			if len(page.Attempts) != 1 || page.Attempts[0].Pos.Offset != 100 {
				t.Fatalf("tenant b: %+v", page.Attempts)
			}
			pos, err := s.Positions(ctx)
			if err != nil || pos["mm.a.wh.attempt_log"][0] != 25 || pos["mm.a.wh.attempt_log"][1] != 24 {
				t.Fatalf("positions %v %v", pos, err)
			}
			if pg, ok := s.(*Postgres); ok {
				sum, ok, err := pg.WebhookSummary(ctx, "a", "wh_1")
				if err != nil || !ok || sum.Attempts != 25 || sum.Delivered != 20 || sum.Temporary != 5 || sum.LastStatus != 200 {
					t.Fatalf("summary %+v %v %v (a batch applied twice must count once)", sum, ok, err)
				}
			}
		})
	}
}

func TestStoresAudit(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var es []Entry
			for i := int64(0); i < 5; i++ {
				typ := controlstate.TypeKeyCreated
				if i%2 == 1 {
					typ = controlstate.TypeTopicCreated
				}
				tenant := "a"
				if i == 4 {
					tenant = "b"
				}
				pos := Position{Topic: "mm.__control", Partition: 0, Offset: i}
				es = append(es, Entry{Pos: pos, Audit: &AuditEvent{ID: idOf(pos), Time: t0.Add(time.Duration(i) * time.Second), Type: typ,
					Actor: "key:k1", Summary: "s", Details: map[string]any{"n": float64(i)}, Tenant: tenant, Pos: pos}})
			}
			if err := s.Apply(ctx, Batch{Entries: es, Next: next(es...)}); err != nil {
				t.Fatal(err)
			}
			page, err := s.Audit(ctx, "a", AuditQuery{Type: controlstate.TypeKeyCreated})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Events) != 2 || page.Events[0].ID != "mm.__control:0-2" || page.Events[0].Details["n"] != float64(2) || page.Next != nil {
				t.Fatalf("audit of a: %+v", page)
			}
			page, _ = s.Audit(ctx, "b", AuditQuery{})
			if len(page.Events) != 1 || page.Events[0].Pos.Offset != 4 {
				t.Fatalf("audit of b: %+v", page)
			}
		})
	}
}

// The memory window keeps the newest entries of each tenant only.
func TestMemoryWindowIsBounded(t *testing.T) {
	m := NewMemory(3, 4)
	var es []Entry
	for i := int64(0); i < 10; i++ {
		es = append(es, attempt("a", "wh_1", i, OutcomeDelivered, 200))
	}
	if err := m.Apply(context.Background(), Batch{Entries: es, Next: next(es...)}); err != nil {
		t.Fatal(err)
	}
	page, _ := m.Attempts(context.Background(), "a", "wh_1", AttemptQuery{Status: -1})
	if len(page.Attempts) != 4 || page.Attempts[0].Pos.Offset != 9 || page.Attempts[3].Pos.Offset != 6 {
		t.Fatalf("window: %+v", page.Attempts)
	}
}

// Audit details never hold a secret: no key hash, no webhook secret
// (sealed or plain), no URL query or userinfo.
func TestAuditHoldsNoSecret(t *testing.T) {
	events := []struct {
		typ  string
		data any
	}{
		{controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "a", Plan: "free", AdminKey: &controlstate.KeyCreatedData{
			Tenant: "a", KeyID: "key_1", Name: "admin", Role: "admin", Hash: "SECRETHASH1", Prefix: "mm_abcd"}}},
		{controlstate.TypeKeyCreated, controlstate.KeyCreatedData{Tenant: "a", KeyID: "key_2", Name: "ci", Role: "producer", Hash: "SECRETHASH2", Prefix: "mm_efgh"}},
		{controlstate.TypeWebhookCreated, controlstate.WebhookCreatedData{Tenant: "a", ID: "wh_1", Topic: "orders",
			URL: "https://user:SECRETPASS@example.com/hook?token=SECRETQUERY#SECRETFRAG", Secret: "whsec_SECRETPLAIN",
			SealedSecret: &controlstate.Sealed{KEK: "kek_1", Ciphertext: "SECRETCIPHER"}, Group: "g"}},
		{controlstate.TypeWebhookEnabled, controlstate.WebhookEnabledData{Tenant: "a", ID: "wh_1", URL: "https://example.com/x?sig=SECRETQ2"}},
	}
	for i, e := range events {
		raw, _ := json.Marshal(e.data)
		ev := controlstate.Event{V: 1, Type: e.typ, ID: "e", At: t0, Data: raw, Actor: "key:key_9"}
		a := auditOf(ev, Position{Topic: "mm.__control", Offset: int64(i)})
		if a == nil || a.Tenant != "a" || a.Actor != "key:key_9" || a.Summary == "" {
			t.Fatalf("%s: %+v", e.typ, a)
		}
		out, _ := json.Marshal(a)
		if strings.Contains(string(out), "SECRET") {
			t.Errorf("%s: audit event holds a secret: %s", e.typ, out)
		}
	}
	raw, _ := json.Marshal(controlstate.SigningKeyCreatedData{KID: "sk_1", Seed: "SECRETSEED"})
	if a := auditOf(controlstate.Event{Type: controlstate.TypeSigningKeyCreated, Data: raw, At: t0}, Position{}); a != nil {
		t.Errorf("a signing key event is no tenant's: %+v", a)
	}
}
