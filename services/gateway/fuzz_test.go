package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

// Whatever the body, Content-Type and ?room= of a publish, parsePublish
// never panics, refuses with a 4xx catalog error, or makes records that
// keep every limit: valid JSON data for JSON bodies, at most
// publish.max_batch_messages records of at most publish.max_message_bytes,
// rooms within publish.max_room_length, content-type first and no
// reserved header.
func FuzzParsePublish(f *testing.F) {
	for _, s := range []string{
		`{"data":{"a":1}}`, `{"data":1,"room":"r","headers":{"k":"v"}}`,
		`{"messages":[{"data":1},{"data":"x","room":"r","headers":[{"key":"b","value_base64":"/w=="}]}]}`,
		`{"messages":[]}`, `{"data":1,"messages":[]}`, `{"data":`, `{"data":1} {}`, `{"data":1,"headers":{"msgmesh-x":"1"}}`,
		`{"data":"\xff"}`, `{"messages":[{"room":""}]}`,
	} {
		f.Add([]byte(s), "application/json", "")
	}
	f.Add([]byte("raw bytes"), "application/octet-stream", "room-1")
	f.Add([]byte("a=b"), "application/x-www-form-urlencoded", "")
	f.Add([]byte{}, "", "")
	cfg := config.Defaults()
	cfg.Publish.MaxBatchMessages = 5
	cfg.Publish.MaxMessageBytes = 64
	cfg.Publish.MaxRoomLength = 16
	cfg.Publish.MaxHeaders = 4
	g := &Gateway{cfg: ConfigOf(cfg)}
	gin.SetMode(gin.ReleaseMode)
	f.Fuzz(func(t *testing.T, body []byte, contentType, room string) {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		target := "/v1/topics/t/messages"
		if room != "" {
			target += "?room=" + url.QueryEscape(room)
		}
		c.Request = httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
		if contentType != "" {
			c.Request.Header.Set("Content-Type", contentType)
		}
		recs, _, err := g.parsePublish(c, body)
		if err != nil {
			var he *httpapi.Error
			if !errors.As(err, &he) || he.Code.Status < 400 || he.Code.Status >= 500 {
				t.Fatalf("refusal %v is not a 4xx catalog error", err)
			}
			return
		}
		if len(recs) == 0 || len(recs) > cfg.Publish.MaxBatchMessages {
			t.Fatalf("%d records", len(recs))
		}
		jsonBody := isJSON(c.ContentType())
		for i, r := range recs {
			if len(r.Value) > cfg.Publish.MaxMessageBytes {
				t.Fatalf("record %d: %d bytes", i, len(r.Value))
			}
			if jsonBody && !json.Valid(r.Value) {
				t.Fatalf("record %d: data %q is not JSON", i, r.Value)
			}
			if r.Key != nil && (len(r.Key) == 0 || len(r.Key) > cfg.Publish.MaxRoomLength) {
				t.Fatalf("record %d: room %q", i, r.Key)
			}
			if len(r.Headers) == 0 || r.Headers[0].Key != HeaderContentType || len(r.Headers) > cfg.Publish.MaxHeaders+1 {
				t.Fatalf("record %d: headers %v", i, r.Headers)
			}
			for _, h := range r.Headers[1:] {
				if lk := strings.ToLower(h.Key); lk == HeaderContentType || strings.HasPrefix(lk, reservedHeaderPrefix) || h.Key == "" {
					t.Fatalf("record %d: header %q", i, h.Key)
				}
			}
		}
	})
}
