// Package tracing carries OpenTelemetry traces through Kafka: a span per
// publish whose context is written into every record's traceparent header
// (W3C Trace Context, https://www.w3.org/TR/trace-context/), and a span per
// delivery of such a record (poll answer, SSE event, WebSocket frame,
// webhook POST) that is a child of it, so that one trace shows
// publish → Kafka → each delivery. Spans go to a collector over OTLP/HTTP.
//
// A nil *Tracer is tracing turned off: every method returns at once,
// allocates nothing and leaves records untouched, so the delivery paths
// cost one pointer comparison per record when tracing is off.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/platform/config"
)

// Record headers of W3C Trace Context. With tracing on, the gateway owns
// them: a publish replaces any the publisher set with its own span's.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// ScopeName is the instrumentation scope of MsgMesh's spans.
const ScopeName = "github.com/msgmesh/msgmesh"

// Delivery operations (the first word of a delivery span's name and its
// msgmesh.delivery attribute).
const (
	OpPoll      = "poll"
	OpSSE       = "sse"
	OpWebSocket = "websocket"
	OpWebhook   = "webhook"
)

// Tracer makes MsgMesh's spans. The zero value is not usable; nil is
// tracing off.
type Tracer struct {
	tracer   trace.Tracer
	prop     propagation.TraceContext
	shutdown func(context.Context) error
}

// New returns the Tracer cfg asks for: nil (tracing off, no error) unless
// cfg.Enabled, else spans batched to the OTLP/HTTP collector at
// cfg.OTLPEndpoint (or the OTEL_EXPORTER_OTLP_* environment's), sampled
// parent-based with cfg.SampleRatio for new traces. Nothing is dialled
// until the first export: an unreachable collector never stops startup
// (the exporter logs through OpenTelemetry's error handler and drops
// spans). Call Shutdown to flush at exit.
func New(ctx context.Context, cfg config.Tracing) (*Tracer, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if cfg.OTLPEndpoint != "" {
		u, err := url.Parse(cfg.OTLPEndpoint)
		if err != nil {
			return nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	t := NewWithProvider(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// NewWithProvider returns a Tracer making its spans with tp (tests pass a
// provider with a tracetest.SpanRecorder). tp is not shut down by
// Shutdown.
func NewWithProvider(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Publish describes one publish request.
type Publish struct {
	// Topic is the tenant's topic name, KafkaTopic the record's topic.
	Tenant, Topic, KafkaTopic string
	// Messages is how many records the request publishes.
	Messages int
}

// StartPublish starts the span of one publish request (kind producer,
// named "publish <topic>"). Its parent is the trace context of the HTTP
// request (traceparent/tracestate headers of h) when it has one, so a
// publisher's own trace continues through MsgMesh. End it with EndPublish.
// Tracing off: ctx and a no-op span.
func (t *Tracer) StartPublish(ctx context.Context, h http.Header, p Publish) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	if h.Get(HeaderTraceparent) != "" {
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	}
	return t.tracer.Start(ctx, "publish "+p.Topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "publish"),
		attribute.String("messaging.destination.name", p.KafkaTopic),
		attribute.Int("messaging.batch.message_count", p.Messages),
		attribute.String("msgmesh.tenant", p.Tenant),
		attribute.String("msgmesh.topic", p.Topic),
	))
}

// Inject writes the span context of ctx into every record's traceparent
// (and, when there is one, tracestate) header, replacing headers of those
// names the publisher set. Nothing happens when tracing is off or ctx has
// no valid span context.
func (t *Tracer) Inject(ctx context.Context, recs []*kgo.Record) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	var c headerCarrier
	t.prop.Inject(ctx, &c)
	for _, r := range recs {
		hs := r.Headers[:0]
		for _, h := range r.Headers {
			if h.Key != HeaderTraceparent && h.Key != HeaderTracestate {
				hs = append(hs, h)
			}
		}
		r.Headers = append(hs, c...)
	}
}

// EndPublish ends a publish span: with the cursor of a single record
// published, or the error.
func EndPublish(span trace.Span, recs []*kgo.Record, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if len(recs) == 1 {
		span.SetAttributes(
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(recs[0].Partition))),
			attribute.Int64("messaging.kafka.offset", recs[0].Offset),
		)
	}
	span.End()
}

// Delivery describes one delivery of a record.
type Delivery struct {
	// Op is OpPoll, OpSSE, OpWebSocket or OpWebhook.
	Op string
	// Topic is the tenant's topic name.
	Topic string
	// Consumer is the poll group, or the webhook id; "" for SSE and
	// WebSocket.
	Consumer string
	// Attempt is a webhook delivery's attempt number (0 otherwise).
	Attempt int
}

// Traced reports whether a delivery of a record with headers hs gets a
// span: tracing is on and the record carries a traceparent header.
// Allocation free.
func (t *Tracer) Traced(hs []kgo.RecordHeader) bool {
	if t == nil {
		return false
	}
	for i := range hs {
		if hs[i].Key == HeaderTraceparent {
			return true
		}
	}
	return false
}

// StartDelivery starts the span of delivering the record at partition p,
// offset o with headers hs (kind consumer, or client for a webhook POST;
// named "<op> <topic>"), a child of the publish span its traceparent header
// names: the returned context carries it (for a webhook, inject it into the
// POST with InjectHTTP). ok is false, with ctx and a no-op span, when Traced
// is false or the header is no valid traceparent.
func (t *Tracer) StartDelivery(ctx context.Context, hs []kgo.RecordHeader, p int32, o int64, d Delivery) (_ context.Context, _ trace.Span, ok bool) {
	if !t.Traced(hs) {
		return ctx, trace.SpanFromContext(context.Background()), false
	}
	c := headerCarrier(hs)
	parent := trace.SpanContextFromContext(t.prop.Extract(context.Background(), &c))
	if !parent.IsValid() {
		return ctx, trace.SpanFromContext(context.Background()), false
	}
	kind := trace.SpanKindConsumer
	if d.Op == OpWebhook {
		kind = trace.SpanKindClient
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", d.Op),
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(p))),
		attribute.Int64("messaging.kafka.offset", o),
		attribute.String("msgmesh.topic", d.Topic),
		attribute.String("msgmesh.delivery", d.Op),
	}
	switch d.Op {
	case OpPoll:
		attrs = append(attrs, attribute.String("messaging.consumer.group.name", d.Consumer))
	case OpWebhook:
		attrs = append(attrs, attribute.String("msgmesh.webhook.id", d.Consumer), attribute.Int("msgmesh.webhook.attempt", d.Attempt),
			attribute.String("http.request.method", http.MethodPost))
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	ctx, span := t.tracer.Start(ctx, d.Op+" "+d.Topic, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, span, true
}

// InjectHTTP writes the span context of ctx into h as traceparent (and
// tracestate): the webhook receiver's own spans join the trace.
func (t *Tracer) InjectHTTP(ctx context.Context, h http.Header) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// EndDelivery ends a delivery span, marking it failed with err (nil: the
// delivery succeeded).
func EndDelivery(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ErrDeliveryFailed marks a delivery span whose attempt got an answer
// that is no success (the span's attributes say which).
var ErrDeliveryFailed = errors.New("delivery failed")

// headerCarrier adapts Kafka record headers to propagation.TextMapCarrier
// (keys as written: W3C names are lower case).
type headerCarrier []kgo.RecordHeader

func (c headerCarrier) Get(key string) string {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].Key == key {
			return string(c[i].Value)
		}
	}
	return ""
}

func (c *headerCarrier) Set(key, value string) {
	*c = append(*c, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	out := make([]string, len(c))
	for i := range c {
		out[i] = c[i].Key
	}
	return out
}
