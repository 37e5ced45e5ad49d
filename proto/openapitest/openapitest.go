// Package openapitest checks real HTTP exchanges against proto/openapi.yaml,
// so integration tests fail when a handler drifts from the contract.
//
//	v := openapitest.Validator(t)
//	resp, _ := http.DefaultClient.Do(req)
//	body, _ := io.ReadAll(resp.Body)
//	v.Check(t, req, reqBody, resp, body)
//
// Check fails the test when:
//   - the response status is not documented for the operation, or its body
//     or headers (X-Request-Id, which every response must carry) do not match;
//   - the server answered 2xx to a request the spec says is invalid (the
//     spec is too narrow or the handler too lax). A request the spec
//     rejects that the server also rejects (4xx) is fine: that is how error
//     paths are tested;
//   - an error body's code is not in httpapi.Catalog, or has another status
//     than the catalog's, or a 5xx body lacks request_id equal to
//     X-Request-Id;
//   - the route is not in the spec but the server did not answer 404
//     not_found / 405 method_not_allowed.
//
// Two answers are not held against the spec: 404 not_found on a path of
// the spec (the node does not run the target that serves it: split
// deployments), and bodies holding a JSON number beyond float64's range
// (valid JSON that MsgMesh keeps verbatim, which the validator cannot
// decode): such a request is not held to be invalid, nor such a response.
//
// Security requirements are not checked (the server decides those; the
// tests check the 401s and 403s it answers).
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/proto"
)

// V validates exchanges against the embedded OpenAPI document. It is safe
// for concurrent use.
type V struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	once    sync.Once
	shared  *V
	loadErr error
)

// Validator returns the validator of proto/openapi.yaml (loaded and
// validated once per process), failing t if the spec does not load.
func Validator(t testing.TB) *V {
	t.Helper()
	once.Do(func() { shared, loadErr = load(proto.OpenAPI) })
	if loadErr != nil {
		t.Fatalf("openapitest: %v", loadErr)
	}
	return shared
}

func load(spec []byte) (*V, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("openapi.yaml is invalid: %w", err)
	}
	// kin-openapi has no decoder for NDJSON (publish's application/x-ndjson,
	// a string in the spec): read it as text.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
	// GET /openapi.yaml is a document served as is (a string in the spec);
	// kin-openapi's own YAML decoder would parse it into an object.
	openapi3filter.RegisterBodyDecoder("application/yaml", openapi3filter.FileBodyDecoder)
	// Match any host and scheme: tests talk to 127.0.0.1:<random port>.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi router: %w", err)
	}
	return &V{doc: doc, router: router}, nil
}

// Doc is the loaded document (read-only).
func (v *V) Doc() *openapi3.T { return v.doc }

// Check validates one exchange: req as sent with its body reqBody (req.Body
// is not read; it was consumed by the client) and resp with its body
// respBody (resp.Body is not read either). Failures are reported with
// t.Errorf, so a test can check many exchanges and see every mismatch.
func (v *V) Check(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	for _, p := range v.Problems(req, reqBody, resp, respBody) {
		t.Errorf("openapi: %s %s → %d: %s\n  request body: %s\n  response body: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, p, clip(reqBody), clip(respBody))
	}
}

// Exchange sends req (its body is reqBody) with http.DefaultClient, checks
// the exchange as Check does and returns the response, its body and the
// body decoded as a JSON object (nil when empty). A transport error or a
// body that is not JSON fails the test at once.
func (v *V) Exchange(t testing.TB, req *http.Request, reqBody []byte) (*http.Response, []byte, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v.Check(t, req, reqBody, resp, got)
	var m map[string]any
	if len(got) > 0 {
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("%s %s: %d, body not JSON: %q", req.Method, req.URL.Path, resp.StatusCode, got)
		}
	}
	return resp, got, m
}

// Problems is Check returning the mismatches instead of reporting them.
func (v *V) Problems(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	rid := resp.Header.Get(httpapi.HeaderRequestID)
	if rid == "" {
		add("no %s response header", httpapi.HeaderRequestID)
	}
	if resp.StatusCode >= 400 {
		out = append(out, checkErrorBody(resp, respBody, rid)...)
	}

	ctx := context.Background()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	r.ContentLength = int64(len(reqBody))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }

	route, params, err := v.router.FindRoute(r)
	if err != nil {
		// Not an operation of the spec: the server must say so.
		switch {
		case errors.Is(err, routers.ErrMethodNotAllowed):
			if resp.StatusCode != http.StatusMethodNotAllowed {
				add("the spec has no %s on this path, but the server answered %d (want 405 method_not_allowed)", req.Method, resp.StatusCode)
			}
		case errors.Is(err, routers.ErrPathNotFound):
			if resp.StatusCode != http.StatusNotFound {
				add("the path is not in the spec, but the server answered %d (want 404 not_found)", resp.StatusCode)
			}
		default:
			add("route lookup: %v", err)
		}
		return out
	}

	if resp.StatusCode == http.StatusNotFound && errorCode(respBody) == httpapi.CodeNotFound.Code {
		return out // this node does not serve the route
	}

	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
		SkipSettingDefaults:   true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && resp.StatusCode < 400 && !errors.Is(err, strconv.ErrRange) {
		add("the server accepted (%d) a request the spec rejects: %v", resp.StatusCode, oneLine(err))
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                opts,
	}
	rin.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil && !errors.Is(err, strconv.ErrRange) {
		add("response does not match %s %s: %v", route.Method, route.Path, oneLine(err))
	}
	return out
}

// errorCode is the "code" of an error body, or "".
func errorCode(body []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Code
}

// checkErrorBody checks what the spec cannot say: the code's status is the
// catalog's, and a 5xx request_id is the X-Request-Id header.
func checkErrorBody(resp *http.Response, body []byte, rid string) []string {
	var out []string
	var e struct {
		Error     *string `json:"error"`
		Code      string  `json:"code"`
		RequestID string  `json:"request_id"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return []string{fmt.Sprintf("error body is not JSON: %v", err)}
	}
	if e.Error == nil {
		out = append(out, `error body lacks "error"`)
	}
	var found *httpapi.Code
	for i := range httpapi.Catalog {
		if httpapi.Catalog[i].Code == e.Code {
			found = &httpapi.Catalog[i]
		}
	}
	switch {
	case found == nil:
		out = append(out, fmt.Sprintf("code %q is not in httpapi.Catalog", e.Code))
	case found.Status != resp.StatusCode:
		out = append(out, fmt.Sprintf("code %q is status %d in the catalog, answered with %d", e.Code, found.Status, resp.StatusCode))
	}
	if resp.StatusCode >= 500 && (e.RequestID == "" || e.RequestID != rid) {
		out = append(out, fmt.Sprintf("5xx request_id %q differs from %s %q", e.RequestID, httpapi.HeaderRequestID, rid))
	}
	return out
}

func oneLine(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "\n", " | ")
	return clipString(s, 2000)
}

func clip(b []byte) string { return clipString(string(b), 400) }

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
