package integration

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// The token broker (spec section 4): a backend key mints short-lived,
// downscoped tokens; tokens inherit or narrow, never widen; a token mints
// nothing; tokens travel as Bearer, never as ?token= outside SSE.
func TestCredentialsTokenBroker(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	admin := c.AdminKey
	for _, tp := range []string{"chat", "other"} {
		h.CreateTopic(t, n.URL, admin, tp, 1)
	}
	chatKT := c.TenantKafkaTopic("default", "chat")

	// The spec's done-when: a token for room-42 publishes to room-42 and is
	// refused everything else.
	before := time.Now()
	room42, exp := h.MintToken(t, n.URL, admin, 300, []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}})
	after := time.Now() // the mint happened in between (seconds, on a loaded machine)
	if exp.Before(before.Add(298*time.Second)) || exp.After(after.Add(302*time.Second)) {
		t.Errorf("token of ttl 300s expires %v after the request and %v after the answer, want ~300s", exp.Sub(before), exp.Sub(after))
	}
	j := h.ParseJWT(t, room42)
	if j.Header["alg"] != "EdDSA" || j.Header["kid"] == nil {
		t.Errorf("token header %v, want alg EdDSA and a kid", j.Header)
	}
	if strings.Contains(room42, admin) || strings.Contains(string(credMustJSON(t, j.Claims)), admin) {
		t.Errorf("the token carries the parent key")
	}
	start := h.TotalRecords(t, c.Brokers, chatKT)
	h.Must(t, n.URL, "POST", "/v1/topics/chat/messages", room42, credMsg("room-42", "hi"), 200)
	h.Must(t, n.URL, "POST", "/v1/topics/chat/messages", room42, map[string]any{"messages": []any{credMsg("room-42", 1), credMsg("room-42", 2)}}, 200)
	F := http.StatusForbidden
	credRun(t, n.URL, map[string]string{"token": room42}, []credCall{
		{"token", "POST", "/v1/topics/chat/messages", credMsg("room-43", 1), F, []string{"publish", `"room-43"`}},
		{"token", "POST", "/v1/topics/chat/messages", credMsg("", 1), F, []string{"publish", "every room"}},
		{"token", "POST", "/v1/topics/chat/messages", map[string]any{"messages": []any{credMsg("room-42", 1), credMsg("room-43", 2)}}, F, []string{"publish", `"room-43"`}},
		{"token", "POST", "/v1/topics/chat/poll", map[string]any{"group": "g"}, F, []string{"poll"}},
		{"token", "POST", "/v1/topics/other/messages", credMsg("room-42", 1), F, []string{"publish", `"other"`}},
		{"token", "POST", "/v1/topics", map[string]any{"name": "chat-2"}, F, []string{"topics.manage"}},
		{"token", "DELETE", "/v1/topics/chat", nil, F, []string{"topics.manage"}},
		{"token", "GET", "/v1/topics", nil, F, []string{"topics.read"}},
		{"token", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},
		{"token", "POST", "/v1/keys", map[string]any{"name": "x", "role": "producer"}, F, []string{"keys.manage"}},
		{"token", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60}, F, nil},
		{"token", "PATCH", "/v1/tenant", map[string]any{"strict_topics": false}, F, []string{"tenant.settings"}},
	})
	if got := h.TotalRecords(t, c.Brokers, chatKT) - start; got != 3 {
		t.Errorf("chat gained %d records, want exactly the token's 3 allowed publishes", got)
	}

	// A token with no capabilities inherits the key's.
	_, capKey := h.CapKey(t, n.URL, admin, "backend",
		h.Cap{Ops: []string{"tokens.mint"}, Topics: []string{"*"}},
		h.Cap{Ops: []string{"publish", "poll"}, Topics: []string{"chat"}, Rooms: []string{"room-*"}})
	inherit, _ := h.MintToken(t, n.URL, capKey, 60, nil)
	h.Must(t, n.URL, "POST", "/v1/topics/chat/messages", inherit, credMsg("room-7", 1), 200)
	h.WantForbidden(t, "inheriting token, room lobby", h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", inherit, credMsg("lobby", 1)), "publish", `"lobby"`)
	h.WantForbidden(t, "inheriting token, topic other", h.Do(t, n.URL, "POST", "/v1/topics/other/messages", inherit, credMsg("room-7", 1)), "publish", `"other"`)
	// It inherited tokens.mint, yet a token cannot mint tokens.
	r := h.Do(t, n.URL, "POST", "/v1/tokens", inherit, map[string]any{"ttl_seconds": 30})
	h.WantError(t, "a token minting a token", r, 403, "forbidden")
	if m := r.JSON(t); !strings.Contains(strings.ToLower(m["error"].(string)), "token") {
		t.Errorf("refusal of a token minting a token does not say why: %v", m["error"])
	}
	// Default TTL (15 minutes) when ttl_seconds is omitted.
	dm := h.Must(t, n.URL, "POST", "/v1/tokens", capKey, nil, 200).JSON(t)
	// (899 is accepted here: TestCredentialsTokenLivesItsFullTTL covers the
	// rounding of expiry.)
	if ttl, _ := dm["ttl_seconds"].(float64); ttl != 900 && ttl != 899 {
		t.Errorf("token without ttl_seconds answered %v, want ttl_seconds 900 (the default)", dm)
	}

	// A subset is fine; overreach is 403 naming what was refused.
	sub, _ := h.MintToken(t, n.URL, capKey, 60, []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-9"}}})
	h.Must(t, n.URL, "POST", "/v1/topics/chat/messages", sub, credMsg("room-9", 1), 200)
	h.WantForbidden(t, "narrowed token, room-7", h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", sub, credMsg("room-7", 1)), "publish", `"room-7"`)
	for _, over := range []struct {
		what    string
		caps    []h.Cap
		mention []string
	}{
		{"other room", []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"lobby"}}}, []string{"publish", `"lobby"`}},
		{"every room", []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}}}, []string{"publish", `"*"`}},
		{"other topic", []h.Cap{{Ops: []string{"publish"}, Topics: []string{"other"}, Rooms: []string{"room-1"}}}, []string{"publish", `"other"`}},
		{"wider topic", []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat*"}, Rooms: []string{"room-1"}}}, []string{"publish", `"chat*"`}},
		{"other operation", []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"chat"}, Rooms: []string{"room-1"}}}, []string{"subscribe"}},
		{"keys", []h.Cap{{Ops: []string{"keys.manage"}, Topics: []string{"*"}}}, []string{"keys.manage"}},
		{"everything", []h.Cap{{Ops: []string{"*"}, Topics: []string{"*"}}}, nil},
	} {
		h.WantForbidden(t, "overreaching token ("+over.what+")", h.Do(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(60, over.caps)), over.mention...)
	}
	// Bad requests: ttl over the max (24h), negative, capabilities invalid.
	h.WantError(t, "ttl over the max", h.Do(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(24*3600+1, nil)), 422, "validation_failed")
	h.WantError(t, "negative ttl", h.Do(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(-5, nil)), 422, "validation_failed")
	h.WantError(t, "unknown operation", h.Do(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(60, []h.Cap{{Ops: []string{"fly"}, Topics: []string{"chat"}}})), 422, "validation_failed")
	h.WantError(t, "empty capabilities", h.Do(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(60, []h.Cap{})), 422, "validation_failed")
	h.Must(t, n.URL, "POST", "/v1/tokens", capKey, h.TokenBody(24*3600, nil), 200)

	// ?token= is for SSE only: elsewhere it authenticates nothing.
	for _, cred := range []struct{ what, v string }{{"token", room42}, {"admin key", admin}} {
		r, err := h.RawRequest(h.Client, "POST", n.URL+"/v1/topics/chat/messages?token="+cred.v,
			[]byte(`{"data":1,"room":"room-42"}`), map[string]string{"Content-Type": "application/json"})
		if err != nil {
			t.Fatal(err)
		}
		h.WantError(t, "?token= "+cred.what+" on publish", r, 401, "unauthenticated")
		r, err = h.RawRequest(h.Client, "GET", n.URL+"/v1/topics?token="+cred.v, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.WantError(t, "?token= "+cred.what+" on GET /v1/topics", r, 401, "unauthenticated")
	}
	if got := h.TotalRecords(t, c.Brokers, chatKT) - start; got != 5 {
		t.Errorf("chat gained %d records, want 5 (3 by room42, 1 inherited, 1 narrowed)", got)
	}
}

// A token minted by an admin key (and so inheriting keys.manage) must not
// turn itself into a long-lived key: a frontend holding a token must only
// ever hold something that expires (spec section 4), and revoking the
// parent must kill everything the token could do.
func TestCredentialsTokenCannotCreateKeys(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.CreateTopic(t, n.URL, c.AdminKey, "chat", 1)
	parentID, parent := h.RoleKey(t, n.URL, c.AdminKey, "backend-admin", "admin")
	tok, _ := h.MintToken(t, n.URL, parent, 60, nil)
	r := h.Do(t, n.URL, "POST", "/v1/keys", tok, map[string]any{"name": "escape", "role": "producer"})
	if r.Status == 201 {
		// Show what that means: the key outlives the token and its parent.
		escaped, _ := r.JSON(t)["key"].(string)
		h.Must(t, n.URL, "DELETE", "/v1/keys/"+parentID, c.AdminKey, nil, 204)
		after := h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", escaped, credMsg("", "still here"))
		t.Errorf("a 60 s token created a permanent producer key (201); after revoking the token's parent key that key still publishes (%d); want 403 for keys.manage by a token, as for minting tokens", after.Status)
		return
	}
	h.WantError(t, "token creating a key", r, 403, "forbidden")
}

// A token is valid for the whole ttl_seconds it was minted for, and the
// answer's ttl_seconds is the one asked for, whatever the sub-second part
// of the clock at minting.
func TestCredentialsTokenLivesItsFullTTL(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.CreateTopic(t, n.URL, c.AdminKey, "chat", 1)
	var fake atomic.Int64
	// 0.9 s past a whole second.
	base := time.Now().Truncate(time.Second).Add(900 * time.Millisecond)
	fake.Store(base.UnixNano())
	n.App.SetClock(func() time.Time { return time.Unix(0, fake.Load()) })
	r := h.Must(t, n.URL, "POST", "/v1/tokens", c.AdminKey, h.TokenBody(60, nil), 200).JSON(t)
	tok, _ := r["token"].(string)
	if r["ttl_seconds"] != float64(60) {
		t.Errorf("minted with ttl_seconds 60 at %s, the answer says ttl_seconds %v (expires_at %v)", base.Format("15:04:05.000"), r["ttl_seconds"], r["expires_at"])
	}
	fake.Store(base.Add(59500 * time.Millisecond).UnixNano())
	if p := h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", tok, credMsg("", 1)); p.Status != 200 {
		t.Errorf("a token of ttl_seconds 60 refused 59.5 s after minting: %d %s", p.Status, p.Body)
	}
	fake.Store(base.Add(61 * time.Second).UnixNano())
	h.WantError(t, "token 61 s into a 60 s ttl", h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", tok, credMsg("", 1)), 401, "token_expired")
}

func credMustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Token failure modes, each with its own 401 code: expiry on a
// controllable clock (token_expired) against forgeries (invalid_token):
// a tampered signature, alg none, HS256 keyed with the Ed25519 public key,
// a retired signing key.
func TestCredentialsTokenFailureModes(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	var fake atomic.Int64
	fake.Store(time.Now().UnixNano())
	n.App.SetClock(func() time.Time { return time.Unix(0, fake.Load()) })
	advance := func(d time.Duration) { fake.Add(int64(d)) }
	admin := c.AdminKey
	h.CreateTopic(t, n.URL, admin, "chat", 1)
	pub := func(tok string) h.Response {
		return h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", tok, credMsg("room-42", "x"))
	}
	caps := []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}}

	// Expiry on the node's clock.
	tok, exp := h.MintToken(t, n.URL, admin, 60, caps)
	if want := time.Unix(0, fake.Load()).Add(60 * time.Second); exp.Before(want.Add(-2*time.Second)) || exp.After(want.Add(time.Second)) {
		t.Errorf("token expires_at %v, want ~%v by the node's clock", exp, want)
	}
	if r := pub(tok); r.Status != 200 {
		t.Fatalf("fresh token: %d %s", r.Status, r.Body)
	}
	advance(55 * time.Second)
	if r := pub(tok); r.Status != 200 {
		t.Errorf("token 55 s into a 60 s ttl: %d %s", r.Status, r.Body)
	}
	advance(10 * time.Second)
	h.WantError(t, "token past its expiry", pub(tok), 401, "token_expired")
	expired := tok
	// A token minted now (on the advanced clock) works.
	fresh, _ := h.MintToken(t, n.URL, admin, 60, caps)
	if r := pub(fresh); r.Status != 200 {
		t.Errorf("token minted after the clock moved: %d %s", r.Status, r.Body)
	}

	// Forgeries are invalid_token, not token_expired, even when expired.
	j := h.ParseJWT(t, fresh)
	kid, _ := j.Header["kid"].(string)
	h.WantError(t, "tampered signature", pub(h.TamperSignature(fresh)), 401, "invalid_token")
	h.WantError(t, "tampered signature of an expired token", pub(h.TamperSignature(expired)), 401, "invalid_token")
	h.WantError(t, "truncated signature", pub(fresh[:len(fresh)-10]), 401, "invalid_token")
	h.WantError(t, "no signature", pub(fresh[:strings.LastIndex(fresh, ".")+1]), 401, "invalid_token")
	none := h.Forge(t, map[string]any{"alg": "none", "typ": "JWT", "kid": kid}, j.Payload, nil)
	h.WantError(t, "alg none", pub(none), 401, "invalid_token")
	noneUpper := h.Forge(t, map[string]any{"alg": "None", "typ": "JWT", "kid": kid}, j.Payload, nil)
	h.WantError(t, "alg None", pub(noneUpper), 401, "invalid_token")
	// Algorithm confusion: HS256 keyed with the Ed25519 public key (read
	// from the control log, as an attacker with the public key would have).
	pubKey := ed25519.NewKeyFromSeed(c.SigningKeySeed(t, kid)).Public().(ed25519.PublicKey)
	hs := h.Forge(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, j.Payload, h.HS256(pubKey))
	h.WantError(t, "HS256 with the public key as secret", pub(hs), 401, "invalid_token")
	// A payload changed under the original signature: more rooms.
	widened := h.Forge(t, j.Header, credB64JSON(t, credWithCaps(j.Claims, []h.Cap{{Ops: []string{"*"}, Topics: []string{"*"}}})), nil)
	widened += j.Sig
	h.WantError(t, "payload widened under the original signature", pub(widened), 401, "invalid_token")
	// An unknown kid.
	unk := h.Forge(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": "sk_doesnotexist"}, j.Payload, nil) + j.Sig
	h.WantError(t, "unknown kid", pub(unk), 401, "invalid_token")
	// The genuine token still works after all that.
	if r := pub(fresh); r.Status != 200 {
		t.Errorf("genuine token after forgeries: %d %s", r.Status, r.Body)
	}

	// Rotation: the new key signs; old tokens verify until their key is
	// retired, then are invalid_token; tokens of the new key work.
	rot := h.Must(t, n.URL, "POST", "/v1/signing-keys", c.OperatorKey, nil, 201).JSON(t)
	newKid, _ := rot["kid"].(string)
	if newKid == "" || newKid == kid {
		t.Fatalf("rotate answered %v, want a new kid (old %s)", rot, kid)
	}
	if r := pub(fresh); r.Status != 200 {
		t.Errorf("token of the previous signing key right after rotation (not retired): %d %s", r.Status, r.Body)
	}
	after, _ := h.MintToken(t, n.URL, admin, 60, caps)
	if k := h.ParseJWT(t, after).Header["kid"]; k != newKid {
		t.Errorf("token minted after rotation has kid %v, want %s", k, newKid)
	}
	h.Must(t, n.URL, "POST", "/v1/signing-keys/"+kid+"/retire", c.OperatorKey, nil, 204)
	h.WantError(t, "token of a retired signing key", pub(fresh), 401, "invalid_token")
	if r := pub(after); r.Status != 200 {
		t.Errorf("token of the new signing key after retiring the old: %d %s", r.Status, r.Body)
	}
	h.WantError(t, "retire an unknown kid", h.Do(t, n.URL, "POST", "/v1/signing-keys/sk_nope/retire", c.OperatorKey, nil), 404, "not_found")
	h.WantForbidden(t, "admin key rotating signing keys", h.Do(t, n.URL, "POST", "/v1/signing-keys", admin, nil))
	var listed struct {
		Keys []struct {
			KID     string `json:"kid"`
			Retired bool   `json:"retired"`
			Current bool   `json:"current"`
		} `json:"signing_keys"`
	}
	if err := json.Unmarshal(h.Must(t, n.URL, "GET", "/v1/signing-keys", c.OperatorKey, nil, 200).Body, &listed); err != nil {
		t.Fatal(err)
	}
	for _, k := range listed.Keys {
		if (k.KID == kid) != k.Retired || (k.KID == newKid) != k.Current {
			t.Errorf("signing key %+v: want %s retired and %s current", k, kid, newKid)
		}
	}
}

// Revoking a key kills its tokens on every node within a second
// (401 credential_revoked); tokens of other keys are untouched.
func TestCredentialsRevokedParentKillsTokensEverywhere(t *testing.T) {
	c := h.NewCluster(t)
	a := c.Start(t, nil)
	b := c.Start(t, nil)
	h.CreateTopic(t, a.URL, c.AdminKey, "chat", 1)
	parentID, parent := h.RoleKey(t, a.URL, c.AdminKey, "backend", "producer")
	_, bystander := h.RoleKey(t, a.URL, c.AdminKey, "other-backend", "producer")
	tok, _ := h.MintToken(t, a.URL, parent, 300, nil)
	other, _ := h.MintToken(t, a.URL, bystander, 300, nil)
	pub := func(base, cred string) h.Response {
		return h.Do(t, base, "POST", "/v1/topics/chat/messages", cred, credMsg("r", 1))
	}
	if ok, _ := h.PollUntil(10*time.Second, 20*time.Millisecond, func() bool { return pub(b.URL, tok).Status == 200 }); !ok {
		t.Fatalf("node B never accepted the token minted on A: %s", pub(b.URL, tok).Body)
	}
	h.Must(t, a.URL, "DELETE", "/v1/keys/"+parentID, c.AdminKey, nil, 204)
	revoked := time.Now()
	h.WantError(t, "token of a revoked key on A", pub(a.URL, tok), 401, "credential_revoked")
	var last h.Response
	ok, _ := h.PollUntil(5*time.Second, 20*time.Millisecond, func() bool {
		last = pub(b.URL, tok)
		return last.Status == 401
	})
	took := time.Since(revoked)
	if !ok {
		t.Fatalf("node B still accepts the token 5 s after its key was revoked: %d %s", last.Status, last.Body)
	}
	h.WantError(t, "token of a revoked key on B", last, 401, "credential_revoked")
	if took > time.Second {
		t.Errorf("node B refused the token %v after the revoke, want ≤ 1s", took)
	}
	t.Logf("revocation reached node B's token check in %v", took.Round(time.Millisecond))
	h.WantError(t, "revoked key itself on B", pub(b.URL, parent), 401, "credential_revoked")
	for _, node := range []*h.Node{a, b} {
		if r := pub(node.URL, other); r.Status != 200 {
			t.Errorf("token of an unrevoked key on %s: %d %s", node.URL, r.Status, r.Body)
		}
	}
}

func credB64JSON(t *testing.T, v any) string {
	return base64.RawURLEncoding.EncodeToString(credMustJSON(t, v))
}

func credWithCaps(claims map[string]any, caps []h.Cap) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	out["caps"] = caps
	return out
}

// Retiring the current signing key (say, because it leaked) must not
// leave the token broker answering 503 "retry shortly" for ever: either
// the retire is refused until another key was rotated in, or minting goes
// on with a fresh key.
func TestCredentialsRetiringCurrentSigningKeyKeepsMinting(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.CreateTopic(t, n.URL, c.AdminKey, "chat", 1)
	old, _ := h.MintToken(t, n.URL, c.AdminKey, 60, nil)
	kid, _ := h.ParseJWT(t, old).Header["kid"].(string)
	r := h.Do(t, n.URL, "POST", "/v1/signing-keys/"+kid+"/retire", c.OperatorKey, nil)
	switch r.Status {
	case 409:
		h.WantError(t, "retiring the only signing key", r, 409, "conflict")
		return
	case 204:
	default:
		t.Fatalf("retire the current signing key: %d %s", r.Status, r.Body)
	}
	h.WantError(t, "token of the retired key", h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", old, credMsg("", 1)), 401, "invalid_token")
	var last h.Response
	ok, _ := h.PollUntil(5*time.Second, 100*time.Millisecond, func() bool {
		last = h.Do(t, n.URL, "POST", "/v1/tokens", c.AdminKey, h.TokenBody(60, nil))
		return last.Status == 200
	})
	if !ok {
		t.Fatalf("5 s after the only signing key was retired (204), POST /v1/tokens still answers %d %s; want minting with a new key, or 409 on the retire", last.Status, last.Body)
	}
	tok, _ := last.JSON(t)["token"].(string)
	if k := h.ParseJWT(t, tok).Header["kid"]; k == kid {
		t.Errorf("token minted after retiring %s is signed by it", kid)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/chat/messages", tok, credMsg("", 1), 200)
}
