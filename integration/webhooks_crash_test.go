package integration

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// crashAttempts is N, webhooks.max_attempts, in the kill -9 tests.
const crashAttempts = 4

// crashReceiver is a local HTTPS endpoint that answers every POST 503 and
// records it; it tells the test (after the answer is flushed) when the
// n-th attempt arrived.
type crashReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []h.Delivery
	notify map[int]chan struct{}
}

func newCrashReceiver(t *testing.T) *crashReceiver {
	rc := &crashReceiver{notify: map[int]chan struct{}{}}
	rc.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, h.Delivery{At: time.Now(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		n := len(rc.got)
		ch := rc.notify[n]
		rc.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if ch != nil {
			close(ch)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

// on returns a channel closed once the n-th request has been answered.
func (rc *crashReceiver) on(n int) chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ch := make(chan struct{})
	rc.notify[n] = ch
	return ch
}

func (rc *crashReceiver) deliveries() []h.Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]h.Delivery(nil), rc.got...)
}

// caFile writes the receiver's certificate for webhooks.unsafe_ca_file.
func (rc *crashReceiver) caFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// crashEnv is the environment of a msgmesh process that may deliver to
// rc: the two loudly named test-only settings, N attempts, short backoff.
func crashEnv(c *h.Cluster, addr, ca string) []string {
	return c.EnvFor(addr,
		"MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS=true",
		"MSGMESH_WEBHOOKS_UNSAFE_CA_FILE="+ca,
		"MSGMESH_WEBHOOKS_MAX_ATTEMPTS="+strconv.Itoa(crashAttempts),
		"MSGMESH_WEBHOOKS_ATTEMPT_TIMEOUT=2s",
		"MSGMESH_WEBHOOKS_BACKOFF_BASE=700ms",
		"MSGMESH_WEBHOOKS_BACKOFF_MAX=3s",
	)
}

// kill -9 of msgmesh in the middle of a webhook's retry sequence: a new
// process on the same cluster finishes the sequence; the endpoint sees N
// attempts in all (N+1 when the kill lands inside attempt 2's window, see
// below), always for the same webhook-id, and exactly one dead letter.
//
// Why N+1 is possible and correct: an attempt's outcome becomes durable
// only when the dispatcher has written the message's next step (here the
// retry record for attempt 3) and Kafka acknowledged it; only then is the
// record of attempt 2 committed. The kill here comes right after the
// endpoint flushed its 503 for attempt 2, so the dispatcher is usually
// still reading that answer or waiting for the retry record's ack. If it
// dies there, attempt 2 has reached the endpoint but left no trace in
// Kafka, and the next process makes it again (at-least-once: the receiver
// deduplicates by webhook-id, which is the same for every attempt). It
// cannot be avoided without recording an attempt's outcome before making
// it, which would instead lose attempts the endpoint never saw. What is
// recorded before each POST is only that it starts (the tenant's attempts
// topic), so the dead letter's attempts is the number of POSTs made: N+1
// here. If the kill lands after the commit, the count is exactly N.
//
// (A kill between the retry record's ack and the commit is a third case:
// the record and the commit are one Kafka transaction, see
// TestWebhookKill9BetweenAckAndCommit.)
func TestWebhookKill9MidRetryAttemptsAndOneDeadLetter(t *testing.T) {
	c := h.NewCluster(t)
	rc := newCrashReceiver(t)
	ca := rc.caFile(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, crashEnv(c, addr, ca))
	h.CreateTopic(t, p.URL, c.AdminKey, "orders", 1)
	wh := h.CreateWebhook(t, p.URL, c.AdminKey, "orders", rc.URL+"/down", "")
	second := rc.on(2)
	publishJSON(t, &h.Node{URL: p.URL}, c.AdminKey, "orders", "", map[string]any{"x": 1})
	select {
	case <-second:
	case <-time.After(30 * time.Second):
		t.Fatalf("the 2nd attempt did not arrive in 30s (%d attempts)", len(rc.deliveries()))
	}
	p.Kill()
	killedAt := len(rc.deliveries())
	if killedAt != 2 {
		t.Fatalf("%d attempts when killed, want 2", killedAt)
	}

	// A new process on the same cluster. Its retry consumer gets the
	// partition once the killed member's session has expired
	// (webhooks.session_timeout, 10 s).
	addr2 := h.FreeAddr(t)
	p2 := h.StartProcess(t, addr2, crashEnv(c, addr2, ca))
	restarted := time.Now()
	ok, _ := h.PollUntil(120*time.Second, 200*time.Millisecond, func() bool { return c.DLQRecords(t, "default", wh.ID) >= 1 })
	if !ok {
		t.Fatalf("no dead letter 120s after the restart; %d attempts in all\n%s", len(rc.deliveries()), p2.Output())
	}
	t.Logf("dead-lettered %v after the restart", time.Since(restarted).Round(time.Millisecond))
	// Any attempt or dead letter still to come would come within the
	// backoff (at most 3 s) plus an attempt.
	time.Sleep(6 * time.Second)

	got := rc.deliveries()
	var ids []string
	verifier, err := standardwebhooks.NewWebhook(wh.Secret)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range got {
		ids = append(ids, d.Header.Get("webhook-id"))
		if err := verifier.Verify(d.Body, d.Header); err != nil {
			t.Errorf("attempt %d: signature does not verify: %v", i+1, err)
		}
		if d.Header.Get("webhook-id") != got[0].Header.Get("webhook-id") {
			t.Errorf("attempt %d has webhook-id %q, attempt 1 %q: the id must not change across attempts", i+1, d.Header.Get("webhook-id"), got[0].Header.Get("webhook-id"))
		}
	}
	switch n := len(got); {
	case n == crashAttempts:
		t.Logf("exactly %d attempts (the kill came after attempt 2's outcome was committed)", n)
	case n == crashAttempts+1:
		t.Logf("%d attempts: the kill came before attempt 2's outcome was durable, so attempt 2 was made again (see the comment)", n)
	default:
		t.Errorf("%d attempts in all (%d before the kill), want %d (or %d if the kill lands inside attempt 2): ids %v",
			n, killedAt, crashAttempts, crashAttempts+1, ids)
	}
	if n := c.DLQRecords(t, "default", wh.ID); n != 1 {
		t.Errorf("%d dead letters in the DLQ topic, want exactly 1", n)
	}
	// The dead letter counts the POSTs really made, the repeated one
	// included (the attempts topic recorded it before it was sent).
	dls := h.InspectDeadLetters(t, p2.URL, c.AdminKey, wh.ID)
	if len(dls) != 1 || dls[0].Attempts != len(got) || dls[0].LastStatus != http.StatusServiceUnavailable || dls[0].MessageID != ids[0] {
		t.Errorf("dead letters %+v, want one saying attempts %d (the POSTs made), last status 503, message id %s", dls, len(got), ids[0])
	}
}

// A kill after the retry record for attempt 3 was written (acknowledged
// by Kafka) but before the retry record of attempt 2 was committed. The
// dispatcher writes the next step and commits the consumed offset in one
// Kafka transaction, so the kill leaves an open transaction that Kafka
// aborts (transaction timeout): the retry record for attempt 3 is never
// seen by read_committed readers, the group's offset stays on attempt 2's
// record, and the new process makes attempt 2 again. Before transactions
// the record survived next to the repeated attempt's own and the sequence
// forked (7 attempts and 2 dead letters for N = 4).
//
// The window is held open with the test-only
// webhooks.unsafe_test_hold_retry_commit, and the kill comes once the
// record for attempt 3 is in the retry topic (read uncommitted). Exactly
// one dead letter; N+1 attempts, the +1 being attempt 2, in flight (made,
// outcome not committed) at the kill.
func TestWebhookKill9BetweenAckAndCommit(t *testing.T) {
	c := h.NewCluster(t)
	rc := newCrashReceiver(t)
	ca := rc.caFile(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, append(crashEnv(c, addr, ca), "MSGMESH_WEBHOOKS_UNSAFE_TEST_HOLD_RETRY_COMMIT=10m"))
	h.CreateTopic(t, p.URL, c.AdminKey, "orders", 1)
	wh := h.CreateWebhook(t, p.URL, c.AdminKey, "orders", rc.URL+"/down", "")
	second := rc.on(2)
	publishJSON(t, &h.Node{URL: p.URL}, c.AdminKey, "orders", "", map[string]any{"x": 1})
	select {
	case <-second:
	case <-time.After(30 * time.Second):
		t.Fatalf("the 2nd attempt did not arrive in 30s")
	}
	retryTopic := c.Prefix + ".default.wh.retry"
	// Wait until the retry record for attempt 3 is written (uncommitted:
	// the dispatcher holds the transaction open).
	ok, _ := h.PollUntil(20*time.Second, 20*time.Millisecond, func() bool {
		for _, recs := range h.ReadByOffset(t, c.Brokers, retryTopic) {
			for _, r := range recs {
				if retryAttempt(r) == 3 {
					return true
				}
			}
		}
		return false
	})
	if !ok {
		t.Fatal("the retry record for attempt 3 was not written in 20s")
	}
	p.Kill()
	if n := len(rc.deliveries()); n != 2 {
		t.Fatalf("%d attempts when killed, want 2", n)
	}

	addr2 := h.FreeAddr(t)
	p2 := h.StartProcess(t, addr2, crashEnv(c, addr2, ca))
	// The new retry consumer gets the partition once the killed member's
	// session expired (webhooks.session_timeout, 10 s) and reads past the
	// killed process's transaction once Kafka aborted it (its timeout,
	// 2 × kafka.request_timeout + 5 s).
	ok, _ = h.PollUntil(120*time.Second, 200*time.Millisecond, func() bool { return c.DLQRecords(t, "default", wh.ID) >= 1 })
	if !ok {
		t.Fatalf("no dead letter 120s after the restart; %d attempts\n%s", len(rc.deliveries()), p2.Output())
	}
	time.Sleep(8 * time.Second)
	got, dead := len(rc.deliveries()), c.DLQRecords(t, "default", wh.ID)
	t.Logf("%d attempts in all, %d dead letters", got, dead)
	if got != crashAttempts+1 || dead != 1 {
		t.Errorf("a crash between the retry record's ack and the commit: %d attempts (want N+1 = %d: attempt 2 again) and %d dead letters (want 1)",
			got, crashAttempts+1, dead)
	}
	for _, recs := range h.ReadCommitted(t, c.Brokers, retryTopic) {
		n := map[int]int{}
		for _, r := range recs {
			n[retryAttempt(r)]++
		}
		for a, k := range n {
			if k != 1 {
				t.Errorf("%d committed retry records for attempt %d, want 1 (forked sequence)", k, a)
			}
		}
	}
	// N+1 POSTs were made: the dead letter says so (it said N before the
	// attempts topic recorded each POST before it was sent).
	dls := h.InspectDeadLetters(t, p2.URL, c.AdminKey, wh.ID)
	if len(dls) != 1 || dls[0].Attempts != got {
		t.Errorf("dead letters %+v, want one saying attempts %d (the POSTs made)", dls, got)
	}
}

// retryAttempt is the attempt number a retry record carries (0 if none).
func retryAttempt(r *kgo.Record) int {
	for _, hd := range r.Headers {
		if hd.Key == "msgmesh-attempt" {
			n, _ := strconv.Atoi(string(hd.Value))
			return n
		}
	}
	return 0
}

// kill -9 of msgmesh while it delivers first attempts at full speed: a
// webhook's member commits its offsets (with the next steps, one
// transaction) once per window of about 500 ms, so the new process
// delivers again only what was POSTed since the last commit: messages
// first POSTed within a window (plus the poll in flight and its commit)
// before the kill. Nothing is lost, no message is POSTed more than twice,
// and a repeat keeps its webhook-id.
func TestWebhookKill9DuringFirstAttemptsRepeatsAtMostOneWindow(t *testing.T) {
	const total = 10000
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	ca := rc.CAFile(t)
	unlimited := []string{"MSGMESH_LIMITS_FREE_MESSAGES_PER_SECOND=0", "MSGMESH_LIMITS_FREE_REQUESTS_PER_SECOND=0"}
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, append(crashEnv(c, addr, ca), unlimited...))
	h.CreateTopic(t, p.URL, c.AdminKey, "orders", 3)
	h.CreateWebhook(t, p.URL, c.AdminKey, "orders", rc.URLFor("", "/ok"), "")
	for b := range total / 100 {
		msgs := make([]map[string]any, 100)
		for i := range msgs {
			msgs[i] = map[string]any{"room": "r" + strconv.Itoa(i%12), "data": map[string]any{"seq": b*100 + i}}
		}
		h.Must(t, p.URL, "POST", "/v1/topics/orders/messages", c.AdminKey, map[string]any{"messages": msgs}, http.StatusOK)
	}
	if ok, _ := h.PollUntil(60*time.Second, 5*time.Millisecond, func() bool { return len(rc.Got("/ok")) >= 5000 }); !ok {
		t.Fatalf("%d deliveries in 60s, want 5000 before the kill", len(rc.Got("/ok")))
	}
	p.Kill()
	killAt := time.Now()
	before := len(rc.Got("/ok"))

	addr2 := h.FreeAddr(t)
	p2 := h.StartProcess(t, addr2, append(crashEnv(c, addr2, ca), unlimited...))
	type seen struct {
		first time.Time
		posts int
		ids   map[string]bool
	}
	tally := func() map[int]*seen {
		m := map[int]*seen{}
		for _, d := range rc.Got("/ok") {
			var body struct {
				ID   string `json:"id"`
				Data struct {
					Seq int `json:"seq"`
				} `json:"data"`
			}
			if err := json.Unmarshal(d.Body, &body); err != nil {
				t.Fatalf("body %s: %v", d.Body, err)
			}
			s := m[body.Data.Seq]
			if s == nil {
				s = &seen{first: d.At, ids: map[string]bool{}}
				m[body.Data.Seq] = s
			}
			s.posts++
			s.ids[body.ID+" "+d.Header.Get("webhook-id")] = true
		}
		return m
	}
	if ok, _ := h.PollUntil(120*time.Second, 100*time.Millisecond, func() bool { return len(tally()) == total }); !ok {
		t.Fatalf("%d of %d messages delivered 120s after the restart\n%s", len(tally()), total, p2.Output())
	}
	window := 500*time.Millisecond + 500*time.Millisecond + 3*time.Second // commitEvery + pollBudget + slack for a loaded machine
	repeated := 0
	for seq, s := range tally() {
		if s.posts > 1 {
			repeated++
			if s.posts > 2 {
				t.Errorf("message %d POSTed %d times", seq, s.posts)
			}
			if s.first.Before(killAt.Add(-window)) {
				t.Errorf("message %d first POSTed %v before the kill, and again after it: its offset was not committed for longer than a window",
					seq, killAt.Sub(s.first).Round(time.Millisecond))
			}
		}
		if len(s.ids) != 1 {
			t.Errorf("message %d: webhook-id and body id vary: %v", seq, s.ids)
		}
	}
	t.Logf("%d POSTs before the kill; %d messages POSTed again after it", before, repeated)
}
