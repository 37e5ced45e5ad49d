package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// A request to /mcp counts once against the tenant's request rate, like
// any other call: the API calls a tool makes through the node on the
// caller's behalf are not counted a second time. The clock is frozen, so
// the bucket does not refill while the test runs.
func TestMCPRequestsCountOnceAgainstTheRateLimit(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Limits.Free = config.PlanLimits{RequestsPerSecond: 6}
	})
	key := harness.CreateTenant(t, n.URL, c.OperatorKey, "agent", "free")
	// Then the clock stops an hour on: the bucket is full (six tokens) and
	// stays as the requests leave it.
	harness.CreateTopic(t, n.URL, key, "work", 1)
	frozen := time.Now().Add(time.Hour)
	n.App.SetClock(func() time.Time { return frozen })
	t.Cleanup(func() { n.App.SetClock(nil) })

	// Every /mcp request the client sends is counted here; four tool
	// calls and the protocol's own requests (initialize...) stay within
	// the burst. Each tool call also makes an API call of its own (GET
	// /v1/topics); counted too, they would run the bucket dry.
	var sent atomic.Int32
	tr := &mcp.StreamableClientTransport{Endpoint: n.URL + "/mcp", HTTPClient: &http.Client{
		Transport: counting{&sent, bearer{key, http.DefaultTransport}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "msgmesh-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	for i := 0; i < 4; i++ {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_topics", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("tool call %d: %v", i+1, err)
		}
		if res.IsError {
			t.Fatalf("tool call %d failed: %s (after %d /mcp requests)", i+1, text(res), sent.Load())
		}
		if !strings.Contains(text(res), "work") {
			t.Fatalf("tool call %d: list_topics = %s, want the topic work", i+1, text(res))
		}
	}
	mcpRequests := int(sent.Load())
	if mcpRequests > 6 {
		t.Fatalf("the client sent %d /mcp requests; the test needs at most the burst of 6", mcpRequests)
	}
	// What is left of the burst is what /mcp did not use: plain calls
	// until the first 429 (the same answer as for any call over the rate).
	left := 0
	for ; left <= 6; left++ {
		r := harness.Do(t, n.URL, "GET", "/v1/tenant", key, nil)
		if r.Status == 429 {
			harness.WantError(t, "the request after the burst", r, 429, "rate_limited")
			break
		}
		if r.Status != 200 {
			t.Fatalf("GET /v1/tenant: %d %s", r.Status, r.Body)
		}
	}
	if counted := 6 - left; counted != mcpRequests {
		t.Errorf("the rate limit counted %d requests for %d /mcp requests (4 tool calls), want one each", counted, mcpRequests)
	}
}

// counting counts the requests it sends.
type counting struct {
	n  *atomic.Int32
	rt http.RoundTripper
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// A JSON-RPC batch on /mcp is refused before any tool runs (one POST is
// one message, counted once against the request rate): with or without
// leading white space, and it made no API call on the caller's behalf.
func TestMCPRefusesBatches(t *testing.T) {
	c := harness.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Limits.Free = config.PlanLimits{RequestsPerSecond: 4}
	})
	key := harness.CreateTenant(t, n.URL, c.OperatorKey, "batcher", "free")
	frozen := time.Now().Add(time.Hour)
	n.App.SetClock(func() time.Time { return frozen })
	t.Cleanup(func() { n.App.SetClock(nil) })
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_topics","arguments":{}}}`
	var items []string
	for i := 0; i < 50; i++ {
		items = append(items, fmt.Sprintf(call, i))
	}
	for _, body := range []string{"[" + strings.Join(items, ",") + "]", " \r\n\t [" + strings.Join(items, ",") + "]"} {
		req, _ := http.NewRequest("POST", n.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(raw), `"code":"invalid_request"`) {
			t.Fatalf("a batch of 50 tool calls on /mcp: %d %s, want 400 invalid_request", resp.StatusCode, raw)
		}
	}
	// Two requests counted (the refused batches); the other two of the
	// burst are left: no tool call ran an API call of its own.
	for i := 0; i < 2; i++ {
		harness.Must(t, n.URL, "GET", "/v1/tenant", key, nil, 200)
	}
	harness.WantError(t, "the request after the burst", harness.Do(t, n.URL, "GET", "/v1/tenant", key, nil), 429, "rate_limited")
}
