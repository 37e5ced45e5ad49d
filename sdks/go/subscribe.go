package msgmesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// SSE event types of GET /v1/topics/{topic}/events besides messages.
const (
	// EventResync says the start was beyond the replay window: events
	// were missed; fetch a fresh snapshot, then continue live.
	EventResync = "msgmesh-resync"
	// EventClosed comes before the server ends a stream on purpose,
	// with {"reason","error"}.
	EventClosed = "msgmesh-closed"
)

// State is a subscription's connection state.
type State string

// The states of a Subscription.
const (
	StateConnecting   State = "connecting"
	StateLive         State = "live"
	StateReconnecting State = "reconnecting"
	// StateFailed is terminal: Err says why (the topic was deleted, the
	// key is not allowed, ...).
	StateFailed State = "failed"
	// StateClosed is terminal: Close was called or the context ended.
	StateClosed State = "closed"
)

// Resync is a msgmesh-resync event.
type Resync struct {
	// Reason is why ("window_records", "window_age", "retention").
	Reason string `json:"reason"`
	// Position is where the stream continues (live).
	Position string `json:"position"`
}

// SubscribeOptions choose where a subscription starts and receive what
// it delivers. The callbacks run one at a time on the subscription's
// goroutine, in stream order: a slow callback delays the next event (and
// the server drops a subscriber that falls too far behind).
type SubscribeOptions struct {
	// Room restricts the stream to one room ("" for the whole topic).
	Room string
	// Cursor is where to resume: a position (an SSE id, e.g. the
	// Position of an earlier Subscription) or comma-separated message
	// cursors ("0-41,1-17": after those messages). It wins over From.
	Cursor string
	// From is "latest" (default: only new messages) or "earliest".
	From string
	// OnMessage receives each message once: a message at or before one
	// already delivered on its partition (a boundary duplicate after a
	// reconnect) is dropped.
	OnMessage func(Message)
	// OnResync receives msgmesh-resync events.
	OnResync func(Resync)
	// OnPosition receives every SSE id, including those of events that
	// carry no message: the position to resume from after everything
	// delivered so far.
	OnPosition func(position string)
	// OnError receives each failed connection attempt or dropped stream
	// (the subscription retries unless the error is terminal).
	OnError func(error)
	// OnStateChange receives every state change.
	OnStateChange func(State)
	// IdleTimeout drops a connection on which nothing (not even the
	// server's heartbeat comment) arrived for this long, then reconnects.
	// Default 60 s.
	IdleTimeout time.Duration
}

// Subscription is a live SSE subscription to one topic (or room). It
// reconnects with full-jitter backoff, resuming from its position.
type Subscription struct {
	c      *Client
	topic  string
	o      SubscribeOptions
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state State
	pos   string
	err   error
	// last is each partition's highest delivered offset (dedupe).
	last map[int32]int64
}

// Subscribe opens an SSE subscription to topic. It returns once the first
// connection answered: an error the subscription cannot recover from
// (ErrForbidden, ErrNotFound, ErrUnauthorized, ErrInvalidRequest) is
// returned here; a retryable one (network, 429, 5xx) leaves the
// subscription reconnecting. Once running, a 403 tenant_suspended on a
// reconnect is retried with backoff too (the suspension lifts when the
// tenant is reinstated). It ends when ctx ends or Close is called.
func (c *Client) Subscribe(ctx context.Context, topic string, o SubscribeOptions) (*Subscription, error) {
	switch o.From {
	case "", "latest", "earliest":
	default:
		return nil, fmt.Errorf("msgmesh: SubscribeOptions.From must be latest or earliest, got %q", o.From)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{c: c, topic: topic, o: o, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		state: StateConnecting, last: map[int32]int64{}}
	s.seed(strings.TrimSpace(o.Cursor))
	s.emitState(StateConnecting)
	resp, err := s.connect(false)
	if err != nil && !retryable(err) {
		s.finish(err)
		cancel()
		<-s.done
		return nil, err
	}
	go s.run(resp, err)
	return s, nil
}

// seed records a resume point as delivered, so that the boundary record
// the server may send again is dropped.
func (s *Subscription) seed(cur string) {
	if cur == "" {
		return
	}
	if strings.Contains(cur, ".") {
		s.pos = cur
		_, next, ok := strings.Cut(cur, ".")
		if !ok {
			return
		}
		for p, n := range strings.Split(next, "-") {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil && v > 0 {
				s.last[int32(p)] = v - 1
			}
		}
		return
	}
	for _, x := range strings.Split(cur, ",") {
		if p, o, err := ParseCursor(strings.TrimSpace(x)); err == nil {
			s.last[p] = o
		}
	}
}

// Close ends the subscription and waits until its goroutine returned (no
// callback runs after Close returns, unless Close is called from one).
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

// Done is closed when the subscription ended (closed or failed).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// State is the current state.
func (s *Subscription) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Position is the last SSE id received ("" before the first): pass it
// as SubscribeOptions.Cursor to resume exactly after what was delivered.
func (s *Subscription) Position() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos
}

// Err is why a failed subscription stopped (nil otherwise).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Subscription) emitState(st State) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
	if s.o.OnStateChange != nil {
		s.o.OnStateChange(st)
	}
}

func (s *Subscription) emitError(err error) {
	if s.o.OnError != nil && s.ctx.Err() == nil {
		s.o.OnError(err)
	}
}

// finish ends the subscription: failed with err, or closed (err nil or
// the context's).
func (s *Subscription) finish(err error) {
	if err != nil && s.ctx.Err() == nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		s.emitState(StateFailed)
	} else {
		s.emitState(StateClosed)
	}
	close(s.done)
}

// connect opens one stream from the current position.
func (s *Subscription) connect(refresh bool) (*http.Response, error) {
	q := url.Values{}
	if s.o.Room != "" {
		q.Set("room", s.o.Room)
	}
	if s.o.From != "" {
		q.Set("from", s.o.From)
	}
	pos := s.Position()
	if pos == "" && s.o.Cursor != "" {
		q.Set("cursor", s.o.Cursor)
	}
	u := s.c.rt + "/v1/topics/" + esc(s.topic) + "/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := s.c.newRequest(s.ctx, "GET", u, nil, refresh)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if pos != "" {
		req.Header.Set("Last-Event-ID", pos)
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		e := errorOf(resp, b)
		if e.Status == http.StatusUnauthorized && !refresh && s.c.opts.APIKey == "" {
			return s.connect(true)
		}
		return nil, e
	}
	return resp, nil
}

// run reads streams and reconnects until the end.
func (s *Subscription) run(resp *http.Response, err error) {
	attempt := 0
	refresh := false
	for {
		if err == nil {
			attempt = 0
			s.emitState(StateLive)
			var closed *closedEvent
			closed, err = s.read(resp)
			resp.Body.Close()
			if s.ctx.Err() != nil {
				s.finish(nil)
				return
			}
			if closed != nil {
				switch closed.Reason {
				case "topic_deleted":
					s.finish(&Error{Status: http.StatusNotFound, Code: "topic_deleted", Message: closed.Error})
					return
				case "token_expired":
					// Refresh the token and reconnect at once.
					refresh = true
					err = nil
				default:
					err = fmt.Errorf("msgmesh: stream closed by the server: %s", closed.Reason)
				}
			} else if err == nil {
				err = errors.New("msgmesh: stream ended")
			}
		}
		if err != nil {
			if !retryable(err) && !suspended(err) {
				s.finish(err)
				return
			}
			s.emitError(err)
			s.emitState(StateReconnecting)
			if !s.sleep(s.delay(attempt, err)) {
				s.finish(nil)
				return
			}
			attempt++
		} else {
			s.emitState(StateReconnecting)
		}
		resp, err = s.connect(refresh)
		refresh = false
	}
}

// delay is the full-jitter backoff of the attempt-th retry, at least a
// 429's Retry-After.
func (s *Subscription) delay(attempt int, err error) time.Duration {
	b := s.c.opts.Reconnect
	ceil := b.Max
	if attempt < 30 {
		ceil = min(b.Max, b.Min<<attempt)
	}
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > d {
		d = e.RetryAfter
	}
	return d
}

func (s *Subscription) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

type closedEvent struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// idleReader cancels the stream when no byte arrived for a while.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.d)
	}
	return n, err
}

// maxEventBytes bounds one SSE event (a message is at most a few MiB).
const maxEventBytes = 16 << 20

// read dispatches one stream's events until it ends. It returns the
// msgmesh-closed event when the server said why it ended.
func (s *Subscription) read(resp *http.Response) (*closedEvent, error) {
	idle := time.AfterFunc(s.o.IdleTimeout, func() { resp.Body.Close() })
	defer idle.Stop()
	body := &idleReader{r: resp.Body, timer: idle, d: s.o.IdleTimeout}
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: maxEventBytes}) {
		if err != nil {
			return nil, err
		}
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		switch ev.Type {
		case EventClosed:
			var c closedEvent
			_ = json.Unmarshal([]byte(ev.Data), &c)
			return &c, nil
		case EventResync:
			var r Resync
			_ = json.Unmarshal([]byte(ev.Data), &r)
			if r.Position == "" {
				r.Position = ev.LastEventID
			}
			s.setPosition(ev.LastEventID)
			if s.o.OnResync != nil {
				s.o.OnResync(r)
			}
			continue
		case "", "message":
		default:
			// An event type this client does not know: keep its id only.
			s.setPosition(ev.LastEventID)
			continue
		}
		if ev.Data == "" {
			// An id-only event: the position moved (idle stream).
			s.setPosition(ev.LastEventID)
			continue
		}
		m, err := decodeMessage([]byte(ev.Data))
		if err != nil {
			s.emitError(err)
			s.setPosition(ev.LastEventID)
			continue
		}
		s.mu.Lock()
		last, seen := s.last[m.Partition]
		dup := seen && m.Offset <= last
		if !dup {
			s.last[m.Partition] = m.Offset
		}
		s.mu.Unlock()
		if !dup && s.o.OnMessage != nil {
			s.o.OnMessage(m)
		}
		s.setPosition(ev.LastEventID)
	}
	return nil, nil
}

func (s *Subscription) setPosition(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	changed := s.pos != id
	s.pos = id
	s.mu.Unlock()
	if changed && s.o.OnPosition != nil {
		s.o.OnPosition(id)
	}
}
