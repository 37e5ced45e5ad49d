package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// HeaderRequestID is echoed on every response.
const HeaderRequestID = "X-Request-Id"

const (
	ctxRequestID = "msgmesh.request_id"
	ctxErrorCode = "msgmesh.error_code"
)

// RequestID takes a sane incoming X-Request-Id (1-128 visible ASCII) or
// makes a random one, and sets it on the response.
func RequestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(HeaderRequestID)
		if !saneID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Set(ctxRequestID, id)
		c.Header(HeaderRequestID, id)
		c.Next()
	}
}

func saneID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// RequestIDOf returns the request id RequestID assigned.
func RequestIDOf(c *gin.Context) string { return c.GetString(ctxRequestID) }

type errorBody struct {
	Error     string `json:"error"`
	Code      string `json:"code"`
	RequestID string `json:"request_id,omitempty"`
}

// Abort writes err as the JSON error body with its status and stops the
// chain. 5xx errors are logged with their cause and carry request_id.
func Abort(c *gin.Context, log *slog.Logger, err error) {
	e := AsError(err)
	body := errorBody{Error: e.Message, Code: e.Code.Code}
	if e.Code.Status >= 500 {
		body.RequestID = RequestIDOf(c)
		if log != nil {
			log.Error("request failed", "request_id", body.RequestID, "method", c.Request.Method,
				"route", c.FullPath(), "status", e.Code.Status, "code", e.Code.Code, "err", e.Cause)
		}
	}
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	c.Set(ctxErrorCode, e.Code.Code)
	c.Abort()
	JSON(c, e.Code.Status, body)
}

// RenderErrors answers a request whose chain was aborted with an error
// (c.Error, as platform/auth's middleware and Require checks do) and
// nothing written yet: the last error, through AsError. Every engine
// installs it, before the routes.
func RenderErrors(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if c.IsAborted() && len(c.Errors) > 0 && !c.Writer.Written() {
			Abort(c, log, c.Errors.Last().Err)
		}
	}
}

// JSON writes v as the JSON body with status, without HTML escaping (gin's
// c.JSON turns "<" into "\u003c", which makes messages such as "want
// <partition>-<offset>" unreadable; the body is JSON, never HTML).
func JSON(c *gin.Context, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		c.Status(http.StatusInternalServerError)
		return
	}
	c.Header("Content-Type", "application/json; charset=utf-8")
	c.Status(status)
	_, _ = c.Writer.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// Recover turns a panic into a 500 error body instead of a dropped
// connection, and logs it.
func Recover(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		Abort(c, log, Wrap(CodeInternal, errors.New("panic"), "internal error"))
		log.Error("panic in handler", "request_id", RequestIDOf(c), "panic", rec)
	})
}

// AccessLog logs one line per request: at debug level for 1xx-3xx, at
// info for 4xx and 5xx (so that a client's failing calls can be found by
// the X-Request-Id it was answered): method, route, status, error code,
// duration, request id. Never headers, query or bodies: they may hold
// keys, tokens or payloads.
func AccessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		lvl := slog.LevelDebug
		if c.Writer.Status() >= 400 {
			lvl = slog.LevelInfo
		}
		if !log.Enabled(c.Request.Context(), lvl) {
			return
		}
		attrs := []any{"method", c.Request.Method, "route", c.FullPath(), "status", c.Writer.Status()}
		if code := c.GetString(ctxErrorCode); code != "" {
			attrs = append(attrs, "code", code)
		}
		attrs = append(attrs, "ms", time.Since(start).Milliseconds(), "request_id", RequestIDOf(c))
		log.Log(c.Request.Context(), lvl, "http", attrs...)
	}
}

// LimitBody caps the request body at n bytes; reading past it fails with
// *http.MaxBytesError, which ReadErr maps to 413.
func LimitBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		}
		c.Next()
	}
}

// ReadErr maps a body read error to the catalog: too large → 413, else 400.
func ReadErr(err error) *Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Errorf(CodePayloadTooLarge, "request body is over the %d byte limit", mbe.Limit)
	}
	return Wrap(CodeInvalidRequest, err, "could not read the request body")
}

// NoRoute and NoMethod answer unknown routes with catalog errors.
func NoRoute(c *gin.Context) {
	Abort(c, nil, Errorf(CodeNotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path))
}

// NoMethod answers a known path with a wrong method.
func NoMethod(c *gin.Context) {
	Abort(c, nil, Errorf(CodeMethodNotAllowed, "method %s not allowed on %s", c.Request.Method, c.Request.URL.Path))
}

// BindJSON decodes the request body into v, refusing unknown fields and
// trailing data. Errors map to 400 (or 413 past the body limit).
func BindJSON(c *gin.Context, v any) error {
	if c.Request.Body == nil {
		return Errorf(CodeInvalidRequest, "a JSON body is required")
	}
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ReadErr(err)
		}
		if errors.Is(err, io.EOF) {
			return Errorf(CodeInvalidRequest, "a JSON body is required")
		}
		return Errorf(CodeInvalidRequest, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return Errorf(CodeInvalidRequest, "invalid JSON body: trailing data after the object")
	}
	return nil
}

// BindOptionalJSON is BindJSON for an optional body: an empty body (of any
// transfer encoding) leaves v as it is.
func BindOptionalJSON(c *gin.Context, v any) error {
	if c.Request.Body == nil {
		return nil
	}
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return ReadErr(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(raw))
	return BindJSON(c, v)
}
