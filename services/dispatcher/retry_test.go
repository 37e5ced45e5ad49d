package dispatcher

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/names"
)

// A retry record of a webhook this node's control projection does not
// have (yet) is not dropped: the node that wrote it knew the webhook, and
// this one may only be behind. Dropping it committed past a message that
// got neither its next attempt nor a dead letter. It is dropped once the
// projection applied the webhook's deletion, or when it is older than
// unknownGrace.
func TestRetryOfUnknownWebhookWaitsUnlessDeleted(t *testing.T) {
	d := &Dispatcher{cfg: Config{Webhooks: config.Webhooks{BackoffMax: time.Second}}, state: controlstate.NewState(),
		names: names.Mapper{Prefix: "p"}, gone: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
	l := letter{Tenant: "acme", Webhook: "wh_1", Topic: "orders", MessageID: "msg_e_0-5", Cursor: "0-5", Attempt: 2, Posts: 1,
		PublishedAt: time.Now(), Value: []byte(`{}`)}
	fresh := l.Record(d.names.RetryTopic("acme"))
	fresh.Timestamp = time.Now()

	start := time.Now()
	next, done, fin, err := d.retryOne(context.Background(), "acme", fresh)
	if err != nil || done || next != nil || fin != "" {
		t.Fatalf("unknown webhook, fresh record: next %v done %v finished %q err %v; want it left where it is", next, done, fin, err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("left after %v; want a wait before it is read again", took)
	}

	old := l.Record(d.names.RetryTopic("acme"))
	old.Timestamp = time.Now().Add(-2 * unknownGrace)
	if _, done, fin, _ := d.retryOne(context.Background(), "acme", old); !done || fin != attemptKey(l) {
		t.Fatalf("unknown webhook, record older than the grace: done %v finished %q; want dropped", done, fin)
	}

	data, _ := json.Marshal(controlstate.WebhookDeletedData{Tenant: "acme", ID: "wh_1"})
	d.OnControlEvent(controlstate.Event{V: controlstate.SchemaVersion, Type: controlstate.TypeWebhookDeleted, Data: data}, nil)
	start = time.Now()
	if _, done, fin, _ := d.retryOne(context.Background(), "acme", fresh); !done || fin != attemptKey(l) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("deleted webhook: done %v finished %q after %v; want dropped at once", done, fin, time.Since(start))
	}
}
