package harness

// Helpers for the webhook tests: a local HTTPS receiver whose answer is
// scripted per path, the PEM file that makes the dispatcher trust it, a
// DNS resolver the test controls, and the webhook API calls.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
)

// Delivery is one request a Receiver got.
type Delivery struct {
	At     time.Time
	Path   string
	Header http.Header
	Body   []byte
}

// Payload decodes the delivery's JSON body.
func (d Delivery) Payload(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(d.Body, &m); err != nil {
		t.Fatalf("webhook body is not a JSON object: %q", d.Body)
	}
	return m
}

// Receiver is a local HTTPS endpoint (httptest.NewTLSServer on 127.0.0.1)
// that records every request and answers with what Answer says for its
// path: a status (0 = 200), or Hang to never answer.
type Receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []Delivery
	answers map[string]int
}

// Hang is the Answer that makes the receiver hold the request without
// answering (until the client gives up).
const Hang = -1

// NewReceiver starts a Receiver, closed when t ends.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{answers: map[string]int{}}
	rc.Server = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, Delivery{At: time.Now(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	status := rc.answers[r.URL.Path]
	rc.mu.Unlock()
	switch {
	case status == Hang:
		<-r.Context().Done()
		return
	case status == 0:
		status = http.StatusOK
	case status >= 300 && status < 400:
		w.Header().Set("Location", r.URL.Path+"/")
	}
	w.WriteHeader(status)
}

// Answer makes requests to path get status (0 = 200, Hang = none).
func (rc *Receiver) Answer(path string, status int) {
	rc.mu.Lock()
	rc.answers[path] = status
	rc.mu.Unlock()
}

// Got returns the requests to path so far ("" = every path), in arrival
// order.
func (rc *Receiver) Got(path string) []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Delivery
	for _, d := range rc.got {
		if path == "" || d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// URLFor is the receiver's https URL for path with host in place of
// 127.0.0.1 (host "" keeps 127.0.0.1). The test certificate is valid for
// 127.0.0.1, ::1 and example.com.
func (rc *Receiver) URLFor(host, path string) string {
	u := rc.URL
	if host != "" {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(u, "https://"))
		u = "https://" + host + ":" + port
	}
	return u + path
}

// CAFile writes the receiver's certificate as a PEM file (for
// webhooks.unsafe_ca_file) and returns its path.
func (rc *Receiver) CAFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "receiver-ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WebhookConfig returns a config mutator for webhook tests: the test-only
// private-target and CA settings pointed at rc, attempts, a short
// attempt timeout and backoff.
func WebhookConfig(t testing.TB, rc *Receiver, attempts int, timeout, backoff time.Duration) func(*config.Config) {
	ca := rc.CAFile(t)
	return func(c *config.Config) {
		c.Webhooks.UnsafeAllowPrivateTargets = true
		c.Webhooks.UnsafeCAFile = ca
		c.Webhooks.MaxAttempts = attempts
		c.Webhooks.AttemptTimeout = timeout
		c.Webhooks.BackoffBase = backoff
		c.Webhooks.BackoffMax = 4 * backoff
		c.Webhooks.Concurrency = 8
	}
}

// FakeDNS is a resolver the test scripts: each name answers the
// addresses last set for it; unknown names are not found.
type FakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
}

// NewFakeDNS returns an empty FakeDNS.
func NewFakeDNS() *FakeDNS { return &FakeDNS{names: map[string][]netip.Addr{}} }

// Set makes name resolve to addrs.
func (f *FakeDNS) Set(name string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[name] = nil
	for _, a := range addrs {
		f.names[name] = append(f.names[name], netip.MustParseAddr(a))
	}
}

// LookupNetIP implements ssrf.Resolver.
func (f *FakeDNS) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	addrs, ok := f.names[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		if network == "ip" || (network == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

// Webhook is a webhook as the API answers.
type Webhook struct {
	ID             string  `json:"id"`
	Topic          string  `json:"topic"`
	URL            string  `json:"url"`
	Room           *string `json:"room"`
	Secret         string  `json:"secret"`
	Enabled        bool    `json:"enabled"`
	DisabledReason string  `json:"disabled_reason"`
	Group          string  `json:"group"`
}

// CreateWebhook registers url on topic (room "" = every room).
func CreateWebhook(t testing.TB, base, key, topic, url, room string) Webhook {
	t.Helper()
	body := map[string]any{"topic": topic, "url": url}
	if room != "" {
		body["room"] = room
	}
	r := Must(t, base, "POST", "/v1/webhooks", key, body, http.StatusCreated)
	var w Webhook
	if err := json.Unmarshal(r.Body, &w); err != nil || w.ID == "" || !strings.HasPrefix(w.Secret, "whsec_") {
		t.Fatalf("create webhook answer %s (%v)", r.Body, err)
	}
	return w
}

// GetWebhook reads webhook id.
func GetWebhook(t testing.TB, base, key, id string) Webhook {
	t.Helper()
	r := Must(t, base, "GET", "/v1/webhooks/"+id, key, nil, http.StatusOK)
	var w Webhook
	if err := json.Unmarshal(r.Body, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// DeadLetter is one dead letter as inspection shows it.
type DeadLetter struct {
	Cursor         string          `json:"cursor"`
	MessageID      string          `json:"message_id"`
	OriginalCursor string          `json:"original_cursor"`
	Data           json.RawMessage `json:"data"`
	Attempts       int             `json:"attempts"`
	LastStatus     int             `json:"last_status"`
	LastError      string          `json:"last_error"`
}

// InspectDeadLetters runs one (one-shot) inspection of webhook id.
func InspectDeadLetters(t testing.TB, base, key, id string) []DeadLetter {
	t.Helper()
	r := Must(t, base, "GET", "/v1/webhooks/"+id+"/dead-letters?max=1000", key, nil, http.StatusOK)
	var out struct {
		DeadLetters []DeadLetter `json:"dead_letters"`
		Note        string       `json:"note"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Note, "does not mean there are no dead letters") {
		t.Fatalf("inspection answer has no one-shot note: %s", r.Body)
	}
	return out.DeadLetters
}

// DLQRecords counts webhook id's records in the tenant's dead-letter
// topic, read straight from Kafka (what kcat sees; inspection does not
// change it).
func (c *Cluster) DLQRecords(t testing.TB, tenant, id string) int {
	t.Helper()
	topic := c.Prefix + "." + tenant + ".dlq"
	n := 0
	for _, recs := range ReadCommitted(t, c.Brokers, topic) {
		for _, r := range recs {
			if string(r.Key) == id {
				n++
			}
		}
	}
	return n
}

// ReadCommitted reads every record of kafkaTopic a read_committed consumer
// sees (up to the last stable offset), by partition and offset. The
// dispatcher writes retry and dead-letter records in transactions: a
// record of an aborted transaction is not a retry or a dead letter.
func ReadCommitted(t testing.TB, brokers []string, kafkaTopic string) map[int32]map[int64]*kgo.Record {
	t.Helper()
	adm := KafkaAdmin(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lso, err := adm.ListCommittedOffsets(ctx, kafkaTopic)
	if err == nil {
		err = lso.Error()
	}
	out := map[int32]map[int64]*kgo.Record{}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return out
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", kafkaTopic, err)
	}
	parts := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) {
		out[o.Partition] = map[int64]*kgo.Record{}
		if o.Offset > 0 {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			ends[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kafkaTopic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer cl.Close()
	done := map[int32]bool{}
	for len(done) < len(parts) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: timed out; done partitions %v of %v", kafkaTopic, done, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				out[r.Partition][r.Offset] = r
			}
			if r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out
}
