package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

const (
	ctxPrincipal  = "msgmesh.principal"
	ctxCredential = "msgmesh.credential"
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

// Authenticate checks a bearer credential (a key or a token). Missing →
// 401 unauthenticated; unknown key or bad token → 401 invalid_credential /
// invalid_token; expired token → 401 token_expired; revoked key or parent
// → 401 credential_revoked; suspended tenant → 403 tenant_suspended.
func (a *Authenticator) Authenticate(cred string) (Principal, error) {
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return Principal{}, httpapi.Errorf(httpapi.CodeUnauthenticated, "missing credential: send Authorization: Bearer <key or token>")
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
			return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
		}
		if k.RevokedAt != nil {
			return Principal{}, httpapi.Errorf(httpapi.CodeCredentialRevoked, "the key was revoked")
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
			return Principal{}, httpapi.Errorf(httpapi.CodeTokenExpired, "the token expired; fetch a new one")
		case errors.Is(err, ErrParentRevoked):
			return Principal{}, httpapi.Errorf(httpapi.CodeCredentialRevoked, "the key that minted this token was revoked")
		case err != nil:
			return Principal{}, httpapi.Errorf(httpapi.CodeInvalidToken, "invalid token")
		}
	default:
		return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
	}
	t, ok := a.State.Tenant(p.Tenant)
	if !ok {
		return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
	}
	if t.Suspended {
		return Principal{}, httpapi.Errorf(httpapi.CodeTenantSuspended, "the tenant is suspended for billing; topping up lifts the suspension")
	}
	return p, nil
}

// Middleware authenticates every request of the group from
// "Authorization: Bearer" (or, when allowQueryToken reports true for the
// request, from ?token=, for EventSource which cannot set headers) and
// stores the Principal for handlers (PrincipalOf).
func (a *Authenticator) Middleware(allowQueryToken func(*gin.Context) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		header := c.GetHeader("Authorization")
		// The scheme is case-insensitive (RFC 9110, section 11.1).
		scheme, cred, _ := strings.Cut(header, " ")
		hasBearer := strings.EqualFold(scheme, "Bearer")
		switch {
		case header != "" && !hasBearer:
			httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeUnauthenticated, "unsupported Authorization scheme: send Authorization: Bearer <key or token>"))
			return
		case header == "" && allowQueryToken != nil && allowQueryToken(c):
			cred = c.Query("token")
			// A URL ends up in access logs, proxies and browser history:
			// only short-lived tokens go there, never a key (spec
			// section 4: keys stay server side).
			if q := strings.TrimSpace(cred); LooksLikeKey(q) || a.OperatorKey != "" && EqualSecret(q, a.OperatorKey) {
				err := httpapi.Errorf(httpapi.CodeKeyInURL, "an API key may not be sent as ?token= (URLs end up in logs and browser history): send it in the Authorization header as a Bearer credential, or put a short-lived token (POST /v1/tokens) in the URL")
				httpapi.Abort(c, nil, err)
				return
			}
		}
		p, err := a.Authenticate(cred)
		if err != nil {
			httpapi.Abort(c, nil, err)
			return
		}
		c.Set(ctxPrincipal, p)
		c.Set(ctxCredential, strings.TrimSpace(cred))
		// Control events appended for this request name who made it.
		c.Request = c.Request.WithContext(controlstate.WithActor(c.Request.Context(), p.Actor()))
		c.Next()
	}
}

// CredentialOf returns the credential Middleware authenticated (from the
// Authorization header, whatever the scheme's case, or ?token=), for
// handlers that re-check it later (long-lived streams).
func CredentialOf(c *gin.Context) string {
	s, _ := c.Get(ctxCredential)
	cred, _ := s.(string)
	return cred
}

// PrincipalOf returns the caller stored by Middleware.
func PrincipalOf(c *gin.Context) Principal {
	p, _ := c.Get(ctxPrincipal)
	pr, _ := p.(Principal)
	return pr
}

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
	httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "%s", Refusal(p, op, topic, room)))
	return p, false
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
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "only the operator key may manage tenants and token signing keys"))
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
	httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "%s", Refusal(p, op, "", "")))
	return false
}
