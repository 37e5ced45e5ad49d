package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/platform/readmodel"
)

// Every attempt becomes one record of the tenant's attempt log, keyed by
// the webhook id, with the outcome's API name and a redacted error.
func TestAttemptEventsRecord(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "mm.acme.wh.attempt_log"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	e, err := newAttemptEvents(Config{ClientOpts: opts, RequestTimeout: 5 * time.Second}, names.Mapper{Prefix: "mm"})
	if err != nil {
		t.Fatal(err)
	}
	l := letter{Tenant: "acme", Webhook: "wh_1", Topic: "orders", MessageID: "msg", Cursor: "1-7", Attempt: 2}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e.record(l, attemptResult{Status: 503, Outcome: Temporary}, at, 12*time.Millisecond)
	e.record(l, attemptResult{Err: &url.Error{Op: "Post", URL: "https://x.example/h?token=SECRET", Err: errors.New("connection refused")}, Outcome: Temporary}, at, time.Millisecond)
	e.record(l, attemptResult{Outcome: Refused, Err: errors.New("refused")}, at, 0)
	e.close(context.Background())

	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("mm.acme.wh.attempt_log"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []readmodel.AttemptRecord
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "wh_1" {
				t.Errorf("key %q, want the webhook id", r.Key)
			}
			var a readmodel.AttemptRecord
			if err := json.Unmarshal(r.Value, &a); err != nil {
				t.Fatal(err)
			}
			got = append(got, a)
		})
	}
	if len(got) != 3 {
		t.Fatalf("%d records, want 3", len(got))
	}
	first := readmodel.AttemptRecord{Tenant: "acme", WebhookID: "wh_1", Topic: "orders", Cursor: "1-7", MessageID: "msg", Attempt: 2,
		Outcome: "temporary", Status: 503, DurationMs: 12, Time: at}
	if got[0] != first {
		t.Errorf("record %+v, want %+v", got[0], first)
	}
	if got[1].Error != "connection refused" || got[2].Outcome != "guard_refused" {
		t.Errorf("records %+v", got[1:])
	}
}

// Kafka unreachable: recording an attempt returns at once (delivery never
// waits for the attempt log).
func TestAttemptEventsNeverBlock(t *testing.T) {
	e, err := newAttemptEvents(Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, RequestTimeout: time.Second}, names.Mapper{Prefix: "mm"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.cl.Close()
	start := time.Now()
	for i := 0; i < attemptEventsBuffer+100; i++ {
		e.record(letter{Tenant: "acme", Webhook: "wh_1", Attempt: 1}, attemptResult{Status: 200}, time.Now(), 0)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("%d records took %v with Kafka unreachable", attemptEventsBuffer+100, took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for readCounter(e) < 100 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := readCounter(e); n < 100 {
		t.Errorf("%v records counted as dropped beyond the buffer, want at least 100", n)
	}
}

func readCounter(e *attemptEvents) float64 {
	return testutil.ToFloat64(e.dropped)
}
