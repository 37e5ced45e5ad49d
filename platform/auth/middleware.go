package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
)

// ctxKey keys what Middleware puts in the request context.
type ctxKey int

const (
	ctxPrincipal ctxKey = iota
	ctxCredential
)

// Authenticator turns a credential into a Principal.
type Authenticator struct {
	// State is the control projection holding key hashes, signing keys and
	// tenants.
	State *controlstate.State
	// OperatorKey, if set, authenticates as the operator.
	OperatorKey string
	// Now is the clock for token expiry; nil means time.Now.
	Now func() time.Time
	// MaxTokenTTL refuses tokens living longer (exp - iat), whatever their
	// signature (tokens.max_ttl); 0 caps none.
	MaxTokenTTL time.Duration
}

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate checks a bearer credential (a key or a token). It returns
// an *Error of kind ErrUnauthenticated (missing), ErrInvalidCredential
// (unknown key), ErrTokenInvalid (bad token), ErrTokenExpired,
// ErrCredentialRevoked (revoked key or parent) or ErrTenantSuspended.
func (a *Authenticator) Authenticate(cred string) (Principal, error) {
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return Principal{}, refuse(ErrUnauthenticated, "missing credential: send Authorization: Bearer <key or token>")
	}
	if a.OperatorKey != "" && EqualSecret(cred, a.OperatorKey) {
		return Principal{Operator: true}, nil
	}
	var p Principal
	switch {
	case LooksLikeKey(cred):
		h := HashKey(cred)
		k, found := a.State.KeyByHash(h)
		if !found || !EqualHash(k.Hash, h) {
			return Principal{}, refuse(ErrInvalidCredential, "invalid credential")
		}
		if k.RevokedAt != nil {
			return Principal{}, refuse(ErrCredentialRevoked, "the key was revoked")
		}
		p = Principal{Tenant: k.Tenant, KeyID: k.ID, Role: k.Role, Caps: k.Capabilities}
		if k.Role != "" {
			p.Caps = capability.ForRole(k.Role)
		}
	case strings.Count(cred, ".") == 2:
		var err error
		p, err = VerifyToken(a.State, a.now(), cred, a.MaxTokenTTL)
		switch {
		case errors.Is(err, ErrTokenExpired):
			return Principal{}, &Error{Kind: ErrTokenExpired, Message: "the token expired; fetch a new one"}
		case errors.Is(err, ErrParentRevoked):
			return Principal{}, &Error{Kind: ErrCredentialRevoked, Message: "the key that minted this token was revoked", Err: ErrParentRevoked}
		case err != nil:
			return Principal{}, &Error{Kind: ErrTokenInvalid, Message: "invalid token", Err: err}
		}
	default:
		return Principal{}, refuse(ErrInvalidCredential, "invalid credential")
	}
	t, ok := a.State.Tenant(p.Tenant)
	if !ok {
		return Principal{}, refuse(ErrInvalidCredential, "invalid credential")
	}
	if t.Suspended {
		return Principal{}, refuse(ErrTenantSuspended, "the tenant is suspended for billing; topping up lifts the suspension")
	}
	return p, nil
}

// Middleware authenticates every request of the group from
// "Authorization: Bearer" (or, when allowQueryToken reports true for the
// request, from ?token=, for EventSource which cannot set headers) and
// stores the Principal and the raw credential in the request context for
// handlers (PrincipalOf, CredentialOf). A refusal aborts the chain with
// an *Error for the engine's httpapi.RenderErrors to answer.
func (a *Authenticator) Middleware(allowQueryToken func(*gin.Context) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		header := c.GetHeader("Authorization")
		// The scheme is case-insensitive (RFC 9110, section 11.1).
		scheme, cred, _ := strings.Cut(header, " ")
		hasBearer := strings.EqualFold(scheme, "Bearer")
		switch {
		case header != "" && !hasBearer:
			abort(c, refuse(ErrUnauthenticated, "unsupported Authorization scheme: send Authorization: Bearer <key or token>"))
			return
		case header == "" && allowQueryToken != nil && allowQueryToken(c):
			cred = c.Query("token")
			// A URL ends up in access logs, proxies and browser history:
			// only short-lived tokens go there, never a key (spec
			// section 4: keys stay server side).
			if q := strings.TrimSpace(cred); LooksLikeKey(q) || a.OperatorKey != "" && EqualSecret(q, a.OperatorKey) {
				err := refuse(ErrKeyInURL, "an API key may not be sent as ?token= (URLs end up in logs and browser history): send it in the Authorization header as a Bearer credential, or put a short-lived token (POST /v1/tokens) in the URL")
				abort(c, err)
				return
			}
		}
		p, err := a.Authenticate(cred)
		if err != nil {
			abort(c, err)
			return
		}
		// Control events appended for this request name who made it.
		ctx := controlstate.WithActor(c.Request.Context(), p.Actor())
		ctx = context.WithValue(ctx, ctxPrincipal, p)
		ctx = context.WithValue(ctx, ctxCredential, strings.TrimSpace(cred))
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// CredentialOf returns the credential Middleware authenticated (from the
// Authorization header, whatever the scheme's case, or ?token=), for
// handlers that re-check it later (long-lived streams).
func CredentialOf(c *gin.Context) string { return CredentialFrom(c.Request.Context()) }

// CredentialFrom returns the raw credential Middleware stored in ctx (the
// key or token itself, without its scheme), or "".
func CredentialFrom(ctx context.Context) string {
	cred, _ := ctx.Value(ctxCredential).(string)
	return cred
}

// PrincipalFrom returns the caller Middleware stored in ctx.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(ctxPrincipal).(Principal)
	return p
}

// PrincipalOf returns the caller stored by Middleware.
func PrincipalOf(c *gin.Context) Principal { return PrincipalFrom(c.Request.Context()) }

// Require answers 403 unless the caller may do a tenant-wide op (or op on
// every topic); the one policy check handlers call, with RequireOn.
func Require(c *gin.Context, op capability.Op) (Principal, bool) {
	return RequireOn(c, op, "", "")
}

// RequireOn answers 403, naming what was refused, unless the caller may
// do op on topic in room (see Principal.Can).
func RequireOn(c *gin.Context, op capability.Op, topic, room string) (Principal, bool) {
	p := PrincipalOf(c)
	if p.Can(op, topic, room) {
		return p, true
	}
	abort(c, Refused(p, op, topic, room))
	return p, false
}

// Refused is the ErrForbidden *Error naming what p was refused (Refusal).
func Refused(p Principal, op capability.Op, topic, room string) *Error {
	return refuse(ErrForbidden, Refusal(p, op, topic, room))
}

// Refusal says what p was refused, for 403 bodies. A credential limited to
// some rooms of a topic that asks for the whole topic is told so; one that
// may not use the topic at all is not told about rooms.
func Refusal(p Principal, op capability.Op, topic, room string) string {
	if p.Operator {
		return "the operator key may only manage tenants and token signing keys; use a tenant key for this"
	}
	what := string(op)
	if topic != "" {
		what += fmt.Sprintf(" on topic %q", topic)
	}
	switch {
	case room != "":
		what += fmt.Sprintf(" in room %q", room)
	case topic != "" && (op == capability.OpPublish || op == capability.OpSubscribe || op == capability.OpPoll) && someRoomsOf(p.Caps, op, topic):
		if op == capability.OpPoll {
			what += " (poll reads every room; this credential may use only some rooms of this topic)"
		} else {
			what += " in every room (it may use only some rooms of this topic: name one of them)"
		}
	}
	return "this credential may not " + what
}

// someRoomsOf reports whether caps grant op on topic in at least one room.
func someRoomsOf(caps []capability.Capability, op capability.Op, topic string) bool {
	for _, c := range caps {
		hasOp := false
		for _, o := range c.Ops {
			hasOp = hasOp || o == op || o == capability.OpAll
		}
		if !hasOp {
			continue
		}
		for _, t := range c.Topics {
			if capability.Match(t, topic) {
				return true
			}
		}
	}
	return false
}

// RequireOperator answers 403 unless the caller is the operator.
func RequireOperator(c *gin.Context) bool {
	if !PrincipalOf(c).Operator {
		abort(c, refuse(ErrForbidden, "only the operator key may manage tenants and token signing keys"))
		return false
	}
	return true
}

// RequireSome answers 403 unless the caller may do op on at least one
// topic (a first check before the body names the topic or rooms).
func RequireSome(c *gin.Context, op capability.Op) bool {
	p := PrincipalOf(c)
	if !p.Operator && capability.AllowsSomewhere(p.Caps, op) {
		return true
	}
	abort(c, Refused(p, op, "", ""))
	return false
}
