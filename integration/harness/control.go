package harness

// Helpers for the control-plane, bad-input and crash tests: reading Kafka
// directly (what an SRE with kcat or kadm would see), error-body checks,
// polling until a condition holds, and running the binary with a clean
// environment.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaTopic is the Kafka topic backing tenant topic of c.
func (c *Cluster) TenantKafkaTopic(tenant, topic string) string {
	return c.Prefix + "." + tenant + "." + topic
}

// KafkaAdmin returns a kadm client on brokers, closed when t ends.
func KafkaAdmin(t testing.TB, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// EndOffsets returns the end (high watermark) offset of every partition of
// kafkaTopic.
func EndOffsets(t testing.TB, brokers []string, kafkaTopic string) map[int32]int64 {
	t.Helper()
	adm := KafkaAdmin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := adm.ListEndOffsets(ctx, kafkaTopic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", kafkaTopic, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		t.Fatalf("Kafka topic %s has no partitions", kafkaTopic)
	}
	return out
}

// TotalRecords is the sum of end offsets of kafkaTopic (its record count
// when nothing was deleted by retention).
func TotalRecords(t testing.TB, brokers []string, kafkaTopic string) int64 {
	t.Helper()
	var n int64
	for _, o := range EndOffsets(t, brokers, kafkaTopic) {
		n += o
	}
	return n
}

// ReadByOffset consumes kafkaTopic directly from Kafka, every partition from
// its start to the end offsets read first, and returns the records by
// partition and offset.
func ReadByOffset(t testing.TB, brokers []string, kafkaTopic string) map[int32]map[int64]*kgo.Record {
	t.Helper()
	ends := EndOffsets(t, brokers, kafkaTopic)
	parts := map[int32]kgo.Offset{}
	want := 0
	for p, e := range ends {
		if e > 0 {
			parts[p] = kgo.NewOffset().AtStart()
			want++
		}
	}
	out := map[int32]map[int64]*kgo.Record{}
	for p := range ends {
		out[p] = map[int64]*kgo.Record{}
	}
	if want == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kafkaTopic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := map[int32]bool{}
	for len(done) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out; done partitions %v of %v", kafkaTopic, done, ends)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition][r.Offset] = r
			if r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out
}

// TopicConfigEventually returns the value of config name of kafkaTopic
// once Kafka reports want, or what it last reported after 15 s: a config
// change is applied by the controller and reaches the broker that answers
// DescribeConfigs a moment later (KRaft).
func TopicConfigEventually(t testing.TB, brokers []string, kafkaTopic, name, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := TopicConfig(t, brokers, kafkaTopic, name)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TopicConfig returns the value of config name of kafkaTopic as Kafka
// reports it (DescribeTopicConfigs).
func TopicConfig(t testing.TB, brokers []string, kafkaTopic, name string) string {
	t.Helper()
	adm := KafkaAdmin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A topic just created may not be in the broker's metadata yet
	// (KRaft: the broker follows the controller's log): wait for it.
	var rc kadm.ResourceConfig
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, kafkaTopic)
		if err == nil {
			rc, err = rcs.On(kafkaTopic, nil)
			if err == nil {
				err = rc.Err
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || ctx.Err() != nil {
			t.Fatalf("describe configs of %s: %v", kafkaTopic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			if c.Value == nil {
				return ""
			}
			return *c.Value
		}
	}
	t.Fatalf("Kafka topic %s has no config %s", kafkaTopic, name)
	return ""
}

// WantError checks an error answer: status, a JSON body with a non-empty
// "error" and the stable "code", an X-Request-Id header, and "request_id"
// on 5xx. It returns the decoded body.
func WantError(t testing.TB, what string, r Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Errorf("%s: body is not a JSON object: %q", what, r.Body)
		return nil
	}
	if s, _ := m["error"].(string); strings.TrimSpace(s) == "" {
		t.Errorf("%s: body has no \"error\" message: %s", what, r.Body)
	}
	if m["code"] != code {
		t.Errorf("%s: code %v, want %q: %s", what, m["code"], code, r.Body)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id header", what)
	}
	if status >= 500 {
		if id, _ := m["request_id"].(string); id == "" || id != r.Header.Get("X-Request-Id") {
			t.Errorf("%s: 5xx body request_id %q, want the X-Request-Id %q", what, m["request_id"], r.Header.Get("X-Request-Id"))
		}
	}
	return m
}

// PollUntil calls f every interval until it returns true or timeout
// passes, and reports whether it succeeded and how long it took.
func PollUntil(timeout, interval time.Duration, f func() bool) (bool, time.Duration) {
	start := time.Now()
	for {
		if f() {
			return true, time.Since(start)
		}
		if time.Since(start) > timeout {
			return false, time.Since(start)
		}
		time.Sleep(interval)
	}
}

// CleanEnv is os.Environ without any MSGMESH_* variable, plus kv: a
// process that sees only the settings a test gives it.
func CleanEnv(kv ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "MSGMESH_") {
			continue
		}
		env = append(env, e)
	}
	return append(env, kv...)
}

// RunBinary runs the msgmesh binary to completion with args and env and
// returns its exit code and combined output.
func RunBinary(t testing.TB, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("run msgmesh %v: %v", args, err)
	return -1, ""
}

// RawRequest sends a request with full control of headers (nil header values are
// not sent) and returns the response; network errors are returned, not
// fatal, for use from goroutines.
func RawRequest(client *http.Client, method, url string, body []byte, headers map[string]string) (Response, error) {
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, url, rd)
	} else {
		req, err = http.NewRequest(method, url, nil)
	}
	if err != nil {
		return Response{}, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}, nil
}
