// Package auth authenticates API keys and decides what a credential may do.
//
// A key is "mm_" + 43 characters of unpadded base64url (256 random bits).
// Only its SHA-256 (hex) is stored, in the control log; a presented key is
// hashed and looked up, and the stored hash is compared in constant time.
// The operator key comes from configuration and may manage tenants only.
//
// Roles (spec section 4) and what each may do inside its tenant:
//
//	operation        admin  producer  consumer
//	topics.read        ✓       ✓         ✓     GET /v1/topics, GET /v1/topics/{topic}
//	topics.manage      ✓                       POST /v1/topics, DELETE /v1/topics/{topic}
//	publish            ✓       ✓               POST /v1/topics/{topic}/messages
//	poll               ✓                 ✓     POST /v1/topics/{topic}/poll and /commit
//	keys.manage        ✓                       POST/GET /v1/keys, DELETE /v1/keys/{id}
//	tenant.settings    ✓                       PATCH /v1/tenant
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeyPrefix starts every MsgMesh API key, so leaked keys are recognisable
// by secret scanners.
const KeyPrefix = "mm_"

// Roles.
const (
	RoleAdmin    = "admin"
	RoleProducer = "producer"
	RoleConsumer = "consumer"
)

// Op is an operation a credential may be allowed.
type Op string

// Operations.
const (
	OpTopicsRead     Op = "topics.read"
	OpTopicsManage   Op = "topics.manage"
	OpPublish        Op = "publish"
	OpPoll           Op = "poll"
	OpKeysManage     Op = "keys.manage"
	OpTenantSettings Op = "tenant.settings"
)

var roleOps = map[string]map[Op]bool{
	RoleAdmin:    {OpTopicsRead: true, OpTopicsManage: true, OpPublish: true, OpPoll: true, OpKeysManage: true, OpTenantSettings: true},
	RoleProducer: {OpTopicsRead: true, OpPublish: true},
	RoleConsumer: {OpTopicsRead: true, OpPoll: true},
}

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool { _, ok := roleOps[r]; return ok }

// Principal is the authenticated caller.
type Principal struct {
	// Operator is true for the operator key; Tenant is then empty.
	Operator bool
	Tenant   string
	KeyID    string
	Role     string
}

// Allows reports whether p may perform op in its tenant.
func (p Principal) Allows(op Op) bool {
	if p.Operator {
		return false
	}
	return roleOps[p.Role][op]
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
