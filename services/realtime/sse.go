package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/tracing"
	protows "github.com/msgmesh/msgmesh/proto/ws"
)

// EventResync is the SSE event type that says "I cannot guarantee
// completeness": fetch a fresh snapshot (spec section 3).
const EventResync = "msgmesh-resync"

// subscribeTarget checks a subscription request shared by SSE and
// WebSocket: the room, the capability (403), the topic (404). room nil =
// the whole topic.
func (s *Service) subscribeTarget(p auth.Principal, name string, room *string) (controlstate.Topic, error) {
	r := ""
	if room != nil {
		if *room == "" {
			return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeInvalidRequest, "room is empty (omit it to receive the whole topic)")
		}
		r = *room
	}
	if !p.Can(capability.OpSubscribe, name, r) {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeForbidden, "%s", auth.Refusal(p, capability.OpSubscribe, name, r))
	}
	t, ok := s.state.Topic(p.Tenant, name)
	if !ok {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q not found", name)
	}
	return t, nil
}

// sse serves GET /v1/topics/{topic}/events.
//
// Start: Last-Event-ID (a reconnect) wins over ?cursor= (a position id, or
// comma-separated message cursors, with ?epoch= to tell the topic's
// incarnation), which wins over ?from=latest|earliest (latest by default).
// Every error is answered before streaming starts. Events:
//
//	retry: <ms>
//	id: <position>                       (id only: the starting position)
//
//	id: <position>
//	data: {"cursor":"p-o","room":...,"data":...,"headers":[...],"published_at":"..."}
//
//	event: msgmesh-resync
//	id: <position>
//	data: {"reason":"window_records","position":"<position>"}
//
//	event: msgmesh-closed
//	id: <position>
//	data: {"reason":"topic_deleted","error":"..."}
//
// plus ": heartbeat" comments. The first event is id-only (no data: a
// browser records the id without dispatching anything), so that a stream
// cut before its first message still resumes exactly; an id-only event
// replaces a heartbeat whenever the position moved without a message (a
// room stream past other rooms' records). Before the server ends a stream
// on purpose it sends msgmesh-closed: topic_deleted (terminal), shutdown
// (reconnect, to any node), token_expired (reconnect with a fresh token),
// credential_revoked / tenant_suspended / invalid_token (the credential
// no longer works), catchup_busy (reconnect with backoff); its id is the
// position to resume from.
func (s *Service) sse(c *gin.Context) {
	p := auth.PrincipalOf(c)
	var room *string
	if r, ok := c.GetQuery("room"); ok {
		room = &r
	}
	t, err := s.subscribeTarget(p, c.Param("topic"), room)
	if err != nil {
		httpapi.Abort(c, s.log, err)
		return
	}
	start, err := ParseStart(c.GetHeader("Last-Event-ID"), c.Query("cursor"), c.Query("from"))
	if err == nil {
		start.Epoch, err = ParseEpoch(c.Query("epoch"))
	}
	if err != nil {
		code := httpapi.CodeInvalidCursor
		if strings.HasPrefix(err.Error(), "from ") {
			code = httpapi.CodeInvalidRequest
		}
		httpapi.Abort(c, s.log, httpapi.Errorf(code, "%v", err))
		return
	}
	octx, ocancel := context.WithCancelCause(c.Request.Context())
	defer ocancel(nil)
	ostop := context.AfterFunc(s.ctx, func() { ocancel(errShutdown) })
	defer ostop()
	st, err := s.open(octx, t, room, start)
	if err != nil {
		httpapi.Abort(c, s.log, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	ss := &sseStream{s: s, st: st, topic: t.Name, principal: p, cred: auth.CredentialOf(c)}
	if out := hijackSSE(c.Writer, c.Request, s.cfg.WriteTimeout); out != nil {
		// The connection is the stream's now: the handler returns (its
		// goroutine, request and buffers go), the stream goes on in its
		// own goroutine, which Close waits for like WebSockets'.
		ss.out = out
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			ss.serve(context.Background())
		}()
		return
	}
	w := c.Writer
	rc := http.NewResponseController(w)
	// The server's read timeout would end a long stream: lift it.
	_ = rc.SetReadDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	// Everything is written from this goroutine (events, heartbeats): no
	// write can outlive the handler, whose writer gin reuses afterwards.
	ss.out = &sseOut{w: w, rc: rc, timeout: s.cfg.WriteTimeout}
	ss.serve(c.Request.Context())
}

// sseStream is one SSE stream once its answer is decided: it runs in the
// handler (writing through net/http) or, on a hijacked connection, in its
// own goroutine.
type sseStream struct {
	s         *Service
	st        *stream
	topic     string
	principal auth.Principal
	cred      string
	out       *sseOut
}

// serve runs the stream until it ends; parent is the request's context
// (context.Background on a hijacked connection, which the stream watches
// itself).
func (ss *sseStream) serve(parent context.Context) {
	s, st, out := ss.s, ss.st, ss.out
	defer st.close()
	defer out.finish()
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(errShutdown) })
	defer stop()
	if out.conn != nil {
		// The stream's wait reads the connection (a hang-up ends it at
		// once); ctx ending interrupts that read.
		stopPoke := context.AfterFunc(ctx, out.poke)
		defer stopPoke()
	}
	s.metrics.subscribers.WithLabelValues("sse").Inc()
	defer s.metrics.subscribers.WithLabelValues("sse").Dec()

	// The headers, the retry hint and the first event (the id-only start,
	// or a resync) leave in one write, so a client that sees the stream
	// open holds its position. Events are added to the batch and written
	// when the stream flushes (once per batch of live events).
	out.add([]byte("retry: " + strconv.FormatInt(s.cfg.RetryHint.Milliseconds(), 10) + "\n: msgmesh\n\n"))
	var buf []byte
	var lastID []byte // the id the client holds
	// writeID adds an id-only event when the client's id is not pos.
	writeID := func(pos Position) error {
		buf = pos.Append(append(buf[:0], "id: "...))
		if id := buf[4:]; !bytes.Equal(id, lastID) {
			lastID = append(lastID[:0], id...)
			out.add(append(buf, "\n\n"...))
		}
		return nil
	}
	// Heartbeats, from the stream's goroutine; and the credential is
	// re-checked (a revoked key or an expired token ends the stream with
	// msgmesh-closed: the reconnect gets its 401).
	// On a hijacked connection the heartbeat is the wait's read deadline
	// (no ticker); elsewhere a ticker, its first beat at random.
	var nextBeat time.Time
	var tick *time.Ticker
	rebased := false
	if out.conn != nil {
		nextBeat = time.Now().Add(firstBeat(s.cfg.Heartbeat))
		st.poke = out.poke
		st.beatDue = func() bool { return !time.Now().Before(nextBeat) }
		// A stream that is receiving waits on its wake channel (no read
		// system call and no deadline change per event); one that had no
		// event for sseActiveFor waits in the read again, where a hang-up
		// is seen at once (while events flow, the next write sees it).
		var (
			active *time.Timer // armed while active; made at the first event
			events int         // wake-ups since active was armed
		)
		defer func() {
			if active != nil {
				active.Stop()
			}
		}()
		st.wait = func(ctx context.Context, l *liveSub) (woke, error) {
			for active != nil && events >= 0 {
				select {
				case <-l.wake:
					events++
					return wokeItems, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-active.C:
					switch {
					case !time.Now().Before(nextBeat):
						active.Reset(sseActiveFor)
						return wokeBeat, nil
					case events == 0:
						events = -1 // idle: wait in the read
					default:
						events = 0
						active.Reset(sseActiveFor)
					}
				}
			}
			l.reading.Store(true)
			w, err := out.wait(ctx, l.wake, nextBeat)
			l.reading.Store(false)
			if errors.Is(err, errClientGone) {
				cancel(errClientGone)
			}
			if err == nil && w == wokeItems {
				events = 0
				if active == nil {
					active = time.NewTimer(sseActiveFor)
				} else {
					active.Reset(sseActiveFor)
				}
			}
			return w, err
		}
	} else {
		tick = time.NewTicker(firstBeat(s.cfg.Heartbeat))
		defer tick.Stop()
		st.beat = tick.C
	}
	if p := ss.principal; !p.ExpiresAt.IsZero() {
		expiry := time.AfterFunc(p.ExpiresAt.Sub(s.now()), func() { cancel(errTokenExpired) })
		defer expiry.Stop()
	}
	sent, slow := s.metrics.sent.WithLabelValues("sse"), s.metrics.slow.WithLabelValues("disconnect")
	batched := 0 // messages in the batch
	flush := func() error {
		if err := out.flush(); err != nil {
			if batched > 0 {
				slow.Inc()
			}
			return err
		}
		if batched > 0 {
			sent.Add(float64(batched))
			batched = 0
		}
		return nil
	}
	st.onBeat = func() error {
		switch {
		case tick == nil:
			nextBeat = time.Now().Add(s.cfg.Heartbeat)
		case !rebased:
			tick.Reset(s.cfg.Heartbeat)
			rebased = true
		}
		if _, err := s.authenticate(ss.cred); err != nil {
			return err
		}
		if pos := st.position(); !bytes.Equal(pos.Append(buf[:0]), lastID) {
			_ = writeID(pos)
		} else {
			out.add(heartbeat)
		}
		return flush()
	}
	st.flush = flush
	emit := func(ev event) error {
		if ev.shared != nil && ev.resync == "" {
			b, idEnd := ev.shared.sseEvent(st.epoch)
			lastID = append(lastID[:0], b[4:idEnd]...)
			out.add(b)
		} else {
			buf = buf[:0]
			var idAt, idEnd int
			if ev.resync != "" {
				buf = append(buf, "event: "+EventResync+"\nid: "...)
				idAt = len(buf)
				buf = ev.pos.Append(buf)
				idEnd = len(buf)
				buf = append(buf, `
data: {"reason":"`...)
				buf = append(buf, ev.resync...)
				buf = append(buf, `","position":"`...)
				buf = ev.pos.Append(buf)
				buf = append(buf, "\"}\n\n"...)
			} else {
				buf = append(buf, "id: "...)
				idAt = len(buf)
				buf = ev.pos.Append(buf)
				idEnd = len(buf)
				buf = append(buf, '\n')
				buf = appendData(buf, ev.msg)
				buf = append(buf, '\n')
			}
			lastID = append(lastID[:0], buf[idAt:idEnd]...)
			out.add(buf)
		}
		if ev.resync == "" {
			batched++
		}
		if ev.rec != nil && s.tracer.Traced(ev.rec.Headers) {
			// A traced message is written at once: its span covers the
			// write.
			_, span, _ := s.tracer.StartDelivery(ctx, ev.rec.Headers, ev.rec.Partition, ev.rec.Offset, tracing.Delivery{Op: tracing.OpSSE, Topic: ss.topic})
			err := flush()
			tracing.EndDelivery(span, err)
			return err
		}
		return nil
	}
	err := st.run(ctx, emit, writeID)
	if out.failed || parent.Err() != nil || errors.Is(context.Cause(ctx), errClientGone) {
		return // the client is gone: nothing to tell
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	reason, text := closeReason(err, ss.topic)
	if reason == "" {
		s.log.Debug("realtime: sse stream ended", "topic", ss.topic, "err", err)
		_ = out.flush()
		return
	}
	s.metrics.closed.WithLabelValues("sse", reason).Inc()
	buf = append(buf[:0], "event: "+EventClosed+"\nid: "...)
	buf = st.position().Append(buf)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, closedData(reason, text)...)
	out.add(append(buf, "\n\n"...))
	_ = out.flush()
}

// EventClosed is the SSE event type sent before the server ends a stream
// on purpose; its data is {"reason": "<code>", "error": "<text>"} and its
// id the position to resume from.
const EventClosed = "msgmesh-closed"

// Closing reasons of msgmesh-closed events and closed frames.
const (
	// ReasonTopicDeleted: the topic was deleted; terminal (a reconnect
	// gets 404 topic_not_found, or a resync if it was made again).
	ReasonTopicDeleted = protows.ReasonTopicDeleted
	// ReasonShutdown: the node is shutting down; reconnect with backoff
	// (to any node) from the position.
	ReasonShutdown = protows.ReasonShutdown
	// ReasonTokenExpired: the token expired; reconnect with a fresh token
	// from the position.
	ReasonTokenExpired = protows.ReasonTokenExpired
	// ReasonCatchupBusy: every catch-up reader of the node stayed busy;
	// reconnect with backoff from the position.
	ReasonCatchupBusy = protows.ReasonCatchupBusy
)

// errTokenExpired: the stream's token reached its expiry.
var errTokenExpired = errors.New("the token expired")

// closeReason names why a stream ended when the server ended it on
// purpose ("" otherwise: the client went away, a write failed).
func closeReason(err error, topic string) (reason, text string) {
	switch ae, known := httpapi.Known(err); {
	case err == nil:
		return "", ""
	case errors.Is(err, errTopicDeleted):
		return ReasonTopicDeleted, fmt.Sprintf("topic %q was deleted", topic)
	case errors.Is(err, errShutdown):
		return ReasonShutdown, "the node is shutting down; reconnect (to any node) from this position"
	case errors.Is(err, errTokenExpired):
		return ReasonTokenExpired, "the token expired; reconnect with a fresh token from this position"
	case errors.Is(err, errCatchupBusy):
		return ReasonCatchupBusy, err.Error()
	case known:
		// The credential re-check failed: token_expired, credential_revoked,
		// tenant_suspended, invalid_token...
		return ae.Code.Code, ae.Message
	}
	return "", ""
}

// closedData is the JSON of a msgmesh-closed event (no HTML escaping).
func closedData(reason, text string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Reason string `json:"reason"`
		Error  string `json:"error"`
	}{reason, text})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

var heartbeat = []byte(": heartbeat\n\n")

// sseActiveFor: a hijacked stream that had an event within this long
// waits for the next on its channel, not in a read of its connection
// (sseOut.wait).
const sseActiveFor = time.Second

// firstBeat is a stream's first heartbeat interval: at random in the
// second half of the heartbeat, then every heartbeat. Streams that open
// together (a deploy, a reconnect wave, a benchmark) do not all re-check
// their credentials (a signature verification each) in the same instant.
func firstBeat(every time.Duration) time.Duration {
	if every < 2 {
		return max(every, 1)
	}
	return every/2 + rand.N(every/2)
}

// appendData appends msg as "data:" lines. A message is valid JSON, so a
// line break in it is whitespace: each line becomes its own data line
// (the client joins them with "\n"), and a CR is dropped.
func appendData(b, msg []byte) []byte {
	for {
		i := bytes.IndexByte(msg, '\n')
		line := msg
		if i >= 0 {
			line = msg[:i]
		}
		b = append(b, "data: "...)
		for _, ch := range line {
			if ch != '\r' {
				b = append(b, ch)
			}
		}
		b = append(b, '\n')
		if i < 0 {
			return b
		}
		msg = msg[i+1:]
	}
}
