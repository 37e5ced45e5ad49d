package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func engine(log *slog.Logger) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(RequestID(), AccessLog(log))
	e.GET("/v1/things/:id", func(c *gin.Context) {
		Abort(c, log, Errorf(CodeInvalidCursor, "cursor %q: want <epoch>.<o0>-<o1> & co", c.Query("cursor")))
	})
	e.GET("/ok", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	return e
}

// Error bodies show < > & as they are, not as \u003c escapes.
func TestErrorBodyNotHTMLEscaped(t *testing.T) {
	e := engine(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/v1/things/1?cursor=x", nil))
	want := `{"error":"cursor \"x\": want <epoch>.<o0>-<o1> & co","code":"invalid_cursor"}`
	if w.Code != 400 || w.Body.String() != want {
		t.Fatalf("got %d %s\nwant %s", w.Code, w.Body.String(), want)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
}

// A 4xx answer is logged at info (the default level) with its request id
// and code, never the credential; a 2xx stays at debug.
func TestAccessLogLogs4xxAtInfo(t *testing.T) {
	var buf bytes.Buffer
	e := engine(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	req := httptest.NewRequest("GET", "/v1/things/1?cursor=garbage&token=tok_SECRET", nil)
	req.Header.Set("Authorization", "Bearer mm_SECRET")
	req.Header.Set(HeaderRequestID, "req-4xx-1")
	e.ServeHTTP(httptest.NewRecorder(), req)
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/ok", nil))
	out := buf.String()
	for _, want := range []string{"level=INFO", "status=400", "code=invalid_cursor", "request_id=req-4xx-1", "route=/v1/things/:id"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("log holds the credential:\n%s", out)
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("want exactly the 4xx line at info (the 204 at debug):\n%s", out)
	}
}
