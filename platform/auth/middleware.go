package auth

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

const ctxPrincipal = "msgmesh.principal"

// Authenticator turns a bearer credential into a Principal.
type Authenticator struct {
	// State is the control projection holding key hashes.
	State *controlstate.State
	// OperatorKey, if set, authenticates as the operator.
	OperatorKey string
}

// Authenticate checks "Authorization: Bearer <key>". Missing → 401
// unauthenticated; unknown → 401 invalid_credential; revoked → 401
// credential_revoked.
func (a *Authenticator) Authenticate(header string) (Principal, error) {
	cred, ok := strings.CutPrefix(header, "Bearer ")
	cred = strings.TrimSpace(cred)
	if !ok || cred == "" {
		return Principal{}, httpapi.Errorf(httpapi.CodeUnauthenticated, "missing credential: send Authorization: Bearer <key>")
	}
	if a.OperatorKey != "" && EqualSecret(cred, a.OperatorKey) {
		return Principal{Operator: true}, nil
	}
	if !LooksLikeKey(cred) {
		return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
	}
	h := HashKey(cred)
	k, found := a.State.KeyByHash(h)
	if !found || !EqualHash(k.Hash, h) {
		return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
	}
	if k.RevokedAt != nil {
		return Principal{}, httpapi.Errorf(httpapi.CodeCredentialRevoked, "the key was revoked")
	}
	if _, ok := a.State.Tenant(k.Tenant); !ok {
		return Principal{}, httpapi.Errorf(httpapi.CodeInvalidCredential, "invalid credential")
	}
	return Principal{Tenant: k.Tenant, KeyID: k.ID, Role: k.Role}, nil
}

// Middleware authenticates every request of the group and stores the
// Principal for handlers (PrincipalOf).
func (a *Authenticator) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := a.Authenticate(c.GetHeader("Authorization"))
		if err != nil {
			httpapi.Abort(c, nil, err)
			return
		}
		c.Set(ctxPrincipal, p)
		c.Next()
	}
}

// PrincipalOf returns the caller stored by Middleware.
func PrincipalOf(c *gin.Context) Principal {
	p, _ := c.Get(ctxPrincipal)
	pr, _ := p.(Principal)
	return pr
}

// Require answers 403 unless the caller may perform op; every handler
// calls it (the one place where permission is decided).
func Require(c *gin.Context, op Op) (Principal, bool) {
	p := PrincipalOf(c)
	if !p.Allows(op) {
		who := "role " + p.Role
		if p.Operator {
			who = "the operator key"
		}
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "%s may not %s", who, op))
		return p, false
	}
	return p, true
}

// RequireOperator answers 403 unless the caller is the operator.
func RequireOperator(c *gin.Context) bool {
	if !PrincipalOf(c).Operator {
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "only the operator key may manage tenants"))
		return false
	}
	return true
}
