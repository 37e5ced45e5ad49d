package msgmesh

// Unit tests against httptest servers that speak the wire format of
// proto/openapi.yaml and /work's CONTRACT (poll batch/ack, headers list,
// id-only SSE events, msgmesh-closed). The integration tests in
// integration/mcp_test.go run the client against a real msgmesh.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestClient(t *testing.T, h http.HandlerFunc, o Options) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	if o.APIKey == "" && o.GetToken == nil {
		o.APIKey = "mm_test"
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a credential: no error")
	}
	if _, err := New(Options{APIKey: "k", URL: "ftp://x"}); err == nil {
		t.Fatal("New with an ftp URL: no error")
	}
}

func TestErrorsByStatusAndCode(t *testing.T) {
	cases := []struct {
		status int
		kind   error
	}{
		{400, ErrInvalidRequest}, {422, ErrInvalidRequest}, {401, ErrUnauthorized}, {403, ErrForbidden},
		{404, ErrNotFound}, {409, ErrConflict}, {413, ErrPayloadTooLarge}, {429, ErrRateLimited}, {503, ErrServer},
	}
	for _, tc := range cases {
		c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "rid-1")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(tc.status)
			fmt.Fprintf(w, `{"error":"nope %d","code":"code_%d"}`, tc.status, tc.status)
		}, Options{})
		_, err := c.GetTopic(context.Background(), "t")
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, tc.kind) {
			t.Fatalf("%d: %v, want %v", tc.status, err, tc.kind)
		}
		if e.Status != tc.status || e.Code != fmt.Sprintf("code_%d", tc.status) || e.Message != fmt.Sprintf("nope %d", tc.status) ||
			e.RequestID != "rid-1" || e.RetryAfter != 3*time.Second {
			t.Fatalf("%d: %+v", tc.status, e)
		}
		for _, other := range []error{ErrInvalidRequest, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrConflict, ErrPayloadTooLarge, ErrRateLimited, ErrServer} {
			if other != tc.kind && errors.Is(err, other) {
				t.Fatalf("%d also matches %v", tc.status, other)
			}
		}
	}
}

// Poll sends the previous batch as ack, per (topic, group, consumer);
// an empty answer or a server without batches sends none.
func TestPollAcksThePreviousBatch(t *testing.T) {
	var mu sync.Mutex
	var acks []string
	n := 0
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ack, _ := body["ack"].(string)
		acks = append(acks, r.URL.Path+" "+fmt.Sprint(body["group"])+" ack="+ack)
		n++
		k := n
		mu.Unlock()
		switch {
		case strings.Contains(r.URL.Path, "/old/"):
			fmt.Fprint(w, `{"messages":[{"cursor":"0-1","room":null,"data":1,"headers":{"a":"1","b":"2"},"published_at":"2026-12-01T10:00:00Z"}]}`)
		case k == 3:
			fmt.Fprint(w, `{"messages":[]}`)
		default:
			fmt.Fprintf(w, `{"messages":[{"cursor":"1-%d","room":"r","data":{"k":%d},"headers":[{"key":"h","value":"v"},{"key":"h","value_base64":"/w=="}],"published_at":"2026-12-01T10:00:00Z"}],"batch":"b%d"}`, k, k, k)
		}
	}, Options{})
	ctx := context.Background()
	r1, err := c.Poll(ctx, "orders", PollOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	m := r1.Messages[0]
	if r1.Batch != "b1" || m.Partition != 1 || m.Offset != 1 || m.RoomName() != "r" || string(m.Data) != `{"k":1}` {
		t.Fatalf("first poll: %+v", r1)
	}
	if len(m.Headers) != 2 || m.Headers.Get("h") != "v" || string(m.Headers[1].Bytes()) != "\xff" {
		t.Fatalf("headers %+v", m.Headers)
	}
	if _, err := c.Poll(ctx, "orders", PollOptions{Group: "other"}); err != nil { // batch b2 of another group
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx, "orders", PollOptions{Group: "g"}); err != nil { // acks b1, gets empty
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx, "orders", PollOptions{Group: "g"}); err != nil { // nothing to ack
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx, "orders", PollOptions{Group: "g", Ack: "explicit"}); err != nil {
		t.Fatal(err)
	}
	old, err := c.Poll(ctx, "old", PollOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx, "old", PollOptions{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if old.Batch != "" || old.Messages[0].Headers.Get("b") != "2" || old.Messages[0].Headers[0].Key != "a" {
		t.Fatalf("poll of a server without batches: %+v", old)
	}
	want := []string{
		"/v1/topics/orders/poll g ack=", "/v1/topics/orders/poll other ack=", "/v1/topics/orders/poll g ack=b1",
		"/v1/topics/orders/poll g ack=", "/v1/topics/orders/poll g ack=explicit",
		"/v1/topics/old/poll g ack=", "/v1/topics/old/poll g ack=",
	}
	if fmt.Sprint(acks) != fmt.Sprint(want) {
		t.Fatalf("polls\n%v\nwant\n%v", acks, want)
	}
}

// sseServer serves scripted streams: conns[i] is the i-th connection's
// body (written then the stream ends), and the requests are recorded.
type sseServer struct {
	mu    sync.Mutex
	conns []string
	reqs  []*http.Request
}

func (s *sseServer) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, r)
	body := ""
	if i < len(s.conns) {
		body = s.conns[i]
	}
	s.mu.Unlock()
	if strings.HasPrefix(body, "status ") {
		// "status 503", or "status 403 tenant_suspended" with its code
		var code int
		var name string
		fmt.Sscanf(body, "status %d %s", &code, &name)
		if name == "" {
			name = fmt.Sprintf("c%d", code)
		}
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"scripted","code":%q}`, name)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	if body == "" {
		<-r.Context().Done() // an idle stream
		return
	}
	_, _ = io.WriteString(w, body)
}

func (s *sseServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

const msgFmt = `data: {"cursor":"%s","room":null,"data":{"n":%d},"headers":[],"published_at":"2026-12-01T10:00:00Z"}` + "\n"

// Id-only events move the position without a message; a reconnect
// resumes with Last-Event-ID and drops the boundary duplicate.
func TestSubscribeIDOnlyEventsResumeAndDedupe(t *testing.T) {
	s := &sseServer{conns: []string{
		"retry: 1000\n: hello\n\nid: ep.5-0\n\nid: ep.6-0\n" + fmt.Sprintf(msgFmt, "0-5", 5) + "\n",
		"id: ep.6-0\n" + fmt.Sprintf(msgFmt, "0-5", 5) + "\nid: ep.7-0\n" + fmt.Sprintf(msgFmt, "0-6", 6) + "\nid: ep.7-3\n\n",
	}}
	c := newTestClient(t, s.handle, Options{Reconnect: Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}})
	var mu sync.Mutex
	var got, positions []string
	var states []State
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{
		From:          "earliest",
		OnMessage:     func(m Message) { mu.Lock(); got = append(got, m.Cursor); mu.Unlock() },
		OnPosition:    func(p string) { mu.Lock(); positions = append(positions, p); mu.Unlock() },
		OnStateChange: func(st State) { mu.Lock(); states = append(states, st); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for sub.Position() != "ep.7-3" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	sub.Close()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[0-5 0-6]" {
		t.Fatalf("messages %v, want [0-5 0-6] (the boundary duplicate dropped)", got)
	}
	if fmt.Sprint(positions) != "[ep.5-0 ep.6-0 ep.7-0 ep.7-3]" {
		t.Fatalf("positions %v", positions)
	}
	reqs := s.requests()
	if reqs[0].URL.Query().Get("from") != "earliest" || reqs[0].Header.Get("Last-Event-ID") != "" ||
		reqs[0].Header.Get("Authorization") != "Bearer mm_test" {
		t.Fatalf("first request %v %v", reqs[0].URL, reqs[0].Header)
	}
	if reqs[1].Header.Get("Last-Event-ID") != "ep.6-0" {
		t.Fatalf("reconnect Last-Event-ID %q, want ep.6-0", reqs[1].Header.Get("Last-Event-ID"))
	}
	if states[0] != StateConnecting || states[1] != StateLive || states[2] != StateReconnecting || states[len(states)-1] != StateClosed {
		t.Fatalf("states %v", states)
	}
}

// A cursor to resume from seeds the dedupe: the boundary record a resume
// may send again is not delivered twice.
func TestSubscribeCursorSeedsDedupe(t *testing.T) {
	s := &sseServer{conns: []string{
		"id: ep.6-2\n" + fmt.Sprintf(msgFmt, "0-5", 5) + "\nid: ep.6-3\n" + fmt.Sprintf(msgFmt, "1-2", 12) + "\n",
	}}
	c := newTestClient(t, s.handle, Options{})
	got := make(chan string, 10)
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{Cursor: "ep.6-2", OnMessage: func(m Message) { got <- m.Cursor }})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if m := <-got; m != "1-2" {
		t.Fatalf("first delivered %s, want 1-2 (0-5 is before the cursor ep.6-2)", m)
	}
	if id := s.requests()[0].Header.Get("Last-Event-ID"); id != "ep.6-2" {
		t.Fatalf("resume from a position: Last-Event-ID %q, want ep.6-2", id)
	}
}

func TestSubscribeResyncAndClosed(t *testing.T) {
	s := &sseServer{conns: []string{
		"event: msgmesh-resync\nid: ep.90\ndata: {\"reason\":\"window_records\",\"position\":\"ep.90\"}\n\n" +
			"event: msgmesh-closed\ndata: {\"reason\":\"topic_deleted\",\"error\":\"topic gone\"}\n\n",
	}}
	c := newTestClient(t, s.handle, Options{})
	resync := make(chan Resync, 1)
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{OnResync: func(r Resync) { resync <- r }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("topic_deleted did not end the subscription")
	}
	if r := <-resync; r.Reason != "window_records" || r.Position != "ep.90" {
		t.Fatalf("resync %+v", r)
	}
	var e *Error
	if sub.State() != StateFailed || !errors.Is(sub.Err(), ErrNotFound) || !errors.As(sub.Err(), &e) || e.Code != "topic_deleted" || sub.Position() != "ep.90" {
		t.Fatalf("state %s err %v position %s, want failed with ErrNotFound code topic_deleted (as the JS and Python SDKs)", sub.State(), sub.Err(), sub.Position())
	}
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d connections after topic_deleted, want 1 (terminal)", n)
	}
}

// token_expired: a new token from GetToken, then a reconnect from the
// position; shutdown: a reconnect with backoff.
func TestSubscribeTokenExpiredAndShutdown(t *testing.T) {
	s := &sseServer{conns: []string{
		"id: ep.1\n\nevent: msgmesh-closed\ndata: {\"reason\":\"token_expired\",\"error\":\"expired\"}\n\n",
		"id: ep.2\n\nevent: msgmesh-closed\ndata: {\"reason\":\"shutdown\",\"error\":\"bye\"}\n\n",
		"status 503",
		"id: ep.3\n\n",
	}}
	var mu sync.Mutex
	n := 0
	c := newTestClient(t, s.handle, Options{
		GetToken: func(context.Context) (string, time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("tok%d", n), time.Now().Add(time.Hour), nil
		},
		Reconnect: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond},
	})
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.requests()) < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	reqs := s.requests()
	if len(reqs) < 4 {
		t.Fatalf("%d connections, want at least 4", len(reqs))
	}
	auth := []string{}
	ids := []string{}
	for _, r := range reqs[:4] {
		auth = append(auth, r.Header.Get("Authorization"))
		ids = append(ids, r.Header.Get("Last-Event-ID"))
	}
	if fmt.Sprint(auth) != "[Bearer tok1 Bearer tok2 Bearer tok2 Bearer tok2]" {
		t.Fatalf("credentials %v: want a new token after token_expired only", auth)
	}
	if fmt.Sprint(ids) != "[ ep.1 ep.2 ep.2]" {
		t.Fatalf("Last-Event-IDs %v", ids)
	}
}

// A running subscription whose tenant is suspended (msgmesh-closed
// tenant_suspended, then 403 tenant_suspended on reconnect) keeps retrying
// with backoff and resumes from its position once reinstated; another 403
// on a reconnect is terminal.
func TestSubscribeRetriesSuspension(t *testing.T) {
	s := &sseServer{conns: []string{
		"id: ep.1\n\nevent: msgmesh-closed\ndata: {\"reason\":\"tenant_suspended\",\"error\":\"suspended\"}\n\n",
		"status 403 tenant_suspended",
		"status 403 tenant_suspended",
		"id: ep.2\n\nevent: msgmesh-closed\ndata: {\"reason\":\"credential_revoked\",\"error\":\"x\"}\n\n",
		"status 403 forbidden",
	}}
	c := newTestClient(t, s.handle, Options{Reconnect: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}})
	var mu sync.Mutex
	var errs []error
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	select {
	case <-sub.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the subscription did not end on the final 403 forbidden; %d connections", len(s.requests()))
	}
	reqs := s.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d connections, want 5 (two suspended refusals retried, then resumed, then a terminal 403)", len(reqs))
	}
	if id := reqs[3].Header.Get("Last-Event-ID"); id != "ep.1" {
		t.Errorf("the reconnect after the suspension lifted sent Last-Event-ID %q, want ep.1", id)
	}
	var e *Error
	if sub.State() != StateFailed || !errors.As(sub.Err(), &e) || e.Code != "forbidden" {
		t.Fatalf("state %s err %v, want failed with the 403 forbidden", sub.State(), sub.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, err := range errs {
		if errors.As(err, &e) && e.Code == "tenant_suspended" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("OnError saw %d tenant_suspended refusals, want 2 (%v)", n, errs)
	}
}

// The first connection's terminal error is Subscribe's.
func TestSubscribeRefusedUpFront(t *testing.T) {
	s := &sseServer{conns: []string{"status 403"}}
	c := newTestClient(t, s.handle, Options{})
	_, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{})
	var e *Error
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &e) || e.Code != "c403" {
		t.Fatalf("Subscribe refused: %v, want ErrForbidden", err)
	}
	if _, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{From: "middle"}); err == nil {
		t.Fatal("From middle: no error")
	}
}

// The n-th retry waits a random time in [0, min(max, min·2ⁿ)]: full
// jitter, growing, capped; a 429's Retry-After is a floor.
func TestBackoffFullJitter(t *testing.T) {
	c, _ := New(Options{APIKey: "k"})
	s := &Subscription{c: c}
	for attempt, ceil := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second} {
		lo, hi := time.Hour, time.Duration(0)
		for range 2000 {
			d := s.delay(attempt, errors.New("network"))
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < 0 || hi > ceil || lo > ceil/10 || hi < ceil*9/10 {
			t.Fatalf("attempt %d: delays in [%v, %v], want spread over [0, %v]", attempt, lo, hi, ceil)
		}
	}
	if d := s.delay(0, &Error{Status: 429, RetryAfter: 3 * time.Second}); d != 3*time.Second {
		t.Fatalf("429 with Retry-After 3s: %v", d)
	}
}

// An idle connection (not even a heartbeat) is dropped and resumed.
func TestSubscribeIdleTimeoutReconnects(t *testing.T) {
	s := &sseServer{conns: []string{"id: ep.1\n\n: heartbeat\n\n", ""}}
	// The first stream ends after its events; make it hang instead.
	s.conns[0] = ""
	c := newTestClient(t, s.handle, Options{Reconnect: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}})
	sub, err := c.Subscribe(context.Background(), "orders", SubscribeOptions{IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.requests()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(s.requests()) < 2 {
		t.Fatal("an idle stream was not dropped and reconnected")
	}
}

func TestPublishBodies(t *testing.T) {
	var bodies []string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.URL.Path+" "+string(b))
		if strings.Contains(string(b), `"messages"`) {
			fmt.Fprint(w, `{"cursors":["0-1","1-1"]}`)
			return
		}
		fmt.Fprint(w, `{"cursor":"0-0"}`)
	}, Options{})
	ctx := context.Background()
	cur, err := c.Publish(ctx, "orders", map[string]int{"n": 1}, &PublishOptions{Room: "r", Headers: HeadersOf("a", "1", "bin", "\xff")})
	if err != nil || cur != "0-0" {
		t.Fatalf("Publish: %v %q", err, cur)
	}
	if _, err := c.Publish(ctx, "orders", 1, &PublishOptions{Headers: HeadersOf("z", "1", "a", "2")}); err != nil {
		t.Fatal(err)
	}
	curs, err := c.PublishBatch(ctx, "orders", []OutgoingMessage{{Data: json.RawMessage(`[1]`)}, {Data: "x", Room: "q"}})
	if err != nil || len(curs) != 2 {
		t.Fatalf("PublishBatch: %v %v", err, curs)
	}
	want := []string{
		`/v1/topics/orders/messages {"data":{"n":1},"headers":[{"key":"a","value":"1"},{"key":"bin","value_base64":"/w=="}],"room":"r"}`,
		`/v1/topics/orders/messages {"data":1,"headers":{"z":"1","a":"2"}}`,
		`/v1/topics/orders/messages {"messages":[{"data":[1]},{"data":"x","room":"q"}]}`,
	}
	if fmt.Sprint(bodies) != fmt.Sprint(want) {
		t.Fatalf("bodies\n%v\nwant\n%v", bodies, want)
	}
}
