package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/tracing"
	protows "github.com/msgmesh/msgmesh/proto/ws"
)

// WebSocket close codes (proto/ws/frames.schema.json documents them).
const (
	// CloseShutdown: the node is shutting down; reconnect (to any node)
	// and resubscribe with each subscription's last position.
	CloseShutdown = protows.CloseShutdown // 1001
	// CloseBadFrame: a frame was not JSON text; fix the client.
	CloseBadFrame = protows.CloseBadFrame
	// CloseAuthExpired: the token expired without a refresh; fetch a new
	// token, reconnect and resubscribe from the last positions.
	CloseAuthExpired = protows.CloseAuthExpired
	// CloseAuthRevoked: the credential was revoked or the tenant
	// suspended; obtain a new credential.
	CloseAuthRevoked = protows.CloseAuthRevoked
	// CloseSlowConsumer: the client did not read for
	// realtime.write_timeout; reconnect and resume from the last positions.
	CloseSlowConsumer = protows.CloseSlowConsumer
)

// Client frames are read at most wsFrameRate a second after a burst of
// wsFrameBurst: a faster client is read more slowly (TCP backpressure),
// never disconnected, and its frames never take room from deliveries.
const (
	wsFrameRate  = 100
	wsFrameBurst = 500
)

// clientFrame is any frame a client sends.
type clientFrame struct {
	Type   string  `json:"type"`
	ID     string  `json:"id"`
	Topic  string  `json:"topic"`
	Room   *string `json:"room"`
	Cursor string  `json:"cursor"`
	From   string  `json:"from"`
	Token  string  `json:"token"`
	Epoch  string  `json:"epoch"`
}

// wsConn is one WebSocket connection: several subscriptions, each with its
// own bounded frame queue, written round-robin by one writer so that one
// subscription's flood never starves another.
type wsConn struct {
	s    *Service
	conn *websocket.Conn
	ctx  context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	principal auth.Principal
	cred      string
	subs      map[string]*wsSub
	order     []*wsSub // round-robin order; replaced, never changed in place
	authMoved chan struct{}

	ctrl   chan []byte   // control frames (subscribed, error, pong...)
	notify chan struct{} // a queue has frames
	// catchups caps the subscriptions of this connection reading Kafka
	// directly at once, so that a few connections cannot hold every one
	// of the node's realtime.max_catchups slots.
	catchups chan struct{}

	// wmu is held while a data frame is written: by the writer (its
	// flush, token-expiring, the closed frame) or by a subscription
	// writing its frame directly (enqueue); gorilla/websocket takes one
	// writer at a time (WriteControl aside).
	wmu sync.Mutex

	closeOnce sync.Once
	closeCode int
	closeText string
	// closeReason, if set, is sent in a closed frame before the close.
	closeReason, closeError string
	wg                      sync.WaitGroup
}

type wsSub struct {
	id     string
	topic  string
	room   *string
	q      chan []byte
	cancel context.CancelFunc
}

// wsConnCatchups is how many subscriptions of one WebSocket may catch up
// from Kafka at once; the others wait their turn (at most
// realtime.write_timeout, then unsubscribed reason error: resubscribe from
// the last position).
const wsConnCatchups = 2

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 16 << 10}

// ws serves GET /v1/ws.
func (s *Service) ws(c *gin.Context) {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		httpapi.Abort(c, s.log, httpapi.Errorf(httpapi.CodeInvalidRequest, "GET /v1/ws expects a WebSocket upgrade"))
		return
	}
	if s.ctx.Err() != nil {
		httpapi.Abort(c, s.log, httpapi.Errorf(httpapi.CodeShuttingDown, "the node is shutting down; reconnect (to another node)"))
		return
	}
	up := upgrader
	up.CheckOrigin = s.checkOrigin
	up.Error = func(w http.ResponseWriter, r *http.Request, status int, reason error) {
		httpapi.Abort(c, s.log, httpapi.Errorf(httpapi.CodeInvalidRequest, "WebSocket handshake: %v", reason))
	}
	conn, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	ctx, stop := context.WithCancel(s.ctx)
	wc := &wsConn{s: s, conn: conn, ctx: ctx, stop: stop, principal: auth.PrincipalOf(c), cred: auth.CredentialOf(c),
		subs: map[string]*wsSub{}, authMoved: make(chan struct{}, 1),
		ctrl: make(chan []byte, 64), notify: make(chan struct{}, 1), catchups: make(chan struct{}, wsConnCatchups)}
	wc.serve()
}

func (s *Service) checkOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || len(s.origins) == 0 || slices.Contains(s.origins, "*") {
		return true
	}
	if slices.Contains(s.origins, o) {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// serve runs the connection until it closes.
func (wc *wsConn) serve() {
	s := wc.s
	wc.conn.SetReadLimit(64 << 10)
	wait := 2*s.cfg.Heartbeat + 5*time.Second
	_ = wc.conn.SetReadDeadline(time.Now().Add(wait))
	wc.conn.SetPongHandler(func(string) error { return wc.conn.SetReadDeadline(time.Now().Add(wait)) })
	wc.wg.Add(1)
	go wc.writer()
	frames := rate.NewLimiter(wsFrameRate, wsFrameBurst)
	for {
		mt, data, err := wc.conn.ReadMessage()
		if err != nil {
			wc.closeWith(websocket.CloseNormalClosure, "", "", "")
			break
		}
		if mt != websocket.TextMessage {
			wc.closeWith(CloseBadFrame, "frames are JSON text", protows.ReasonInvalidFrame, "frames are JSON text")
			break
		}
		if frames.Wait(wc.ctx) != nil {
			break
		}
		_ = wc.conn.SetReadDeadline(time.Now().Add(wait))
		wc.frame(data)
	}
	wc.stop()
	wc.mu.Lock()
	for _, sub := range wc.subs {
		sub.cancel()
	}
	wc.mu.Unlock()
	wc.wg.Wait()
	_ = wc.conn.Close()
}

// frame handles one text frame of the client: a JSON object (clientFrame)
// or an error frame back.
func (wc *wsConn) frame(data []byte) {
	var f clientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		wc.sendError("", httpapi.CodeInvalidRequest, "frame is not a JSON object: "+err.Error())
		return
	}
	wc.handle(f)
}

func (wc *wsConn) handle(f clientFrame) {
	switch f.Type {
	case "ping":
		wc.control(map[string]any{"type": "pong"})
	case "subscribe":
		wc.subscribe(f)
	case "unsubscribe":
		wc.mu.Lock()
		sub := wc.subs[f.ID]
		wc.mu.Unlock()
		if sub == nil {
			wc.sendError(f.ID, httpapi.CodeInvalidRequest, "no subscription with this id")
			return
		}
		wc.endSub(sub)
	case "refresh":
		wc.refresh(f.Token)
	default:
		wc.sendError(f.ID, httpapi.CodeInvalidRequest, "unknown frame type (want subscribe, unsubscribe, refresh or ping)")
	}
}

func (wc *wsConn) subscribe(f clientFrame) {
	s := wc.s
	if f.ID == "" || len(f.ID) > 128 {
		wc.sendError(f.ID, httpapi.CodeInvalidRequest, "subscribe needs an id of 1-128 characters")
		return
	}
	wc.mu.Lock()
	p := wc.principal
	_, dup := wc.subs[f.ID]
	count := len(wc.subs)
	wc.mu.Unlock()
	if dup {
		wc.sendError(f.ID, httpapi.CodeConflict, "a subscription with this id exists on this connection")
		return
	}
	if count >= s.cfg.WSMaxSubscriptions {
		wc.sendError(f.ID, httpapi.CodeTooManySubs, "this connection holds its maximum number of subscriptions")
		return
	}
	t, err := s.subscribeTarget(p, f.Topic, f.Room)
	if err != nil {
		wc.sendErr(f.ID, err)
		return
	}
	start, err := ParseStart("", f.Cursor, f.From)
	if err == nil {
		start.Epoch, err = ParseEpoch(f.Epoch)
	}
	if err != nil {
		code := httpapi.CodeInvalidCursor
		if strings.HasPrefix(err.Error(), "from ") {
			code = httpapi.CodeInvalidRequest
		}
		wc.sendError(f.ID, code, err.Error())
		return
	}
	ctx, cancel := context.WithCancel(wc.ctx)
	sub := &wsSub{id: f.ID, topic: f.Topic, room: f.Room, q: make(chan []byte, s.cfg.WSQueueFrames), cancel: cancel}
	wc.mu.Lock()
	wc.subs[f.ID] = sub
	wc.order = append(slices.Clip(wc.order), sub) // a new array: the writer's snapshot stays
	wc.mu.Unlock()
	wc.wg.Add(1)
	go func() {
		defer wc.wg.Done()
		defer cancel()
		st, err := s.open(ctx, t, f.Room, start)
		if err != nil {
			wc.removeSub(sub)
			wc.sendErr(f.ID, err)
			return
		}
		defer st.close()
		st.connSlots = wc.catchups
		s.metrics.subscribers.WithLabelValues("ws").Inc()
		defer s.metrics.subscribers.WithLabelValues("ws").Dec()
		idJSON, _ := json.Marshal(f.ID)
		sent := s.metrics.sent.WithLabelValues("ws")
		var buf []byte
		joined := func(pos Position) error {
			return wc.enqueue(ctx, sub, frame(`{"type":"subscribed","id":`, idJSON, pos, ""))
		}
		emit := func(ev event) error {
			if ev.resync != "" {
				return wc.enqueue(ctx, sub, frame(`{"type":"resync","id":`, idJSON, ev.pos, ev.resync))
			}
			buf = make([]byte, 0, len(ev.msg)+len(f.ID)+64+len(ev.pos.Next)*8)
			buf = append(buf, `{"type":"message","id":`...)
			buf = append(buf, idJSON...)
			buf = append(buf, `,"position":"`...)
			buf = ev.pos.Append(buf)
			buf = append(buf, `","message":`...)
			buf = append(buf, ev.msg...)
			buf = append(buf, '}')
			if ev.rec != nil && s.tracer.Traced(ev.rec.Headers) {
				// The span covers handing the frame to the connection's
				// writer (its bounded queue).
				_, span, _ := s.tracer.StartDelivery(ctx, ev.rec.Headers, ev.rec.Partition, ev.rec.Offset, tracing.Delivery{Op: tracing.OpWebSocket, Topic: t.Name})
				err := wc.enqueue(ctx, sub, buf)
				tracing.EndDelivery(span, err)
				if err != nil {
					return err
				}
			} else if err := wc.enqueue(ctx, sub, buf); err != nil {
				return err
			}
			sent.Inc()
			return nil
		}
		err = st.run(ctx, emit, joined)
		switch {
		case errors.Is(err, errShutdown), errors.Is(err, context.Canceled):
			// The connection ends (closed frame, 1001) or the client
			// unsubscribed.
		default:
			reason, text := closeReason(err, t.Name)
			if reason == "" {
				reason, text = protows.ReasonError, "the subscription failed; subscribe again from its last position"
				s.log.Debug("realtime: websocket subscription ended", "topic", t.Name, "err", err)
			}
			pos := st.position()
			wc.closeSub(sub, reason, text, &pos)
		}
	}()
}

// frame builds a subscribed or resync frame.
func frame(head string, idJSON []byte, pos Position, reason string) []byte {
	b := append([]byte(head), idJSON...)
	b = append(b, `,"position":"`...)
	b = pos.Append(b)
	b = append(b, '"')
	if reason != "" {
		b = append(b, `,"reason":"`...)
		b = append(b, reason...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// enqueue waits for room in sub's queue: a flooded subscription waits
// alone (its live feed overflows and it catches up from Kafka later).
//
// When nothing waits for the connection's writer (no control frame, no
// queued frame of any subscription) and it is not writing, the frame is
// written at once from the subscription's goroutine instead: one goroutine
// hop less per frame, the same order and fairness (whatever is queued goes
// first, through the writer).
func (wc *wsConn) enqueue(ctx context.Context, sub *wsSub, f []byte) error {
	if len(sub.q) == 0 && wc.wmu.TryLock() {
		if wc.ctx.Err() == nil && ctx.Err() == nil && wc.idleLocked() {
			ok := wc.writeFrame(f)
			wc.wmu.Unlock()
			if !ok {
				return context.Canceled // the connection ends (closeWith)
			}
			return nil
		}
		wc.wmu.Unlock()
	}
	select {
	case sub.q <- f: // room: no wait (and no two-channel select)
	default:
		select {
		case sub.q <- f:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case wc.notify <- struct{}{}:
	default:
	}
	return nil
}

func (wc *wsConn) removeSub(sub *wsSub) bool {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.subs[sub.id] != sub {
		return false
	}
	delete(wc.subs, sub.id)
	wc.order = slices.DeleteFunc(slices.Clone(wc.order), func(x *wsSub) bool { return x == sub })
	return true
}

// endSub stops a subscription the client unsubscribed (answered by
// unsubscribed).
func (wc *wsConn) endSub(sub *wsSub) {
	sub.cancel()
	if !wc.removeSub(sub) {
		return
	}
	wc.control(map[string]any{"type": "unsubscribed", "id": sub.id})
}

// closeSub ends a subscription on the server's side and tells the client
// why: a closed frame with the subscription's id, topic, reason
// (topic_deleted, forbidden, catchup_busy, error...), error text and, when
// known, the position to resubscribe from.
func (wc *wsConn) closeSub(sub *wsSub, reason, text string, pos *Position) {
	sub.cancel()
	if !wc.removeSub(sub) {
		return
	}
	m := map[string]any{"type": protows.TypeClosed, "id": sub.id, "topic": sub.topic, "reason": reason, "error": text}
	if pos != nil {
		m["position"] = pos.String()
	}
	wc.s.metrics.closed.WithLabelValues("ws", reason).Inc()
	wc.control(m)
}

// refresh replaces the connection's credential in place: same tenant;
// subscriptions the new credential may not make end (reason forbidden).
func (wc *wsConn) refresh(tok string) {
	p, err := wc.s.authenticate(tok)
	if err != nil {
		wc.sendErr("", err)
		return
	}
	wc.mu.Lock()
	if p.Tenant != wc.principal.Tenant || p.Operator {
		wc.mu.Unlock()
		wc.sendError("", httpapi.CodeForbidden, "a refresh must be a credential of the same tenant")
		return
	}
	wc.principal, wc.cred = p, tok
	var lost []*wsSub
	for _, sub := range wc.subs {
		r := ""
		if sub.room != nil {
			r = *sub.room
		}
		if !p.Can(capability.OpSubscribe, sub.topic, r) {
			lost = append(lost, sub)
		}
	}
	wc.mu.Unlock()
	for _, sub := range lost {
		wc.closeSub(sub, protows.ReasonForbidden, "the refreshed credential may not subscribe to this topic or room", nil)
	}
	m := map[string]any{"type": "refreshed"}
	if !p.ExpiresAt.IsZero() {
		m["expires_at"] = p.ExpiresAt.UTC().Format(time.RFC3339)
	}
	wc.control(m)
	select {
	case wc.authMoved <- struct{}{}:
	default:
	}
}

func (wc *wsConn) sendErr(id string, err error) {
	e := httpapi.AsError(err)
	if e.Code.Status >= 500 {
		wc.s.log.Warn("realtime: websocket subscription", "err", err)
	}
	wc.sendError(id, e.Code, e.Message)
}

func (wc *wsConn) sendError(id string, code httpapi.Code, msg string) {
	m := map[string]any{"type": "error", "code": code.Code, "error": msg}
	if id != "" {
		m["id"] = id
	}
	wc.control(m)
}

// control queues a control frame, waiting for room in the queue: the
// writer drains it first, and a client that does not read is closed by the
// writer's timeout (4008), which ends the wait. Never called from the
// writer.
func (wc *wsConn) control(m map[string]any) {
	b := marshalFrame(m)
	select {
	case wc.ctrl <- b:
		select {
		case wc.notify <- struct{}{}:
		default:
		}
	case <-wc.ctx.Done():
	}
}

// marshalFrame is m's JSON without HTML escaping (texts quote <...>).
func marshalFrame(m map[string]any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// closeSlow ends a connection whose client does not read (counted once).
func (wc *wsConn) closeSlow() {
	if wc.closeWith(CloseSlowConsumer, "slow consumer", "", "") {
		wc.s.metrics.slow.WithLabelValues("disconnect").Inc()
	}
}

// closeWith ends the connection with code (the first reason wins: it
// reports whether this one did); a reason is first sent in a closed frame
// {"type":"closed","reason":...,"error":...}.
func (wc *wsConn) closeWith(code int, text, reason, errText string) (first bool) {
	wc.closeOnce.Do(func() {
		first = true
		wc.closeCode, wc.closeText = code, text
		wc.closeReason, wc.closeError = reason, errText
		wc.stop()
	})
	return first
}

// writer writes control frames first, then up to a few frames of each
// subscription in turn; it also pings, re-checks the credential and
// watches the token's expiry.
func (wc *wsConn) writer() {
	defer wc.wg.Done()
	s := wc.s
	ping := time.NewTicker(firstBeat(s.cfg.Heartbeat))
	defer ping.Stop()
	rebased := false
	expiring, expired := wc.authTimers()
	defer func() { expiring.Stop(); expired.Stop() }()
	write := wc.writeFrame
	for {
		select {
		case <-wc.ctx.Done():
			// Unless another reason came first.
			wc.closeWith(CloseShutdown, "server shutting down", ReasonShutdown, "the node is shutting down; reconnect (to any node) and resubscribe from each subscription's last position")
			code, text := wc.closeCode, wc.closeText
			if code != websocket.CloseAbnormalClosure {
				if wc.closeReason != "" {
					s.metrics.closed.WithLabelValues("ws", wc.closeReason).Inc()
					wc.wmu.Lock()
					_ = wc.conn.SetWriteDeadline(time.Now().Add(time.Second))
					_ = wc.conn.WriteMessage(websocket.TextMessage, marshalFrame(map[string]any{"type": protows.TypeClosed, "reason": wc.closeReason, "error": wc.closeError}))
					wc.wmu.Unlock()
				}
				_ = wc.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
			}
			// Unblock the reader.
			_ = wc.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			return
		case <-ping.C:
			if !rebased {
				ping.Reset(s.cfg.Heartbeat)
				rebased = true
			}
			if _, err := s.authenticate(wc.currentCred()); err != nil {
				e := httpapi.AsError(err)
				if e.Code == httpapi.CodeTokenExpired {
					wc.closeWith(CloseAuthExpired, "token expired", ReasonTokenExpired, "the token expired; reconnect with a fresh token and resubscribe from the last positions")
				} else {
					wc.closeWith(CloseAuthRevoked, e.Code.Code, e.Code.Code, e.Message)
				}
				continue
			}
			_ = wc.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.cfg.WriteTimeout))
		case <-expiring.C:
			wc.mu.Lock()
			exp := wc.principal.ExpiresAt
			wc.mu.Unlock()
			// Written here: the writer never waits on its own queue.
			wc.wmu.Lock()
			ok := write(marshalFrame(map[string]any{"type": "token-expiring", "expires_at": exp.UTC().Format(time.RFC3339)}))
			wc.wmu.Unlock()
			if !ok {
				continue
			}
		case <-expired.C:
			wc.closeWith(CloseAuthExpired, "token expired", ReasonTokenExpired, "the token expired; reconnect with a fresh token and resubscribe from the last positions")
		case <-wc.authMoved:
			expiring.Stop()
			expired.Stop()
			expiring, expired = wc.authTimers()
		case <-wc.notify:
			// A failed write ends the connection (closeWith): stop
			// writing at once, and let the loop above close it.
			wc.flush(write)
		}
	}
}

// flush writes control frames first, then up to 8 frames of each
// subscription in turn, until the queues are empty, the connection ends or
// a write fails.
func (wc *wsConn) flush(write func([]byte) bool) {
	wc.wmu.Lock()
	defer wc.wmu.Unlock()
	for progress := true; progress && wc.ctx.Err() == nil; {
		progress = false
	ctrl:
		for {
			select {
			case b := <-wc.ctrl:
				if !write(b) {
					return
				}
				progress = true
			default:
				break ctrl
			}
		}
		wc.mu.Lock()
		order := wc.order // never changed in place (subscribe, removeSub)
		wc.mu.Unlock()
		for _, sub := range order {
			for range 8 {
				var b []byte
				select {
				case b = <-sub.q:
				default:
				}
				if b == nil {
					break
				}
				if !write(b) {
					return
				}
				progress = true
			}
		}
	}
}

// writeFrame writes one text frame (wmu held); a failed write ends the
// connection: a timeout as a slow consumer (4008), else abnormally.
func (wc *wsConn) writeFrame(b []byte) bool {
	_ = wc.conn.SetWriteDeadline(time.Now().Add(wc.s.cfg.WriteTimeout))
	if err := wc.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
			wc.closeSlow()
		} else {
			wc.closeWith(websocket.CloseAbnormalClosure, "", "", "")
		}
		return false
	}
	return true
}

// idleLocked reports whether nothing waits for the writer: no control
// frame and no subscription's frame (wmu held).
func (wc *wsConn) idleLocked() bool {
	if len(wc.ctrl) > 0 {
		return false
	}
	wc.mu.Lock()
	order := wc.order
	wc.mu.Unlock()
	for _, sub := range order {
		if len(sub.q) > 0 {
			return false
		}
	}
	return true
}

func (wc *wsConn) currentCred() string {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	return wc.cred
}

// authTimers fire token-expiring (realtime.token_expiring_lead before, or
// half-way for short tokens) and at expiry; never for keys.
func (wc *wsConn) authTimers() (expiring, expired *time.Timer) {
	wc.mu.Lock()
	exp := wc.principal.ExpiresAt
	wc.mu.Unlock()
	if exp.IsZero() {
		t1, t2 := time.NewTimer(time.Hour), time.NewTimer(time.Hour)
		t1.Stop()
		t2.Stop()
		return t1, t2
	}
	left := exp.Sub(wc.s.now())
	lead := wc.s.cfg.TokenExpiringLead
	if lead > left/2 {
		lead = left / 2
	}
	return time.NewTimer(left - lead), time.NewTimer(left)
}
