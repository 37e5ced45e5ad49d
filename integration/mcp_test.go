package integration

// The MCP server (services/mcp, issue 11) against a real msgmesh on the
// real broker: over the go-sdk's in-memory transports, `msgmesh mcp` over
// stdio (command transport) and streamable HTTP at /mcp.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	mcpsrv "github.com/msgmesh/msgmesh/services/mcp"
)

// watchOut is watch_topic's structured result.
type watchOut struct {
	Events []struct {
		Cursor      string  `json:"cursor"`
		Room        *string `json:"room"`
		Data        any     `json:"data"`
		PublishedAt string  `json:"published_at"`
	} `json:"events"`
	Cursor   string `json:"cursor"`
	Resync   bool   `json:"resync"`
	TimedOut bool   `json:"timed_out"`
}

// data lists the events' data.n values.
func (w watchOut) ns() []int {
	var out []int
	for _, e := range w.Events {
		m, _ := e.Data.(map[string]any)
		n, _ := m["n"].(float64)
		out = append(out, int(n))
	}
	return out
}

// mcpTest is an MCP server on a node with an in-memory client session.
type mcpTest struct {
	srv      *mcpsrv.Server
	cs       *mcp.ClientSession
	progress atomic.Int64
}

// newMCP serves the MCP tools with key against base and connects an
// in-memory client (protocol: the latest unless version is set).
func newMCP(t *testing.T, base, key string, version string) *mcpTest {
	t.Helper()
	srv, err := mcpsrv.New(mcpsrv.Config{URL: base, APIKey: key, ProgressInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := &mcpTest{srv: srv}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cl := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { m.progress.Add(1) },
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := cl.Connect(ctx, ct, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	m.cs = cs
	return m
}

// call calls tool name and decodes its structured result into out
// (unless nil or an error result). A protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	r, err := callE(context.Background(), cs, name, args, out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func callE(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) (*mcp.CallToolResult, error) {
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	if !r.IsError && out != nil {
		b, _ := json.Marshal(r.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			return r, fmt.Errorf("structured content %s: %v", b, err)
		}
	}
	return r, nil
}

// ok is call failing the test on a tool error.
func ok(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	if r := call(t, cs, name, args, out); r.IsError {
		t.Fatalf("%s(%v): tool error %s", name, args, text(r))
	}
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// toolErr is call wanting a tool error containing want.
func toolErr(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	r := call(t, cs, name, args, nil)
	if !r.IsError || !strings.Contains(text(r), want) {
		t.Fatalf("%s(%v): IsError %v %q, want a tool error with %q", name, args, r.IsError, text(r), want)
	}
}

func publishN(t *testing.T, base, key, topic, room string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		body := map[string]any{"data": map[string]any{"n": i}}
		if room != "" {
			body["room"] = room
		}
		harness.Must(t, base, "POST", "/v1/topics/"+topic+"/messages", key, body, http.StatusOK)
	}
}

// wantNs fails unless got is exactly want.
func wantNs(t *testing.T, what string, got watchOut, want ...int) {
	t.Helper()
	if fmt.Sprint(got.ns()) != fmt.Sprint(want) || got.TimedOut {
		t.Fatalf("%s: events %v (timed_out %v, resync %v), want %v", what, got.ns(), got.TimedOut, got.Resync, want)
	}
}

// Every tool, with its annotations and schemas, over the latest protocol
// and an older one.
func TestMCPTools(t *testing.T) {
	c, n, rc, _ := webhookCluster(t, 2, time.Second, 100*time.Millisecond)
	for _, version := range []string{"", "2025-06-18"} {
		t.Run("protocol="+version, func(t *testing.T) {
			m := newMCP(t, n.URL, c.AdminKey, version)
			tools, err := m.cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{ // name: "readonly" | "destructive" | "additive"
				"list_topics": "readonly", "describe_topic": "readonly", "create_topic": "additive", "publish": "additive",
				"poll": "destructive", "watch_topic": "readonly", "list_webhooks": "readonly",
				"inspect_dead_letters": "destructive", "replay_dead_letters": "additive",
			}
			if len(tools.Tools) != len(want) {
				t.Fatalf("%d tools, want %d", len(tools.Tools), len(want))
			}
			for _, tl := range tools.Tools {
				kind, found := want[tl.Name]
				if !found {
					t.Fatalf("unexpected tool %q", tl.Name)
				}
				a := tl.Annotations
				got := "additive"
				switch {
				case a.ReadOnlyHint:
					got = "readonly"
				case a.DestructiveHint != nil && *a.DestructiveHint:
					got = "destructive"
				case a.DestructiveHint == nil:
					got = "unset"
				}
				if got != kind {
					t.Errorf("%s: annotations %+v, want %s", tl.Name, a, kind)
				}
				if tl.InputSchema == nil || tl.OutputSchema == nil {
					t.Errorf("%s: input schema %v, output schema %v", tl.Name, tl.InputSchema, tl.OutputSchema)
				}
			}
			ws, _ := json.Marshal(findTool(tools.Tools, "watch_topic").InputSchema)
			for _, f := range []string{"topic", "room", "cursor", "from", "max_events", "wait_ms"} {
				if !strings.Contains(string(ws), `"`+f+`"`) {
					t.Errorf("watch_topic input schema lacks %s: %s", f, ws)
				}
			}
		})
	}

	m := newMCP(t, n.URL, c.AdminKey, "")
	var topic struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
	}
	ok(t, m.cs, "create_topic", map[string]any{"name": "tools", "partitions": 2}, &topic)
	if topic.Name != "tools" || topic.Partitions != 2 {
		t.Fatalf("create_topic: %+v", topic)
	}
	toolErr(t, m.cs, "create_topic", map[string]any{"name": "tools"}, "409")
	var topics struct {
		Topics []struct{ Name string } `json:"topics"`
	}
	ok(t, m.cs, "list_topics", map[string]any{}, &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Name != "tools" {
		t.Fatalf("list_topics: %+v", topics)
	}
	ok(t, m.cs, "describe_topic", map[string]any{"topic": "tools"}, &topic)
	if topic.Partitions != 2 {
		t.Fatalf("describe_topic: %+v", topic)
	}
	toolErr(t, m.cs, "describe_topic", map[string]any{"topic": "nope"}, "topic_not_found")

	var pub struct {
		Cursors []string `json:"cursors"`
	}
	ok(t, m.cs, "publish", map[string]any{"topic": "tools", "data": map[string]any{"n": 0}, "room": "r1"}, &pub)
	if len(pub.Cursors) != 1 {
		t.Fatalf("publish: %+v", pub)
	}
	ok(t, m.cs, "publish", map[string]any{"topic": "tools", "messages": []any{
		map[string]any{"data": map[string]any{"n": 1}}, map[string]any{"data": map[string]any{"n": 2}, "room": "r2"},
	}, "room": "r1"}, &pub)
	if len(pub.Cursors) != 2 {
		t.Fatalf("publish batch: %+v", pub)
	}
	toolErr(t, m.cs, "publish", map[string]any{"topic": "tools"}, "give data")

	var polled struct {
		Messages []struct {
			Cursor string  `json:"cursor"`
			Room   *string `json:"room"`
			Data   any     `json:"data"`
		} `json:"messages"`
		Batch string `json:"batch"`
	}
	got := 0
	for deadline := time.Now().Add(20 * time.Second); got < 3 && time.Now().Before(deadline); {
		ok(t, m.cs, "poll", map[string]any{"topic": "tools", "group": "g1", "max": 10}, &polled)
		got += len(polled.Messages)
	}
	if got != 3 {
		t.Fatalf("poll: %d messages, want 3", got)
	}
	// The last batch is acknowledged by the next poll: nothing again.
	ok(t, m.cs, "poll", map[string]any{"topic": "tools", "group": "g1"}, &polled)
	if len(polled.Messages) != 0 {
		t.Fatalf("poll after ack: %d messages again", len(polled.Messages))
	}

	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "tools", "from": "earliest", "wait_ms": 5000}, &w)
	if len(w.Events) != 3 || w.Cursor == "" || w.TimedOut {
		t.Fatalf("watch_topic from earliest: %+v", w)
	}
	for _, e := range w.Events {
		if e.PublishedAt == "" || e.Cursor == "" {
			t.Fatalf("event %+v lacks cursor or published_at", e)
		}
	}

	// Webhooks and their dead letters: a 410 dead-letters at once.
	rc.Answer("/gone", 410)
	wh := harness.CreateWebhook(t, n.URL, c.AdminKey, "tools", rc.URLFor("", "/gone"), "")
	var hooks struct {
		Webhooks []struct {
			ID    string `json:"id"`
			Topic string `json:"topic"`
		} `json:"webhooks"`
	}
	ok(t, m.cs, "list_webhooks", map[string]any{}, &hooks)
	if len(hooks.Webhooks) != 1 || hooks.Webhooks[0].ID != wh.ID {
		t.Fatalf("list_webhooks: %+v", hooks)
	}
	ok(t, m.cs, "publish", map[string]any{"topic": "tools", "data": map[string]any{"n": 9}}, &pub)
	waitDLQ(t, c, wh.ID, 1, 30*time.Second)
	var dl struct {
		DeadLetters []map[string]any `json:"dead_letters"`
		OneShot     bool             `json:"one_shot"`
	}
	ok(t, m.cs, "inspect_dead_letters", map[string]any{"webhook_id": wh.ID}, &dl)
	if len(dl.DeadLetters) != 1 || !dl.OneShot {
		t.Fatalf("inspect_dead_letters: %+v", dl)
	}
	dlCursor, _ := dl.DeadLetters[0]["cursor"].(string)
	ok(t, m.cs, "inspect_dead_letters", map[string]any{"webhook_id": wh.ID}, &dl)
	if len(dl.DeadLetters) != 0 {
		t.Fatalf("second inspection: %d dead letters, want 0 (one-shot)", len(dl.DeadLetters))
	}
	var rep struct {
		Replayed int      `json:"replayed"`
		Cursors  []string `json:"cursors"`
	}
	ok(t, m.cs, "replay_dead_letters", map[string]any{"webhook_id": wh.ID, "cursors": []string{dlCursor}}, &rep)
	if rep.Replayed != 1 || len(rep.Cursors) != 1 {
		t.Fatalf("replay_dead_letters: %+v", rep)
	}
	toolErr(t, m.cs, "inspect_dead_letters", map[string]any{"webhook_id": "nope"}, "404")
}

func findTool(ts []*mcp.Tool, name string) *mcp.Tool {
	for _, t := range ts {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// A key's capabilities apply to every tool: a refusal is a tool error
// naming the status, never a crash, and the server keeps serving.
func TestMCPCapabilities(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "open", 1)
	harness.CreateTopic(t, n.URL, c.AdminKey, "secret", 1)
	_, key := harness.CapKey(t, n.URL, c.AdminKey, "watcher",
		harness.Cap{Ops: []string{"subscribe", "topics.read"}, Topics: []string{"open"}},
		harness.Cap{Ops: []string{"subscribe"}, Topics: []string{"open"}, Rooms: []string{"a"}})
	m := newMCP(t, n.URL, key, "")
	toolErr(t, m.cs, "publish", map[string]any{"topic": "open", "data": 1}, "403")
	toolErr(t, m.cs, "create_topic", map[string]any{"name": "mine"}, "403")
	toolErr(t, m.cs, "watch_topic", map[string]any{"topic": "secret", "wait_ms": 500}, "403")
	toolErr(t, m.cs, "poll", map[string]any{"topic": "open", "group": "g"}, "403")
	toolErr(t, m.cs, "inspect_dead_letters", map[string]any{"webhook_id": "x"}, "403")
	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "open", "wait_ms": 300}, &w)
	if !w.TimedOut {
		t.Fatalf("allowed watch: %+v, want timed_out", w)
	}
	if m.srv.Waiters() != 0 {
		t.Fatalf("%d waiters after the calls, want 0", m.srv.Waiters())
	}
}

// watch_topic blocks while nothing is published, wakes within 100 ms of
// a publish, returns only new events, and its cursor resumes exactly
// (max_events splits a burst without losing or repeating anything).
func TestMCPWatchWakesOnPublish(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "wake", 3)
	publishN(t, n.URL, c.AdminKey, "wake", "", 0, 3) // old: never returned
	m := newMCP(t, n.URL, c.AdminKey, "")

	// A first watch from an exact position: from earliest, take the old.
	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "wake", "from": "earliest", "wait_ms": 5000}, &w)
	if len(w.Events) != 3 {
		t.Fatalf("from earliest: %v", w.ns())
	}
	cur := w.Cursor

	type result struct {
		w   watchOut
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	go func() {
		var w watchOut
		r, err := callE(context.Background(), m.cs, "watch_topic", map[string]any{"topic": "wake", "cursor": cur, "wait_ms": 20000}, &w)
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error %s", text(r))
		}
		res <- result{w, err, time.Now()}
	}()
	if okw, _ := harness.PollUntil(10*time.Second, 5*time.Millisecond, func() bool { return m.srv.Waiters() == 1 }); !okw {
		t.Fatalf("waiters %d, want 1", m.srv.Waiters())
	}
	select {
	case r := <-res:
		t.Fatalf("watch returned with nothing published: %+v %v", r.w, r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	publishN(t, n.URL, c.AdminKey, "wake", "", 100, 101)
	published := time.Now()
	var r result
	select {
	case r = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not wake on a publish")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(published); d > 100*time.Millisecond {
		t.Errorf("woke %v after the publish was acknowledged, want within 100ms", d)
	}
	wantNs(t, "woken", r.w, 100)
	if m.srv.Waiters() != 0 {
		t.Fatalf("waiters %d after the call, want 0", m.srv.Waiters())
	}

	// Nothing new: timed_out at wait_ms, not an error; the cursor holds.
	start := time.Now()
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "wake", "cursor": r.w.Cursor, "wait_ms": 700}, &w)
	if !w.TimedOut || len(w.Events) != 0 || w.Cursor == "" || time.Since(start) < 650*time.Millisecond {
		t.Fatalf("idle watch after %v: %+v, want timed_out at 700ms", time.Since(start), w)
	}
	cur = w.Cursor

	// A burst, read two at a time: every event once, nothing else.
	publishN(t, n.URL, c.AdminKey, "wake", "", 200, 207)
	var seen []int
	for len(seen) < 7 {
		ok(t, m.cs, "watch_topic", map[string]any{"topic": "wake", "cursor": cur, "max_events": 2, "wait_ms": 5000}, &w)
		if w.TimedOut || len(w.Events) == 0 || len(w.Events) > 2 {
			t.Fatalf("burst read: %+v after %v", w, seen)
		}
		seen = append(seen, w.ns()...)
		cur = w.Cursor
	}
	counts := map[int]int{}
	for _, v := range seen {
		counts[v]++
	}
	for i := 200; i < 207; i++ {
		if counts[i] != 1 {
			t.Fatalf("burst: got %v, want each of 200..206 once", seen)
		}
	}
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "wake", "cursor": cur, "wait_ms": 500}, &w)
	if !w.TimedOut {
		t.Fatalf("after the burst: %v, want nothing more", w.ns())
	}
}

// The cursor resumes exactly across a msgmesh restart (and with a fresh
// MCP server: the cursor carries everything).
func TestMCPWatchResumesAcrossRestart(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "durable", 3)
	publishN(t, n.URL, c.AdminKey, "durable", "", 0, 5)
	m := newMCP(t, n.URL, c.AdminKey, "")
	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "durable", "from": "earliest", "wait_ms": 5000}, &w)
	if len(w.Events) != 5 {
		t.Fatalf("before the restart: %v", w.ns())
	}
	cur := w.Cursor
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n2 := c.Start(t, nil)
	publishN(t, n2.URL, c.AdminKey, "durable", "", 5, 9)
	m2 := newMCP(t, n2.URL, c.AdminKey, "")
	var got []int
	for len(got) < 4 {
		ok(t, m2.cs, "watch_topic", map[string]any{"topic": "durable", "cursor": cur, "wait_ms": 5000}, &w)
		if w.TimedOut {
			t.Fatalf("after the restart: %v then timed out", got)
		}
		got = append(got, w.ns()...)
		cur = w.Cursor
	}
	sortInts(got)
	if fmt.Sprint(got) != "[5 6 7 8]" {
		t.Fatalf("after the restart: %v, want exactly 5..8", got)
	}
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// A cursor beyond the replay window says resync (and continues live).
func TestMCPWatchResync(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Realtime.ReplayWindowRecords = 3 })
	harness.CreateTopic(t, n.URL, c.AdminKey, "window", 1)
	publishN(t, n.URL, c.AdminKey, "window", "", 0, 1)
	m := newMCP(t, n.URL, c.AdminKey, "")
	// wait_ms is a bound, not a pause: each call answers as soon as its
	// events (or the resync) arrive.
	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "window", "from": "earliest", "wait_ms": 30000}, &w)
	wantNs(t, "first", w, 0)
	cur := w.Cursor
	publishN(t, n.URL, c.AdminKey, "window", "", 1, 11)
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "window", "cursor": cur, "wait_ms": 30000}, &w)
	if !w.Resync || w.Cursor == "" || w.Cursor == cur {
		t.Fatalf("beyond the window: %+v, want resync with a new cursor", w)
	}
	publishN(t, n.URL, c.AdminKey, "window", "", 11, 12)
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "window", "cursor": w.Cursor, "wait_ms": 30000}, &w)
	wantNs(t, "after the resync", w, 11)
	if w.Resync {
		t.Fatal("resync again after continuing from the resync cursor")
	}
}

// A room's watch gets only that room's events, resuming in the room.
func TestMCPWatchRooms(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "rooms", 4)
	publishN(t, n.URL, c.AdminKey, "rooms", "a", 0, 2)
	publishN(t, n.URL, c.AdminKey, "rooms", "b", 2, 4)
	m := newMCP(t, n.URL, c.AdminKey, "")
	var w watchOut
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "rooms", "room": "a", "from": "earliest", "wait_ms": 5000}, &w)
	wantNs(t, "room a", w, 0, 1)
	for _, e := range w.Events {
		if e.Room == nil || *e.Room != "a" {
			t.Fatalf("room a's watch got room %v", e.Room)
		}
	}
	cur := w.Cursor
	publishN(t, n.URL, c.AdminKey, "rooms", "b", 4, 6)
	publishN(t, n.URL, c.AdminKey, "rooms", "a", 6, 7)
	ok(t, m.cs, "watch_topic", map[string]any{"topic": "rooms", "room": "a", "cursor": cur, "wait_ms": 5000}, &w)
	wantNs(t, "room a resumed", w, 6)
}

// Cancelling a waiting call frees its waiter (and its SSE stream) at once;
// progress notifications come while it waits when a token was sent.
func TestMCPWatchCancelFreesWaiter(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "cancel", 1)
	m := newMCP(t, n.URL, c.AdminKey, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "watch_topic", Arguments: map[string]any{"topic": "cancel", "wait_ms": 30000}}
		p.SetProgressToken("watch-1")
		_, err := m.cs.CallTool(ctx, p)
		done <- err
	}()
	if okw, _ := harness.PollUntil(10*time.Second, 5*time.Millisecond, func() bool { return m.srv.Waiters() == 1 }); !okw {
		t.Fatalf("waiters %d, want 1", m.srv.Waiters())
	}
	if okp, _ := harness.PollUntil(5*time.Second, 10*time.Millisecond, func() bool { return m.progress.Load() >= 2 }); !okp {
		t.Fatalf("%d progress notifications while waiting, want at least 2", m.progress.Load())
	}
	if sse := metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`); sse != 1 {
		t.Fatalf("node has %v SSE subscribers while waiting, want 1", sse)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	start := time.Now()
	if okw, _ := harness.PollUntil(time.Second, 2*time.Millisecond, func() bool { return m.srv.Waiters() == 0 }); !okw {
		t.Fatalf("waiters %d a second after the cancel, want 0", m.srv.Waiters())
	}
	t.Logf("waiter freed %v after the cancel", time.Since(start))
	if okw, _ := harness.PollUntil(5*time.Second, 10*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 0
	}); !okw {
		t.Fatal("the node still has the cancelled call's SSE subscriber")
	}
}

// bearer adds Authorization to every request.
type bearer struct {
	key string
	rt  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

func httpMCP(t *testing.T, base, key, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, nil).Connect(context.Background(), tr, opts)
	if err != nil {
		t.Fatalf("connect %s/mcp (protocol %q): %v", base, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// The same tools over streamable HTTP at /mcp of a node, with the
// caller's own key or token: capabilities, waking, cancellation.
func TestMCPStreamableHTTP(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "web", 2)

	// No credential: 401 before MCP.
	r := harness.Do(t, n.URL, "POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("POST /mcp without a key: %d %s, want 401", r.Status, r.Body)
	}
	// Stateless: no standalone stream and no session (405, the API's error shape).
	for _, method := range []string{"GET", "DELETE"} {
		r := harness.Do(t, n.URL, method, "/mcp", c.AdminKey, nil)
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" || r.JSON(t)["code"] != "method_not_allowed" {
			t.Fatalf("%s /mcp: %d %v %s, want 405 method_not_allowed with Allow: POST", method, r.Status, r.Header, r.Body)
		}
	}
	for _, version := range []string{"", "2025-06-18"} {
		cs := httpMCP(t, n.URL, c.AdminKey, version)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) != 9 {
			t.Fatalf("protocol %q: tools/list: %v (%d tools)", version, err, len(tools.Tools))
		}
		ok(t, cs, "publish", map[string]any{"topic": "web", "data": map[string]any{"n": 1}}, nil)
	}

	cs := httpMCP(t, n.URL, c.AdminKey, "")
	var w watchOut
	ok(t, cs, "watch_topic", map[string]any{"topic": "web", "from": "earliest", "wait_ms": 5000}, &w)
	wantNs(t, "earliest", w, 1, 1)
	cur := w.Cursor
	res := make(chan watchOut, 1)
	go func() {
		var w watchOut
		_, _ = callE(context.Background(), cs, "watch_topic", map[string]any{"topic": "web", "cursor": cur, "wait_ms": 20000}, &w)
		res <- w
	}()
	if okw, _ := harness.PollUntil(10*time.Second, 5*time.Millisecond, func() bool { return n.App.MCP().Waiters() == 1 }); !okw {
		t.Fatalf("node waiters %d, want 1", n.App.MCP().Waiters())
	}
	if g := metricValue(t, n.URL, "msgmesh_mcp_watch_waiters"); g != 1 {
		t.Fatalf("msgmesh_mcp_watch_waiters %v, want 1", g)
	}
	publishN(t, n.URL, c.AdminKey, "web", "", 2, 3)
	published := time.Now()
	select {
	case w = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("HTTP watch did not wake")
	}
	if d := time.Since(published); d > 100*time.Millisecond {
		t.Errorf("HTTP watch woke %v after the publish, want within 100ms", d)
	}
	wantNs(t, "woken over HTTP", w, 2)

	// Stateless poll: the batch goes back as ack.
	var polled struct {
		Messages []map[string]any `json:"messages"`
		Batch    string           `json:"batch"`
	}
	var ms []map[string]any
	ack := ""
	for deadline := time.Now().Add(20 * time.Second); len(ms) < 3 && time.Now().Before(deadline); {
		ok(t, cs, "poll", map[string]any{"topic": "web", "group": "hg", "ack": ack}, &polled)
		ms = append(ms, polled.Messages...)
		if polled.Batch != "" {
			ack = polled.Batch
		}
	}
	if len(ms) != 3 {
		t.Fatalf("HTTP poll: %d messages, want the 3 published", len(ms))
	}
	ok(t, cs, "poll", map[string]any{"topic": "web", "group": "hg", "ack": ack}, &polled)
	if len(polled.Messages) != 0 {
		t.Fatalf("HTTP poll after ack: %d messages again", len(polled.Messages))
	}
	toolErr(t, cs, "watch_topic", map[string]any{"topic": "web", "from": "middle"}, "middle")

	// A token downscoped to subscribe on another topic: 403 tool error.
	tok := harness.Must(t, n.URL, "POST", "/v1/tokens", c.AdminKey, harness.TokenBody(60,
		[]harness.Cap{{Ops: []string{"subscribe"}, Topics: []string{"other"}}}), http.StatusOK).JSON(t)["token"].(string)
	tcs := httpMCP(t, n.URL, tok, "")
	toolErr(t, tcs, "watch_topic", map[string]any{"topic": "web", "wait_ms": 300}, "403")
	toolErr(t, tcs, "publish", map[string]any{"topic": "web", "data": 1}, "403")

	// Progress notifications reach an HTTP client (stateless: on the
	// call's own response stream) every 5 s while it waits.
	var progress atomic.Int64
	pcs, err := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: n.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{c.AdminKey, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pcs.Close()
	pp := &mcp.CallToolParams{Name: "watch_topic", Arguments: map[string]any{"topic": "web", "cursor": w.Cursor, "wait_ms": 5600}}
	pp.SetProgressToken("http-watch")
	if r, err := pcs.CallTool(context.Background(), pp); err != nil || r.IsError {
		t.Fatalf("watch with a progress token: %v %v", err, r)
	}
	if progress.Load() < 1 {
		t.Fatal("no progress notification over HTTP while watch_topic waited 5.6 s")
	}

	// An aborted call frees the node's waiter at once.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = callE(ctx, cs, "watch_topic", map[string]any{"topic": "web", "cursor": w.Cursor, "wait_ms": 30000}, nil)
	}()
	if okw, _ := harness.PollUntil(10*time.Second, 5*time.Millisecond, func() bool { return n.App.MCP().Waiters() == 1 }); !okw {
		t.Fatalf("node waiters %d, want 1", n.App.MCP().Waiters())
	}
	cancel()
	wg.Wait()
	if okw, _ := harness.PollUntil(time.Second, 2*time.Millisecond, func() bool { return n.App.MCP().Waiters() == 0 }); !okw {
		t.Fatalf("node waiters %d a second after the abort, want 0", n.App.MCP().Waiters())
	}
	if okw, _ := harness.PollUntil(5*time.Second, 10*time.Millisecond, func() bool {
		return metricValue(t, n.URL, "msgmesh_mcp_watch_waiters") == 0 &&
			metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 0
	}); !okw {
		t.Fatal("the aborted call's waiter or SSE stream is still counted")
	}
}

// `msgmesh mcp` over stdio (the go-sdk's command transport): MQ_API_KEY
// and MQ_URL, and a clear refusal without the key.
func TestMCPCommandStdio(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "stdio", 1)
	bin := harness.Binary(t)

	out, err := exec.Command(bin, "mcp").CombinedOutput()
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 2 || !strings.Contains(string(out), "MQ_API_KEY is required") {
		t.Fatalf("msgmesh mcp without MQ_API_KEY: %v %s", err, out)
	}

	cmd := exec.Command(bin, "mcp")
	cmd.Env = harness.Env("MQ_API_KEY="+c.AdminKey, "MQ_URL="+n.URL)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 9 {
		t.Fatalf("tools/list over stdio: %v", err)
	}
	var topics struct {
		Topics []struct{ Name string } `json:"topics"`
	}
	ok(t, cs, "list_topics", map[string]any{}, &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Name != "stdio" {
		t.Fatalf("list_topics over stdio: %+v", topics)
	}
	ok(t, cs, "publish", map[string]any{"topic": "stdio", "data": map[string]any{"n": 1}}, nil)
	var w watchOut
	ok(t, cs, "watch_topic", map[string]any{"topic": "stdio", "from": "earliest", "wait_ms": 5000}, &w)
	wantNs(t, "stdio watch", w, 1)
}

// lowerBearer sends the credential with the scheme in lower case, which
// RFC 9110 (section 11.1) allows.
type lowerBearer struct {
	key string
	rt  http.RoundTripper
}

func (b lowerBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "bearer "+b.key)
	return b.rt.RoundTrip(r)
}

// A caller authenticated with "Authorization: bearer <key>" (the scheme is
// case-insensitive) can use the tools: they act with the credential the
// API's middleware read, never re-parsing the header (it used to want
// "Bearer " exactly and answered every tool call "no credential").
func TestMCPLowerCaseBearerScheme(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, nil)
	harness.CreateTopic(t, n.URL, c.AdminKey, "lower", 1)
	tr := &mcp.StreamableClientTransport{Endpoint: n.URL + "/mcp", HTTPClient: &http.Client{Transport: lowerBearer{c.AdminKey, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect with a lower-case bearer: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	var out struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	ok(t, cs, "list_topics", nil, &out)
	if len(out.Topics) != 1 || out.Topics[0].Name != "lower" {
		t.Fatalf("list_topics: %+v, want topic lower", out)
	}
}
