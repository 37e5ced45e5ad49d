package integration

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Keys and tokens (valid, expired, forged, sent as ?token=) never reach
// the logs of a real process at debug level in JSON, nor does the token
// signing key.
func TestCredentialsTokensNeverLogged(t *testing.T) {
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr, "MSGMESH_LOG_LEVEL=debug", "MSGMESH_LOG_FORMAT=json"))
	secrets := map[string]string{"bootstrap admin key": c.AdminKey, "operator key": c.OperatorKey}
	admin := c.AdminKey
	h.CreateTopic(t, p.URL, admin, "x", 1)

	capID, capKey := h.CapKey(t, p.URL, admin, "backend",
		h.Cap{Ops: []string{"tokens.mint"}, Topics: []string{"*"}},
		h.Cap{Ops: []string{"publish", "subscribe"}, Topics: []string{"x"}})
	secrets["capability key"] = capKey
	valid, _ := h.MintToken(t, p.URL, capKey, 600, []h.Cap{{Ops: []string{"publish", "subscribe"}, Topics: []string{"x"}, Rooms: []string{"room-42"}}})
	secrets["token"] = valid
	short, _ := h.MintToken(t, p.URL, capKey, 1, nil)
	secrets["expiring token"] = short
	j := h.ParseJWT(t, valid)
	secrets["token signature"] = j.Sig
	kid, _ := j.Header["kid"].(string)
	secrets["signing key seed"] = base64.StdEncoding.EncodeToString(c.SigningKeySeed(t, kid))
	tampered := h.TamperSignature(valid)
	secrets["tampered token"] = tampered
	none := h.Forge(t, map[string]any{"alg": "none", "kid": kid}, j.Payload, nil)
	secrets["alg none token"] = none

	pub := func(cred string) h.Response {
		return h.Do(t, p.URL, "POST", "/v1/topics/x/messages", cred, credMsg("room-42", "m"))
	}
	h.Must(t, p.URL, "POST", "/v1/topics/x/messages", valid, credMsg("room-42", "ok"), 200)
	h.WantForbidden(t, "token in another room", h.Do(t, p.URL, "POST", "/v1/topics/x/messages", valid, credMsg("room-43", "m")), "publish", `"room-43"`)
	h.Must(t, p.URL, "POST", "/v1/topics/x/messages", capKey, credMsg("", "ok"), 200)
	h.WantError(t, "tampered token", pub(tampered), 401, "invalid_token")
	h.WantError(t, "alg none token", pub(none), 401, "invalid_token")
	time.Sleep(2100 * time.Millisecond)
	h.WantError(t, "expired token", pub(short), 401, "token_expired")
	h.WantError(t, "a token minting a token", h.Do(t, p.URL, "POST", "/v1/tokens", valid, nil), 403, "forbidden")

	// ?token= on the SSE path (it may be 404 until SSE exists) and on a
	// route that does not take it.
	for _, q := range []struct{ what, v string }{{"token", valid}, {"expired token", short}, {"tampered token", tampered}, {"key", capKey}} {
		for _, path := range []string{"/v1/topics/x/events?room=room-42&token=", "/v1/topics?token="} {
			status, body := credProbe(t, p.URL+path+url.QueryEscape(q.v))
			if status/100 == 5 {
				t.Errorf("GET %s<%s>: %d %s", path, q.what, status, body)
			}
			if strings.Contains(body, q.v) {
				t.Errorf("GET %s<%s>: the answer echoes the credential", path, q.what)
			}
		}
	}
	// Revoke the parent: its tokens fail as credential_revoked.
	h.Must(t, p.URL, "DELETE", "/v1/keys/"+capID, admin, nil, 204)
	h.WantError(t, "token of a revoked key", pub(valid), 401, "credential_revoked")
	// Operator calls, including a rotation (a new seed in the control log).
	rot := h.Must(t, p.URL, "POST", "/v1/signing-keys", c.OperatorKey, nil, 201).JSON(t)
	newKid, _ := rot["kid"].(string)
	h.Must(t, p.URL, "GET", "/v1/signing-keys", c.OperatorKey, nil, 200)
	ta := h.CreateTenant(t, p.URL, c.OperatorKey, "logged", "free")
	secrets["tenant admin key"] = ta
	t2, _ := h.MintToken(t, p.URL, ta, 60, nil)
	secrets["token of the new signing key"] = t2
	secrets["new signing key seed"] = base64.StdEncoding.EncodeToString(c.SigningKeySeed(t, newKid))

	if err := p.Terminate(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	out := p.Output()
	if !strings.Contains(out, `"level":"DEBUG"`) || !strings.Contains(out, `"msg":"http"`) {
		t.Fatalf("the process did not log at debug level in JSON (the check would be empty):\n%.2000s", out)
	}
	for what, s := range secrets {
		if strings.Contains(out, s) || strings.Contains(out, url.QueryEscape(s)) {
			t.Errorf("the log contains the %s", what)
		}
	}
	// Not even the token's payload segment (tenant, parent key, capabilities).
	if strings.Contains(out, j.Payload) {
		t.Errorf("the log contains a token's payload segment")
	}
	t.Logf("checked %d bytes of debug log for %d secrets", len(out), len(secrets))
}

// credProbe GETs u and returns the status and (unless it is an event
// stream, which is left unread) the body.
func credProbe(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
