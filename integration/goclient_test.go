package integration

// The Go client (sdks/go) against a real msgmesh on the real broker.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/integration/harness"
	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

func goClient(t *testing.T, base, key string) *msgmesh.Client {
	t.Helper()
	c, err := msgmesh.New(msgmesh.Options{URL: base, APIKey: key, Reconnect: msgmesh.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Topics, publish, batch, poll and commit, tokens and typed errors.
func TestGoClientAPI(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	ctx := context.Background()
	mm := goClient(t, n.URL, c.AdminKey)
	if _, err := mm.CreateTopic(ctx, "go", 2); err != nil {
		t.Fatal(err)
	}
	var e *msgmesh.Error
	if _, err := mm.CreateTopic(ctx, "go", 2); !errors.Is(err, msgmesh.ErrConflict) || !errors.As(err, &e) || e.Status != 409 {
		t.Fatalf("create twice: %v, want ErrConflict", err)
	}
	if _, err := mm.GetTopic(ctx, "nope"); !errors.Is(err, msgmesh.ErrNotFound) || !errors.As(err, &e) || e.Code != "topic_not_found" || e.RequestID == "" {
		t.Fatalf("get a missing topic: %v, want ErrNotFound topic_not_found with a request id", err)
	}
	ts, err := mm.ListTopics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "go" || ts[0].Partitions != 2 {
		t.Fatalf("ListTopics: %v %+v", err, ts)
	}
	cur, err := mm.Publish(ctx, "go", map[string]any{"n": 0}, &msgmesh.PublishOptions{Room: "r", Headers: msgmesh.HeadersOf("k", "v")})
	if err != nil || cur == "" {
		t.Fatalf("Publish: %v %q", err, cur)
	}
	curs, err := mm.PublishBatch(ctx, "go", []msgmesh.OutgoingMessage{{Data: map[string]any{"n": 1}}, {Data: map[string]any{"n": 2}, Room: "r"}})
	if err != nil || len(curs) != 2 {
		t.Fatalf("PublishBatch: %v %v", err, curs)
	}
	var got []msgmesh.Message
	for deadline := time.Now().Add(20 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		r, err := mm.Poll(ctx, "go", msgmesh.PollOptions{Group: "g", Max: 10, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Messages...)
	}
	if len(got) != 3 {
		t.Fatalf("polled %d messages, want 3", len(got))
	}
	for _, m := range got {
		p, o, err := msgmesh.ParseCursor(m.Cursor)
		if err != nil || p != m.Partition || o != m.Offset || m.PublishedAt.IsZero() {
			t.Fatalf("message %+v", m)
		}
		if m.RoomName() == "r" && string(m.Data) == `{"n":0}` && m.Headers.Get("k") != "v" {
			t.Fatalf("headers of the first message: %+v", m.Headers)
		}
	}
	if err := mm.Commit(ctx, "go", msgmesh.CommitOptions{Group: "g", Cursors: []string{got[len(got)-1].Cursor}}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	tok, err := mm.MintToken(ctx, msgmesh.TokenOptions{TTL: time.Minute, Capabilities: []msgmesh.Capability{{Ops: []string{"subscribe"}, Topics: []string{"go"}}}})
	if err != nil || tok.Token == "" || tok.ExpiresAt.Before(time.Now()) {
		t.Fatalf("MintToken: %v %+v", err, tok)
	}
	narrow := goClient(t, n.URL, tok.Token)
	if _, err := narrow.Publish(ctx, "go", 1, nil); !errors.Is(err, msgmesh.ErrForbidden) {
		t.Fatalf("publish with a subscribe-only token: %v, want ErrForbidden", err)
	}
	if _, err := narrow.Subscribe(ctx, "other", msgmesh.SubscribeOptions{}); !errors.Is(err, msgmesh.ErrForbidden) {
		t.Fatalf("subscribe to another topic: %v, want ErrForbidden", err)
	}
	hooks, err := mm.ListWebhooks(ctx)
	if err != nil || len(hooks) != 0 {
		t.Fatalf("ListWebhooks: %v %v", err, hooks)
	}
}

// A subscription survives a msgmesh restart: it reconnects with backoff,
// resumes from its position and delivers every message exactly once.
func TestGoClientSubscribeAcrossRestart(t *testing.T) {
	c := harness.NewCluster(t)
	addr := harness.FreeAddr(t)
	p := harness.StartProcess(t, addr, c.EnvFor(addr))
	ctx := context.Background()
	mm := goClient(t, p.URL, c.AdminKey)
	if _, err := mm.CreateTopic(ctx, "live", 3); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var states []msgmesh.State
	sub, err := mm.Subscribe(ctx, "live", msgmesh.SubscribeOptions{
		From: "earliest",
		OnMessage: func(m msgmesh.Message) {
			mu.Lock()
			seen[string(m.Data)]++
			mu.Unlock()
		},
		OnStateChange: func(s msgmesh.State) { mu.Lock(); states = append(states, s); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	for i := 0; i < 6; i++ {
		if _, err := mm.Publish(ctx, "live", map[string]any{"n": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if okc, _ := harness.PollUntil(20*time.Second, 10*time.Millisecond, func() bool { return count() == 6 }); !okc {
		t.Fatalf("%d of 6 before the restart", count())
	}
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	p2 := harness.StartProcess(t, addr, c.EnvFor(addr))
	mm2 := goClient(t, p2.URL, c.AdminKey)
	for i := 6; i < 10; i++ {
		if _, err := mm2.Publish(ctx, "live", map[string]any{"n": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if okc, _ := harness.PollUntil(30*time.Second, 10*time.Millisecond, func() bool { return count() == 10 }); !okc {
		t.Fatalf("%d of 10 after the restart (state %s)", count(), sub.State())
	}
	time.Sleep(200 * time.Millisecond) // a duplicate would arrive right behind
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < 10; i++ {
		if k := fmt.Sprintf(`{"n":%d}`, i); seen[k] != 1 {
			t.Fatalf("message %s delivered %d times: %v", k, seen[k], seen)
		}
	}
	reconnected := false
	for _, s := range states {
		reconnected = reconnected || s == msgmesh.StateReconnecting
	}
	if !reconnected || sub.State() != msgmesh.StateLive {
		t.Fatalf("states %v, now %s: want a reconnect, then live", states, sub.State())
	}
}
