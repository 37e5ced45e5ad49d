package tracing

import (
	"context"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/msgmesh/msgmesh/platform/config"
)

// Tracing off is a nil *Tracer: the delivery paths' checks allocate
// nothing and leave records alone.
func TestOffAllocatesNothing(t *testing.T) {
	tr, err := New(context.Background(), config.Tracing{Enabled: false})
	if err != nil || tr != nil {
		t.Fatalf("New(disabled) = %v, %v; want nil, nil", tr, err)
	}
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}, {Key: HeaderTraceparent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	recs := []*kgo.Record{r}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if tr.Traced(r.Headers) {
			t.Fatal("traced with tracing off")
		}
		_, span, ok := tr.StartDelivery(ctx, r.Headers, 0, 1, Delivery{Op: OpSSE, Topic: "t"})
		if ok {
			t.Fatal("delivery span with tracing off")
		}
		EndDelivery(span, nil)
		tr.Inject(ctx, recs)
		tr.InjectHTTP(ctx, http.Header(nil))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record with tracing off, want 0", allocs)
	}
	if len(r.Headers) != 2 {
		t.Fatalf("headers changed with tracing off: %v", r.Headers)
	}
}

// A publisher's traceparent and tracestate headers are replaced by the
// publish span's; other headers keep their order.
func TestInjectReplacesTraceHeaders(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tr := NewWithProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)))
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "Tracestate": {"vendor=1"}}
	ctx, span := tr.StartPublish(context.Background(), h, Publish{Tenant: "acme", Topic: "orders", KafkaTopic: "msgmesh.acme.orders", Messages: 1})
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: HeaderTraceparent, Value: []byte("forged")}, {Key: "b", Value: []byte("2")}, {Key: HeaderTracestate, Value: []byte("x=y")}}}
	tr.Inject(ctx, []*kgo.Record{r})
	EndPublish(span, []*kgo.Record{r}, nil)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + span.SpanContext().SpanID().String() + "-01"
	var keys []string
	for _, hd := range r.Headers {
		keys = append(keys, hd.Key)
	}
	c := headerCarrier(r.Headers)
	if len(r.Headers) != 4 || r.Headers[0].Key != "a" || r.Headers[1].Key != "b" ||
		c.Get(HeaderTraceparent) != want || c.Get(HeaderTracestate) != "vendor=1" {
		t.Fatalf("headers %v (%s), want a, b, traceparent %s, tracestate vendor=1", keys, r.Headers, want)
	}
	_, d, ok := tr.StartDelivery(context.Background(), r.Headers, 2, 7, Delivery{Op: OpPoll, Topic: "orders", Consumer: "g1"})
	if !ok {
		t.Fatal("no delivery span for a traced record")
	}
	EndDelivery(d, nil)
	ended := sr.Ended()
	if len(ended) != 2 || ended[1].Parent().SpanID() != span.SpanContext().SpanID() || ended[1].Name() != "poll orders" {
		t.Fatalf("spans %v: want publish orders and its child poll orders", ended)
	}
	// A malformed traceparent gets no span.
	if _, _, ok := tr.StartDelivery(context.Background(), []kgo.RecordHeader{{Key: HeaderTraceparent, Value: []byte("garbage")}}, 0, 0, Delivery{Op: OpSSE}); ok {
		t.Fatal("a span for a malformed traceparent")
	}
}

// New with an endpoint makes an exporter without dialling anything.
func TestNewEnabled(t *testing.T) {
	tr, err := New(context.Background(), config.Tracing{Enabled: true, OTLPEndpoint: "http://127.0.0.1:1", SampleRatio: 1, ServiceName: "msgmesh"})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = tr.Shutdown(ctx)
}

// The per-record cost of a delivery span, off (nil Tracer) and on (a
// sampled record, recorded spans exported nowhere): docs/benchmarks.md.
func BenchmarkDelivery(b *testing.B) {
	hs := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")},
		{Key: HeaderTraceparent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}
	run := func(b *testing.B, tr *Tracer) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if tr.Traced(hs) {
				_, span, _ := tr.StartDelivery(ctx, hs, 1, 42, Delivery{Op: OpSSE, Topic: "orders"})
				EndDelivery(span, nil)
			}
		}
	}
	b.Run("off", func(b *testing.B) { run(b, nil) })
	b.Run("on", func(b *testing.B) {
		run(b, NewWithProvider(sdktrace.NewTracerProvider())) // recording spans, exported nowhere
	})
}
