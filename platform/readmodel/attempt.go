// Package readmodel is MsgMesh's queryable read model: the audit log of
// control changes and the log of every webhook delivery attempt.
//
// Kafka stays the source of truth. The dispatcher appends every attempt
// to its tenant's attempt log topic (<prefix>.<tenant>.wh.attempt_log,
// platform/names); a Projector follows that topic family and the control
// topic into a Store: PostgreSQL (pgx/v5, postgres.url) where one is
// configured, else a bounded in-memory window. The read API
// (GET /v1/audit, GET /v1/webhooks/{id}/attempts) answers from the Store
// and says which ("source": "postgres" | "memory").
package readmodel

import "time"

// Outcomes of an attempt as the attempt log and the API name them.
const (
	OutcomeDelivered    = "delivered"
	OutcomeTemporary    = "temporary"
	OutcomePermanent    = "permanent"
	OutcomeGuardRefused = "guard_refused"
)

// AttemptRecord is the JSON value of one attempt log record (its key is
// the webhook id). Error is already redacted (no URL query, no resolver
// address, at most 300 bytes).
type AttemptRecord struct {
	Tenant    string `json:"tenant"`
	WebhookID string `json:"webhook_id"`
	// Topic is the tenant topic the message came from.
	Topic     string `json:"topic"`
	Cursor    string `json:"cursor"`
	MessageID string `json:"message_id"`
	// Attempt is the attempt's number in the message's sequence (1 first).
	Attempt int    `json:"attempt"`
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered, 0 when there was no answer.
	Status     int       `json:"status"`
	Error      string    `json:"error"`
	DurationMs int64     `json:"duration_ms"`
	Time       time.Time `json:"time"`
}
