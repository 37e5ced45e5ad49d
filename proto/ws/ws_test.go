package ws

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(FramesSchema))
	if err != nil {
		t.Fatalf("frames.schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("frames.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("frames.schema.json")
	if err != nil {
		t.Fatalf("compile frames.schema.json: %v", err)
	}
	return s
}

// Frames the server and clients exchange validate; malformed ones do not.
func TestFramesSchema(t *testing.T) {
	s := compile(t)
	valid := []string{
		`{"type":"subscribe","id":"s1","topic":"orders","room":"room-42","cursor":"3f9a1c0b7e2d4a51.12--0"}`,
		`{"type":"subscribe","id":"s1","topic":"orders","from":"earliest"}`,
		`{"type":"unsubscribe","id":"s1"}`,
		`{"type":"refresh","token":"a.b.c"}`,
		`{"type":"ping"}`,
		`{"type":"subscribed","id":"s1","position":"3f9a1c0b7e2d4a51.12-7-0"}`,
		`{"type":"message","id":"s1","position":"3f9a1c0b7e2d4a51.13-7-0","message":{"cursor":"0-12","room":null,"data":{"a":1},"headers":[{"key":"content-type","value":"application/json"},{"key":"b","value_base64":"/w=="}],"published_at":"2026-11-30T10:00:00.000Z"}}`,
		`{"type":"message","id":"s1","position":"e.-1-","message":{"cursor":"1-0","room":"r","data_base64":"AAE=","headers":[],"published_at":"2026-11-30T10:00:00.000Z"}}`,
		`{"type":"resync","id":"s1","reason":"window_records","position":"e.5-5-5"}`,
		`{"type":"unsubscribed","id":"s1"}`,
		`{"type":"closed","id":"s1","topic":"orders","reason":"topic_deleted","error":"topic \"orders\" was deleted","position":"e.5-5-5"}`,
		`{"type":"closed","reason":"shutdown","error":"the node is shutting down"}`,
		`{"type":"subscribe","id":"s1","topic":"orders","cursor":"0-4","epoch":"3f9a1c0b7e2d4a51"}`,
		`{"type":"error","id":"s1","code":"forbidden","error":"this credential may not subscribe"}`,
		`{"type":"token-expiring","expires_at":"2026-11-30T10:00:00Z"}`,
		`{"type":"refreshed","expires_at":"2026-11-30T10:00:00Z"}`,
		`{"type":"pong"}`,
	}
	invalid := []string{
		// headers are a list of {"key","value"|"value_base64"}, not an object
		`{"type":"message","id":"s1","position":"e.1","message":{"cursor":"0-1","room":null,"data":1,"headers":{"content-type":"application/json"},"published_at":"2026-11-30T10:00:00.000Z"}}`,
		`{"type":"subscribe","topic":"orders"}`,
		`{"type":"subscribe","id":"s1","topic":"a.b"}`,
		`{"type":"message","id":"s1","position":"nope","message":{}}`,
		`{"type":"resync","id":"s1","reason":"because","position":"e.1"}`,
		`{"type":"shout"}`,
		`{"type":"closed","id":"s1","topic":"orders"}`,
		`{"type":"unsubscribed","id":"s1","reason":"topic_deleted"}`,
	}
	for _, f := range valid {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(f)))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("valid frame %s refused: %v", f, err)
		}
	}
	for _, f := range invalid {
		var v any
		_ = json.Unmarshal([]byte(f), &v)
		if s.Validate(v) == nil {
			t.Errorf("invalid frame %s accepted", f)
		}
	}
}
