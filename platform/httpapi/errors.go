// Package httpapi is MsgMesh's HTTP plumbing shared by every target: the
// error catalog (status, stable code, message), request ids, JSON error
// bodies and body limits.
//
// Every non-2xx body is {"error": "...", "code": "..."}; 5xx bodies also
// carry "request_id" (DESIGN.md contract, spec section 6).
package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/limits"
)

// Code is one entry of the error catalog: an HTTP status and the stable,
// machine-readable code clients match on. Codes never change meaning.
type Code struct {
	Status int
	Code   string
	// Doc says when it happens and what the caller should do.
	Doc string
}

// The catalog. proto/openapi.yaml lists the same codes (a test checks).
var (
	CodeInvalidRequest       = Code{400, "invalid_request", "The request is malformed (bad JSON, a missing or invalid field). Fix it; retrying is pointless."}
	CodeRoomNotSupported     = Code{400, "room_not_supported", "Poll is a whole-topic firehose and takes no room; use SSE or WebSocket to receive one room."}
	CodeUnauthenticated      = Code{401, "unauthenticated", "No credential was sent. Send Authorization: Bearer <key>."}
	CodeInvalidCredential    = Code{401, "invalid_credential", "The credential is unknown or malformed. Obtain a new one; do not retry."}
	CodeCredentialRevoked    = Code{401, "credential_revoked", "The key (or the key that minted this token) was revoked. Obtain a new credential; do not retry."}
	CodeTokenExpired         = Code{401, "token_expired", "The token expired. Fetch a fresh token from your backend and retry once."}
	CodeKeyInURL             = Code{401, "key_in_url", "An API key was sent in the URL (?token=), where it would end up in logs and browser history. Send keys as Authorization: Bearer; the URL takes only short-lived tokens (POST /v1/tokens)."}
	CodeInvalidToken         = Code{401, "invalid_token", "The token is malformed, its signature does not verify, or its signing key was retired. Obtain a new one; do not retry."}
	CodeForbidden            = Code{403, "forbidden", "The credential's role or capabilities do not allow this operation; the message names what was refused."}
	CodeTenantSuspended      = Code{403, "tenant_suspended", "The tenant is suspended for billing. Topping up lifts the suspension automatically; back off and retry."}
	CodeNotFound             = Code{404, "not_found", "No such route or resource."}
	CodeTopicNotFound        = Code{404, "topic_not_found", "The topic does not exist (with the strict topic gate on, publishing to a topic never created is 404). Check the name or create it."}
	CodeTenantNotFound       = Code{404, "tenant_not_found", "The tenant does not exist."}
	CodeKeyNotFound          = Code{404, "key_not_found", "The key does not exist in this tenant."}
	CodeConsumerNotFound     = Code{404, "consumer_not_found", "The consumer is not held by this node (it expired or never polled); its unacknowledged batch will be delivered again."}
	CodeMethodNotAllowed     = Code{405, "method_not_allowed", "The route exists but not with this method."}
	CodeConflict             = Code{409, "conflict", "The resource already exists (decided in control-log order)."}
	CodePayloadTooLarge      = Code{413, "payload_too_large", "A message, the request body or the batch count is over the configured limit. Split it."}
	CodeUnsupportedMedia     = Code{415, "unsupported_media_type", "The Content-Type is not accepted on this route."}
	CodeValidation           = Code{422, "validation_failed", "The request is well-formed but a value is not acceptable."}
	CodeRateLimited          = Code{429, "rate_limited", "The tenant's request or message rate limit was exceeded. Back off and retry after Retry-After."}
	CodeQuotaExceeded        = Code{429, "quota_exceeded", "The plan's monthly message quota is used up. Retry after Retry-After (the next month) or change plan."}
	CodeTooManyConsumers     = Code{429, "too_many_consumers", "This node holds its maximum number of poll consumers. Retry later or reuse consumer names."}
	CodeInternal             = Code{500, "internal", "An unexpected server error. Report the request_id."}
	CodeKafkaUnavailable     = Code{503, "kafka_unavailable", "Kafka did not acknowledge in time; nothing is confirmed. Retry with backoff (a retried publish may duplicate)."}
	CodeNotReady             = Code{503, "not_ready", "The node is still catching up with the control log. Retry shortly."}
	CodeShuttingDown         = Code{503, "shutting_down", "The node is shutting down. Retry against another node."}
	CodeInvalidCursor        = Code{400, "invalid_cursor", "The cursor or Last-Event-ID is malformed, names a partition the topic does not have, or an offset beyond the end of the log. Fix it, or reconnect without one to start live."}
	CodeTooManySubs          = Code{429, "too_many_subscribers", "This node holds its maximum number of realtime subscribers. Retry after Retry-After, ideally against another node."}
	CodeWebhookNotFound      = Code{404, "webhook_not_found", "The webhook does not exist in this tenant (deleting is final; a re-registered URL is a new webhook)."}
	CodeTargetRefused        = Code{422, "webhook_target_refused", "The webhook URL is not a public https target: it is malformed, does not resolve, or resolves to a loopback, private, link-local, metadata or otherwise internal address. The message names the reason; register a public https URL."}
	CodeReadModelUnavailable = Code{503, "read_model_unavailable", "The read model's database (PostgreSQL) is not reachable; publish and delivery are unaffected. Retry with backoff."}
	// net/http's own answers to requests it cannot parse (ErrorFormatListener).
	CodeExpectationFailed = Code{417, "expectation_failed", "The request has an Expect header other than 100-continue, which the server cannot meet. Send it without."}
	CodeHeadersTooLarge   = Code{431, "request_headers_too_large", "The request line and headers are over the server's limit (1 MiB). Send fewer or smaller headers."}
	CodeNotImplemented    = Code{501, "not_implemented", "The request uses a transfer coding other than chunked. Send a Content-Length or chunked body."}
	CodeHTTPVersion       = Code{505, "http_version_not_supported", "The request is not HTTP/1.x. Use HTTP/1.1."}
)

// Catalog lists every code, for docs and the OpenAPI check.
var Catalog = []Code{
	CodeInvalidRequest, CodeRoomNotSupported, CodeUnauthenticated, CodeInvalidCredential,
	CodeCredentialRevoked, CodeTokenExpired, CodeKeyInURL, CodeInvalidToken, CodeForbidden, CodeTenantSuspended, CodeNotFound, CodeTopicNotFound, CodeTenantNotFound,
	CodeKeyNotFound, CodeConsumerNotFound, CodeMethodNotAllowed, CodeConflict, CodePayloadTooLarge,
	CodeUnsupportedMedia, CodeValidation, CodeRateLimited, CodeQuotaExceeded, CodeTooManyConsumers, CodeInternal,
	CodeKafkaUnavailable, CodeNotReady, CodeShuttingDown, CodeInvalidCursor, CodeTooManySubs,
	CodeWebhookNotFound, CodeTargetRefused, CodeReadModelUnavailable,
	CodeExpectationFailed, CodeHeadersTooLarge, CodeNotImplemented, CodeHTTPVersion,
}

// Error is an API error: a catalog code, a message for the client, and
// optionally the cause (logged for 5xx, never sent).
type Error struct {
	Code    Code
	Message string
	Cause   error
	// RetryAfter, when positive, is sent as Retry-After (seconds).
	RetryAfter int
}

// Errorf makes an *Error with a formatted client message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap makes an *Error whose cause is err; the client sees only msg.
func Wrap(code Code, err error, msg string) *Error {
	return &Error{Code: code, Message: msg, Cause: err}
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code.Code + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Code.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// AsError turns any error into an *Error: an *Error in the chain is kept,
// a domain error of platform/auth or platform/limits gets its catalog code
// (FromDomain), anything else becomes 500 internal.
func AsError(err error) *Error {
	if e, ok := Known(err); ok {
		return e
	}
	return Wrap(CodeInternal, err, http.StatusText(http.StatusInternalServerError))
}

// Known is AsError for errors the catalog knows: an *Error in the chain,
// or a domain error FromDomain maps. ok is false for anything else.
func Known(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return FromDomain(err)
}

// domainCodes maps the domain errors of platform/auth and platform/limits
// to the catalog: the one place where they become HTTP answers. The first
// kind err matches (errors.Is) wins.
var domainCodes = []struct {
	kind error
	code Code
}{
	{auth.ErrUnauthenticated, CodeUnauthenticated},
	{auth.ErrKeyInURL, CodeKeyInURL},
	{auth.ErrTokenExpired, CodeTokenExpired},
	{auth.ErrCredentialRevoked, CodeCredentialRevoked},
	{auth.ErrParentRevoked, CodeCredentialRevoked},
	{auth.ErrTokenInvalid, CodeInvalidToken},
	{auth.ErrInvalidCredential, CodeInvalidCredential},
	{auth.ErrTenantSuspended, CodeTenantSuspended},
	{auth.ErrForbidden, CodeForbidden},
	{limits.ErrQuotaExceeded, CodeQuotaExceeded},
	{limits.ErrRateLimited, CodeRateLimited},
}

// FromDomain maps a domain error of platform/auth (*auth.Error and its
// kinds) or platform/limits (*limits.Error) to its *Error: the catalog
// code, the domain error's client message, Retry-After in whole seconds,
// and err as the cause. ok is false when err is neither.
func FromDomain(err error) (*Error, bool) {
	if err == nil {
		return nil, false
	}
	for _, d := range domainCodes {
		if !errors.Is(err, d.kind) {
			continue
		}
		e := &Error{Code: d.code, Message: d.kind.Error(), Cause: err}
		var ae *auth.Error
		var le *limits.Error
		switch {
		case errors.As(err, &ae):
			e.Message = ae.Message
		case errors.As(err, &le):
			e.Message = le.Message
			e.RetryAfter = int((le.RetryAfter + time.Second - 1) / time.Second)
		}
		return e, true
	}
	return nil, false
}
