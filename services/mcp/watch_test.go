package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves s to an in-memory client session.
func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func watchCall(t *testing.T, cs *mcp.ClientSession, args map[string]any) WatchOut {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolWatchTopic, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError {
		t.Fatalf("tool error: %+v", r.Content[0])
	}
	var out WatchOut
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The SSE contract: a stream starts with an id-only event and keeps the
// position current while idle. A watch from latest that times out
// returns that position, so the next call misses nothing published in
// between; after events, an id-only event that follows them moves the
// cursor too, but never past an event not returned.
func TestWatchCursorFromIDOnlyEvents(t *testing.T) {
	streams := []string{
		"id: ep.10-4\n\n",
		"id: ep.11-4\ndata: {\"cursor\":\"0-10\",\"room\":null,\"data\":{\"n\":1},\"headers\":[],\"published_at\":\"2026-12-01T10:00:00Z\"}\n\n" +
			"id: ep.11-5\ndata: {\"cursor\":\"1-4\",\"room\":null,\"data\":{\"n\":2},\"headers\":[],\"published_at\":\"2026-12-01T10:00:00Z\"}\n\n" +
			"id: ep.11-6\ndata: {\"cursor\":\"1-5\",\"room\":null,\"data\":{\"n\":3},\"headers\":[],\"published_at\":\"2026-12-01T10:00:00Z\"}\n\n",
		"id: ep.11-5\ndata: {\"cursor\":\"1-4\",\"room\":null,\"data\":{\"n\":2},\"headers\":[],\"published_at\":\"2026-12-01T10:00:00Z\"}\n\nid: ep.12-6\n\n",
	}
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := len(got)
		got = append(got, r)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, streams[i])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL, APIKey: "mm_k"})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	w := watchCall(t, cs, map[string]any{"topic": "t", "wait_ms": 300})
	if !w.TimedOut || w.Cursor != "ep.10-4" || len(w.Events) != 0 {
		t.Fatalf("idle watch from latest: %+v, want timed_out at the id-only position", w)
	}
	w = watchCall(t, cs, map[string]any{"topic": "t", "cursor": w.Cursor, "max_events": 2, "wait_ms": 3000})
	if len(w.Events) != 2 || w.Cursor != "ep.11-5" || w.TimedOut {
		t.Fatalf("max_events 2: %+v, want 2 events and the position after the second", w)
	}
	if id := got[1].Header.Get("Last-Event-ID"); id != "ep.10-4" {
		t.Fatalf("resumed with Last-Event-ID %q", id)
	}
	w = watchCall(t, cs, map[string]any{"topic": "t", "cursor": w.Cursor, "wait_ms": 500})
	if len(w.Events) != 0 {
		t.Fatalf("the boundary event 1-4 came again: %+v", w)
	}
	if !w.TimedOut || w.Cursor != "ep.12-6" {
		t.Fatalf("after a boundary duplicate and an id-only event: %+v, want timed_out at ep.12-6", w)
	}
	if s.Waiters() != 0 {
		t.Fatalf("waiters %d", s.Waiters())
	}
}
