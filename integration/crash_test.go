package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// crashAck is one message a publish answered 2xx for.
type crashAck struct {
	cursor  string
	payload []byte
}

// kill -9 of msgmesh while 16 clients publish: every message that got a
// 2xx is in Kafka at exactly its cursor, byte for byte, and a new process
// on the same cluster becomes ready and serves the topic.
func TestKill9LosesNoAcknowledgedPublish(t *testing.T) {
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr))
	h.Must(t, p.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "crash", "partitions": 4}, 201)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := p.URL + "/v1/topics/crash/messages"
	auth := "Bearer " + c.AdminKey

	var (
		mu      sync.Mutex
		acks    []crashAck
		bad     []string // 2xx answers that do not make sense
		stop    atomic.Bool
		wg      sync.WaitGroup
		nAcked  atomic.Int64
		nFailed atomic.Int64
	)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				var (
					body     []byte
					ct       = "application/json"
					payloads [][]byte
					batch    bool
				)
				switch g % 3 {
				case 0: // single JSON message
					pl := []byte(fmt.Sprintf(`{"g":%d,"i":%d,"kind":"single"}`, g, i))
					payloads = [][]byte{pl}
					body = []byte(fmt.Sprintf(`{"data":%s,"room":"room-%d"}`, pl, i%7))
				case 1: // batch of 1..5
					batch = true
					n := i%5 + 1
					var parts []string
					for j := 0; j < n; j++ {
						pl := []byte(fmt.Sprintf(`{"g":%d,"i":%d,"j":%d,"kind":"batch"}`, g, i, j))
						payloads = append(payloads, pl)
						parts = append(parts, fmt.Sprintf(`{"data":%s,"room":"r%d"}`, pl, j))
					}
					body = []byte(`{"messages":[` + strings.Join(parts, ",") + `]}`)
				default: // raw bytes
					ct = "application/octet-stream"
					pl := []byte(fmt.Sprintf("raw g=%d i=%d \x00\xff", g, i))
					payloads = [][]byte{pl}
					body = pl
				}
				resp, err := h.RawRequest(client, "POST", url, body, map[string]string{"Authorization": auth, "Content-Type": ct})
				if err != nil || resp.Status/100 != 2 {
					nFailed.Add(1)
					if err != nil {
						time.Sleep(5 * time.Millisecond) // the process is gone
					}
					continue
				}
				var out struct {
					Cursor  string   `json:"cursor"`
					Cursors []string `json:"cursors"`
				}
				if err := json.Unmarshal(resp.Body, &out); err != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("2xx with unreadable body %q", resp.Body))
					mu.Unlock()
					continue
				}
				cursors := out.Cursors
				if !batch {
					cursors = []string{out.Cursor}
				}
				mu.Lock()
				if len(cursors) != len(payloads) {
					bad = append(bad, fmt.Sprintf("2xx with %d cursors for %d messages: %s", len(cursors), len(payloads), resp.Body))
				} else {
					for k := range cursors {
						acks = append(acks, crashAck{cursor: cursors[k], payload: payloads[k]})
					}
				}
				mu.Unlock()
				nAcked.Add(int64(len(cursors)))
			}
		}(g)
	}

	// Let traffic flow, then kill -9 mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for nAcked.Load() < 2000 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	p.Kill()
	killedAt := nAcked.Load()
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("acknowledged %d messages (%d when killed), %d requests failed", len(acks), killedAt, nFailed.Load())
	for _, b := range bad {
		t.Error(b)
	}
	if len(acks) < 100 {
		t.Fatalf("only %d messages were acknowledged before the kill; the test needs traffic", len(acks))
	}

	// Every acknowledged message is in Kafka at its cursor, same bytes.
	recs := h.ReadByOffset(t, c.Brokers, c.TenantKafkaTopic("default", "crash"))
	seen := map[string]bool{}
	missing := 0
	for _, a := range acks {
		if seen[a.cursor] {
			t.Errorf("cursor %s was acknowledged twice", a.cursor)
		}
		seen[a.cursor] = true
		part, off, ok := crashParseCursor(a.cursor)
		if !ok {
			t.Errorf("acknowledged cursor %q is not <partition>-<offset>", a.cursor)
			continue
		}
		r := recs[part][off]
		if r == nil {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged message %s (%q) is not in Kafka", a.cursor, a.payload)
			}
			continue
		}
		if !bytes.Equal(r.Value, a.payload) {
			t.Errorf("Kafka record at %s is %q, acknowledged payload was %q", a.cursor, r.Value, a.payload)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged messages are missing from Kafka", missing, len(acks))
	}

	// A new process on the same cluster comes up and serves the topic.
	addr2 := h.FreeAddr(t)
	p2 := h.StartProcess(t, addr2, c.EnvFor(addr2))
	top := h.Must(t, p2.URL, "GET", "/v1/topics/crash", c.AdminKey, nil, 200).JSON(t)
	if top["partitions"] != float64(4) {
		t.Errorf("after restart the topic is %v, want 4 partitions", top)
	}
	pub := h.Must(t, p2.URL, "POST", "/v1/topics/crash/messages", c.AdminKey, map[string]any{"data": "after-restart"}, 200).JSON(t)
	if cur, _ := pub["cursor"].(string); cur == "" || seen[cur] {
		t.Errorf("publish after restart answered cursor %v (must be new)", pub["cursor"])
	}
	poll := h.Must(t, p2.URL, "POST", "/v1/topics/crash/poll", c.AdminKey, map[string]any{"group": "after", "max": 10, "wait_ms": 10000}, 200).JSON(t)
	if msgs, _ := poll["messages"].([]any); len(msgs) == 0 {
		t.Errorf("poll after restart returned no messages: %v", poll)
	}
}

func crashParseCursor(s string) (int32, int64, bool) {
	ps, ofs, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, false
	}
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(ofs, 10, 64)
	return int32(p), o, err1 == nil && err2 == nil
}

// With its Kafka gone, a publish answers 503 kafka_unavailable with a
// request_id within the request timeout, and never a false 2xx.
func TestKafkaUnreachablePublishIs503(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	closeKafka := func() { closeOnce.Do(kc.Close) }
	t.Cleanup(closeKafka)
	addrs := kc.ListenAddrs()

	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) {
		cfg.Kafka.Brokers = addrs
		cfg.Kafka.RequestTimeout = 3 * time.Second
		cfg.HTTP.ShutdownTimeout = 5 * time.Second
	})
	h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": "down", "partitions": 2}, 201)
	h.Must(t, n.URL, "POST", "/v1/topics/down/messages", c.AdminKey, map[string]any{"data": 1}, 200)

	closeKafka()

	client := &http.Client{Timeout: 30 * time.Second}
	bodies := []string{
		`{"data":{"after":"close"}}`,
		`{"messages":[{"data":1},{"data":2},{"data":3}]}`,
		`{"data":"x","room":"r1"}`,
		`{"data":4}`,
	}
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func(i int, b string) {
			defer wg.Done()
			start := time.Now()
			r, err := h.RawRequest(client, "POST", n.URL+"/v1/topics/down/messages", []byte(b),
				map[string]string{"Authorization": "Bearer " + c.AdminKey, "Content-Type": "application/json"})
			took := time.Since(start)
			if err != nil {
				t.Errorf("publish %d with Kafka down: no answer: %v (after %v); want 503 kafka_unavailable within ~15s (kafka.request_timeout 3s)", i, err, took)
				return
			}
			if r.Status/100 == 2 {
				t.Errorf("publish %d with Kafka down answered %d %s: a false acknowledgement", i, r.Status, r.Body)
				return
			}
			h.WantError(t, fmt.Sprintf("publish %d with Kafka down", i), r, 503, "kafka_unavailable")
			if took > 15*time.Second {
				t.Errorf("publish %d with Kafka down took %v, want ≤ 15s (request timeout 3s)", i, took)
			}
			t.Logf("publish %d with Kafka down: %d in %v", i, r.Status, took.Round(time.Millisecond))
		}(i, b)
	}
	wg.Wait()
}

var embeddedKeyRE = regexp.MustCompile(`mm_[A-Za-z0-9_-]{43}`)

// Embedded mode (no brokers, no bootstrap key): the first start prints a
// generated admin key once; it works; a restart on the same data dir
// prints none, the key still works, and topics and messages survive.
func TestEmbeddedBootstrapKeySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	httpAddr, kafkaAddr := h.FreeAddr(t), h.FreeAddr(t)
	env := h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr)

	p := h.StartProcess(t, httpAddr, env)
	keys := embeddedKeyRE.FindAllString(p.Output(), -1)
	if len(keys) != 1 {
		t.Fatalf("first embedded start printed %d keys, want exactly 1:\n%s", len(keys), p.Output())
	}
	key := keys[0]
	ten := h.Must(t, p.URL, "GET", "/v1/tenant", key, nil, 200).JSON(t)
	if ten["id"] != "default" {
		t.Errorf("the generated key belongs to tenant %v, want default", ten["id"])
	}
	h.Must(t, p.URL, "POST", "/v1/topics", key, map[string]any{"name": "keep", "partitions": 2}, 201)
	want := map[string]string{}
	for i := 0; i < 3; i++ {
		pl := fmt.Sprintf(`{"n":%d}`, i)
		r := h.Must(t, p.URL, "POST", "/v1/topics/keep/messages", key, []byte(`{"data":`+pl+`}`), 200).JSON(t)
		want[r["cursor"].(string)] = pl
	}
	if err := p.Terminate(60 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v, want exit 0\n%s", err, p.Output())
	}

	p2 := h.StartProcess(t, httpAddr, env)
	if more := embeddedKeyRE.FindAllString(p2.Output(), -1); len(more) != 0 {
		t.Errorf("restart printed keys %v; the key must be printed only on the first start", more)
	}
	h.Must(t, p2.URL, "GET", "/v1/tenant", key, nil, 200)
	h.Must(t, p2.URL, "GET", "/v1/topics/keep", key, nil, 200)
	got := map[string]string{}
	ok, _ := h.PollUntil(30*time.Second, 0, func() bool {
		r := h.Must(t, p2.URL, "POST", "/v1/topics/keep/poll", key, map[string]any{"group": "after-restart", "wait_ms": 2000}, 200).JSON(t)
		msgs, _ := r["messages"].([]any)
		for _, m := range msgs {
			mm := m.(map[string]any)
			raw, _ := json.Marshal(mm["data"])
			got[mm["cursor"].(string)] = string(raw)
		}
		return len(got) >= len(want)
	})
	if !ok || len(got) != len(want) {
		t.Fatalf("after restart polled %v, want %v", got, want)
	}
	for cur, pl := range want {
		if got[cur] != pl {
			t.Errorf("after restart message %s is %q, want %q", cur, got[cur], pl)
		}
	}
	if err := p2.Terminate(60 * time.Second); err != nil {
		t.Errorf("second SIGTERM: %v, want exit 0", err)
	}
}

// --verify-config reports every bad setting at once, naming each, exit 2.
func TestVerifyConfigNamesEveryBadKey(t *testing.T) {
	code, out := h.RunBinary(t, h.CleanEnv("MSGMESH_HTTP_ADDR=not-an-address", "MSGMESH_LOG_LEVEL=loud",
		"MSGMESH_DATA_DIR="+t.TempDir()), "serve", "--verify-config")
	if code != 2 {
		t.Errorf("exit code %d, want 2\n%s", code, out)
	}
	for _, k := range [][]string{{"http.addr", "MSGMESH_HTTP_ADDR"}, {"log.level", "MSGMESH_LOG_LEVEL"}} {
		if !strings.Contains(out, k[0]) && !strings.Contains(out, k[1]) {
			t.Errorf("output does not name %s:\n%s", k[0], out)
		}
	}
	// And a good configuration verifies with exit 0.
	code, out = h.RunBinary(t, h.CleanEnv("MSGMESH_HTTP_ADDR=127.0.0.1:0", "MSGMESH_DATA_DIR="+t.TempDir()), "serve", "--verify-config")
	if code != 0 {
		t.Errorf("good config: exit code %d, want 0\n%s", code, out)
	}
}
