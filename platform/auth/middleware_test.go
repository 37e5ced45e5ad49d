package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

// serveOne runs Middleware (query tokens allowed) on one request and
// returns the status, the error code and the credential the handler saw.
func serveOne(t *testing.T, a *auth.Authenticator, target, authorization string) (int, string, string) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.Use(httpapi.RenderErrors(nil))
	seen := ""
	e.GET("/x", a.Middleware(func(*gin.Context) bool { return true }), func(c *gin.Context) {
		seen = auth.CredentialOf(c)
		c.Status(http.StatusNoContent)
	})
	req := httptest.NewRequest("GET", target, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	var body struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	return w.Code, body.Code, seen
}

// Every refusal of the middleware is answered by httpapi's one mapping,
// with the catalog code; an Authorization scheme other than Bearer is 401
// unauthenticated.
func TestMiddlewareRefusalsAnswerCatalogCodes(t *testing.T) {
	a := &auth.Authenticator{State: controlstate.NewState(), OperatorKey: "op_secret"}
	for _, tc := range []struct{ target, authorization, code string }{
		{"/x", "", "unauthenticated"},
		{"/x", "Basic b3A6c2VjcmV0", "unauthenticated"},
		{"/x", "Bearer mm_" + strings.Repeat("A", 43), "invalid_credential"},
		{"/x", "Bearer a.b.c", "invalid_token"},
		{"/x?token=a.b.c", "", "invalid_token"},
	} {
		st, code, cred := serveOne(t, a, tc.target, tc.authorization)
		if st != http.StatusUnauthorized || code != tc.code || cred != "" {
			t.Errorf("%s with %q: %d %q (handler saw %q), want 401 %s", tc.target, tc.authorization, st, code, cred, tc.code)
		}
	}
}

// ?token= refuses keys (401 key_in_url) before looking them up; the
// scheme of the Authorization header is case-insensitive and the handler
// sees the credential without it.
func TestMiddlewareQueryKeysAndCredential(t *testing.T) {
	a := &auth.Authenticator{State: controlstate.NewState(), OperatorKey: "op_secret"}
	key, _, _, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{key, "op_secret"} {
		if st, code, _ := serveOne(t, a, "/x?token="+q, ""); st != http.StatusUnauthorized || code != "key_in_url" {
			t.Errorf("key in ?token=: %d %q, want 401 key_in_url", st, code)
		}
	}
	for _, h := range []string{"Bearer op_secret", "bearer op_secret", "BEARER  op_secret "} {
		if st, _, cred := serveOne(t, a, "/x", h); st != http.StatusNoContent || cred != "op_secret" {
			t.Errorf("Authorization %q: %d, credential %q", h, st, cred)
		}
	}
}
