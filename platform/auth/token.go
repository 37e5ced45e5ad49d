package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
)

// TokenIssuer is the "iss" of every MsgMesh token.
const TokenIssuer = "msgmesh"

// TokenClaims are a token's JWT claims: sub = tenant, jti = token id,
// pk = parent key id, caps = capabilities (a subset of the parent's).
type TokenClaims struct {
	jwt.RegisteredClaims
	ParentKey string                  `json:"pk"`
	Caps      []capability.Capability `json:"caps"`
}

// Errors of VerifyToken; the middleware maps them to 401 codes.
var (
	// ErrTokenExpired: the token's exp has passed. Fetch a new token.
	ErrTokenExpired = errors.New("token expired")
	// ErrTokenInvalid: malformed, bad signature, wrong algorithm, unknown
	// or retired signing key.
	ErrTokenInvalid = errors.New("invalid token")
	// ErrParentRevoked: the token's parent key was revoked (or is gone).
	ErrParentRevoked = errors.New("parent key revoked")
	// ErrNoSigningKey: no signing key exists yet.
	ErrNoSigningKey = errors.New("no token signing key")
)

// NewSigningKey returns a fresh Ed25519 seed (base64) and a key id.
func NewSigningKey() (kid, seed string, err error) {
	var b [ed25519.SeedSize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	return NewID("sk_"), base64.StdEncoding.EncodeToString(b[:]), nil
}

func privateKey(k controlstate.SigningKey) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(k.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key %s: bad seed", k.KID)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// MintToken signs a token for tenant, child of parentKey, with caps, valid
// from now for ttl. The caller checks caps ⊆ the parent's first.
func MintToken(st *controlstate.State, now time.Time, tenant, parentKey string, caps []capability.Capability, ttl time.Duration) (string, time.Time, error) {
	sk, ok := st.CurrentSigningKey()
	if !ok {
		return "", time.Time{}, ErrNoSigningKey
	}
	priv, err := privateKey(sk)
	if err != nil {
		return "", time.Time{}, err
	}
	// JWT times are whole seconds: round up so the token lives its full ttl.
	exp := now.Add(ttl + time.Second - 1).Truncate(time.Second)
	claims := TokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    TokenIssuer,
			Subject:   tenant,
			ID:        NewID("tok_"),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		ParentKey: parentKey,
		Caps:      caps,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = sk.KID
	s, err := t.SignedString(priv)
	return s, exp, err
}

// IssuedAtSkew is how far in the future a token's iat may be (clock skew
// between nodes); beyond it the token is refused.
const IssuedAtSkew = 60 * time.Second

// VerifyToken checks raw's signature (EdDSA only: "none", HS* and every
// other algorithm are refused), issuer, expiry against now and the signing
// key (known and not retired), then that the parent key still stands.
//
// Whatever its signature, a token is refused (ErrTokenInvalid) without an
// iat, with an iat more than IssuedAtSkew after now, or living longer
// than maxTTL (exp - iat; tokens.max_ttl, plus the second MintToken rounds
// exp up by). maxTTL 0 caps no lifetime.
func VerifyToken(st *controlstate.State, now time.Time, raw string, maxTTL time.Duration) (Principal, error) {
	var claims TokenClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		sk, ok := st.SigningKey(kid)
		if !ok || sk.Retired {
			return nil, fmt.Errorf("unknown or retired signing key %q", kid)
		}
		priv, err := privateKey(sk)
		if err != nil {
			return nil, err
		}
		return priv.Public(), nil
	},
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(TokenIssuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, ErrTokenExpired
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %v", ErrTokenInvalid, err)
	}
	if claims.IssuedAt == nil {
		return Principal{}, fmt.Errorf("%w: no iat", ErrTokenInvalid)
	}
	iat, exp := claims.IssuedAt.Time, claims.ExpiresAt.Time
	if iat.After(now.Add(IssuedAtSkew)) {
		return Principal{}, fmt.Errorf("%w: iat is %v in the future", ErrTokenInvalid, iat.Sub(now).Round(time.Second))
	}
	if maxTTL > 0 && exp.Sub(iat) > maxTTL+time.Second {
		return Principal{}, fmt.Errorf("%w: lifetime %v exceeds tokens.max_ttl %v", ErrTokenInvalid, exp.Sub(iat), maxTTL)
	}
	parent, ok := st.Key(claims.Subject, claims.ParentKey)
	if !ok || parent.RevokedAt != nil {
		return Principal{}, ErrParentRevoked
	}
	return Principal{
		Tenant: claims.Subject, KeyID: claims.ParentKey, Caps: claims.Caps,
		TokenID: claims.ID, ExpiresAt: claims.ExpiresAt.Time,
	}, nil
}
