package harness

// Helpers for the credential tests: capability keys, tokens, tenants,
// 403 checks, and forging JWTs the way an attacker would (alg none,
// algorithm confusion, a tampered signature).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/keyring"
	"github.com/msgmesh/msgmesh/platform/names"
)

// Cap is one capability of a key or token request body.
type Cap struct {
	Ops    []string `json:"ops"`
	Topics []string `json:"topics"`
	Rooms  []string `json:"rooms,omitempty"`
}

// CapKey creates a capability key with adminKey and returns its id and
// plaintext.
func CapKey(t testing.TB, base, adminKey, name string, caps ...Cap) (id, key string) {
	t.Helper()
	r := Must(t, base, "POST", "/v1/keys", adminKey, map[string]any{"name": name, "capabilities": caps}, http.StatusCreated).JSON(t)
	id, _ = r["id"].(string)
	key, _ = r["key"].(string)
	if id == "" || !strings.HasPrefix(key, "mm_") {
		t.Fatalf("create key %s answered %v, want an id and a mm_ key", name, r)
	}
	return id, key
}

// RoleKey creates a role key with adminKey and returns its id and plaintext.
func RoleKey(t testing.TB, base, adminKey, name, role string) (id, key string) {
	t.Helper()
	r := Must(t, base, "POST", "/v1/keys", adminKey, map[string]any{"name": name, "role": role}, http.StatusCreated).JSON(t)
	id, _ = r["id"].(string)
	key, _ = r["key"].(string)
	if id == "" || !strings.HasPrefix(key, "mm_") {
		t.Fatalf("create key %s answered %v, want an id and a mm_ key", name, r)
	}
	return id, key
}

// TokenBody is the POST /v1/tokens body: ttl_seconds (omitted when 0) and
// capabilities (omitted when nil).
func TokenBody(ttlSeconds int, caps []Cap) map[string]any {
	b := map[string]any{}
	if ttlSeconds != 0 {
		b["ttl_seconds"] = ttlSeconds
	}
	if caps != nil {
		b["capabilities"] = caps
	}
	return b
}

// MintToken mints a token with key and returns it with its expiry.
func MintToken(t testing.TB, base, key string, ttlSeconds int, caps []Cap) (string, time.Time) {
	t.Helper()
	r := Must(t, base, "POST", "/v1/tokens", key, TokenBody(ttlSeconds, caps), http.StatusOK).JSON(t)
	tok, _ := r["token"].(string)
	exp, err := time.Parse(time.RFC3339Nano, fmtString(r["expires_at"]))
	if tok == "" || strings.Count(tok, ".") != 2 || err != nil {
		t.Fatalf("POST /v1/tokens answered %v, want a JWT and an RFC 3339 expires_at (%v)", r, err)
	}
	return tok, exp
}

func fmtString(v any) string { s, _ := v.(string); return s }

// CreateTenant creates tenant id on plan with the operator key and
// returns its first admin key.
func CreateTenant(t testing.TB, base, operatorKey, id, plan string) string {
	t.Helper()
	r := Must(t, base, "POST", "/v1/tenants", operatorKey, map[string]any{"id": id, "plan": plan}, http.StatusCreated).JSON(t)
	k, _ := r["admin_key"].(string)
	if !strings.HasPrefix(k, "mm_") {
		t.Fatalf("create tenant %s answered %v, want an admin_key", id, r)
	}
	return k
}

// WantForbidden checks a 403 forbidden whose error names every one of
// mention (e.g. the operation, the topic, the room).
func WantForbidden(t testing.TB, what string, r Response, mention ...string) {
	t.Helper()
	m := WantError(t, what, r, http.StatusForbidden, "forbidden")
	if m == nil {
		return
	}
	msg, _ := m["error"].(string)
	for _, s := range mention {
		if !strings.Contains(msg, s) {
			t.Errorf("%s: the 403 error %q does not name %q", what, msg, s)
		}
	}
}

// JWT is a token split into its parts.
type JWT struct {
	Header  map[string]any
	Claims  map[string]any
	Payload string // the payload segment as sent
	Sig     string // the signature segment as sent
}

// ParseJWT splits tok without verifying it.
func ParseJWT(t testing.TB, tok string) JWT {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", tok)
	}
	var j JWT
	for i, dst := range []*map[string]any{&j.Header, &j.Claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatalf("token segment %d: %v", i, err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatalf("token segment %d: %v", i, err)
		}
	}
	j.Payload, j.Sig = parts[1], parts[2]
	return j
}

// Forge builds a JWT from header and the payload segment, signing
// "header.payload" with sign (nil: an empty signature).
func Forge(t testing.TB, header map[string]any, payload string, sign func([]byte) []byte) string {
	t.Helper()
	hb, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString(hb) + "." + payload
	if sign == nil {
		return input + "."
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

// HS256 signs with HMAC-SHA256 under secret.
func HS256(secret []byte) func([]byte) []byte {
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	}
}

// TamperSignature changes one character in the middle of tok's signature
// (the last character of base64url may only carry padding bits, so
// changing it could leave the signature valid).
func TamperSignature(tok string) string {
	i := strings.LastIndex(tok, ".")
	sig := []byte(tok[i+1:])
	mid := len(sig) / 2
	if sig[mid] == 'A' {
		sig[mid] = 'B'
	} else {
		sig[mid] = 'A'
	}
	return tok[:i+1] + string(sig)
}

// SigningKeySeed reads the Ed25519 seed of signing key kid from c's
// control log in Kafka, opening it with the cluster's key-encryption key
// (what someone with read access to the control topic AND that key
// sees). It fails the test if kid is not there or does not open.
func (c *Cluster) SigningKeySeed(t testing.TB, kid string) []byte {
	t.Helper()
	st := c.ReplayControlLog(t)
	k, ok := st.SigningKey(kid)
	if !ok {
		t.Fatalf("signing key %s is not in the control log", kid)
	}
	seed, err := base64.StdEncoding.DecodeString(k.Seed)
	if err != nil || len(seed) != 32 {
		t.Fatalf("signing key %s: seed does not open with the cluster's key (%v)", kid, st.Unreadable())
	}
	return seed
}

// ReplayControlLog reads c's whole control topic into a projection that
// opens sealed secrets with the cluster's key-encryption key.
func (c *Cluster) ReplayControlLog(t testing.TB) *controlstate.State {
	t.Helper()
	key, err := keyring.ParseKey([]byte(c.SecretsKey))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keyring.New(key)
	if err != nil {
		t.Fatal(err)
	}
	st := controlstate.NewStateWith(kr)
	for _, r := range c.ControlRecords(t) {
		var ev controlstate.Event
		if json.Unmarshal(r.Value, &ev) == nil {
			_ = st.Apply(ev)
		}
	}
	return st
}

// ControlRecords reads every record of c's control topic, in order.
func (c *Cluster) ControlRecords(t testing.TB) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, recs := range ReadByOffset(t, c.Brokers, names.Mapper{Prefix: c.Prefix}.ControlTopic()) {
		for _, r := range recs {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out
}
