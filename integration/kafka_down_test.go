package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// lateBroker is a TCP address that refuses connections until Open, then
// forwards them to the broker: Kafka "coming back". (Clients learn the
// broker's own advertised address from the metadata it answers.)
type lateBroker struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
}

func (b *lateBroker) Open(t *testing.T) {
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatalf("listen %s: %v", b.addr, err)
	}
	b.mu.Lock()
	b.ln = ln
	b.mu.Unlock()
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				up, err := net.Dial("tcp", b.target)
				if err != nil {
					return
				}
				defer func() { _ = up.Close() }()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
}

type serveOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *serveOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *serveOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With the brokers unreachable at start, `msgmesh serve` stays up: it
// retries with backoff, /healthz answers 200 and /readyz 503
// kafka_unavailable with the reason, and it becomes ready (and serves)
// once Kafka comes back. Before, it exited within milliseconds.
func TestServeStaysUpUntilKafkaComesBack(t *testing.T) {
	c := h.NewCluster(t)
	broker := &lateBroker{addr: h.FreeAddr(t), target: c.Brokers[0]}
	addr := h.FreeAddr(t)
	out := &serveOutput{}
	cmd := exec.Command(h.Binary(t), "serve")
	cmd.Env = append(c.EnvFor(addr), "MSGMESH_KAFKA_BROKERS="+broker.addr, "MSGMESH_KAFKA_REQUEST_TIMEOUT=2s")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("msgmesh output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	get := func(path string) h.Response {
		r, err := h.RawRequest(h.Client, "GET", base+path, nil, nil)
		if err != nil {
			return h.Response{}
		}
		return r
	}
	ok, _ := h.PollUntil(20*time.Second, 50*time.Millisecond, func() bool { return get("/healthz").Status == http.StatusOK })
	if !ok {
		select {
		case <-exited:
			t.Fatalf("msgmesh exited with the brokers unreachable: %v", exitErr)
		default:
		}
		t.Fatal("/healthz did not answer 200 within 20s")
	}
	// It keeps trying for a while: still up, not ready, and says why
	// once its first attempt failed (before that, within milliseconds of
	// the start, it is 503 not_ready: catching up, with no reason yet).
	var last h.Response
	ok, _ = h.PollUntil(20*time.Second, 100*time.Millisecond, func() bool {
		last = get("/readyz")
		var e struct{ Code string }
		return last.Status == http.StatusServiceUnavailable && json.Unmarshal(last.Body, &e) == nil && e.Code == "kafka_unavailable"
	})
	if !ok {
		t.Fatalf("/readyz never answered 503 kafka_unavailable within 20s: %d %s", last.Status, last.Body)
	}
	body := h.WantError(t, "/readyz with Kafka down", last, http.StatusServiceUnavailable, "kafka_unavailable")
	if msg, _ := body["error"].(string); !strings.Contains(msg, broker.addr) && !strings.Contains(msg, "refused") && !strings.Contains(msg, "dial") {
		t.Errorf("/readyz error %q does not give the reason (the dial error)", msg)
	}
	time.Sleep(5 * time.Second)
	select {
	case <-exited:
		t.Fatalf("msgmesh exited while Kafka was down: %v", exitErr)
	default:
	}
	if r := get("/healthz"); r.Status != http.StatusOK {
		t.Fatalf("/healthz %d while Kafka is down, want 200", r.Status)
	}
	if r := get("/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d while Kafka is down, want 503", r.Status)
	}
	r := h.Do(t, base, "GET", "/v1/topics", c.AdminKey, nil)
	h.WantError(t, "API while Kafka is down", r, http.StatusServiceUnavailable, "not_ready")
	downLines := strings.Count(out.String(), "level=WARN") + strings.Count(out.String(), "level=ERROR")

	broker.Open(t)
	ok, took := h.PollUntil(60*time.Second, 100*time.Millisecond, func() bool { return get("/readyz").Status == http.StatusOK })
	if !ok {
		t.Fatalf("not ready 60s after Kafka came back: %d %s", get("/readyz").Status, get("/readyz").Body)
	}
	t.Logf("ready %v after Kafka came back; %d warnings while it was down", took.Round(time.Millisecond), downLines)
	h.CreateTopic(t, base, c.AdminKey, "orders", 1)
	publishJSON(t, &h.Node{URL: base}, c.AdminKey, "orders", "", map[string]any{"back": true})
	// Retries back off: the log stays small while Kafka is down.
	if downLines > 40 {
		t.Errorf("%d warnings in the first ~10s with Kafka down, want a few (retries back off)", downLines)
	}
}
