package panel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/httpapi"
)

// apiError is a non-2xx answer of the API: {"error","code"} and its
// status.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return e.Message
}

// call sends one request to this node's own API with key as the bearer
// credential, so the panel can do exactly what the key may do. out (if
// not nil) receives the JSON answer.
func (p *Panel) call(ctx context.Context, key, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.APIURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: httpapi.CodeNotReady.Code, Message: "the API did not answer (retry shortly): " + err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(b, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Code, Message: e.Error}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func esc(s string) string { return url.PathEscape(s) }

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// abortJSON answers err in the API's error format ({"error","code"},
// request_id on 5xx): an API error keeps its status and code.
func abortJSON(c *gin.Context, log *slog.Logger, err error) {
	if e, ok := err.(*apiError); ok {
		httpapi.Abort(c, log, &httpapi.Error{Code: httpapi.Code{Status: e.Status, Code: e.Code}, Message: e.Message})
		return
	}
	httpapi.Abort(c, log, err)
}

// statusOf is the HTTP status of an API error (500 for others).
func statusOf(err error) int {
	if e, ok := err.(*apiError); ok {
		return e.Status
	}
	return http.StatusInternalServerError
}

// unauthorized: the session's key no longer works (revoked, tenant gone).
func unauthorized(err error) bool {
	e, ok := err.(*apiError)
	return ok && e.Status == http.StatusUnauthorized
}

// routeMissing: the API has no such route on this build (404 not_found,
// not a resource's own not-found code).
func routeMissing(err error) bool {
	e, ok := err.(*apiError)
	return ok && e.Status == http.StatusNotFound && (e.Code == "not_found" || strings.HasPrefix(e.Message, "no route"))
}

// Shapes of the API answers the pages render.
type (
	tenantView struct {
		ID              string `json:"id"`
		Plan            string `json:"plan"`
		StrictTopics    bool   `json:"strict_topics"`
		RetentionMs     int64  `json:"retention_ms"`
		CreatedAt       string `json:"created_at"`
		Suspended       bool   `json:"suspended"`
		SuspendedReason string `json:"suspended_reason"`
	}
	topicView struct {
		Name        string `json:"name"`
		Partitions  int32  `json:"partitions"`
		KafkaTopic  string `json:"kafka_topic"`
		RetentionMs int64  `json:"retention_ms"`
		CreatedAt   string `json:"created_at"`
		Epoch       string `json:"epoch"`
	}
	capabilityView struct {
		Ops    []string `json:"ops"`
		Topics []string `json:"topics"`
		Rooms  []string `json:"rooms"`
	}
	keyView struct {
		ID           string           `json:"id"`
		Key          string           `json:"key"`
		Name         string           `json:"name"`
		Role         string           `json:"role"`
		Capabilities []capabilityView `json:"capabilities"`
		Prefix       string           `json:"prefix"`
		CreatedAt    string           `json:"created_at"`
		RevokedAt    *string          `json:"revoked_at"`
	}
	webhookView struct {
		ID             string  `json:"id"`
		Topic          string  `json:"topic"`
		URL            string  `json:"url"`
		Room           *string `json:"room"`
		Secret         string  `json:"secret"`
		Enabled        bool    `json:"enabled"`
		DisabledReason string  `json:"disabled_reason"`
		Group          string  `json:"group"`
		CreatedAt      string  `json:"created_at"`
		UpdatedAt      string  `json:"updated_at"`
	}
	deadLetterView struct {
		Cursor         string          `json:"cursor"`
		MessageID      string          `json:"message_id"`
		Topic          string          `json:"topic"`
		Room           *string         `json:"room"`
		OriginalCursor string          `json:"original_cursor"`
		Data           json.RawMessage `json:"data"`
		DataBase64     string          `json:"data_base64"`
		PublishedAt    string          `json:"published_at"`
		DeadLetteredAt string          `json:"dead_lettered_at"`
		Attempts       int             `json:"attempts"`
		Reason         string          `json:"reason"`
		LastError      string          `json:"last_error"`
		LastStatus     int             `json:"last_status"`
	}
	attemptView struct {
		WebhookID  string `json:"webhook_id"`
		Cursor     string `json:"cursor"`
		MessageID  string `json:"message_id"`
		Attempt    int    `json:"attempt"`
		Outcome    string `json:"outcome"`
		Status     int    `json:"status"`
		Error      string `json:"error"`
		DurationMs int64  `json:"duration_ms"`
		Time       string `json:"time"`
	}
	auditEvent struct {
		ID      string         `json:"id"`
		Time    string         `json:"time"`
		Type    string         `json:"type"`
		Actor   string         `json:"actor"`
		Summary string         `json:"summary"`
		Details map[string]any `json:"details"`
	}
)
