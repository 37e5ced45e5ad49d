package auth

import (
	"errors"

	"github.com/gin-gonic/gin"
)

// Kinds of refusal of Authenticate, Middleware and the Require checks;
// match them with errors.Is. platform/httpapi maps each to its HTTP answer
// (the one place that does): the 401 codes unauthenticated,
// invalid_credential, credential_revoked, token_expired, invalid_token and
// key_in_url, and the 403 codes tenant_suspended and forbidden.
var (
	// ErrUnauthenticated: no credential, or an Authorization scheme other
	// than Bearer. Send Authorization: Bearer <key or token>.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrInvalidCredential: an unknown or malformed key (or a key of a
	// tenant that is gone). Obtain a new one; do not retry.
	ErrInvalidCredential = errors.New("invalid credential")
	// ErrCredentialRevoked: the key, or the key that minted the token, was
	// revoked. ErrParentRevoked is wrapped beside it for tokens.
	ErrCredentialRevoked = errors.New("credential revoked")
	// ErrKeyInURL: a key (not a short-lived token) was sent as ?token=.
	ErrKeyInURL = errors.New("key in URL")
	// ErrTenantSuspended: the credential is good but its tenant is
	// suspended for billing; back off and retry.
	ErrTenantSuspended = errors.New("tenant suspended")
	// ErrForbidden: the credential may not do what was asked; the message
	// names what was refused (Refusal).
	ErrForbidden = errors.New("forbidden")
)

// Error is a refusal: its Kind (one of the Err* values above, or
// ErrTokenExpired / ErrTokenInvalid for tokens), a message for the client
// that never holds the credential, and the underlying cause if any.
type Error struct {
	Kind    error
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "auth: " + e.Message + ": " + e.Err.Error()
	}
	return "auth: " + e.Message
}

// Unwrap returns Kind and the cause, so errors.Is matches either.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func refuse(kind error, msg string) *Error { return &Error{Kind: kind, Message: msg} }

// abort stops the chain with err for the engine's error renderer
// (httpapi.RenderErrors, which every MsgMesh engine installs) to answer.
func abort(c *gin.Context, err error) {
	_ = c.Error(err)
	c.Abort()
}
