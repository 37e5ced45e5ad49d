package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// SIGTERM while publishes are in flight: msgmesh exits 0, and every
// publish that was answered 200 is in Kafka at its cursor with its bytes
// (read back with franz-go, independently of msgmesh).
func TestDataPathGracefulShutdownKeepsAcknowledgedPublishes(t *testing.T) {
	const (
		topic      = "shutdown"
		publishers = 8
	)
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	// publishes as fast as it can: not a test of the plan's rate limits
	env := c.EnvFor(addr, append([]string{"MSGMESH_DATA_DIR=" + t.TempDir()}, h.UnlimitedEnv...)...)
	p := h.StartProcess(t, addr, env)
	key := c.AdminKey
	tp := h.CreateTopic(t, p.URL, key, topic, 3)

	type acked struct {
		cursor  string
		payload []byte
	}
	var (
		mu        sync.Mutex
		confirmed []acked
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		afterTerm atomic.Int64 // 200s received after SIGTERM was sent
		termSent  atomic.Bool
		refused   atomic.Int64 // non-200 answers and transport errors
	)
	for g := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// even publishers send single messages, odd ones batches of 10
				n := 1 + (g%2)*9
				payloads := make([][]byte, n)
				var body []byte
				if n == 1 {
					payloads[0] = fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i)
					body = fmt.Appendf(nil, `{"room":"r-%d","data":%s}`, g, payloads[0])
				} else {
					body = []byte(`{"messages":[`)
					for j := range n {
						payloads[j] = fmt.Appendf(nil, `{"g":%d,"i":%d,"j":%d}`, g, i, j)
						if j > 0 {
							body = append(body, ',')
						}
						body = fmt.Appendf(body, `{"room":"r-%d","data":%s}`, g, payloads[j])
					}
					body = append(body, "]}"...)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				st, resp, err := h.DoE(ctx, p.URL, "POST", "/v1/topics/"+topic+"/messages", key, body, "application/json")
				cancel()
				if err != nil || st != http.StatusOK {
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var ans struct {
					Cursor  string   `json:"cursor"`
					Cursors []string `json:"cursors"`
				}
				if err := json.Unmarshal(resp, &ans); err != nil {
					t.Errorf("200 answer %q: %v", resp, err)
					return
				}
				if n == 1 {
					ans.Cursors = []string{ans.Cursor}
				}
				if len(ans.Cursors) != n {
					t.Errorf("200 answer %s for %d messages", resp, n)
					return
				}
				if termSent.Load() {
					afterTerm.Add(1)
				}
				mu.Lock()
				for j := range n {
					confirmed = append(confirmed, acked{ans.Cursors[j], payloads[j]})
				}
				mu.Unlock()
			}
		}()
	}

	// SIGTERM once publishes flow (some confirmed, more in flight).
	flowing, _ := h.PollUntil(30*time.Second, 20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) >= 50
	})
	if !flowing {
		close(stop)
		wg.Wait()
		t.Fatalf("fewer than 50 publishes succeeded in 30s before SIGTERM")
	}
	termSent.Store(true)
	err := p.Terminate(30 * time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("SIGTERM with publishes in flight: %v (want exit 0)\n%s", err, p.Output())
	}

	recs := c.ReadTopic(t, tp.KafkaTopic)
	stored := make(map[string][]byte, len(recs))
	for _, r := range recs {
		stored[fmt.Sprintf("%d-%d", r.Partition, r.Offset)] = r.Value
	}
	missing := 0
	for _, a := range confirmed {
		v, ok := stored[a.cursor]
		switch {
		case !ok:
			missing++
			if missing <= 5 {
				t.Errorf("publish of %s was answered 200 with cursor %s, but Kafka has no record there", a.payload, a.cursor)
			}
		case !bytes.Equal(v, a.payload):
			t.Errorf("cursor %s holds %q, but the publish answered 200 with that cursor was %q", a.cursor, v, a.payload)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged messages are not in Kafka", missing, len(confirmed))
	}
	t.Logf("%d messages acknowledged (%d requests answered 200 after SIGTERM, %d refused or failed); %d records in Kafka",
		len(confirmed), afterTerm.Load(), refused.Load(), len(recs))
}

// A client hanging up on its long-poll is routine (timeouts, page
// reloads): msgmesh must not report it as Kafka being unavailable, at
// ERROR level, which is what operators alert on.
func TestDataPathAbandonedPollIsNotLoggedAsKafkaFailure(t *testing.T) {
	const topic = "hangup"
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr, "MSGMESH_DATA_DIR="+t.TempDir()))
	key := c.AdminKey
	h.CreateTopic(t, p.URL, key, topic, 1)
	// join the group first so the hang-up happens during the wait
	h.Poll(t, p.URL, key, topic, h.PollReq{Group: "g1", Consumer: "c1", WaitMs: 200})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := h.PollE(ctx, p.URL, key, topic, h.PollReq{Group: "g1", Consumer: "c1", WaitMs: 10000})
	cancel()
	if err == nil {
		t.Fatal("the long-poll was expected to be abandoned by the client")
	}
	// the server is still fine, and has logged what it logs
	h.Poll(t, p.URL, key, topic, h.PollReq{Group: "g1", Consumer: "c1", WaitMs: 200})
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	for _, line := range strings.Split(p.Output(), "\n") {
		if strings.Contains(line, "route=/readyz") {
			continue // the readiness probes of StartProcess, before the node was ready
		}
		if strings.Contains(line, "kafka_unavailable") || (strings.Contains(line, "/poll") && strings.Contains(line, "ERROR")) {
			t.Errorf("a client hang-up on a long-poll was logged as a server/Kafka failure:\n%s", line)
		}
	}
}
