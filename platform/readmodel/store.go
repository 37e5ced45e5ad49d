package readmodel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sources a page says it came from.
const (
	SourcePostgres = "postgres"
	SourceMemory   = "memory"
)

// Position is a Kafka record's place: the read model's identity of a row
// (rows are idempotent by it).
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// AuditEvent is one applied control change as the API shows it. Details
// never hold a secret (no key hash, no sealed or plaintext secret, URLs
// without userinfo, query or fragment).
type AuditEvent struct {
	// ID is "<kafka topic>:<partition>-<offset>" of the control record.
	ID      string         `json:"id"`
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"`
	Actor   string         `json:"actor"`
	Summary string         `json:"summary"`
	Details map[string]any `json:"details"`

	Tenant string   `json:"-"`
	Pos    Position `json:"-"`
}

// Attempt is one webhook delivery attempt as the API shows it.
type Attempt struct {
	WebhookID  string    `json:"webhook_id"`
	Cursor     string    `json:"cursor"`
	MessageID  string    `json:"message_id"`
	Attempt    int       `json:"attempt"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status"`
	Error      string    `json:"error"`
	DurationMs int64     `json:"duration_ms"`
	Time       time.Time `json:"time"`

	Tenant string   `json:"-"`
	Topic  string   `json:"-"`
	Pos    Position `json:"-"`
}

// Entry is one projected record: an audit event, an attempt, or neither
// (a record that projects to nothing still advances its position).
type Entry struct {
	Pos     Position
	Audit   *AuditEvent
	Attempt *Attempt
}

// Batch is what one Apply makes durable at once: the entries and, for
// each partition they came from, the next offset to read.
type Batch struct {
	Entries []Entry
	// Next is the next offset of each topic partition the batch covers.
	Next map[string]map[int32]int64
}

// AuditQuery filters GET /v1/audit. Zero fields do not filter.
type AuditQuery struct {
	Since, Until time.Time // Since inclusive, Until exclusive
	Type         string
	Limit        int
	After        *Key
}

// AttemptQuery filters GET /v1/webhooks/{id}/attempts. Zero fields do not
// filter; Status -1 does not filter (0 matches attempts with no answer).
type AttemptQuery struct {
	Since, Until time.Time
	Outcome      string
	Status       int
	Cursor       string
	Limit        int
	After        *Key
}

// Key is a keyset pagination position: pages go newest first, by time,
// then partition, then offset.
type Key struct {
	Time      time.Time `json:"t"`
	Partition int32     `json:"p"`
	Offset    int64     `json:"o"`
}

// before reports whether (t, pos) sorts after k in a newest-first listing.
func (k *Key) before(t time.Time, p Position) bool {
	if k == nil {
		return true
	}
	if !t.Equal(k.Time) {
		return t.Before(k.Time)
	}
	if p.Partition != k.Partition {
		return p.Partition < k.Partition
	}
	return p.Offset < k.Offset
}

// newer reports whether a sorts before b newest first.
func newer(at time.Time, a Position, bt time.Time, b Position) bool {
	if !at.Equal(bt) {
		return at.After(bt)
	}
	if a.Partition != b.Partition {
		return a.Partition > b.Partition
	}
	return a.Offset > b.Offset
}

// ErrBadPageToken is returned by ParseKey for an after value that is not
// a next of a previous page.
var ErrBadPageToken = errors.New("after is not the next value of a previous page")

// Encode is k as a page token.
func (k Key) Encode() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseKey reads a page token made by Encode.
func ParseKey(s string) (*Key, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadPageToken
	}
	var k Key
	if err := json.Unmarshal(b, &k); err != nil || k.Time.IsZero() || k.Offset < 0 {
		return nil, ErrBadPageToken
	}
	return &k, nil
}

// AuditPage is one page of audit events; Next is nil on the last page.
type AuditPage struct {
	Events []AuditEvent
	Next   *Key
}

// AttemptPage is one page of attempts; Next is nil on the last page.
type AttemptPage struct {
	Attempts []Attempt
	Next     *Key
}

// Store holds the read model. The Projector writes it, the read API reads
// it. Memory is the bounded in-memory window; Postgres the database.
type Store interface {
	// Source is SourcePostgres or SourceMemory.
	Source() string
	// Positions are the stored next offsets, by topic and partition.
	Positions(ctx context.Context) (map[string]map[int32]int64, error)
	// Apply makes b durable at once (rows and positions together).
	// Entries at positions already applied are skipped.
	Apply(ctx context.Context, b Batch) error
	// Audit lists tenant's audit events, newest first.
	Audit(ctx context.Context, tenant string, q AuditQuery) (AuditPage, error)
	// Attempts lists the attempts of tenant's webhook, newest first.
	Attempts(ctx context.Context, tenant, webhookID string, q AttemptQuery) (AttemptPage, error)
}

// limitOf is q's limit, 100 by default and 1000 at most.
func limitOf(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}

// MaxLimit is the largest page.
const MaxLimit = 1000

// idOf is an AuditEvent.ID.
func idOf(p Position) string { return fmt.Sprintf("%s:%d-%d", p.Topic, p.Partition, p.Offset) }
