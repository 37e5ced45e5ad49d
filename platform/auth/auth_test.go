package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
)

func TestNewKeyShape(t *testing.T) {
	k1, h1, d1, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _, _, _ := NewKey()
	if k1 == k2 {
		t.Fatal("two keys alike")
	}
	if !LooksLikeKey(k1) || len(k1) != 3+43 {
		t.Fatalf("key shape %q", k1)
	}
	if HashKey(k1) != h1 || len(h1) != 64 {
		t.Fatalf("hash %q", h1)
	}
	if d1 != k1[:9] {
		t.Fatalf("display %q", d1)
	}
}

// state returns a projection with tenant t, key k1 and one signing key.
func state(t *testing.T) (*controlstate.State, string) {
	t.Helper()
	s := controlstate.NewState()
	apply := func(typ string, d any) {
		raw, _ := json.Marshal(d)
		if err := s.Apply(controlstate.Event{V: controlstate.SchemaVersion, Type: typ, ID: NewID("ev_"), At: time.Now(), Data: raw}); err != nil {
			t.Fatal(err)
		}
	}
	key, hash, disp, _ := NewKey()
	apply(controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "t", Plan: "free",
		AdminKey: &controlstate.KeyCreatedData{Tenant: "t", KeyID: "k1", Role: capability.RoleAdmin, Hash: hash, Prefix: disp}})
	kid, seed, _ := NewSigningKey()
	apply(controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: kid, Seed: seed})
	return s, key
}

func applyTo(t *testing.T, s *controlstate.State, typ string, d any) {
	t.Helper()
	raw, _ := json.Marshal(d)
	if err := s.Apply(controlstate.Event{V: controlstate.SchemaVersion, Type: typ, ID: NewID("ev_"), At: time.Now(), Data: raw}); err != nil {
		t.Fatal(err)
	}
}

func TestTokenLifecycle(t *testing.T) {
	s, _ := state(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	caps := []capability.Capability{{Ops: []capability.Op{capability.OpPublish}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}}
	tok, exp, err := MintToken(s, now, "t", "k1", caps, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(now.Add(time.Minute)) {
		t.Fatalf("exp %v", exp)
	}
	p, err := VerifyToken(s, now.Add(30*time.Second), tok, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "t" || p.KeyID != "k1" || !p.Can(capability.OpPublish, "chat", "room-42") || p.Can(capability.OpPublish, "chat", "room-43") {
		t.Fatalf("principal %+v", p)
	}
	if _, err := VerifyToken(s, now.Add(61*time.Second), tok, time.Hour); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired: %v", err)
	}
	// A flipped signature byte.
	parts := strings.Split(tok, ".")
	sig := []byte(parts[2])
	if sig[5] == 'A' {
		sig[5] = 'B'
	} else {
		sig[5] = 'A'
	}
	if _, err := VerifyToken(s, now, parts[0]+"."+parts[1]+"."+string(sig), time.Hour); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("bad signature: %v", err)
	}
	// Rotation: a new key signs, the old one still verifies until retired.
	old, _ := s.CurrentSigningKey()
	kid, seed, _ := NewSigningKey()
	applyTo(t, s, controlstate.TypeSigningKeyCreated, controlstate.SigningKeyCreatedData{KID: kid, Seed: seed})
	if _, err := VerifyToken(s, now, tok, time.Hour); err != nil {
		t.Fatalf("old token after rotation: %v", err)
	}
	tok2, _, _ := MintToken(s, now, "t", "k1", caps, time.Minute)
	applyTo(t, s, controlstate.TypeSigningKeyRetired, controlstate.SigningKeyRetiredData{KID: old.KID})
	if _, err := VerifyToken(s, now, tok, time.Hour); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("token of a retired key: %v", err)
	}
	if _, err := VerifyToken(s, now, tok2, time.Hour); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	// Revoking the parent kills its tokens.
	applyTo(t, s, controlstate.TypeKeyRevoked, controlstate.KeyRevokedData{Tenant: "t", KeyID: "k1"})
	if _, err := VerifyToken(s, now, tok2, time.Hour); !errors.Is(err, ErrParentRevoked) {
		t.Fatalf("revoked parent: %v", err)
	}
}

func TestTokenAlgorithmConfusion(t *testing.T) {
	s, _ := state(t)
	now := time.Now()
	tok, _, err := MintToken(s, now, "t", "k1", capability.ForRole(capability.RoleAdmin), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	sk, _ := s.CurrentSigningKey()
	// alg: none with the same claims and no signature.
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"` + sk.KID + `"}`))
	if _, err := VerifyToken(s, now, hdr+"."+parts[1]+".", time.Hour); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("alg none accepted: %v", err)
	}
	// HS256 keyed with the Ed25519 public key bytes.
	priv, _ := privateKey(sk)
	claims := jwt.MapClaims{}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(raw, &claims)
	h := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	h.Header["kid"] = sk.KID
	forged, err := h.SignedString([]byte(priv.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyToken(s, now, forged, time.Hour); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("HS256 forgery accepted: %v", err)
	}
}

func TestAuthenticate(t *testing.T) {
	s, key := state(t)
	a := &Authenticator{State: s, OperatorKey: strings.Repeat("o", 40)}
	if p, err := a.Authenticate(key); err != nil || p.Tenant != "t" || !p.Can(capability.OpKeysManage, "", "") {
		t.Fatalf("admin key: %+v %v", p, err)
	}
	if p, err := a.Authenticate(strings.Repeat("o", 40)); err != nil || !p.Operator || p.Can(capability.OpPublish, "x", "") {
		t.Fatalf("operator: %+v %v", p, err)
	}
	for bad, kind := range map[string]error{
		"":                                ErrUnauthenticated,
		"mm_nope":                         ErrInvalidCredential,
		"mm_" + strings.Repeat("A", 43):   ErrInvalidCredential,
		"a.b.c":                           ErrTokenInvalid,
		"not a credential of either kind": ErrInvalidCredential,
	} {
		_, err := a.Authenticate(bad)
		var ae *Error
		if !errors.Is(err, kind) || !errors.As(err, &ae) || ae.Message == "" {
			t.Errorf("Authenticate(%q) = %v, want an *auth.Error of kind %v", bad, err, kind)
		}
	}
	applyTo(t, s, controlstate.TypeTenantSuspended, controlstate.TenantSuspendedData{Tenant: "t", Reason: "billing"})
	if _, err := a.Authenticate(key); !errors.Is(err, ErrTenantSuspended) {
		t.Fatalf("suspended tenant: %v, want ErrTenantSuspended", err)
	}
}

// A validly signed token is still refused when it lives longer than
// tokens.max_ttl, has no iat or an iat beyond the skew in the future.
func TestTokenLifetimeAndIssuedAt(t *testing.T) {
	s, _ := state(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC)
	sk, _ := s.CurrentSigningKey()
	priv, _ := privateKey(sk)
	sign := func(iat, exp *jwt.NumericDate) string {
		c := TokenClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: TokenIssuer, Subject: "t", ID: "tok_x", IssuedAt: iat, ExpiresAt: exp},
			ParentKey: "k1", Caps: capability.ForRole(capability.RoleAdmin)}
		tk := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
		tk.Header["kid"] = sk.KID
		out, err := tk.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	at := func(d time.Duration) *jwt.NumericDate { return jwt.NewNumericDate(now.Add(d)) }
	maxTTL := time.Hour
	for _, tc := range []struct {
		name     string
		tok      string
		accepted bool
	}{
		{"exactly max_ttl", sign(at(0), at(maxTTL)), true},
		{"max_ttl minted at a fractional second (exp rounded up)", func() string { tk, _, _ := MintToken(s, now, "t", "k1", nil, maxTTL); return tk }(), true},
		{"a year", sign(at(0), at(365*24*time.Hour)), false},
		{"max_ttl plus two seconds", sign(at(0), at(maxTTL+2*time.Second)), false},
		{"iat 30s ahead (skew)", sign(at(30*time.Second), at(10*time.Minute)), true},
		{"iat 2m ahead", sign(at(2*time.Minute), at(10*time.Minute)), false},
		{"no iat", sign(nil, at(time.Minute)), false},
	} {
		_, err := VerifyToken(s, now, tc.tok, maxTTL)
		if tc.accepted && err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
		if !tc.accepted && !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s: want ErrTokenInvalid, got %v", tc.name, err)
		}
	}
}
