// Package auth authenticates credentials and decides what they may do.
//
// Two kinds of credential reach the API as "Authorization: Bearer <x>"
// (and, for SSE, "?token=<x>"):
//
//   - API keys: "mm_" + 43 characters of unpadded base64url (256 random
//     bits). Only the key's SHA-256 (hex) is stored, in the control log; a
//     presented key is hashed and looked up, and the stored hash compared
//     in constant time. A key has a role (admin, producer, consumer) or an
//     explicit capability set (platform/capability).
//   - Tokens: short-lived JWTs (EdDSA, RFC 8037) minted by POST /v1/tokens,
//     carrying a subset of their parent key's capabilities. Revoking the
//     parent kills its tokens.
//
// The operator key comes from configuration and may manage tenants and the
// token signing keys only, nothing inside a tenant.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/msgmesh/msgmesh/platform/capability"
)

// KeyPrefix starts every MsgMesh API key, so leaked keys are recognisable
// by secret scanners.
const KeyPrefix = "mm_"

// Actor names p in the audit log (controlstate.Event.Actor): "operator",
// "key:<key id>" or "token:<jti> (key <key id>)".
func (p Principal) Actor() string {
	switch {
	case p.Operator:
		return "operator"
	case p.TokenID != "":
		return "token:" + p.TokenID + " (key " + p.KeyID + ")"
	}
	return "key:" + p.KeyID
}

// Principal is the authenticated caller.
type Principal struct {
	// Operator is true for the operator key; Tenant is then empty.
	Operator bool
	Tenant   string
	// KeyID is the key used, or for a token its parent key.
	KeyID string
	// Role is the key's role ("" for capability keys and tokens).
	Role string
	// Caps is what the credential may do.
	Caps []capability.Capability
	// TokenID is the token's jti when the caller used a token.
	TokenID string
	// ExpiresAt is a token's expiry (zero for keys).
	ExpiresAt time.Time
}

// Can reports whether p may do op on topic ("" = tenant-wide) in room
// ("" = every room).
//
// A token never manages keys or mints tokens, whatever its capabilities
// say: a credential that expires must not make ones that do not.
func (p Principal) Can(op capability.Op, topic, room string) bool {
	if p.Operator {
		return false
	}
	if p.TokenID != "" && (op == capability.OpKeysManage || op == capability.OpTokensMint) {
		return false
	}
	return capability.Allows(p.Caps, op, topic, room)
}

// NewKey returns a fresh key and its stored form: SHA-256 hex and a short
// display prefix.
func NewKey() (key, hash, display string, err error) {
	var b [32]byte
	if _, err = rand.Read(b[:]); err != nil {
		return "", "", "", fmt.Errorf("auth: random: %w", err)
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, HashKey(key), key[:len(KeyPrefix)+6], nil
}

// HashKey is the stored form of a key: lowercase hex SHA-256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// LooksLikeKey reports whether s has the shape of a MsgMesh key.
func LooksLikeKey(s string) bool {
	return strings.HasPrefix(s, KeyPrefix) && len(s) >= len(KeyPrefix)+32 && len(s) <= 256
}

// EqualHash compares two hashes in constant time.
func EqualHash(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// EqualSecret compares two secrets in constant time (lengths may leak).
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// NewID returns a random identifier with a prefix, e.g. "key_3f9a1c0b7e2d".
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
