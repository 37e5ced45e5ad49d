package dispatcher

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/message"
	"github.com/msgmesh/msgmesh/platform/ssrf"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// Outcome classifies one delivery attempt (spec section 2, "When a
// delivery fails").
type Outcome int

// Outcomes.
const (
	// Delivered: the endpoint answered 2xx.
	Delivered Outcome = iota
	// Permanent: one of the nine codes a resend cannot change; the message
	// is dead-lettered on this attempt.
	Permanent
	// Temporary: anything else (timeouts, connection and DNS failures,
	// other 5xx, every 3xx since redirects are never followed, 401, 403,
	// 408, 409, 429); retried until the attempts run out.
	Temporary
	// Refused: the SSRF guard refused the address actually dialled. Not an
	// attempt: the webhook is disabled and the message stays where it is.
	Refused
)

func (o Outcome) String() string {
	return [...]string{"delivered", "permanent", "temporary", "refused"}[o]
}

// permanentCodes are the nine statuses dead-lettered at once.
var permanentCodes = map[int]bool{400: true, 404: true, 405: true, 410: true, 413: true, 414: true, 415: true, 422: true, 501: true}

// Classify returns the outcome of an attempt that got status (0 when it
// got no answer) or err.
func Classify(status int, err error) Outcome {
	switch {
	case err != nil && errors.Is(err, ssrf.ErrForbidden):
		return Refused
	case err != nil:
		return Temporary
	case status >= 200 && status <= 299:
		return Delivered
	case permanentCodes[status]:
		return Permanent
	default:
		return Temporary
	}
}

// attemptResult is what one attempt got.
type attemptResult struct {
	Status  int
	Err     error
	Outcome Outcome
}

// describe is the dead letter's "last error" text, redacted (no URL
// query, no resolver address) and capped (RedactError).
func (r attemptResult) describe() string {
	return webhookstore.RedactError(r.Err)
}

// Sign returns the Standard Webhooks signature header value for a message:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)), where
// key is the base64 part of a "whsec_" secret.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// post makes one attempt: POST body to url, signed, within the attempt
// timeout. The response body is read (64 KiB at most) and dropped.
func (d *Dispatcher) post(ctx context.Context, url, secret, id string, body []byte) attemptResult {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Webhooks.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{Err: err, Outcome: Temporary}
	}
	ts := time.Now().Unix()
	sig, err := Sign(secret, id, ts, body)
	if err != nil {
		return attemptResult{Err: err, Outcome: Temporary}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "MsgMesh-Webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	// The attempt's span (if the message is traced): the receiver's spans
	// join the publisher's trace (W3C Trace Context).
	d.cfg.Tracer.InjectHTTP(ctx, req.Header)
	resp, err := d.httpClient().Do(req)
	if err != nil {
		return attemptResult{Err: err, Outcome: Classify(0, err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return attemptResult{Status: resp.StatusCode, Outcome: Classify(resp.StatusCode, nil)}
}

// body is the JSON a webhook receives for l: the message as poll shows it
// (platform/message) with the stable message id and the topic first:
//
//	{"id","topic","cursor","room","data" | "data_base64","headers","published_at"}
//
// id equals the webhook-id header and stays the same across retries.
func body(l letter) []byte {
	r := &kgo.Record{Key: l.Room, Value: l.Value, Headers: l.Headers, Timestamp: l.PublishedAt}
	if c, err := cursor.Parse(l.Cursor); err == nil {
		r.Partition, r.Offset = c.Partition, c.Offset
	}
	id, _ := json.Marshal(l.MessageID)
	topic, _ := json.Marshal(l.Topic)
	b := make([]byte, 0, len(l.Value)*4/3+256)
	b = append(b, `{"id":`...)
	b = append(b, id...)
	b = append(b, `,"topic":`...)
	b = append(b, topic...)
	b = append(b, ',')
	n := len(b)
	b = message.Append(b, r)
	// message.Append wrote its own opening brace at n: drop it.
	return append(b[:n], b[n+1:]...)
}
