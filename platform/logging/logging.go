// Package logging sets up MsgMesh's structured logs (log/slog): the level
// and format of log.level and log.format, and a limit on repeated
// warnings so that a condition that repeats in a tight loop (a fetch
// error for a deleted topic, an unreachable broker) is logged once per
// interval with a count, not thousands of times a second.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// DefaultRepeatInterval is how often New's loggers let the same warning
// through.
const DefaultRepeatInterval = 10 * time.Second

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error"; anything else is info) as format "json" or text, with repeated
// warnings limited to one per DefaultRepeatInterval (LimitRepeats).
func New(level, format string, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(LimitRepeats(h, DefaultRepeatInterval))
}

// maxKeys bounds the distinct warnings remembered; beyond it the oldest
// windows are forgotten (so at worst a warning is logged once more).
const maxKeys = 4096

// RepeatedAttr is the attribute a let-through warning carries when
// identical ones were dropped before it: how many.
const RepeatedAttr = "repeated"

// LimitRepeats wraps h so that a record at slog.LevelWarn or above that is
// identical to one let through less than every ago (same level, message,
// attributes and groups, including those added with With) is dropped. The
// first one after the interval goes through with RepeatedAttr set to the
// number dropped meanwhile. Records below LevelWarn always pass. Every
// logger derived from the result (With, WithGroup) shares one memory. h
// already limited is returned as is; every ≤ 0 returns h.
func LimitRepeats(h slog.Handler, every time.Duration) slog.Handler {
	if _, ok := h.(*repeatHandler); ok || every <= 0 {
		return h
	}
	return &repeatHandler{next: h, state: &repeatState{every: every, now: time.Now, seen: map[string]*window{}}}
}

type window struct {
	until   time.Time
	dropped int
}

type repeatState struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[string]*window
}

// pass reports whether the record with key goes through, and how many
// identical records were dropped before it.
func (s *repeatState) pass(key string) (bool, int) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.seen[key]; ok && now.Before(w.until) {
		w.dropped++
		return false, 0
	}
	dropped := 0
	if w, ok := s.seen[key]; ok {
		dropped = w.dropped
	}
	if len(s.seen) >= maxKeys {
		for k, w := range s.seen {
			if !now.Before(w.until) {
				delete(s.seen, k)
			}
		}
		if len(s.seen) >= maxKeys {
			clear(s.seen)
		}
	}
	s.seen[key] = &window{until: now.Add(s.every)}
	return true, dropped
}

type repeatHandler struct {
	next  slog.Handler
	state *repeatState
	// scope is what With and WithGroup added, as text: part of the key.
	scope string
}

func (h *repeatHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *repeatHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	b.WriteString(h.scope)
	b.WriteByte(0)
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteByte(0)
		b.WriteString(a.String())
		return true
	})
	ok, dropped := h.state.pass(b.String())
	if !ok {
		return nil
	}
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(RepeatedAttr, dropped))
	}
	return h.next.Handle(ctx, r)
}

func (h *repeatHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.scope)
	for _, a := range as {
		fmt.Fprintf(&b, "\x01%s", a.String())
	}
	return &repeatHandler{next: h.next.WithAttrs(as), state: h.state, scope: b.String()}
}

func (h *repeatHandler) WithGroup(name string) slog.Handler {
	return &repeatHandler{next: h.next.WithGroup(name), state: h.state, scope: h.scope + "\x02" + name}
}
