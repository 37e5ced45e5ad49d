package integration

// Helpers of the realtime tests: an SSE client on tmaxmax/go-sse's parser,
// a WebSocket client on gorilla/websocket, and publishing numbered
// messages.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"
	sse "github.com/tmaxmax/go-sse"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/proto/ws"
)

var frameSchema = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ws.FramesSchema))
	if err != nil {
		panic(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("frames.schema.json", doc); err != nil {
		panic(err)
	}
	return c.MustCompile("frames.schema.json")
}()

// checkFrame validates a server frame against proto/ws/frames.schema.json.
func checkFrame(t testing.TB, data []byte) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err == nil {
		err = frameSchema.Validate(v)
	}
	if err != nil {
		t.Errorf("frame %.300s does not match frames.schema.json: %v", data, err)
	}
}

// rtMsg is the data of an SSE message event (the poll message shape).
type rtMsg struct {
	h.Msg
	// ID is the SSE event id (the position after this message).
	ID string `json:"-"`
}

// sseEvent is one parsed SSE event.
type sseEvent struct {
	Type, ID, Data string
}

// sseStream is an open SSE response read by go-sse's parser.
type sseStream struct {
	Resp   *http.Response
	events chan sseEvent
	done   chan error
	cancel context.CancelFunc
	// LastID is the id of the last event received.
	LastID string
}

// openSSE GETs /v1/topics/{topic}/events?query with key as a bearer (or
// none if empty) and Last-Event-ID (if set). It returns the response
// when it is not 200 (body read, stream nil).
func openSSE(t testing.TB, base, key, topic string, query url.Values, lastEventID string) (*sseStream, h.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := base + "/v1/topics/" + topic + "/events"
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return nil, h.Response{Status: resp.StatusCode, Header: resp.Header, Body: []byte(b.String())}
	}
	s := &sseStream{Resp: resp, events: make(chan sseEvent, 100000), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer close(s.events)
		for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 4 << 20}) {
			if err != nil {
				s.done <- err
				return
			}
			s.events <- sseEvent{Type: ev.Type, ID: ev.LastEventID, Data: ev.Data}
		}
		s.done <- nil
	}()
	t.Cleanup(s.Close)
	return s, h.Response{Status: resp.StatusCode, Header: resp.Header}
}

// mustSSE is openSSE failing unless 200.
func mustSSE(t testing.TB, base, key, topic string, query url.Values, lastEventID string) *sseStream {
	t.Helper()
	s, r := openSSE(t, base, key, topic, query, lastEventID)
	if s == nil {
		t.Fatalf("SSE %s: status %d, want 200: %s", topic, r.Status, r.Body)
	}
	return s
}

// Close ends the stream (client side).
func (s *sseStream) Close() {
	s.cancel()
	_ = s.Resp.Body.Close()
}

// Next returns the next event that is not id-only (recording the id of
// every event, as a browser does), or ok=false when the stream ended or
// timeout passed.
func (s *sseStream) Next(timeout time.Duration) (sseEvent, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if ok && ev.ID != "" {
				s.LastID = ev.ID
			}
			if ok && ev.idOnly() {
				continue
			}
			return ev, ok
		case <-deadline:
			return sseEvent{}, false
		}
	}
}

// NextAny is Next returning id-only events too.
func (s *sseStream) NextAny(timeout time.Duration) (sseEvent, bool) {
	select {
	case ev, ok := <-s.events:
		if ok && ev.ID != "" {
			s.LastID = ev.ID
		}
		return ev, ok
	case <-time.After(timeout):
		return sseEvent{}, false
	}
}

// idOnly reports an event with an id and nothing else (a browser records
// the id and dispatches nothing).
func (ev sseEvent) idOnly() bool { return ev.Type == "" && ev.Data == "" }

// Ended reports whether the server ended the stream within timeout.
func (s *sseStream) Ended(timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// message decodes a message event, failing on any other.
func (ev sseEvent) message(t testing.TB) rtMsg {
	t.Helper()
	if ev.Type != "" {
		t.Fatalf("got event %q (data %s), want a message", ev.Type, ev.Data)
	}
	var m rtMsg
	if err := json.Unmarshal([]byte(ev.Data), &m.Msg); err != nil {
		t.Fatalf("message data %q: %v", ev.Data, err)
	}
	m.ID = ev.ID
	return m
}

// Messages reads n message events (failing on a resync or a timeout).
func (s *sseStream) Messages(t testing.TB, n int, timeout time.Duration) []rtMsg {
	t.Helper()
	out := make([]rtMsg, 0, n)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		ev, ok := s.Next(time.Until(deadline))
		if !ok {
			t.Fatalf("got %d of %d messages within %v", len(out), n, timeout)
		}
		out = append(out, ev.message(t))
	}
	return out
}

// seqOf is the "seq" of a numbered message.
func seqOf(t testing.TB, m h.Msg) int {
	t.Helper()
	var d struct {
		Seq *int `json:"seq"`
	}
	if err := json.Unmarshal(m.Data, &d); err != nil || d.Seq == nil {
		t.Fatalf("message %s data %s has no seq", m.Cursor, m.Data)
	}
	return *d.Seq
}

// padSeq, when set, is added to each publishSeq message as "pad".
var padSeq string

// publishSeq publishes messages seq from..to-1 ({"seq":i}) in batches of
// up to 100; rooms[i%len(rooms)] is each one's room ("" none). It returns
// their cursors by seq.
func publishSeq(t testing.TB, base, key, topic string, from, to int, rooms ...string) map[int]cursor.Cursor {
	t.Helper()
	out := map[int]cursor.Cursor{}
	for lo := from; lo < to; lo += 100 {
		hi := min(lo+100, to)
		var msgs []map[string]any
		for i := lo; i < hi; i++ {
			d := map[string]any{"seq": i}
			if padSeq != "" {
				d["pad"] = padSeq
			}
			m := map[string]any{"data": d}
			if len(rooms) > 0 && rooms[i%len(rooms)] != "" {
				m["room"] = rooms[i%len(rooms)]
			}
			msgs = append(msgs, m)
		}
		r := h.Must(t, base, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"messages": msgs}, http.StatusOK)
		var ans struct {
			Cursors []string `json:"cursors"`
		}
		if err := json.Unmarshal(r.Body, &ans); err != nil || len(ans.Cursors) != hi-lo {
			t.Fatalf("publish answer %s", r.Body)
		}
		for i, c := range ans.Cursors {
			cu, err := cursor.Parse(c)
			if err != nil {
				t.Fatal(err)
			}
			out[lo+i] = cu
		}
	}
	return out
}

// wsClient is a WebSocket connection to /v1/ws.
type wsClient struct {
	Conn   *websocket.Conn
	frames chan map[string]any
	raw    chan []byte
	closed chan error
}

// dialWS opens /v1/ws with a bearer key/token (or ?token= when
// queryToken). It returns the handshake response on failure.
func dialWS(t testing.TB, base, cred string, queryToken bool) (*wsClient, *http.Response, error) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
	hdr := http.Header{}
	if queryToken {
		u += "?token=" + url.QueryEscape(cred)
	} else if cred != "" {
		hdr.Set("Authorization", "Bearer "+cred)
	}
	conn, resp, err := websocket.DefaultDialer.Dial(u, hdr)
	if err != nil {
		return nil, resp, err
	}
	c := &wsClient{Conn: conn, frames: make(chan map[string]any, 100000), closed: make(chan error, 1)}
	go func() {
		defer close(c.frames)
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				c.closed <- err
				return
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				c.closed <- fmt.Errorf("frame %q is not JSON: %v", data, err)
				return
			}
			checkFrame(t, data)
			c.frames <- m
		}
	}()
	t.Cleanup(func() { _ = conn.Close() })
	return c, resp, nil
}

// rawWS dials /v1/ws with a bearer credential and reads nothing: the
// test reads (or does not) with readFrame, so the server sees real
// backpressure.
func rawWS(t testing.TB, base, cred string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
	conn, _, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + cred}})
	if err != nil {
		t.Fatalf("dial /v1/ws: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readFrame reads one frame from conn within timeout.
func readFrame(t testing.TB, conn *websocket.Conn, timeout time.Duration) map[string]any {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	checkFrame(t, data)
	return m
}

func mustWS(t testing.TB, base, cred string) *wsClient {
	t.Helper()
	c, resp, err := dialWS(t, base, cred, false)
	if err != nil {
		st := 0
		if resp != nil {
			st = resp.StatusCode
		}
		t.Fatalf("dial /v1/ws: %v (status %d)", err, st)
	}
	return c
}

func (c *wsClient) send(t testing.TB, frame map[string]any) {
	t.Helper()
	if err := c.Conn.WriteJSON(frame); err != nil {
		t.Fatalf("send %v: %v", frame, err)
	}
}

// next returns the next frame, or nil after timeout or at close.
func (c *wsClient) next(timeout time.Duration) map[string]any {
	select {
	case f := <-c.frames:
		return f
	case <-time.After(timeout):
		return nil
	}
}

// await returns the first frame of type typ (and subscription id, if
// set), failing after timeout; other frames are passed to skip (nil:
// dropped).
func (c *wsClient) await(t testing.TB, typ, id string, timeout time.Duration, skip func(map[string]any)) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f := c.next(time.Until(deadline))
		if f == nil {
			t.Fatalf("no %q frame (id %q) within %v", typ, id, timeout)
		}
		if f["type"] == typ && (id == "" || f["id"] == id) {
			return f
		}
		if skip != nil {
			skip(f)
		}
	}
}

// closeCode waits for the connection to close and returns its close code.
func (c *wsClient) closeCode(t testing.TB, timeout time.Duration) int {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-c.frames:
			if ok {
				continue
			}
			err := <-c.closed
			if ce, ok := err.(*websocket.CloseError); ok {
				return ce.Code
			}
			t.Fatalf("connection ended without a close frame: %v", err)
		case <-deadline:
			t.Fatalf("connection not closed within %v", timeout)
		}
	}
}

// wsMessage decodes a message frame's message.
func wsMessage(t testing.TB, f map[string]any) h.Msg {
	t.Helper()
	raw, _ := json.Marshal(f["message"])
	var m h.Msg
	if err := json.Unmarshal(raw, &m); err != nil || m.Cursor == "" {
		t.Fatalf("message frame %v: %v", f, err)
	}
	return m
}
