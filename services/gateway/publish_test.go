package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

func parseCtx(body []byte) *gin.Context {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/topics/t/messages", bytes.NewReader(body))
	c.Request.Header.Set("Content-Type", "application/json")
	return c
}

// Headers keep order and duplicates in both forms; content-type comes first.
func TestParsePublishHeaders(t *testing.T) {
	g := &Gateway{cfg: ConfigOf(config.Defaults())}
	body := []byte(`{"messages":[{"data":1,"headers":[{"key":"b","value":"1"},{"key":"a","value_base64":"/w=="},{"key":"b","value":"2"}]},{"data":2,"headers":{"z":"1","a":"2"}}]}`)
	recs, batch, err := g.parsePublish(parseCtx(body), body)
	if err != nil || !batch || len(recs) != 2 {
		t.Fatalf("parsePublish: %v, batch %v, %d records", err, batch, len(recs))
	}
	got := func(i int) string {
		var s []string
		for _, h := range recs[i].Headers {
			s = append(s, fmt.Sprintf("%s=%q", h.Key, h.Value))
		}
		return strings.Join(s, " ")
	}
	if w := `content-type="application/json" b="1" a="\xff" b="2"`; got(0) != w {
		t.Errorf("list form: %s, want %s", got(0), w)
	}
	if w := `content-type="application/json" z="1" a="2"`; got(1) != w {
		t.Errorf("object form: %s, want %s", got(1), w)
	}
}

// BenchmarkParsePublishBatch parses a batch of 100 messages of about 1 KiB
// (the benchmark's batch publish, docs/benchmarks.md).
func BenchmarkParsePublishBatch(b *testing.B) {
	g := &Gateway{cfg: ConfigOf(config.Defaults())}
	var sb strings.Builder
	sb.WriteString(`{"messages":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"room":"room-%d","data":{"i":%d,"pad":"%s"}}`, i%10, i, strings.Repeat("x", 1000))
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := g.parsePublish(parseCtx(body), body); err != nil {
			b.Fatal(err)
		}
	}
}

// The one-pass decoder accepts what encoding/json accepts and refuses the
// rest with a 400, naming what is wrong.
func TestParsePublishJSON(t *testing.T) {
	g := &Gateway{}
	g.cfg.Publish = config.Defaults().Publish // the publish section alone (any config type that has it)
	for _, tc := range []struct{ body, data, room string }{
		{`{"data":1}`, `1`, ""},
		{` { "data" : {"a":[1, 2]} , "room" : "r" } `, `{"a":[1, 2]}`, "r"},
		{`{"data":1,"data":2}`, `2`, ""}, // the last wins, as in encoding/json
		{`{"data":"\ud800"}`, `"\ud800"`, ""},
		{`{"data":1e999}`, `1e999`, ""},
		{`{"data":null,"room":null,"headers":null}`, `null`, ""},
	} {
		recs, _, err := g.parsePublish(parseCtx([]byte(tc.body)), []byte(tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if string(recs[0].Value) != tc.data || string(recs[0].Key) != tc.room {
			t.Errorf("%s: value %s room %q, want %s %q", tc.body, recs[0].Value, recs[0].Key, tc.data, tc.room)
		}
	}
	for _, body := range []string{
		`{"data":`, `[1,2]`, `{"data":1} {"data":2}`, `{"data":1,"colour":"red"}`, `{"data":1,"room":1}`,
		`{"data":01}`, "{\"data\":\"a\x01\"}", `{"data":[1,]}`, `{"messages":{}}`, `{"messages":[1]}`,
		`{"messages":[{"data":1,"x":2}]}`, `{"messages":[{"data":1},null]}`, `{"messages":[]}`, `{"data":tru}`, ``, `{}`,
		`{"messages":[{"data":1,"messages":[]}]}`,
	} {
		_, _, err := g.parsePublish(parseCtx([]byte(body)), []byte(body))
		var he *httpapi.Error
		if !errors.As(err, &he) || he.Code != httpapi.CodeInvalidRequest {
			t.Errorf("%q: %v, want invalid_request", body, err)
		}
	}
}

// The publish answer is the JSON encoding/json would write.
func TestAppendCursors(t *testing.T) {
	for _, tc := range []struct {
		cursors []string
		batch   bool
		want    string
	}{
		{[]string{"0-5"}, false, `{"cursor":"0-5"}`},
		{[]string{"0-5", "12-34567"}, true, `{"cursors":["0-5","12-34567"]}`},
	} {
		if got := string(appendCursors(nil, tc.cursors, tc.batch)); got != tc.want {
			t.Errorf("appendCursors(%v, %v) = %s, want %s", tc.cursors, tc.batch, got, tc.want)
		}
	}
}

// readBody reads the whole body, with or without a Content-Length, and
// one byte past the limit so the caller can refuse it.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name    string
		length  int64
		limit   int
		wantLen int
	}{
		{"with Content-Length", 100, 1000, 100},
		{"chunked", -1, 1000, 100},
		{"Content-Length over the limit", 100, 50, 51},
		{"chunked over the limit", -1, 50, 51},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.ContentLength = tc.length
		b, err := readBody(r, tc.limit)
		if err != nil || len(b) != tc.wantLen || string(b) != body[:tc.wantLen] {
			t.Errorf("%s: %d bytes, %v; want %d", tc.name, len(b), err, tc.wantLen)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body[:10]))
	r.ContentLength = 100
	if _, err := readBody(r, 1000); err == nil {
		t.Error("a body shorter than its Content-Length: no error")
	}
}
