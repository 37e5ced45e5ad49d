package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// callerTraceparent is the publisher's own trace context (W3C Trace
// Context): the publish span continues its trace.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// One trace shows publish → Kafka → each delivery: the publish span is a
// child of the caller's traceparent, the record carries the publish span's
// context in its traceparent header, and the poll answer, the SSE event,
// the WebSocket frame and the webhook POST each get a span that is a child
// of the publish span; the webhook receiver gets a traceparent naming the
// POST's span.
func TestTracingPublishToEveryDelivery(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	c := harness.NewCluster(t)
	rc := harness.NewReceiver(t)
	n := c.StartWith(t, harness.WebhookConfig(t, rc, 3, 5*time.Second, 100*time.Millisecond), []app.Option{app.WithTracerProvider(tp)})

	harness.CreateTopic(t, n.URL, c.AdminKey, "traced", 1)
	harness.CreateWebhook(t, n.URL, c.AdminKey, "traced", rc.URLFor("", "/traced"), "")
	sse := mustSSE(t, n.URL, c.AdminKey, "traced", nil, "")
	defer sse.Close()
	if _, ok := sse.NextAny(10 * time.Second); !ok {
		t.Fatal("SSE: no opening id event")
	}
	ws := mustWS(t, n.URL, c.AdminKey)
	if err := ws.Conn.WriteJSON(map[string]any{"type": "subscribe", "id": "s1", "topic": "traced"}); err != nil {
		t.Fatal(err)
	}
	waitFrame(t, ws, "subscribed")

	r, err := harness.RawRequest(http.DefaultClient, "POST", n.URL+"/v1/topics/traced/messages", []byte(`{"data":{"n":1},"headers":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","k":"v"}}`),
		map[string]string{"Authorization": "Bearer " + c.AdminKey, "Content-Type": "application/json", "traceparent": callerTraceparent})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("publish: %v %d %s", err, r.Status, r.Body)
	}

	publish := waitSpan(t, sr, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "publish traced" })
	if publish.SpanKind() != trace.SpanKindProducer || publish.SpanContext().TraceID().String() != callerTraceID || publish.Parent().SpanID().String() != callerSpanID {
		t.Fatalf("publish span %s kind %v trace %s parent %s: want a producer span continuing the caller's trace %s/%s",
			publish.Name(), publish.SpanKind(), publish.SpanContext().TraceID(), publish.Parent().SpanID(), callerTraceID, callerSpanID)
	}
	want := "00-" + callerTraceID + "-" + publish.SpanContext().SpanID().String() + "-01"

	// The record's header (shown to clients like every record header):
	// the publish span's, replacing the one the publisher put in "headers".
	msgs := harness.Poll(t, n.URL, c.AdminKey, "traced", harness.PollReq{Group: "g1", WaitMs: 5000})
	if len(msgs) != 1 {
		t.Fatalf("poll: %d messages, want 1", len(msgs))
	}
	if got := traceparents(msgs[0]); len(got) != 1 || got[0] != want || msgs[0].Header("k") != "v" {
		t.Fatalf("poll message headers %+v: want one traceparent %s and k=v", msgs[0].Headers, want)
	}
	ev, ok := sse.Next(10 * time.Second)
	if !ok || !strings.Contains(ev.Data, want) {
		t.Fatalf("SSE event %+v (ok %v): want the message with traceparent %s", ev, ok, want)
	}
	if f := waitFrame(t, ws, "message"); !strings.Contains(toJSON(t, f), want) {
		t.Fatalf("WebSocket frame %v: want traceparent %s", f, want)
	}
	got := waitDeliveries(t, rc, "/traced", 1, 30*time.Second)

	for _, op := range []string{"poll", "sse", "websocket", "webhook"} {
		s := waitSpan(t, sr, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == op+" traced" })
		if s.SpanContext().TraceID() != publish.SpanContext().TraceID() || s.Parent().SpanID() != publish.SpanContext().SpanID() {
			t.Errorf("%s span: trace %s parent %s, want a child of the publish span %s", op, s.SpanContext().TraceID(), s.Parent().SpanID(), publish.SpanContext().SpanID())
		}
		wantKind := trace.SpanKindConsumer
		if op == "webhook" {
			wantKind = trace.SpanKindClient
			hdr := got[0].Header.Get("traceparent")
			if hdr != "00-"+callerTraceID+"-"+s.SpanContext().SpanID().String()+"-01" {
				t.Errorf("webhook POST traceparent %q: want the webhook span %s of trace %s", hdr, s.SpanContext().SpanID(), callerTraceID)
			}
			if !hasAttr(s, "http.response.status_code", "200") || !hasAttr(s, "msgmesh.webhook.outcome", "delivered") {
				t.Errorf("webhook span attributes %v: want status 200, outcome delivered", s.Attributes())
			}
		}
		if op == "poll" && !hasAttr(s, "messaging.consumer.group.name", "g1") {
			t.Errorf("poll span attributes %v: want the group g1", s.Attributes())
		}
		if s.SpanKind() != wantKind {
			t.Errorf("%s span kind %v, want %v", op, s.SpanKind(), wantKind)
		}
	}
}

// With tracing off (the default) nothing is added: a publisher's own
// traceparent header passes through verbatim and webhooks get none.
func TestTracingOffLeavesHeadersAlone(t *testing.T) {
	c := harness.NewCluster(t)
	rc := harness.NewReceiver(t)
	n := c.Start(t, harness.WebhookConfig(t, rc, 3, 5*time.Second, 100*time.Millisecond))
	harness.CreateTopic(t, n.URL, c.AdminKey, "untraced", 1)
	harness.CreateWebhook(t, n.URL, c.AdminKey, "untraced", rc.URLFor("", "/untraced"), "")
	own := "00-11111111111111111111111111111111-2222222222222222-01"
	r, err := harness.RawRequest(http.DefaultClient, "POST", n.URL+"/v1/topics/untraced/messages", []byte(`{"data":1,"headers":{"traceparent":"`+own+`"}}`),
		map[string]string{"Authorization": "Bearer " + c.AdminKey, "Content-Type": "application/json", "traceparent": callerTraceparent})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("publish: %v %d %s", err, r.Status, r.Body)
	}
	msgs := harness.Poll(t, n.URL, c.AdminKey, "untraced", harness.PollReq{Group: "g1", WaitMs: 5000})
	if len(msgs) != 1 {
		t.Fatalf("poll: %d messages, want 1", len(msgs))
	}
	if got := traceparents(msgs[0]); len(got) != 1 || got[0] != own {
		t.Fatalf("traceparent headers %v, want the publisher's own %s", got, own)
	}
	d := waitDeliveries(t, rc, "/untraced", 1, 30*time.Second)
	if h := d[0].Header.Get("traceparent"); h != "" {
		t.Fatalf("webhook POST has traceparent %q with tracing off", h)
	}
}

// With tracing.enabled the spans reach an OTLP/HTTP collector at
// tracing.otlp_endpoint (its path /v1/traces added), flushed at shutdown
// at the latest.
func TestTracingExportsOverOTLP(t *testing.T) {
	got := make(chan string, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	c := harness.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Tracing = config.Tracing{Enabled: true, OTLPEndpoint: collector.URL, SampleRatio: 1, ServiceName: "msgmesh-test"}
	})
	harness.CreateTopic(t, n.URL, c.AdminKey, "exported", 1)
	harness.Must(t, n.URL, "POST", "/v1/topics/exported/messages", c.AdminKey, map[string]any{"data": 1}, http.StatusOK)
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case req := <-got:
		if req != "POST /v1/traces application/x-protobuf" {
			t.Fatalf("collector got %q, want POST /v1/traces application/x-protobuf", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no spans reached the collector")
	}
}

// TestTracingConfigRefused: tracing settings are validated at startup.
func TestTracingConfigRefused(t *testing.T) {
	cfg := config.Defaults()
	cfg.Tracing = config.Tracing{Enabled: true, SampleRatio: 1.5, OTLPEndpoint: "collector:4318", ServiceName: "msgmesh"}
	err := cfg.Validate()
	for _, want := range []string{"tracing.sample_ratio (MSGMESH_TRACING_SAMPLE_RATIO): want 0..1", "tracing.otlp_endpoint (MSGMESH_TRACING_OTLP_ENDPOINT): want an http:// or https:// URL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}

func traceparents(m harness.Msg) []string {
	var out []string
	for _, h := range m.Headers {
		if h.Key == "traceparent" && h.Value != nil {
			out = append(out, *h.Value)
		}
	}
	return out
}

func waitSpan(t *testing.T, sr *tracetest.SpanRecorder, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	ok, _ := harness.PollUntil(30*time.Second, 20*time.Millisecond, func() bool {
		for _, s := range sr.Ended() {
			if match(s) {
				found = s
				return true
			}
		}
		return false
	})
	if !ok {
		var names []string
		for _, s := range sr.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("no such span among the ended ones: %v", names)
	}
	return found
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, a := range s.Attributes() {
		if string(a.Key) == key && a.Value.String() == value {
			return true
		}
	}
	return false
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitFrame(t *testing.T, ws *wsClient, typ string) map[string]any {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case f, ok := <-ws.frames:
			if !ok {
				t.Fatalf("WebSocket closed waiting for a %s frame", typ)
			}
			if f["type"] == typ {
				return f
			}
		case <-deadline:
			t.Fatalf("no %s frame", typ)
		}
	}
}
