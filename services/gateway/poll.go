package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/message"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/tracing"
	"github.com/msgmesh/msgmesh/services/gateway/pollgroup"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

type pollRequest struct {
	Group    string  `json:"group"`
	Consumer string  `json:"consumer"`
	Max      *int    `json:"max"`
	MaxBytes *int    `json:"max_bytes"`
	WaitMs   *int    `json:"wait_ms"`
	Room     *string `json:"room"`
	Ack      string  `json:"ack"`
}

// maxAckLength bounds "ack"; batch ids are about 20 characters.
const maxAckLength = 128

const defaultConsumer = "default"

func (g *Gateway) pollKey(c *gin.Context, tenant, group, consumer string) (pollgroup.Key, error) {
	topic := c.Param("topic")
	if group == "" {
		return pollgroup.Key{}, httpapi.Errorf(httpapi.CodeInvalidRequest, "\"group\" is required")
	}
	if err := names.Group("group", group); err != nil {
		return pollgroup.Key{}, httpapi.Errorf(httpapi.CodeValidation, "%v", err)
	}
	if consumer == "" {
		consumer = defaultConsumer
	}
	if err := names.Group("consumer", consumer); err != nil {
		return pollgroup.Key{}, httpapi.Errorf(httpapi.CodeValidation, "%v", err)
	}
	t, err := g.resolveTopic(c.Request.Context(), tenant, topic, false)
	if err != nil {
		return pollgroup.Key{}, err
	}
	return pollgroup.Key{Group: g.mapper.Group(tenant, topic, group), Topic: t.KafkaTopic, Consumer: consumer, Owner: tenant}, nil
}

// poll long-polls the consumer group. Every non-empty answer names its
// batch ("batch"); the consumer's next poll acknowledges it with "ack" (its
// offsets are committed, then new messages follow) or, without that ack,
// gets the same batch again: an answer the client never read is never
// skipped. POST /commit acknowledges cursors early.
func (g *Gateway) poll(c *gin.Context) {
	p, ok := auth.RequireOn(c, capability.OpPoll, c.Param("topic"), "")
	if !ok {
		return
	}
	var req pollRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		g.fail(c, err)
		return
	}
	if _, has := c.GetQuery("room"); has || req.Room != nil {
		g.fail(c, httpapi.Errorf(httpapi.CodeRoomNotSupported, "poll reads the whole topic and takes no room; to receive one room use SSE (GET /v1/topics/{topic}/events?room=) or WebSocket"))
		return
	}
	max, err := bounded("max", req.Max, g.cfg.Poll.DefaultMax, g.cfg.Poll.MaxMax)
	if err != nil {
		g.fail(c, err)
		return
	}
	maxBytes, err := bounded("max_bytes", req.MaxBytes, g.cfg.Poll.DefaultMaxBytes, 64<<20)
	if err != nil {
		g.fail(c, err)
		return
	}
	waitMs, err := bounded("wait_ms", req.WaitMs, int(g.cfg.Poll.DefaultWait.Milliseconds()), int(g.cfg.Poll.MaxWait.Milliseconds()))
	if err != nil && req.WaitMs != nil && *req.WaitMs == 0 {
		waitMs, err = 0, nil
	}
	if err != nil {
		g.fail(c, err)
		return
	}
	if len(req.Ack) > maxAckLength {
		g.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "\"ack\" is %d bytes, over the limit of %d: send the \"batch\" of the previous answer", len(req.Ack), maxAckLength))
		return
	}
	key, err := g.pollKey(c, p.Tenant, req.Group, req.Consumer)
	if err != nil {
		g.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.draining:
			cancel()
		case <-pctx.Done():
		}
	}()
	b, err := g.polls.Poll(pctx, pollgroup.Request{Key: key, Max: max, MaxBytes: maxBytes, Wait: time.Duration(waitMs) * time.Millisecond, Ack: req.Ack})
	if err != nil {
		if clientGone(c, err) {
			return
		}
		if errors.Is(err, pollgroup.ErrUnknownMember) {
			if _, ok := g.state.Topic(p.Tenant, c.Param("topic")); !ok {
				g.fail(c, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q was deleted", c.Param("topic")))
				return
			}
		}
		if isDraining(g.draining) {
			g.fail(c, &httpapi.Error{Code: httpapi.CodeShuttingDown, Message: "the node is shutting down; poll again (another node or after restart)", RetryAfter: 1})
			return
		}
		g.fail(c, pollErr(err))
		return
	}
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	body := appendMessages((*buf)[:0], b.Records, b.ID)
	*buf = body
	// The acknowledgement's commit ran while the answer was built: the
	// answer goes out only once it is committed (else 503, and the client
	// polls again with the same ack).
	if err := b.Acknowledged(); err != nil {
		g.fail(c, pollErr(err))
		return
	}
	if ctx.Err() != nil {
		// The client is gone: offer the batch again instead of skipping it.
		b.Undelivered()
		return
	}
	var spans []trace.Span
	if g.tracer != nil {
		spans = g.startPollSpans(ctx, c.Param("topic"), req.Group, b.Records)
	}
	c.Writer.Header().Set("Content-Type", "application/json")
	// Known length: no chunked framing, and the client can read the answer
	// into one buffer.
	c.Writer.Header().Set("Content-Length", strconv.Itoa(len(body)))
	c.Writer.WriteHeader(http.StatusOK)
	if _, err := c.Writer.Write(body); err != nil {
		b.Undelivered()
		endSpans(spans, err)
		return
	}
	c.Writer.Flush()
	b.Delivered()
	endSpans(spans, nil)
	g.metrics.polled.Add(float64(len(b.Records)))
}

func isDraining(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// StatusClientClosed is logged (never sent) when the client hung up first.
const StatusClientClosed = 499

// clientGone reports whether err only says the client went away; the
// request is then ended quietly (no 5xx is logged for a client's timeout).
func clientGone(c *gin.Context, err error) bool {
	if c.Request.Context().Err() == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	c.AbortWithStatus(StatusClientClosed)
	return true
}

// bounded reads an optional positive int: nil → def, over max → max.
func bounded(name string, v *int, def, max int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v <= 0 {
		return 0, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be positive, got %d", name, *v)
	}
	if *v > max {
		return max, nil
	}
	return *v, nil
}

func pollErr(err error) error {
	switch {
	case errors.Is(err, pollgroup.ErrTooManyMembers):
		return &httpapi.Error{Code: httpapi.CodeTooManyConsumers, Message: "this node holds its maximum number of poll consumers", Cause: err, RetryAfter: 5}
	case errors.Is(err, pollgroup.ErrUnknownMember):
		return httpapi.Errorf(httpapi.CodeConsumerNotFound, "consumer not found on this node: it expired or never polled; its unacknowledged batch will be delivered again")
	case errors.Is(err, pollgroup.ErrClosed):
		return httpapi.Wrap(httpapi.CodeShuttingDown, err, "the node is shutting down")
	case errors.Is(err, pollgroup.ErrInvalidRequest):
		return httpapi.Wrap(httpapi.CodeInvalidRequest, err, err.Error())
	}
	return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "poll failed talking to Kafka; retry")
}

type commitRequest struct {
	Group    string   `json:"group"`
	Consumer string   `json:"consumer"`
	Cursors  []string `json:"cursors"`
}

// commit acknowledges cursors of a batch this consumer received: 204.
func (g *Gateway) commit(c *gin.Context) {
	p, ok := auth.RequireOn(c, capability.OpPoll, c.Param("topic"), "")
	if !ok {
		return
	}
	var req commitRequest
	if err := httpapi.BindJSON(c, &req); err != nil {
		g.fail(c, err)
		return
	}
	if len(req.Cursors) == 0 {
		g.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "\"cursors\" is empty"))
		return
	}
	cs := make([]cursor.Cursor, 0, len(req.Cursors))
	for _, s := range req.Cursors {
		cu, err := cursor.Parse(s)
		if err != nil {
			g.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "%v", err))
			return
		}
		cs = append(cs, cu)
	}
	key, err := g.pollKey(c, p.Tenant, req.Group, req.Consumer)
	if err != nil {
		g.fail(c, err)
		return
	}
	if err := g.polls.Commit(c.Request.Context(), key, cs); err != nil {
		g.fail(c, pollErr(err))
		return
	}
	// Cursors of partitions this consumer no longer owns, or that it was
	// never given, are skipped: the group's new owner redelivers them.
	c.Status(http.StatusNoContent)
}

// startPollSpans starts a delivery span for each record of a poll answer
// that carries a traceparent (a child of its publish span).
func (g *Gateway) startPollSpans(ctx context.Context, topic, group string, recs []*kgo.Record) []trace.Span {
	var spans []trace.Span
	for _, r := range recs {
		if _, span, ok := g.tracer.StartDelivery(ctx, r.Headers, r.Partition, r.Offset, tracing.Delivery{Op: tracing.OpPoll, Topic: topic, Consumer: group}); ok {
			spans = append(spans, span)
		}
	}
	return spans
}

func endSpans(spans []trace.Span, err error) {
	for _, s := range spans {
		tracing.EndDelivery(s, err)
	}
}

// answerBuffers recycle poll answers' buffers (about 1.3 MB for 1,000
// messages of 1 KiB): a fresh one per poll was zeroed and collected each
// time. A buffer is returned once its answer is written.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer bounds the buffers kept (a rare huge answer is dropped).
const maxPooledAnswer = 8 << 20

func putAnswerBuffer(b *[]byte) {
	if cap(*b) <= maxPooledAnswer {
		answerBuffers.Put(b)
	}
}

// appendMessages appends the poll response to b:
//
//	{"messages":[<message>, ...],"batch":"<id>"}
//
// with each message in the shape of package message (payloads verbatim);
// "batch" only when there are messages: {"messages":[]}.
func appendMessages(b []byte, recs []*kgo.Record, batch string) []byte {
	n := 16
	for _, r := range recs {
		n += len(r.Value)*4/3 + len(r.Key) + 160
	}
	b = slices.Grow(b, n)
	b = append(b, `{"messages":[`...)
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = message.Append(b, r)
	}
	if len(recs) == 0 {
		return append(b, "]}"...)
	}
	b = append(b, `],"batch":"`...)
	b = append(b, batch...) // hex digits, '-' and decimal digits: no escaping
	return append(b, `"}`...)
}
