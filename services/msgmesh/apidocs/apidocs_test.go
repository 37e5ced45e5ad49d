package apidocs

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/proto"
)

func serve(t *testing.T, bundle fstest.MapFS, path string) *httptest.ResponseRecorder {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	Routes(e, bundle)
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w
}

// GET /openapi.yaml is proto/openapi.yaml byte for byte.
func TestOpenAPIServed(t *testing.T) {
	w := serve(t, fstest.MapFS{}, "/openapi.yaml")
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), proto.OpenAPI) || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/yaml") {
		t.Fatalf("GET /openapi.yaml: %d %q, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}
}

// With the renderer built in, /docs loads it and points it at /openapi.yaml.
func TestDocsWithBundle(t *testing.T) {
	bundle := fstest.MapFS{BundleFile: {Data: []byte("/* redoc */")}}
	w := serve(t, bundle, "/docs")
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `<redoc spec-url="/openapi.yaml"`) || !strings.Contains(body, `<script src="/docs/redoc.standalone.js">`) {
		t.Fatalf("GET /docs: %d %s", w.Code, body)
	}
	if js := serve(t, bundle, "/docs/"+BundleFile); js.Code != 200 || js.Body.String() != "/* redoc */" || !strings.Contains(js.Header().Get("Content-Type"), "javascript") {
		t.Fatalf("GET /docs/%s: %d %q %q", BundleFile, js.Code, js.Header().Get("Content-Type"), js.Body.String())
	}
}

// Built without it (plain go build), /docs says how to get it and links
// the contract; the bundle route does not exist.
func TestDocsWithoutBundle(t *testing.T) {
	w := serve(t, fstest.MapFS{}, "/docs")
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "make build") || !strings.Contains(body, `href="/openapi.yaml"`) || strings.Contains(body, "<script") {
		t.Fatalf("GET /docs: %d %s", w.Code, body)
	}
	if js := serve(t, fstest.MapFS{}, "/docs/"+BundleFile); js.Code != http.StatusNotFound {
		t.Fatalf("GET /docs/%s without a bundle: %d", BundleFile, js.Code)
	}
}
