package msgmesh

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The kinds of server error, by HTTP status (spec section 6). An *Error
// matches exactly one of them with errors.Is:
//
//	400, 422    ErrInvalidRequest  fix the request (Code says what)
//	401         ErrUnauthorized    the key is unknown or revoked, the token expired
//	403         ErrForbidden       the key's capabilities do not allow it
//	404         ErrNotFound        no such topic, webhook or key
//	409         ErrConflict        it exists already
//	413         ErrPayloadTooLarge the message or body is over the limit
//	429         ErrRateLimited     wait RetryAfter, then retry
//	5xx         ErrServer          retry with backoff (RequestID identifies it)
var (
	ErrInvalidRequest  = errors.New("msgmesh: invalid request")
	ErrUnauthorized    = errors.New("msgmesh: unauthorized")
	ErrForbidden       = errors.New("msgmesh: forbidden")
	ErrNotFound        = errors.New("msgmesh: not found")
	ErrConflict        = errors.New("msgmesh: conflict")
	ErrPayloadTooLarge = errors.New("msgmesh: payload too large")
	ErrRateLimited     = errors.New("msgmesh: rate limited")
	ErrServer          = errors.New("msgmesh: server error")
)

// Error is a non-2xx answer of the API.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the stable machine-readable code, e.g. "topic_not_found",
	// "forbidden", "token_expired" (proto/openapi.yaml lists them).
	Code string
	// Message is the server's human-readable "error".
	Message string
	// RequestID is the X-Request-Id (quote it when reporting a 5xx).
	RequestID string
	// RetryAfter is the Retry-After of a 429 or 503 (0 when absent).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("msgmesh: %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Status >= 500 && e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Unwrap returns the error's kind (ErrNotFound, ...), or nil for a status
// outside the list.
func (e *Error) Unwrap() error {
	switch {
	case e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity:
		return ErrInvalidRequest
	case e.Status == http.StatusUnauthorized:
		return ErrUnauthorized
	case e.Status == http.StatusForbidden:
		return ErrForbidden
	case e.Status == http.StatusNotFound:
		return ErrNotFound
	case e.Status == http.StatusConflict:
		return ErrConflict
	case e.Status == http.StatusRequestEntityTooLarge:
		return ErrPayloadTooLarge
	case e.Status == http.StatusTooManyRequests:
		return ErrRateLimited
	case e.Status >= 500:
		return ErrServer
	}
	return nil
}

// retryable: worth reconnecting a subscription after (rate limits,
// server errors, a node that is not ready).
// suspended is a 403 of a billing suspension: it lifts by itself when the
// tenant is reinstated (a top-up, spec section 6), so a running
// subscription retries it with backoff (sdks/SEMANTICS.md); any other 403
// stays terminal.
func suspended(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden && e.Code == "tenant_suspended"
}

func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true // network errors
	}
	return e.Status == http.StatusTooManyRequests || e.Status >= 500 || e.Status == http.StatusRequestTimeout
}
