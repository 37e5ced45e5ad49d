package msgmesh

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Topic is a topic as the API shows it.
type Topic struct {
	Name        string `json:"name"`
	Partitions  int32  `json:"partitions"`
	KafkaTopic  string `json:"kafka_topic"`
	RetentionMs int64  `json:"retention_ms"`
	CreatedAt   string `json:"created_at"`
	Epoch       string `json:"epoch"`
}

// CreateTopic creates topic name; partitions 0 takes the server's
// default. ErrConflict when it exists.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int) (Topic, error) {
	in := map[string]any{"name": name}
	if partitions > 0 {
		in["partitions"] = partitions
	}
	var t Topic
	err := c.do(ctx, "POST", c.cp, "/v1/topics", in, &t)
	return t, err
}

// GetTopic describes topic name (ErrNotFound when it does not exist).
func (c *Client) GetTopic(ctx context.Context, name string) (Topic, error) {
	var t Topic
	err := c.do(ctx, "GET", c.cp, "/v1/topics/"+esc(name), nil, &t)
	return t, err
}

// ListTopics lists the tenant's topics.
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var out struct {
		Topics []Topic `json:"topics"`
	}
	err := c.do(ctx, "GET", c.cp, "/v1/topics", nil, &out)
	return out.Topics, err
}

// DeleteTopic deletes topic name and its messages.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", c.cp, "/v1/topics/"+esc(name), nil, nil)
}

// Header is one record header. Value is set when the value is valid
// UTF-8, ValueBase64 otherwise.
type Header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// Bytes is the header's value.
func (h Header) Bytes() []byte {
	if h.Value != nil {
		return []byte(*h.Value)
	}
	b, _ := base64.StdEncoding.DecodeString(h.ValueBase64)
	return b
}

// Headers are a message's headers in record order, duplicates kept.
type Headers []Header

// Get returns the first value of key ("" when absent).
func (hs Headers) Get(key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Bytes())
		}
	}
	return ""
}

// UnmarshalJSON reads the list form [{"key","value"|"value_base64"}] and
// the object form {"k": "v"} of servers before the list.
func (hs *Headers) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		*hs = Headers{}
		return nil
	}
	if b[0] == '[' {
		var l []Header
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		*hs = l
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	out := Headers{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, Header{Key: k.(string), Value: &v})
	}
	*hs = out
	return nil
}

// HeadersOf builds headers from key/value pairs, kept in order (a
// value that is not valid UTF-8 is sent as value_base64).
func HeadersOf(kv ...string) Headers {
	hs := make(Headers, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, headerOf(kv[i], []byte(kv[i+1])))
	}
	return hs
}

func headerOf(k string, v []byte) Header {
	if utf8.Valid(v) {
		s := string(v)
		return Header{Key: k, Value: &s}
	}
	return Header{Key: k, ValueBase64: base64.StdEncoding.EncodeToString(v)}
}

// Message is one delivered message.
type Message struct {
	// Cursor is "<partition>-<offset>", the message's place in Kafka.
	Cursor    string `json:"cursor"`
	Partition int32  `json:"-"`
	Offset    int64  `json:"-"`
	// Room is the message's room, nil for none.
	Room *string `json:"room"`
	// Data is the JSON payload; a payload that is not JSON comes in
	// DataBase64 instead (Data is then nil).
	Data        json.RawMessage `json:"data,omitempty"`
	DataBase64  string          `json:"data_base64,omitempty"`
	Headers     Headers         `json:"headers"`
	PublishedAt time.Time       `json:"published_at"`
}

// Payload is the message's bytes: Data verbatim or DataBase64 decoded.
func (m Message) Payload() ([]byte, error) {
	if m.Data != nil {
		return m.Data, nil
	}
	return base64.StdEncoding.DecodeString(m.DataBase64)
}

// RoomName is the room, "" when none.
func (m Message) RoomName() string {
	if m.Room == nil {
		return ""
	}
	return *m.Room
}

// ParseCursor splits "<partition>-<offset>".
func ParseCursor(s string) (partition int32, offset int64, err error) {
	ps, os, ok := strings.Cut(s, "-")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, fmt.Errorf("msgmesh: malformed cursor %.40q: want <partition>-<offset>", s)
	}
	return int32(p), o, nil
}

// decodeMessage fills Partition and Offset from Cursor.
func decodeMessage(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("msgmesh: decode message: %w", err)
	}
	if m.Headers == nil {
		m.Headers = Headers{}
	}
	var err error
	m.Partition, m.Offset, err = ParseCursor(m.Cursor)
	return m, err
}

// PublishOptions are the optional parts of a publish.
type PublishOptions struct {
	// Room is the message's room ("" for none); one room keeps order.
	Room string
	// Headers are sent as record headers, in order (duplicate keys and
	// non-UTF-8 values need a server that reads the list form).
	Headers Headers
}

// OutgoingMessage is one message of PublishBatch.
type OutgoingMessage struct {
	// Data is marshalled as JSON (a json.RawMessage is sent verbatim).
	Data    any
	Room    string
	Headers Headers
}

func (m OutgoingMessage) body() (map[string]any, error) {
	d, err := json.Marshal(m.Data)
	if err != nil {
		return nil, fmt.Errorf("msgmesh: encode data: %w", err)
	}
	b := map[string]any{"data": json.RawMessage(d)}
	if m.Room != "" {
		b["room"] = m.Room
	}
	if len(m.Headers) > 0 {
		b["headers"] = outgoingHeaders(m.Headers)
	}
	return b, nil
}

// outgoingHeaders is the publish form of hs: a JSON object in order
// ({"k": "v"}, which every server version reads) when the keys are unique
// and every value is UTF-8, else the list form.
func outgoingHeaders(hs Headers) any {
	seen := make(map[string]bool, len(hs))
	for _, h := range hs {
		if h.Value == nil || seen[h.Key] {
			return hs
		}
		seen[h.Key] = true
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(h.Key)
		v, _ := json.Marshal(*h.Value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.Bytes())
}

// Publish appends data (marshalled as JSON) to topic. It returns the
// message's cursor once Kafka acknowledged it (acks=all).
func (c *Client) Publish(ctx context.Context, topic string, data any, o *PublishOptions) (string, error) {
	m := OutgoingMessage{Data: data}
	if o != nil {
		m.Room, m.Headers = o.Room, o.Headers
	}
	b, err := m.body()
	if err != nil {
		return "", err
	}
	var out struct {
		Cursor string `json:"cursor"`
	}
	err = c.do(ctx, "POST", c.gw, "/v1/topics/"+esc(topic)+"/messages", b, &out)
	return out.Cursor, err
}

// PublishBatch appends msgs to topic at once; the cursors are in order.
func (c *Client) PublishBatch(ctx context.Context, topic string, msgs []OutgoingMessage) ([]string, error) {
	if len(msgs) == 0 {
		return nil, errors.New("msgmesh: PublishBatch needs at least one message")
	}
	l := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		b, err := m.body()
		if err != nil {
			return nil, err
		}
		l[i] = b
	}
	var out struct {
		Cursors []string `json:"cursors"`
	}
	err := c.do(ctx, "POST", c.gw, "/v1/topics/"+esc(topic)+"/messages", map[string]any{"messages": l}, &out)
	return out.Cursors, err
}

// PollOptions say whose poll it is and how long it may wait.
type PollOptions struct {
	// Group is the consumer group (required); Consumer the member ("":
	// the server's default).
	Group, Consumer string
	// Max caps the messages of one answer (0: the server's default).
	Max int
	// Wait is how long the server may wait for a first message (0: the
	// server's default; it answers as soon as one exists).
	Wait time.Duration
	// Ack, when set, names the batch to acknowledge instead of the one
	// this Client remembers (for callers that keep the batch id
	// themselves, e.g. across processes).
	Ack string
}

// PollResult is one poll answer.
type PollResult struct {
	Messages []Message
	// Batch identifies a non-empty answer ("" when empty, or from a
	// server before acknowledgements, which commits on delivery).
	Batch string
}

// Poll long-polls the group on topic (at-least-once). The previous batch
// of the same (topic, group, consumer) is acknowledged by this call: the
// Client remembers it and sends it as "ack". A batch nobody acknowledged
// is delivered again. Commit acknowledges early.
func (c *Client) Poll(ctx context.Context, topic string, o PollOptions) (PollResult, error) {
	if o.Group == "" {
		return PollResult{}, errors.New("msgmesh: PollOptions.Group is required")
	}
	in := map[string]any{"group": o.Group}
	if o.Consumer != "" {
		in["consumer"] = o.Consumer
	}
	if o.Max > 0 {
		in["max"] = o.Max
	}
	if o.Wait > 0 {
		in["wait_ms"] = o.Wait.Milliseconds()
	}
	k := batchKey{topic, o.Group, o.Consumer}
	ack := o.Ack
	if ack == "" {
		c.batchMu.Lock()
		ack = c.batches[k]
		c.batchMu.Unlock()
	}
	if ack != "" {
		in["ack"] = ack
	}
	var out struct {
		Messages []json.RawMessage `json:"messages"`
		Batch    string            `json:"batch"`
	}
	if err := c.do(ctx, "POST", c.gw, "/v1/topics/"+esc(topic)+"/poll", in, &out); err != nil {
		return PollResult{}, err
	}
	res := PollResult{Messages: make([]Message, 0, len(out.Messages)), Batch: out.Batch}
	for _, b := range out.Messages {
		m, err := decodeMessage(b)
		if err != nil {
			return PollResult{}, err
		}
		res.Messages = append(res.Messages, m)
	}
	// The acknowledged batch is done; the new one (if any) is next.
	c.batchMu.Lock()
	if out.Batch != "" {
		c.batches[k] = out.Batch
	} else {
		delete(c.batches, k)
	}
	c.batchMu.Unlock()
	return res, nil
}

// CommitOptions name the group and the cursors to commit.
type CommitOptions struct {
	Group, Consumer string
	// Cursors are message cursors; each partition's highest is committed
	// (everything up to and including it is done).
	Cursors []string
}

// Commit acknowledges cursors of the group early (before the next poll).
func (c *Client) Commit(ctx context.Context, topic string, o CommitOptions) error {
	in := map[string]any{"group": o.Group, "cursors": o.Cursors}
	if o.Consumer != "" {
		in["consumer"] = o.Consumer
	}
	return c.do(ctx, "POST", c.gw, "/v1/topics/"+esc(topic)+"/commit", in, nil)
}

// Capability is one grant of a token or key: operations (e.g.
// "publish", "subscribe", "poll") on topic patterns ("orders", "orders.*",
// "*"), optionally only in some rooms, as in the API.
type Capability struct {
	Ops    []string `json:"ops"`
	Topics []string `json:"topics"`
	Rooms  []string `json:"rooms,omitempty"`
}

// TokenOptions shape a minted token.
type TokenOptions struct {
	// TTL is the token's lifetime (0: the server's default).
	TTL time.Duration
	// Capabilities downscope the token (nil: the key's own).
	Capabilities []Capability
}

// Token is a minted short-lived token.
type Token struct {
	Token      string    `json:"token"`
	ExpiresAt  time.Time `json:"expires_at"`
	TTLSeconds int       `json:"ttl_seconds"`
}

// MintToken mints a short-lived token from the client's key (the key
// needs tokens.mint). Give it to a browser or another process.
func (c *Client) MintToken(ctx context.Context, o TokenOptions) (Token, error) {
	in := map[string]any{}
	if o.TTL > 0 {
		in["ttl_seconds"] = int(o.TTL / time.Second)
	}
	if o.Capabilities != nil {
		in["capabilities"] = o.Capabilities
	}
	var t Token
	err := c.do(ctx, "POST", c.cp, "/v1/tokens", in, &t)
	return t, err
}

// Webhook is a registered webhook (never its secret).
type Webhook struct {
	ID             string  `json:"id"`
	Topic          string  `json:"topic"`
	URL            string  `json:"url"`
	Room           *string `json:"room"`
	Enabled        bool    `json:"enabled"`
	DisabledReason string  `json:"disabled_reason,omitempty"`
	Group          string  `json:"group"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
}

// ListWebhooks lists the webhooks the caller may manage.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	err := c.do(ctx, "GET", c.cp, "/v1/webhooks", nil, &out)
	return out.Webhooks, err
}

// DeadLetters is one inspection of a webhook's dead letters.
type DeadLetters struct {
	// Letters are the dead letters as the API shows them (cursor,
	// original_cursor, data, attempts, last_error, ...).
	Letters []map[string]any `json:"dead_letters"`
	// OneShot is true: what one inspection returned is not returned
	// again (spec section 2); replay does not depend on it.
	OneShot bool   `json:"one_shot"`
	Note    string `json:"note"`
}

// InspectDeadLetters returns up to max (0: the server's default) dead
// letters of webhook id not yet inspected. One-shot: the next call
// continues after them.
func (c *Client) InspectDeadLetters(ctx context.Context, id string, max int) (DeadLetters, error) {
	p := "/v1/webhooks/" + esc(id) + "/dead-letters"
	if max > 0 {
		p += "?max=" + strconv.Itoa(max)
	}
	var out DeadLetters
	err := c.do(ctx, "GET", c.cp, p, nil, &out)
	if out.Letters == nil {
		out.Letters = []map[string]any{}
	}
	return out, err
}

// Replay is the answer of ReplayDeadLetters.
type Replay struct {
	// Replayed counts the messages republished; Cursors are their new
	// cursors in the topic.
	Replayed int      `json:"replayed"`
	Cursors  []string `json:"cursors"`
	// NotFound lists requested DLQ cursors that are not dead letters of
	// the webhook.
	NotFound []string `json:"not_found,omitempty"`
	// More: a replay of all stopped at the server's cap; call again.
	More bool `json:"more"`
}

// ReplayDeadLetters republishes webhook id's dead letters into its topic:
// those at cursors (DLQ cursors from an inspection), or all when nil.
func (c *Client) ReplayDeadLetters(ctx context.Context, id string, cursors []string) (Replay, error) {
	in := map[string]any{}
	if cursors != nil {
		in["cursors"] = cursors
	}
	var out Replay
	err := c.do(ctx, "POST", c.cp, "/v1/webhooks/"+esc(id)+"/dead-letters/replay", in, &out)
	if out.Cursors == nil {
		out.Cursors = []string{}
	}
	return out, err
}
