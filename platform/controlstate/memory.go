package controlstate

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// MemoryLog is a control log held in one process's memory: the events Log
// writes, encoded and decoded as Log does (JSON), applied in Append order
// to a State, with the same outcomes and OnApply hooks, but no Kafka. It
// is always ready.
//
// It stands in for Log where a consumer declares the few methods it needs
// (controlplane.ControlLog): handler tests, and single-process tools. It
// is not shared between processes: nothing survives it.
type MemoryLog struct {
	wrapper Wrapper
	state   *State
	now     func() time.Time

	// mu orders appends: like the control topic's one partition, events
	// are applied one at a time, in one order.
	mu     sync.Mutex
	hooks  []func(Event, error)
	values [][]byte // every record value applied, in order
}

// NewMemoryLog returns an empty MemoryLog whose State opens sealed secrets
// with w (nil: events carrying sealed secrets cannot be written or read,
// as for Log without Config.Wrapper).
func NewMemoryLog(w Wrapper) *MemoryLog {
	return &MemoryLog{wrapper: w, state: NewStateWith(w), now: time.Now}
}

// State is the projection of the events appended so far.
func (m *MemoryLog) State() *State { return m.state }

// Ready is always true: there is nothing to catch up with.
func (m *MemoryLog) Ready() bool { return true }

// WaitReady returns at once.
func (m *MemoryLog) WaitReady(context.Context) error { return nil }

// OnApply registers fn to run after each event is applied, with its
// outcome, as Log.OnApply does (on the appending goroutine, in order).
func (m *MemoryLog) OnApply(fn func(Event, error)) {
	m.mu.Lock()
	m.hooks = append(m.hooks, fn)
	m.mu.Unlock()
}

// Append encodes an event of type typ with data as Log.Append does, applies
// it and returns its outcome: nil if accepted, or an error wrapping
// ErrConflict, ErrNotFound or ErrInvalid. It fails only with ctx done.
func (m *MemoryLog) Append(ctx context.Context, typ string, data any) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, fmt.Errorf("controlstate: append %s: %w", typ, err)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("controlstate: encode %s: %w", typ, err)
	}
	ev := Event{V: SchemaVersion, Type: typ, ID: newID(), At: m.now().UTC(), Data: raw, Actor: ActorFrom(ctx)}
	val, err := json.Marshal(ev)
	if err != nil {
		return Event{}, err
	}
	return ev, m.ApplyRecord(val)
}

// ApplyRecord applies one record value as it would be read from the control
// topic, whatever it holds: a value that is not an event is skipped with an
// ErrInvalid outcome (hooks see it too), as every node does with a poison
// record. It returns the outcome.
func (m *MemoryLog) ApplyRecord(value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ev Event
	var outcome error
	if err := json.Unmarshal(value, &ev); err != nil {
		ev = Event{}
		outcome = fmt.Errorf("%w: offset %d: %v", ErrInvalid, len(m.values), err)
	} else {
		outcome = m.state.Apply(ev)
	}
	m.values = append(m.values, append([]byte(nil), value...))
	for _, h := range m.hooks {
		h(ev, outcome)
	}
	return outcome
}

// Records returns a copy of every record value applied, in order (what
// the control topic would hold).
func (m *MemoryLog) Records() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]byte, len(m.values))
	for i, v := range m.values {
		out[i] = append([]byte(nil), v...)
	}
	return out
}

// SealSigningSeed seals a signing key's seed as Log.SealSigningSeed does.
func (m *MemoryLog) SealSigningSeed(ctx context.Context, kid string, seed []byte) (*Sealed, error) {
	return seal(ctx, m.wrapper, seed, signingAAD(kid))
}

// SealWebhookSecret seals a webhook secret as Log.SealWebhookSecret does.
func (m *MemoryLog) SealWebhookSecret(ctx context.Context, tenant, id, secret string) (*Sealed, error) {
	return seal(ctx, m.wrapper, []byte(secret), webhookAAD(tenant, id))
}

// RewrapSecrets is Log.RewrapSecrets over the memory log.
func (m *MemoryLog) RewrapSecrets(ctx context.Context) (rewrapped, plaintext int, err error) {
	return rewrapSecrets(ctx, m.wrapper, m.state, m.Append)
}
