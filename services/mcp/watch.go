package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// Limits of watch_topic's max_events.
const (
	defaultMaxEvents = 100
	maxMaxEvents     = 1000
)

// WatchIn is watch_topic's input.
type WatchIn struct {
	Topic     string `json:"topic" jsonschema:"the topic to watch"`
	Room      string `json:"room,omitempty" jsonschema:"only this room's events"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"the cursor of the previous watch_topic result: only events after it are returned (exact on every partition, on any node, across restarts)"`
	From      string `json:"from,omitempty" jsonschema:"without cursor: latest (default, only new events) or earliest (from the oldest retained)"`
	MaxEvents int    `json:"max_events,omitempty" jsonschema:"at most this many events per call (default 100, at most 1000)"`
	WaitMs    int    `json:"wait_ms,omitempty" jsonschema:"how long to wait for a first new event before answering timed_out (default 25000; capped)"`
}

// WatchOut is watch_topic's result.
type WatchOut struct {
	Events []Event `json:"events" jsonschema:"the new events in order (per partition)"`
	// Cursor is where the next call continues.
	Cursor   string `json:"cursor" jsonschema:"pass it as cursor to the next watch_topic call"`
	Resync   bool   `json:"resync" jsonschema:"true: the cursor was beyond the replay window and events were missed; re-read your state, then continue from cursor"`
	TimedOut bool   `json:"timed_out" jsonschema:"true: nothing new arrived within wait_ms (not an error); call again with cursor"`
}

// watchInputSchema is WatchIn's inferred schema with its limits: from's
// two values, positive max_events, non-negative wait_ms (larger values
// than the caps are capped, not refused).
func watchInputSchema() *jsonschema.Schema {
	sc, err := jsonschema.For[WatchIn](nil)
	if err != nil {
		panic(err)
	}
	sc.Properties["from"].Enum = []any{"latest", "earliest"}
	sc.Properties["max_events"].Minimum = ptr(1.0)
	sc.Properties["wait_ms"].Minimum = ptr(0.0)
	return sc
}

func (s *Server) addWatch() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolWatchTopic, InputSchema: watchInputSchema(),
		Description: "Wait for new events on a topic (or one room of it). Returns as soon as at least one new event exists after cursor " +
			"(gathering a few more for a moment, up to max_events), or after wait_ms with timed_out: true. Always pass the returned cursor " +
			"to the next call: you receive every event exactly once, even across restarts. Woken by the publish itself, not by polling.",
		Annotations: annotated(readOnly, "Watch a topic")}, instrument(s, ToolWatchTopic, s.watchHandler))
}

// watchHandler adapts watch to instrument (which has no request).
func (s *Server) watchHandler(ctx context.Context, c *msgmesh.Client, in WatchIn) (WatchOut, error) {
	return s.watch(ctx, c, in, progressOf(ctx))
}

// watch waits on an SSE subscription of the realtime fan-out (no timer
// loop: the publish itself wakes it). Every step of the stream (message
// or id-only) moves the cursor only while the call still takes events, so
// the returned cursor is exactly after the last event returned.
func (s *Server) watch(ctx context.Context, c *msgmesh.Client, in WatchIn, progress func(elapsed, total time.Duration)) (WatchOut, error) {
	maxEvents := in.MaxEvents
	switch {
	case maxEvents < 0:
		return WatchOut{}, errors.New("max_events must be positive")
	case maxEvents == 0:
		maxEvents = defaultMaxEvents
	case maxEvents > maxMaxEvents:
		maxEvents = maxMaxEvents
	}
	switch in.From {
	case "", "latest", "earliest":
	default:
		return WatchOut{}, fmt.Errorf("from must be latest or earliest, got %q", in.From)
	}
	wait := s.cfg.DefaultWait
	if in.WaitMs < 0 {
		return WatchOut{}, errors.New("wait_ms must not be negative")
	}
	if in.WaitMs > 0 {
		wait = min(time.Duration(in.WaitMs)*time.Millisecond, s.cfg.MaxWait)
	}
	// The subscription's callbacks hand its steps over in stream order (a
	// full channel holds the stream back; nothing is dropped while the
	// call takes events).
	steps := make(chan step, 256)
	subCtx, cancelSub := context.WithCancel(ctx)
	defer cancelSub()
	send := func(st step) {
		select {
		case steps <- st:
		case <-subCtx.Done():
		}
	}
	sub, err := c.Subscribe(subCtx, in.Topic, msgmesh.SubscribeOptions{
		Room: in.Room, Cursor: in.Cursor, From: in.From,
		OnMessage:  func(m msgmesh.Message) { send(step{msg: &m}) },
		OnPosition: func(p string) { send(step{pos: p}) },
		OnResync:   func(r msgmesh.Resync) { send(step{pos: r.Position, resync: true}) },
		OnError:    func(err error) { send(step{err: err}) },
	})
	if err != nil {
		return WatchOut{}, err
	}
	// A waiter is a call whose stream is open. Closing the subscription
	// (and so the SSE request) before the call answers frees the
	// server-side subscriber at once.
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	defer sub.Close()

	out := WatchOut{Events: []Event{}, Cursor: in.Cursor}
	start := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var coalesce <-chan time.Time
	var tick <-chan time.Time
	if progress != nil {
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C
	}
	var lastErr error
	// needPos: a message was taken and its position (the step after it)
	// has not been seen yet.
	needPos := false
	finish := func() WatchOut {
		if needPos {
			out.Cursor = positionAfter(steps, sub)
		}
		return settle(out, steps)
	}
	for {
		select {
		case st := <-steps:
			switch {
			case st.err != nil:
				lastErr = st.err
			case st.msg != nil:
				out.Events = append(out.Events, eventOf(*st.msg))
				needPos = true
				if len(out.Events) >= maxEvents {
					out.Cursor = positionAfter(steps, sub)
					return out, nil
				}
				if coalesce == nil {
					t := time.NewTimer(s.cfg.Coalesce)
					defer t.Stop()
					coalesce = t.C
				}
			case st.resync:
				out.Resync = true
				out.Cursor = st.pos
				return out, nil
			default:
				out.Cursor = st.pos
				needPos = false
			}
		case <-coalesce:
			return finish(), nil
		case <-tick:
			progress(time.Since(start), wait)
		case <-sub.Done():
			if err := sub.Err(); err != nil {
				return WatchOut{}, err
			}
			return WatchOut{}, ctx.Err()
		case <-deadline.C:
			if len(out.Events) > 0 {
				return finish(), nil
			}
			if sub.State() != msgmesh.StateLive && lastErr != nil {
				return WatchOut{}, fmt.Errorf("could not reach MsgMesh's stream within wait_ms: %w", lastErr)
			}
			out.TimedOut = true
			return out, nil
		case <-ctx.Done():
			return WatchOut{}, ctx.Err()
		}
	}
}

// step is one thing a subscription handed to a waiting watch_topic.
type step struct {
	msg    *msgmesh.Message
	pos    string
	resync bool
	err    error
}

// positionAfter waits for the position step that follows the last
// message taken (the subscription sends a message, then its id, from the
// same goroutine), so that the cursor is exactly after it.
func positionAfter(steps <-chan step, sub *msgmesh.Subscription) string {
	for {
		select {
		case st := <-steps:
			if st.msg == nil && st.err == nil && !st.resync && st.pos != "" {
				return st.pos
			}
		case <-sub.Done():
			return sub.Position()
		}
	}
}

// settle takes the steps already handed over that only move the
// position (an id-only event after the last message), keeping the
// cursor exact: it stops at the first message (left for the next call).
func settle(out WatchOut, steps <-chan step) WatchOut {
	for {
		select {
		case st := <-steps:
			if st.msg != nil || st.resync {
				return out
			}
			if st.err == nil && st.pos != "" {
				out.Cursor = st.pos
			}
		default:
			return out
		}
	}
}

// progressOf returns a progress reporter when the call carried a
// progress token (nil otherwise).
func progressOf(ctx context.Context) func(elapsed, total time.Duration) {
	req, _ := ctx.Value(requestKey{}).(*mcp.CallToolRequest)
	if req == nil || req.Params == nil || req.Session == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	return func(elapsed, total time.Duration) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: tok,
			Progress:      float64(elapsed.Milliseconds()),
			Total:         float64(total.Milliseconds()),
			Message:       "waiting for new events",
		})
	}
}

// requestKey carries the tool call's request to tool bodies that need it
// (progress notifications).
type requestKey struct{}

// Watch is watch_topic itself for callers in this process (the live
// demo's agent pane): the same events, cursor, resync and timed_out an
// agent's call gets, acting with c's credential.
func (s *Server) Watch(ctx context.Context, c *msgmesh.Client, in WatchIn) (WatchOut, error) {
	return s.watch(ctx, c, in, nil)
}
