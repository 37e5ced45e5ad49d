package limits

import (
	"errors"
	"time"
)

// Kinds of refusal; match them with errors.Is. platform/httpapi maps
// ErrRateLimited to 429 rate_limited and ErrQuotaExceeded to 429
// quota_exceeded, both with Retry-After.
var (
	// ErrRateLimited: the tenant's request or message rate was exceeded.
	// Back off for Error.RetryAfter and retry.
	ErrRateLimited = errors.New("rate limit exceeded")
	// ErrQuotaExceeded: the plan's monthly message quota is used up. Retry
	// after Error.RetryAfter (the next UTC month) or change plan.
	ErrQuotaExceeded = errors.New("monthly quota exceeded")
)

// Error is a refusal of AllowRequest or AllowMessages.
type Error struct {
	// Kind is ErrRateLimited or ErrQuotaExceeded.
	Kind error
	// Message says which limit, for the client (no tenant secrets).
	Message string
	// RetryAfter is how long until the call would be admitted (at least one
	// second; whole seconds).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return "limits: " + e.Message }

// Unwrap returns Kind, so errors.Is(err, ErrRateLimited) holds.
func (e *Error) Unwrap() error { return e.Kind }

func refused(kind error, retrySeconds int, msg string) *Error {
	return &Error{Kind: kind, Message: msg, RetryAfter: time.Duration(max(1, retrySeconds)) * time.Second}
}
