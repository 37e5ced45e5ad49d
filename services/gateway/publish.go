// Package gateway serves publishing and long-poll consumption:
//
//	POST /v1/topics/{topic}/messages   publish (single, batch or raw body)
//	POST /v1/topics/{topic}/poll       long-poll a consumer group
//	POST /v1/topics/{topic}/commit     acknowledge polled cursors
//
// A message is one Kafka record: the room is the record key, the payload
// the value (bytes verbatim), and headers carry the content type and the
// publisher's headers. A publish is answered only after Kafka acknowledged
// every record with acks=all on the idempotent producer.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/message"
	"github.com/msgmesh/msgmesh/platform/tracing"
)

// HeaderContentType is the Kafka header holding a message's content type.
const HeaderContentType = message.HeaderContentType

// contentTypeJSON is the content-type header value of every JSON message,
// shared by their records (franz-go never modifies a header value).
var contentTypeJSON = []byte("application/json")

// reservedHeaderPrefix is kept for MsgMesh's own headers.
const reservedHeaderPrefix = "msgmesh-"

// publishMessage is one message of a JSON publish body.
type publishMessage struct {
	Data    json.RawMessage `json:"data"`
	Room    *string         `json:"room,omitempty"`
	Headers *publishHeaders `json:"headers,omitempty"`
}

type publishBody struct {
	publishMessage
	Messages []publishMessage `json:"messages"`
}

func (g *Gateway) publish(c *gin.Context) {
	p := auth.PrincipalOf(c)
	name := c.Param("topic")
	// Refuse early when the credential may publish nowhere on this topic.
	if !mayPublishSomeRoom(p, name) {
		auth.RequireOn(c, capability.OpPublish, name, "")
		return
	}
	ctx := c.Request.Context()
	start := time.Now()
	body, err := readBody(c.Request, g.cfg.Publish.MaxBatchBytes)
	if err != nil {
		g.fail(c, httpapi.ReadErr(err))
		return
	}
	if len(body) > g.cfg.Publish.MaxBatchBytes {
		g.fail(c, httpapi.Errorf(httpapi.CodePayloadTooLarge, "request body is over the %d byte limit", g.cfg.Publish.MaxBatchBytes))
		return
	}
	recs, batch, err := g.parsePublish(c, body)
	if err != nil {
		g.fail(c, err)
		return
	}
	// Every message's room must be allowed; nothing is published otherwise.
	for _, r := range recs {
		if _, ok := auth.RequireOn(c, capability.OpPublish, name, string(r.Key)); !ok {
			return
		}
	}
	tenant, _ := g.state.Tenant(p.Tenant)
	if err := g.quota.AllowMessages(p.Tenant, tenant.Plan, len(recs)); err != nil {
		g.fail(c, err)
		return
	}
	topic, err := g.resolveTopic(ctx, p.Tenant, name, true)
	if err != nil {
		g.fail(c, err)
		return
	}
	for _, r := range recs {
		r.Topic = topic.KafkaTopic
	}
	var span trace.Span
	if g.tracer != nil {
		ctx, span = g.tracer.StartPublish(ctx, c.Request.Header, tracing.Publish{Tenant: p.Tenant, Topic: name, KafkaTopic: topic.KafkaTopic, Messages: len(recs)})
		g.tracer.Inject(ctx, recs)
	}
	cursors, err := g.produce(ctx, topic, recs)
	if span != nil {
		tracing.EndPublish(span, recs, err)
	}
	if err != nil {
		if clientGone(c, err) {
			g.log.Debug("publish abandoned by the client; its records may still be written", "request_id", httpapi.RequestIDOf(c))
			return
		}
		g.fail(c, err)
		return
	}
	g.quota.Record(p.Tenant, len(recs))
	g.metrics.published.Add(float64(len(recs)))
	g.metrics.publishSeconds.Observe(time.Since(start).Seconds())
	c.Data(http.StatusOK, "application/json; charset=utf-8", appendCursors(nil, cursors, batch))
}

// appendCursors writes the publish answer, {"cursor":"p-o"} or
// {"cursors":["p-o",...]}, without reflection: a cursor is digits and one
// '-', which JSON needs no escaping for.
func appendCursors(b []byte, cursors []string, batch bool) []byte {
	if !batch {
		b = append(b, `{"cursor":"`...)
		b = append(b, cursors[0]...)
		return append(b, `"}`...)
	}
	b = append(b, `{"cursors":[`...)
	for i, cu := range cursors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, cu...)
		b = append(b, '"')
	}
	return append(b, "]}"...)
}

// readBody reads at most limit+1 bytes of r's body (one more than allowed,
// so the caller can tell "over the limit"). With a Content-Length it reads
// into one buffer of that size instead of growing one (a 100 KiB batch
// would otherwise be copied about eight times).
func readBody(r *http.Request, limit int) ([]byte, error) {
	lr := io.LimitReader(r.Body, int64(limit)+1)
	if n := r.ContentLength; n > 0 && n <= int64(limit) {
		b := make([]byte, n, n+1) // room to see one byte more than announced
		if _, err := io.ReadFull(lr, b); err != nil {
			return nil, err
		}
		// net/http refuses a body longer than its Content-Length: one
		// more read only confirms the end.
		if m, _ := lr.Read(b[n : n+1]); m > 0 {
			return nil, fmt.Errorf("request body longer than its Content-Length")
		}
		return b, nil
	}
	return io.ReadAll(lr)
}

// parsePublish turns a request into records. JSON bodies carry
// {"data","room"?,"headers"?} or {"messages": [...]}; an NDJSON body
// (ContentTypeNDJSON) carries one message's data per line; any other
// content type publishes the raw body with ?room=.
func (g *Gateway) parsePublish(c *gin.Context, body []byte) (recs []*kgo.Record, batch bool, err error) {
	ct := c.ContentType()
	if ct == ContentTypeNDJSON {
		recs, err := g.parseNDJSON(c, body)
		return recs, true, err
	}
	if isJSON(ct) {
		if c.Query("room") != "" {
			return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "with a JSON body, give the room in the body (\"room\"), not in ?room=")
		}
		// RFC 8259 section 8.1: JSON is UTF-8. Decoders would replace the
		// invalid bytes silently (or keep them in "data", making every poll
		// answer that carries the message invalid JSON).
		if !utf8.Valid(body) {
			return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "invalid JSON body: not valid UTF-8 at byte %d (JSON text is UTF-8; to publish other bytes, send them raw with their own Content-Type)", invalidUTF8At(body))
		}
		pb, err := decodePublishBody(body)
		if err != nil {
			return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "invalid JSON body: %v (send {\"data\": ...} or {\"messages\": [...]}, or another Content-Type to publish raw bytes)", err)
		}
		single := len(pb.Data) > 0
		switch {
		case single && pb.Messages != nil:
			return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "send either \"data\" or \"messages\", not both")
		case !single && pb.Messages == nil:
			return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "missing \"data\" (one message) or \"messages\" (a batch)")
		case single:
			r, err := g.record(pb.publishMessage, -1)
			if err != nil {
				return nil, false, err
			}
			return []*kgo.Record{r}, false, nil
		}
		if pb.Room != nil || pb.Headers != nil {
			return nil, true, httpapi.Errorf(httpapi.CodeInvalidRequest, "a batch takes \"room\" and \"headers\" per message, inside \"messages\"")
		}
		if len(pb.Messages) == 0 {
			return nil, true, httpapi.Errorf(httpapi.CodeInvalidRequest, "\"messages\" is empty")
		}
		if len(pb.Messages) > g.cfg.Publish.MaxBatchMessages {
			return nil, true, httpapi.Errorf(httpapi.CodePayloadTooLarge, "batch of %d messages is over the limit of %d", len(pb.Messages), g.cfg.Publish.MaxBatchMessages)
		}
		recs = make([]*kgo.Record, 0, len(pb.Messages))
		for i, m := range pb.Messages {
			if len(m.Data) == 0 {
				return nil, true, httpapi.Errorf(httpapi.CodeInvalidRequest, "messages[%d]: missing \"data\"", i)
			}
			r, err := g.record(m, i)
			if err != nil {
				return nil, true, err
			}
			recs = append(recs, r)
		}
		return recs, true, nil
	}
	if ct == "application/x-www-form-urlencoded" || ct == "multipart/form-data" {
		return nil, false, httpapi.Errorf(httpapi.CodeUnsupportedMedia, "a form body (%s) is not a message: send JSON with Content-Type: application/json, or raw bytes with their own Content-Type (curl -d sends a form unless you set -H 'Content-Type: ...')", ct)
	}
	if len(body) == 0 && ct == "" {
		return nil, false, httpapi.Errorf(httpapi.CodeInvalidRequest, "empty body: send {\"data\": ...} as JSON, or a raw body with its Content-Type")
	}
	if len(body) > g.cfg.Publish.MaxMessageBytes {
		return nil, false, httpapi.Errorf(httpapi.CodePayloadTooLarge, "message of %d bytes is over the %d byte limit", len(body), g.cfg.Publish.MaxMessageBytes)
	}
	r := &kgo.Record{Value: body}
	if q, has := c.GetQuery("room"); has {
		if err := g.checkRoom(q, -1); err != nil {
			return nil, false, err
		}
		r.Key = []byte(q)
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	r.Headers = []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte(c.GetHeader("Content-Type"))}}
	if c.GetHeader("Content-Type") == "" {
		r.Headers[0].Value = []byte(ct)
	}
	return []*kgo.Record{r}, false, nil
}

func isJSON(ct string) bool { return message.IsJSON(ct) }

// invalidUTF8At returns the offset of the first byte of b that is not valid
// UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func where(i int) string {
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("messages[%d]: ", i)
}

func (g *Gateway) checkRoom(room string, i int) error {
	if room == "" {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "%sroom is empty (omit it to publish without a room)", where(i))
	}
	if len(room) > g.cfg.Publish.MaxRoomLength {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "%sroom is %d bytes, over the limit of %d", where(i), len(room), g.cfg.Publish.MaxRoomLength)
	}
	return nil
}

// record makes the Kafka record of one JSON message; i is its index in a
// batch (-1 for a single message).
func (g *Gateway) record(m publishMessage, i int) (*kgo.Record, error) {
	if len(m.Data) > g.cfg.Publish.MaxMessageBytes {
		return nil, httpapi.Errorf(httpapi.CodePayloadTooLarge, "%smessage of %d bytes is over the %d byte limit", where(i), len(m.Data), g.cfg.Publish.MaxMessageBytes)
	}
	r := &kgo.Record{Value: []byte(m.Data)}
	if m.Room != nil {
		if err := g.checkRoom(*m.Room, i); err != nil {
			return nil, err
		}
		r.Key = []byte(*m.Room)
	}
	nh := m.Headers.len()
	if nh > g.cfg.Publish.MaxHeaders {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s%d headers, over the limit of %d", where(i), nh, g.cfg.Publish.MaxHeaders)
	}
	r.Headers = make([]kgo.RecordHeader, 0, nh+1)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderContentType, Value: contentTypeJSON})
	if m.Headers != nil {
		if m.Headers.err != "" {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s%s", where(i), m.Headers.err)
		}
		for _, h := range m.Headers.list {
			lk := strings.ToLower(h.Key)
			if h.Key == "" || len(h.Key) > 256 || lk == HeaderContentType || strings.HasPrefix(lk, reservedHeaderPrefix) {
				return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%sheader name %q is empty, too long or reserved (content-type, msgmesh-*)", where(i), h.Key)
			}
		}
		r.Headers = append(r.Headers, m.Headers.list...)
	}
	return r, nil
}

// produce sends recs and waits until Kafka acknowledged all of them,
// returning their cursors in request order. Concurrent requests share the
// producer's batches. Any failure is 503: the client must retry (some
// records may have been written: at-least-once).
func (g *Gateway) produce(ctx context.Context, topic controlstate.Topic, recs []*kgo.Record) ([]string, error) {
	err := g.produceOnce(ctx, recs)
	if errors.Is(err, kerr.UnknownTopicID) {
		// The topic was deleted and made again under the same name: drop
		// the stale topic id and try once more.
		g.producer.PurgeTopicsFromClient(topic.KafkaTopic)
		err = g.produceOnce(ctx, recs)
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// The control log has the topic but Kafka lost or never made it
		// (a failed create): make it and try once more.
		if e := g.topics.EnsureKafkaTopic(ctx, topic); e != nil {
			return nil, e
		}
		err = g.produceOnce(ctx, recs)
	}
	if err != nil {
		if errors.Is(err, kerr.MessageTooLarge) {
			return nil, httpapi.Wrap(httpapi.CodePayloadTooLarge, err, "Kafka refused the message as too large")
		}
		return nil, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "Kafka did not acknowledge the publish; nothing is confirmed, retry")
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = cursor.Cursor{Partition: r.Partition, Offset: r.Offset}.String()
	}
	return out, nil
}

func (g *Gateway) produceOnce(ctx context.Context, recs []*kgo.Record) error {
	// ProduceSync sends the partitions it just filled at once instead of
	// waiting out the producer's linger; concurrent requests still share
	// batches while a produce request is in flight.
	done := make(chan error, 1)
	go func() { done <- g.producer.ProduceSync(ctx, recs...).FirstErr() }()
	// The idempotent producer never fails a record it already sent without
	// an answer, so a dead broker would hold the request forever: answer
	// 503 after kafka.request_timeout instead (the records may still land).
	timer := time.NewTimer(g.cfg.Kafka.RequestTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return errProduceTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errProduceTimeout = errors.New("no acknowledgement from Kafka within kafka.request_timeout")

// resolveTopic finds a tenant's topic. When it does not exist: 404 with
// the strict topic gate on (or when create is false), else it is created.
func (g *Gateway) resolveTopic(ctx context.Context, tenant, name string, create bool) (controlstate.Topic, error) {
	st := g.state
	if t, ok := st.Topic(tenant, name); ok {
		return t, nil
	}
	tn, _ := st.Tenant(tenant)
	if !create || tn.StrictTopics {
		return controlstate.Topic{}, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q not found", name)
	}
	t, err := g.topics.CreateTopic(ctx, tenant, name, 0)
	var he *httpapi.Error
	if errors.As(err, &he) && he.Code == httpapi.CodeConflict {
		if t, ok := st.Topic(tenant, name); ok {
			return t, nil
		}
	}
	return t, err
}

// mayPublishSomeRoom reports whether p may publish on topic in at least one
// room (a room-limited credential): the full check runs per message.
func mayPublishSomeRoom(p auth.Principal, topic string) bool {
	if p.Operator {
		return false
	}
	for _, c := range p.Caps {
		for _, op := range c.Ops {
			if op != capability.OpPublish && op != capability.OpAll {
				continue
			}
			for _, t := range c.Topics {
				if capability.Match(t, topic) {
					return true
				}
			}
		}
	}
	return false
}
