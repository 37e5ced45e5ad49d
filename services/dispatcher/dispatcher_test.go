package dispatcher

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/ssrf"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// The spec's table (section 2): nine permanent codes, everything else
// temporary, guard refusals apart.
func TestClassify(t *testing.T) {
	permanent := map[int]bool{400: true, 404: true, 405: true, 410: true, 413: true, 414: true, 415: true, 422: true, 501: true}
	for status := 100; status < 600; status++ {
		want := Temporary
		switch {
		case status >= 200 && status < 300:
			want = Delivered
		case permanent[status]:
			want = Permanent
		}
		if got := Classify(status, nil); got != want {
			t.Errorf("status %d: %v, want %v", status, got, want)
		}
	}
	if got := Classify(0, context.DeadlineExceeded); got != Temporary {
		t.Errorf("timeout: %v, want temporary", got)
	}
	refusal := fmt.Errorf("post: %w", &ssrf.Refusal{Host: "x", Reason: "loopback"})
	if got := Classify(0, refusal); got != Refused {
		t.Errorf("guard refusal: %v, want refused", got)
	}
	if got := Classify(0, errors.New("dial tcp: lookup x: no such host")); got != Temporary {
		t.Errorf("DNS failure: %v, want temporary", got)
	}
}

func TestSignStandardWebhooks(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	got, err := Sign(secret, "msg_1", 1700000000, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(`msg_1.1700000000.{"a":1}`))
	if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func TestLetterRoundTripAndBody(t *testing.T) {
	l := letter{Tenant: "acme", Webhook: "wh_1", Topic: "orders", MessageID: "msg_e_0-5", Cursor: "0-5", Room: []byte("r1"),
		PublishedAt: time.UnixMilli(1700000000123), Value: []byte(`{"n":1}`), Attempt: 2, NotBefore: time.UnixMilli(1700000001000),
		LastStatus: 503, Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}, {Key: "x", Value: []byte("y")}}}
	got, err := webhookstore.ParseLetter(l.Record("t"))
	if err != nil {
		t.Fatal(err)
	}
	got.Tenant = l.Tenant
	if fmt.Sprint(got) != fmt.Sprint(l) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, l)
	}
	var b map[string]any
	if err := json.Unmarshal(body(l), &b); err != nil {
		t.Fatalf("body %s: %v", body(l), err)
	}
	if b["id"] != "msg_e_0-5" || b["topic"] != "orders" || b["cursor"] != "0-5" || b["room"] != "r1" || b["data"].(map[string]any)["n"] != float64(1) {
		t.Fatalf("body %s", body(l))
	}
}

func TestBackoffExponentialCappedWithJitter(t *testing.T) {
	d := &Dispatcher{cfg: Config{Webhooks: config.Webhooks{BackoffBase: 500 * time.Millisecond, BackoffMax: 8 * time.Second}}}
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 5: 8 * time.Second, 9: 8 * time.Second} {
		for i := 0; i < 50; i++ {
			if got := d.backoffFor(n); got > want || got < want*8/10 {
				t.Fatalf("backoff after attempt %d: %v, want %v less up to 20%%", n, got, want)
			}
		}
	}
}
