package readmodel

import (
	"context"
	"sort"
	"sync"
)

// Memory is the bounded in-memory read model (no postgres.url): the
// newest AuditWindow audit events and AttemptWindow attempts of each
// tenant. Older ones are forgotten; a restart starts it over from what
// Kafka still holds.
type Memory struct {
	auditWindow, attemptWindow int

	mu       sync.RWMutex
	next     map[string]map[int32]int64
	audit    map[string][]AuditEvent // by tenant, in apply order
	attempts map[string][]Attempt    // by tenant, in apply order
}

// Default windows of NewMemory.
const (
	DefaultAuditWindow   = 10_000
	DefaultAttemptWindow = 50_000
)

// NewMemory returns an empty Memory keeping per tenant up to auditWindow
// audit events and attemptWindow attempts (0: the defaults).
func NewMemory(auditWindow, attemptWindow int) *Memory {
	if auditWindow <= 0 {
		auditWindow = DefaultAuditWindow
	}
	if attemptWindow <= 0 {
		attemptWindow = DefaultAttemptWindow
	}
	return &Memory{auditWindow: auditWindow, attemptWindow: attemptWindow,
		next: map[string]map[int32]int64{}, audit: map[string][]AuditEvent{}, attempts: map[string][]Attempt{}}
}

// Source is SourceMemory.
func (m *Memory) Source() string { return SourceMemory }

// Positions returns the next offsets applied so far.
func (m *Memory) Positions(context.Context) (map[string]map[int32]int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]map[int32]int64{}
	for t, ps := range m.next {
		out[t] = map[int32]int64{}
		for p, o := range ps {
			out[t][p] = o
		}
	}
	return out, nil
}

// Apply adds b's entries not applied yet, dropping the oldest beyond the
// windows.
func (m *Memory) Apply(_ context.Context, b Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range b.Entries {
		if ps := m.next[e.Pos.Topic]; ps != nil {
			if n, ok := ps[e.Pos.Partition]; ok && e.Pos.Offset < n {
				continue
			}
		}
		switch {
		case e.Audit != nil:
			m.audit[e.Audit.Tenant] = trim(append(m.audit[e.Audit.Tenant], *e.Audit), m.auditWindow)
		case e.Attempt != nil:
			m.attempts[e.Attempt.Tenant] = trim(append(m.attempts[e.Attempt.Tenant], *e.Attempt), m.attemptWindow)
		}
	}
	for t, ps := range b.Next {
		if m.next[t] == nil {
			m.next[t] = map[int32]int64{}
		}
		for p, o := range ps {
			if o > m.next[t][p] {
				m.next[t][p] = o
			}
		}
	}
	return nil
}

// trim keeps the newest window entries of l once it holds a quarter more
// (so that the copy is amortized over window/4 appends).
func trim[T any](l []T, window int) []T {
	if len(l) <= window+window/4 {
		return l
	}
	return append(make([]T, 0, window+window/4+1), l[len(l)-window:]...)
}

// newest is the window's part of l.
func newest[T any](l []T, window int) []T {
	if len(l) > window {
		return l[len(l)-window:]
	}
	return l
}

// Audit lists tenant's audit events in the window, newest first.
func (m *Memory) Audit(_ context.Context, tenant string, q AuditQuery) (AuditPage, error) {
	limit := limitOf(q.Limit)
	m.mu.RLock()
	var out []AuditEvent
	for _, e := range newest(m.audit[tenant], m.auditWindow) {
		if (!q.Since.IsZero() && e.Time.Before(q.Since)) || (!q.Until.IsZero() && !e.Time.Before(q.Until)) ||
			(q.Type != "" && e.Type != q.Type) || !q.After.before(e.Time, e.Pos) {
			continue
		}
		out = append(out, e)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return newer(out[i].Time, out[i].Pos, out[j].Time, out[j].Pos) })
	var page AuditPage
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		page.Next = &Key{Time: last.Time, Partition: last.Pos.Partition, Offset: last.Pos.Offset}
	}
	page.Events = out
	return page, nil
}

// Attempts lists the attempts of tenant's webhook in the window, newest
// first.
func (m *Memory) Attempts(_ context.Context, tenant, webhookID string, q AttemptQuery) (AttemptPage, error) {
	limit := limitOf(q.Limit)
	m.mu.RLock()
	var out []Attempt
	for _, a := range newest(m.attempts[tenant], m.attemptWindow) {
		if a.WebhookID != webhookID || (!q.Since.IsZero() && a.Time.Before(q.Since)) || (!q.Until.IsZero() && !a.Time.Before(q.Until)) ||
			(q.Outcome != "" && a.Outcome != q.Outcome) || (q.Status >= 0 && a.Status != q.Status) ||
			(q.Cursor != "" && a.Cursor != q.Cursor) || !q.After.before(a.Time, a.Pos) {
			continue
		}
		out = append(out, a)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return newer(out[i].Time, out[i].Pos, out[j].Time, out[j].Pos) })
	var page AttemptPage
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		page.Next = &Key{Time: last.Time, Partition: last.Pos.Partition, Offset: last.Pos.Offset}
	}
	page.Attempts = out
	return page, nil
}
