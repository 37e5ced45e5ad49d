package harness

// Helpers for the data-path tests (publish, poll, commit, and reading the
// same records straight from Kafka). The *E functions return errors
// instead of failing the test, so goroutines may call them.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/cursor"
)

// KafkaTopic is the Kafka topic of tenant "default"'s topic.
func (c *Cluster) KafkaTopic(topic string) string { return c.Prefix + ".default." + topic }

// KafkaGroup is the Kafka consumer group of poll group group on topic
// (tenant "default").
func (c *Cluster) KafkaGroup(topic, group string) string {
	return c.Prefix + ".default." + topic + "." + group
}

// Topic is the create-topic answer.
type Topic struct {
	Name       string `json:"name"`
	Partitions int32  `json:"partitions"`
	KafkaTopic string `json:"kafka_topic"`
}

// CreateTopic creates topic name with partitions (0: the default) and
// returns the answer.
func CreateTopic(t testing.TB, base, key, name string, partitions int) Topic {
	t.Helper()
	body := map[string]any{"name": name}
	if partitions > 0 {
		body["partitions"] = partitions
	}
	r := Must(t, base, "POST", "/v1/topics", key, body, http.StatusCreated)
	var tp Topic
	if err := json.Unmarshal(r.Body, &tp); err != nil {
		t.Fatalf("create topic answer %q: %v", r.Body, err)
	}
	if tp.KafkaTopic == "" || (partitions > 0 && int(tp.Partitions) != partitions) {
		t.Fatalf("create topic answer %s, want kafka_topic and %d partitions", r.Body, partitions)
	}
	return tp
}

// Msg is one polled message.
type Msg struct {
	Cursor      string          `json:"cursor"`
	Room        *string         `json:"room"`
	Data        json.RawMessage `json:"data"`
	DataBase64  *string         `json:"data_base64"`
	Headers     []Header        `json:"headers"`
	PublishedAt string          `json:"published_at"`
}

// Header is one message header: Value, or ValueBase64 for bytes that are
// not UTF-8.
type Header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

// Header returns the first value of the header key ("" if none).
func (m Msg) Header(key string) string {
	for _, h := range m.Headers {
		if h.Key == key && h.Value != nil {
			return *h.Value
		}
	}
	return ""
}

// RoomName is the room, "" when null.
func (m Msg) RoomName() string {
	if m.Room == nil {
		return ""
	}
	return *m.Room
}

// Payload is the message's bytes: data verbatim, or data_base64 decoded.
func (m Msg) Payload() ([]byte, error) {
	switch {
	case m.DataBase64 != nil && m.Data != nil:
		return nil, fmt.Errorf("message %s has both data and data_base64", m.Cursor)
	case m.DataBase64 != nil:
		return base64.StdEncoding.DecodeString(*m.DataBase64)
	case m.Data != nil:
		return []byte(m.Data), nil
	}
	return nil, fmt.Errorf("message %s has neither data nor data_base64", m.Cursor)
}

// Pos is the (partition, offset) of msg's cursor; it fails t on a bad cursor.
func (m Msg) Pos(t testing.TB) cursor.Cursor {
	t.Helper()
	c, err := cursor.Parse(m.Cursor)
	if err != nil {
		t.Fatalf("message cursor %q: %v", m.Cursor, err)
	}
	return c
}

// PollReq is a poll request; zero fields are left out.
type PollReq struct {
	Group    string
	Consumer string
	Max      int
	MaxBytes int
	WaitMs   int
	// Ack is sent as "ack". Empty means the "batch" of the last answer that
	// PollE read for the same credential, topic, group and consumer (as the
	// SDKs do), unless NoAck is set.
	Ack   string
	NoAck bool
}

// acks holds the last "batch" PollE read per ackKey.
var acks sync.Map

type ackKey struct{ cred, topic, group, consumer string }

func (r PollReq) ackKey(cred, topic string) ackKey {
	return ackKey{cred, topic, r.Group, r.Consumer}
}

func (r PollReq) body() map[string]any {
	b := map[string]any{"group": r.Group}
	if r.Consumer != "" {
		b["consumer"] = r.Consumer
	}
	if r.Max > 0 {
		b["max"] = r.Max
	}
	if r.MaxBytes > 0 {
		b["max_bytes"] = r.MaxBytes
	}
	if r.WaitMs > 0 {
		b["wait_ms"] = r.WaitMs
	}
	if r.Ack != "" {
		b["ack"] = r.Ack
	}
	return b
}

// DoE is Do returning errors (safe in goroutines). body is []byte (sent
// with contentType) or anything JSON-encodable; query is appended to path.
func DoE(ctx context.Context, base, method, path, key string, body any, contentType string) (int, []byte, error) {
	return doE(ctx, base, method, path, key, body, contentType, nil)
}

// doE is DoE handing the finished exchange to check (if set).
func doE(ctx context.Context, base, method, path, key string, body any, contentType string, check func(*http.Request, []byte, *http.Response, []byte)) (int, []byte, error) {
	var reqBody []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		reqBody = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		reqBody = raw
		if contentType == "" {
			contentType = "application/json"
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil && check != nil {
		check(req, reqBody, resp, raw)
	}
	return resp.StatusCode, raw, err
}

// PollAnswer is a poll's answer.
type PollAnswer struct {
	Messages []Msg  `json:"messages"`
	Batch    string `json:"batch"`
}

// PollE polls topic, acknowledging the last batch it read for the same
// consumer (see PollReq.Ack); any status but 200 is an error.
func PollE(ctx context.Context, base, key, topic string, req PollReq) ([]Msg, error) {
	a, err := PollBatchE(ctx, base, key, topic, req)
	return a.Messages, err
}

// PollBatchE is PollE returning the whole answer. It checks the batch rule:
// a non-empty answer has "batch", an empty one has not.
func PollBatchE(ctx context.Context, base, key, topic string, req PollReq) (PollAnswer, error) {
	return pollBatch(ctx, base, key, topic, req, nil)
}

func pollBatch(ctx context.Context, base, key, topic string, req PollReq, check func(*http.Request, []byte, *http.Response, []byte)) (PollAnswer, error) {
	ak := req.ackKey(key, topic)
	if req.Ack == "" && !req.NoAck {
		if v, ok := acks.Load(ak); ok {
			req.Ack = v.(string)
		}
	}
	st, raw, err := doE(ctx, base, "POST", "/v1/topics/"+topic+"/poll", key, req.body(), "", check)
	if err != nil {
		return PollAnswer{}, err
	}
	if st != http.StatusOK {
		return PollAnswer{}, fmt.Errorf("poll: status %d: %s", st, raw)
	}
	var out PollAnswer
	if err := json.Unmarshal(raw, &out); err != nil {
		return PollAnswer{}, fmt.Errorf("poll answer %q: %v", raw, err)
	}
	if out.Messages == nil {
		return PollAnswer{}, fmt.Errorf("poll answer %q has no \"messages\" array", raw)
	}
	if (len(out.Messages) > 0) != (out.Batch != "") {
		return PollAnswer{}, fmt.Errorf("poll answer %q: want \"batch\" exactly when there are messages", raw)
	}
	if out.Batch != "" {
		acks.Store(ak, out.Batch)
	}
	return out, nil
}

// Poll is PollE failing t on error (call it from the test goroutine); the
// exchange is checked against proto/openapi.yaml (CheckContract).
func Poll(t testing.TB, base, key, topic string, req PollReq) []Msg {
	t.Helper()
	a, err := pollBatch(context.Background(), base, key, topic, req, func(r *http.Request, rb []byte, resp *http.Response, b []byte) {
		CheckContract(t, r, rb, resp, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return a.Messages
}

// Commit acknowledges cursors with POST /commit, failing t unless it
// succeeds (200 or 204).
func Commit(t testing.TB, base, key, topic, group, consumer string, cursors []string) {
	t.Helper()
	r := Do(t, base, "POST", "/v1/topics/"+topic+"/commit", key,
		map[string]any{"group": group, "consumer": consumer, "cursors": cursors})
	if r.Status != http.StatusOK && r.Status != http.StatusNoContent {
		t.Fatalf("POST /v1/topics/%s/commit: status %d, want 200 or 204: %s", topic, r.Status, r.Body)
	}
}

// Cursors lists the messages' cursors.
func Cursors(ms []Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Cursor
	}
	return out
}

// KafkaClient is a plain franz-go client on the cluster's broker, closed
// when t ends.
func (c *Cluster) KafkaClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin is a kadm client on the cluster's broker, closed when t ends.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.KafkaClient(t))
}

// ReadTopic reads every record of kafkaTopic, from the start of each
// partition up to its end offset when called, with franz-go directly (no
// consumer group).
func (c *Cluster) ReadTopic(t testing.TB, kafkaTopic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := c.Admin(t).ListEndOffsets(ctx, kafkaTopic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", kafkaTopic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", kafkaTopic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	offs := map[int32]kgo.Offset{}
	for p := range want {
		offs[p] = kgo.NewOffset().AtStart()
	}
	var recs []*kgo.Record
	if len(want) == 0 {
		return recs
	}
	cl := c.KafkaClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kafkaTopic: offs}))
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out with partitions %v not read to their end", kafkaTopic, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("reading %s/%d: %v", kafkaTopic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	return recs
}

// Kcat returns kcat's path. Without it the test is skipped, or fails when
// MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 (CI must run every check).
func Kcat(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1" {
			t.Fatal("kcat not found (scripts/deps.sh kcat installs it)")
		}
		t.Skip("kcat not found (scripts/deps.sh kcat installs it)")
	}
	return p
}

// RunKcat runs kcat with args and stdin, failing t on error or after 60 s.
func RunKcat(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Kcat(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\nstdout: %s\nstderr: %s", args, err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

// Unlimited lifts the per-tenant rate limits and monthly quota of both
// plans (0 = unlimited), for throughput tests of the data path; pass it
// as (part of) Start's mutate.
func Unlimited(cfg *config.Config) {
	cfg.Limits.Free = config.PlanLimits{}
	cfg.Limits.Paid = config.PlanLimits{}
}

// UnlimitedEnv is Unlimited for a msgmesh process (EnvFor's extra).
var UnlimitedEnv = []string{
	"MSGMESH_LIMITS_FREE_REQUESTS_PER_SECOND=0",
	"MSGMESH_LIMITS_FREE_MESSAGES_PER_SECOND=0",
	"MSGMESH_LIMITS_FREE_MONTHLY_MESSAGES=0",
	"MSGMESH_LIMITS_PAID_REQUESTS_PER_SECOND=0",
	"MSGMESH_LIMITS_PAID_MESSAGES_PER_SECOND=0",
	"MSGMESH_LIMITS_PAID_MONTHLY_MESSAGES=0",
}
