package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/config"
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
