package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// Tool names (the MCP contract in DESIGN.md).
const (
	ToolListTopics         = "list_topics"
	ToolDescribeTopic      = "describe_topic"
	ToolCreateTopic        = "create_topic"
	ToolPublish            = "publish"
	ToolPoll               = "poll"
	ToolWatchTopic         = "watch_topic"
	ToolListWebhooks       = "list_webhooks"
	ToolInspectDeadLetters = "inspect_dead_letters"
	ToolReplayDeadLetters  = "replay_dead_letters"
)

func ptr[T any](v T) *T { return &v }

// Annotations: read-only tools change nothing; the others say whether
// they destroy (something cannot be had again) or only add.
var (
	readOnly    = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
	additive    = &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	destructive = &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}
)

func annotated(a *mcp.ToolAnnotations, title string) *mcp.ToolAnnotations {
	c := *a
	c.Title = title
	return &c
}

// Event is one message as the tools return it.
type Event struct {
	Cursor string  `json:"cursor" jsonschema:"the message's place: <partition>-<offset>"`
	Room   *string `json:"room" jsonschema:"the message's room, null for none"`
	// Data is the JSON payload; a payload that is not JSON comes as
	// data_base64.
	Data        any              `json:"data,omitempty" jsonschema:"the JSON payload (absent when the payload is not JSON: see data_base64)"`
	DataBase64  string           `json:"data_base64,omitempty" jsonschema:"the payload in base64 when it is not JSON"`
	Headers     []msgmesh.Header `json:"headers" jsonschema:"record headers in order"`
	PublishedAt string           `json:"published_at" jsonschema:"when Kafka stored it (RFC 3339)"`
}

func eventOf(m msgmesh.Message) Event {
	e := Event{Cursor: m.Cursor, Room: m.Room, DataBase64: m.DataBase64, Headers: m.Headers,
		PublishedAt: m.PublishedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	if e.Headers == nil {
		e.Headers = []msgmesh.Header{}
	}
	if m.Data != nil {
		var v any
		if json.Unmarshal(m.Data, &v) == nil {
			e.Data = v
		}
	}
	return e
}

type topicIn struct {
	Topic string `json:"topic" jsonschema:"the topic's name"`
}

type topicsOut struct {
	Topics []msgmesh.Topic `json:"topics"`
}

type createTopicIn struct {
	Name       string `json:"name" jsonschema:"the new topic's name (letters, digits, . _ -)"`
	Partitions int    `json:"partitions,omitempty" jsonschema:"number of partitions (default: the server's)"`
}

type publishMsg struct {
	Data    any               `json:"data" jsonschema:"the JSON payload"`
	Room    string            `json:"room,omitempty" jsonschema:"the message's room (one room keeps order)"`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"record headers"`
}

type publishIn struct {
	Topic    string            `json:"topic" jsonschema:"the topic to publish to"`
	Data     any               `json:"data,omitempty" jsonschema:"the JSON payload of one message (or use messages)"`
	Messages []publishMsg      `json:"messages,omitempty" jsonschema:"a batch of messages published at once (instead of data)"`
	Room     string            `json:"room,omitempty" jsonschema:"the room of data, and the default room of messages"`
	Headers  map[string]string `json:"headers,omitempty" jsonschema:"record headers of data"`
}

type publishOut struct {
	Cursors []string `json:"cursors" jsonschema:"the published messages' cursors, in order, once Kafka acknowledged them"`
}

type pollIn struct {
	Topic    string `json:"topic" jsonschema:"the topic to poll"`
	Group    string `json:"group" jsonschema:"the consumer group: it remembers what was acknowledged"`
	Max      int    `json:"max,omitempty" jsonschema:"at most this many messages (default: the server's)"`
	Consumer string `json:"consumer,omitempty" jsonschema:"the group member (default: the server's)"`
	Ack      string `json:"ack,omitempty" jsonschema:"the batch of the previous poll's result, acknowledged by this call (over stdio the server remembers it)"`
}

type pollOut struct {
	Messages []Event `json:"messages"`
	Batch    string  `json:"batch,omitempty" jsonschema:"pass it as ack to the next poll; unacknowledged batches are delivered again"`
}

type webhooksOut struct {
	Webhooks []msgmesh.Webhook `json:"webhooks"`
}

type inspectIn struct {
	WebhookID string `json:"webhook_id" jsonschema:"the webhook's id (from list_webhooks)"`
	Max       int    `json:"max,omitempty" jsonschema:"at most this many dead letters (default: the server's)"`
}

type replayIn struct {
	WebhookID string   `json:"webhook_id" jsonschema:"the webhook's id (from list_webhooks)"`
	Cursors   []string `json:"cursors,omitempty" jsonschema:"dead-letter cursors from inspect_dead_letters; all dead letters when omitted"`
}

func (s *Server) addTools() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolListTopics, Description: "List the tenant's topics.",
		Annotations: annotated(readOnly, "List topics")}, instrument(s, ToolListTopics,
		func(ctx context.Context, c *msgmesh.Client, _ struct{}) (topicsOut, error) {
			ts, err := c.ListTopics(ctx)
			if ts == nil {
				ts = []msgmesh.Topic{}
			}
			return topicsOut{Topics: ts}, err
		}))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolDescribeTopic, Description: "Describe one topic: partitions, retention, Kafka topic.",
		Annotations: annotated(readOnly, "Describe a topic")}, instrument(s, ToolDescribeTopic,
		func(ctx context.Context, c *msgmesh.Client, in topicIn) (msgmesh.Topic, error) {
			return c.GetTopic(ctx, in.Topic)
		}))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolCreateTopic, Description: "Create a topic (needs an admin key).",
		Annotations: annotated(additive, "Create a topic")}, instrument(s, ToolCreateTopic,
		func(ctx context.Context, c *msgmesh.Client, in createTopicIn) (msgmesh.Topic, error) {
			return c.CreateTopic(ctx, in.Name, in.Partitions)
		}))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolPublish,
		Description: "Publish one message (data) or a batch (messages) to a topic, optionally in a room. Answers once Kafka stored it.",
		Annotations: annotated(additive, "Publish")}, instrument(s, ToolPublish, publish))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolPoll,
		Description: "Long-poll a consumer group (at-least-once): returns messages the group has not acknowledged. " +
			"This call acknowledges the previous batch of the same group (ack), so the group moves on: destructive for the group's position.",
		Annotations: annotated(destructive, "Poll a consumer group")}, instrument(s, ToolPoll,
		func(ctx context.Context, c *msgmesh.Client, in pollIn) (pollOut, error) {
			r, err := c.Poll(ctx, in.Topic, msgmesh.PollOptions{Group: in.Group, Consumer: in.Consumer, Max: in.Max, Ack: in.Ack})
			out := pollOut{Messages: make([]Event, 0, len(r.Messages)), Batch: r.Batch}
			for _, m := range r.Messages {
				out.Messages = append(out.Messages, eventOf(m))
			}
			return out, err
		}))
	s.addWatch()
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolListWebhooks, Description: "List the webhooks the key may manage, with their state.",
		Annotations: annotated(readOnly, "List webhooks")}, instrument(s, ToolListWebhooks,
		func(ctx context.Context, c *msgmesh.Client, _ struct{}) (webhooksOut, error) {
			ws, err := c.ListWebhooks(ctx)
			if ws == nil {
				ws = []msgmesh.Webhook{}
			}
			return webhooksOut{Webhooks: ws}, err
		}))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolInspectDeadLetters,
		Description: "Inspect a webhook's dead letters. One-shot: what one call returns is not returned again (replay does not depend on it).",
		Annotations: annotated(destructive, "Inspect dead letters")}, instrument(s, ToolInspectDeadLetters,
		func(ctx context.Context, c *msgmesh.Client, in inspectIn) (msgmesh.DeadLetters, error) {
			return c.InspectDeadLetters(ctx, in.WebhookID, in.Max)
		}))
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolReplayDeadLetters,
		Description: "Republish a webhook's dead letters into its topic (the chosen cursors, or all), so the webhook delivers them again.",
		Annotations: annotated(additive, "Replay dead letters")}, instrument(s, ToolReplayDeadLetters,
		func(ctx context.Context, c *msgmesh.Client, in replayIn) (msgmesh.Replay, error) {
			return c.ReplayDeadLetters(ctx, in.WebhookID, in.Cursors)
		}))
}

// instrument adapts a tool body to the go-sdk: the call's API client,
// API errors as tool errors, the call counter.
func instrument[In, Out any](s *Server, name string, f func(context.Context, *msgmesh.Client, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		c, err := s.client(req)
		if err != nil {
			s.metrics.calls.WithLabelValues(name, "error").Inc()
			return nil, zero, err
		}
		out, err := f(context.WithValue(ctx, requestKey{}, req), c, in)
		if err != nil {
			s.metrics.calls.WithLabelValues(name, "error").Inc()
			return nil, zero, toolError(err)
		}
		s.metrics.calls.WithLabelValues(name, "ok").Inc()
		return nil, out, nil
	}
}

func headersOf(m map[string]string) msgmesh.Headers {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, m[k])
	}
	return msgmesh.HeadersOf(kv...)
}

func publish(ctx context.Context, c *msgmesh.Client, in publishIn) (publishOut, error) {
	switch {
	case in.Data != nil && len(in.Messages) > 0:
		return publishOut{}, errors.New("give either data (one message) or messages (a batch), not both")
	case in.Data == nil && len(in.Messages) == 0:
		return publishOut{}, errors.New("give data (one message) or messages (a batch)")
	case in.Data != nil:
		cur, err := c.Publish(ctx, in.Topic, in.Data, &msgmesh.PublishOptions{Room: in.Room, Headers: headersOf(in.Headers)})
		if err != nil {
			return publishOut{}, err
		}
		return publishOut{Cursors: []string{cur}}, nil
	}
	msgs := make([]msgmesh.OutgoingMessage, len(in.Messages))
	for i, m := range in.Messages {
		room := m.Room
		if room == "" {
			room = in.Room
		}
		msgs[i] = msgmesh.OutgoingMessage{Data: m.Data, Room: room, Headers: headersOf(m.Headers)}
	}
	curs, err := c.PublishBatch(ctx, in.Topic, msgs)
	return publishOut{Cursors: curs}, err
}
