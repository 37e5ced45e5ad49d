package integration

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/config"
)

// A token signed with the real signing key (as whoever held the seed
// could) is still refused when it lives longer than tokens.max_ttl or
// claims an iat beyond the 60 s skew in the future, or has no iat.
func TestTokensLifetimeCapped(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Tokens.MaxTTL = time.Hour })
	admin := c.AdminKey
	minted, _ := h.MintToken(t, n.URL, admin, 3600, nil)
	j := h.ParseJWT(t, minted)
	kid, _ := j.Header["kid"].(string)
	parent, _ := j.Claims["pk"].(string)
	priv := ed25519.NewKeyFromSeed(c.SigningKeySeed(t, kid))
	sign := func(iat *jwt.NumericDate, exp time.Time) string {
		claims := auth.TokenClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: auth.TokenIssuer, Subject: "default", ID: "tok_signed",
			IssuedAt: iat, ExpiresAt: jwt.NewNumericDate(exp)}, ParentKey: parent, Caps: capability.ForRole(capability.RoleAdmin)}
		tk := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
		tk.Header["kid"] = kid
		s, err := tk.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	at := func(d time.Duration) *jwt.NumericDate { return jwt.NewNumericDate(now.Add(d)) }
	get := func(tok string) h.Response { return h.Do(t, n.URL, "GET", "/v1/topics", tok, nil) }
	h.Must(t, n.URL, "GET", "/v1/topics", minted, nil, 200)
	if r := get(sign(at(0), now.Add(time.Hour))); r.Status != 200 {
		t.Fatalf("a token of exactly tokens.max_ttl: %d %s", r.Status, r.Body)
	}
	if r := get(sign(at(30*time.Second), now.Add(10*time.Minute))); r.Status != 200 {
		t.Fatalf("a token with iat 30s ahead (within the skew): %d %s", r.Status, r.Body)
	}
	h.WantError(t, "a one-year token", get(sign(at(0), now.Add(365*24*time.Hour))), 401, "invalid_token")
	h.WantError(t, "a token of two hours (max_ttl 1h)", get(sign(at(0), now.Add(2*time.Hour))), 401, "invalid_token")
	h.WantError(t, "a token issued 10 minutes from now", get(sign(at(10*time.Minute), now.Add(20*time.Minute))), 401, "invalid_token")
	h.WantError(t, "a token without iat", get(sign(nil, now.Add(10*time.Minute))), 401, "invalid_token")
	// Minting above the cap is refused up front.
	h.WantError(t, "minting over max_ttl", h.Do(t, n.URL, "POST", "/v1/tokens", admin, map[string]any{"ttl_seconds": 3601}), 422, "validation_failed")
}
