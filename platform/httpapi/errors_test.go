package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/limits"
)

// Every domain error of platform/auth and platform/limits maps to its
// catalog code, keeps the domain message for the client, and stays the
// cause (errors.Is still matches through the *Error).
func TestFromDomainMapsEveryKind(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  Code
		retry int
	}{
		{&auth.Error{Kind: auth.ErrUnauthenticated, Message: "m"}, CodeUnauthenticated, 0},
		{&auth.Error{Kind: auth.ErrInvalidCredential, Message: "m"}, CodeInvalidCredential, 0},
		{&auth.Error{Kind: auth.ErrCredentialRevoked, Message: "m", Err: auth.ErrParentRevoked}, CodeCredentialRevoked, 0},
		{auth.ErrParentRevoked, CodeCredentialRevoked, 0},
		{&auth.Error{Kind: auth.ErrTokenExpired, Message: "m"}, CodeTokenExpired, 0},
		{&auth.Error{Kind: auth.ErrTokenInvalid, Message: "m", Err: errors.New("bad signature")}, CodeInvalidToken, 0},
		{&auth.Error{Kind: auth.ErrKeyInURL, Message: "m"}, CodeKeyInURL, 0},
		{&auth.Error{Kind: auth.ErrTenantSuspended, Message: "m"}, CodeTenantSuspended, 0},
		{&auth.Error{Kind: auth.ErrForbidden, Message: "m"}, CodeForbidden, 0},
		{&limits.Error{Kind: limits.ErrRateLimited, Message: "m", RetryAfter: 2 * time.Second}, CodeRateLimited, 2},
		{fmt.Errorf("publish: %w", &limits.Error{Kind: limits.ErrQuotaExceeded, Message: "m", RetryAfter: 90 * time.Second}), CodeQuotaExceeded, 90},
	} {
		e := AsError(tc.err)
		if e.Code != tc.code || e.RetryAfter != tc.retry || !errors.Is(e, tc.err) {
			t.Errorf("%v: %s retry %d, want %s retry %d", tc.err, e.Code.Code, e.RetryAfter, tc.code.Code, tc.retry)
		}
		if _, isAuth := tc.err.(*auth.Error); isAuth && e.Message != "m" {
			t.Errorf("%v: message %q, want the domain message", tc.err, e.Message)
		}
	}
	if _, ok := Known(errors.New("boom")); ok {
		t.Error("an unknown error is Known")
	}
	if e := AsError(errors.New("boom")); e.Code != CodeInternal {
		t.Errorf("unknown error: %s, want internal", e.Code.Code)
	}
}

// RenderErrors answers a chain aborted with c.Error (as auth's middleware
// does) with the mapped JSON error and Retry-After, and leaves written
// responses alone.
func TestRenderErrors(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(RequestID(), RenderErrors(nil))
	e.GET("/refused", func(c *gin.Context) {
		_ = c.Error(&limits.Error{Kind: limits.ErrRateLimited, Message: "request rate limit of 5 per second exceeded", RetryAfter: time.Second})
		c.Abort()
	})
	e.GET("/written", func(c *gin.Context) {
		_ = c.Error(errors.New("logged only"))
		c.Status(http.StatusNoContent)
	})
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/refused", nil))
	var body map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != http.StatusTooManyRequests || body["code"] != "rate_limited" || body["error"] != "request rate limit of 5 per second exceeded" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("refused: %d %v Retry-After %q", w.Code, body, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/written", nil))
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Fatalf("written: %d %q", w.Code, w.Body)
	}
}
