package realtime

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
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

// credential is the raw credential of the request (for re-checks).
func credential(c *gin.Context) string {
	if cred, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
		return cred
	}
	return c.Query("token")
}

// sse serves GET /v1/topics/{topic}/events.
//
// Start: Last-Event-ID (a reconnect) wins over ?cursor= (a position id, or
// comma-separated message cursors), which wins over ?from=latest|earliest
// (latest by default). Every error is answered before streaming starts.
// Events:
//
//	retry: <ms>
//	id: <position>
//	data: {"cursor":"p-o","room":...,"data":...,"headers":[...],"published_at":"..."}
//
//	event: msgmesh-resync
//	id: <position>
//	data: {"reason":"window_records","position":"<position>"}
//
// plus ": heartbeat" comments. The stream ends at the token's expiry, when
// the credential is revoked, the topic deleted or the node shuts down; the
// client reconnects with Last-Event-ID.
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
	if err != nil {
		code := httpapi.CodeInvalidCursor
		if strings.HasPrefix(err.Error(), "from ") {
			code = httpapi.CodeInvalidRequest
		}
		httpapi.Abort(c, s.log, httpapi.Errorf(code, "%v", err))
		return
	}
	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	st, err := s.open(ctx, t, room, start)
	if err != nil {
		httpapi.Abort(c, s.log, err)
		return
	}
	defer st.close()
	s.metrics.subscribers.WithLabelValues("sse").Inc()
	defer s.metrics.subscribers.WithLabelValues("sse").Dec()

	w := c.Writer
	rc := http.NewResponseController(w)
	// The server's read timeout would end a long stream: lift it.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// Everything is written from this goroutine (events, heartbeats): no
	// write can outlive the handler, whose writer gin reuses afterwards.
	var buf []byte
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := write([]byte("retry: " + strconv.FormatInt(s.cfg.RetryHint.Milliseconds(), 10) + "\n: msgmesh\n\n")); err != nil {
		return
	}
	// Heartbeats, from the stream's goroutine; and the credential is
	// re-checked (a revoked key or an expired token ends the stream: the
	// reconnect gets its 401).
	cred := credential(c)
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	if !p.ExpiresAt.IsZero() {
		expiry := time.AfterFunc(p.ExpiresAt.Sub(s.now()), cancel)
		defer expiry.Stop()
	}
	st.beat = tick.C
	st.onBeat = func() error {
		if _, err := s.authenticate(cred); err != nil {
			return err
		}
		return write(heartbeat)
	}
	sent, slow := s.metrics.sent.WithLabelValues("sse"), s.metrics.slow.WithLabelValues("disconnect")
	emit := func(ev event) error {
		buf = buf[:0]
		if ev.resync != "" {
			buf = append(buf, "event: "+EventResync+"\nid: "...)
			buf = ev.pos.Append(buf)
			buf = append(buf, `
data: {"reason":"`...)
			buf = append(buf, ev.resync...)
			buf = append(buf, `","position":"`...)
			buf = ev.pos.Append(buf)
			buf = append(buf, "\"}\n\n"...)
		} else {
			buf = append(buf, "id: "...)
			buf = ev.pos.Append(buf)
			buf = append(buf, '\n')
			buf = appendData(buf, ev.msg)
			buf = append(buf, '\n')
		}
		if err := write(buf); err != nil {
			slow.Inc()
			return err
		}
		if ev.resync == "" {
			sent.Inc()
		}
		return nil
	}
	err = st.run(ctx, emit, nil)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errShutdown) && !errors.Is(err, errTopicDeleted) {
		s.log.Debug("realtime: sse stream ended", "topic", t.Name, "err", err)
	}
}

var heartbeat = []byte(": heartbeat\n\n")

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
