package message

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestEncode(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 5e6, time.UTC)
	cases := []struct {
		name string
		rec  *kgo.Record
		want map[string]any
		raw  string // "data" bytes expected verbatim, if set
	}{
		{"json verbatim", &kgo.Record{Partition: 2, Offset: 7, Key: []byte("r1"), Value: []byte(`{"b": 1,  "a":[2]}`), Timestamp: at,
			Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("application/json")}}},
			map[string]any{"cursor": "2-7", "room": "r1", "published_at": "2026-11-30T12:00:00.005Z"}, `{"b": 1,  "a":[2]}`},
		{"no key, no content type, json", &kgo.Record{Value: []byte(`"x"`), Timestamp: at},
			map[string]any{"cursor": "0-0", "room": nil, "data": "x"}, ""},
		{"text is base64", &kgo.Record{Value: []byte("hello"), Timestamp: at, Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("text/plain")}}},
			map[string]any{"data_base64": base64.StdEncoding.EncodeToString([]byte("hello"))}, ""},
		{"bad json under json type is base64", &kgo.Record{Value: []byte(`{"a":`), Timestamp: at, Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("application/json; charset=utf-8")}}},
			map[string]any{"data_base64": base64.StdEncoding.EncodeToString([]byte(`{"a":`))}, ""},
		{"awkward room and headers", &kgo.Record{Key: []byte("a\"b\n\xff"), Value: []byte("1"), Timestamp: at, Headers: []kgo.RecordHeader{{Key: "x\\y", Value: []byte("<&>")}}},
			map[string]any{"room": "a\"b\n\ufffd", "data": float64(1)}, ""},
	}
	for _, c := range cases {
		out := Encode(c.rec)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: not JSON: %v: %s", c.name, err, out)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, k, got[k], v, out)
			}
		}
		if c.raw != "" {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(out, &m)
			if string(m["data"]) != c.raw {
				t.Errorf("%s: data %s, want verbatim %s", c.name, m["data"], c.raw)
			}
		}
	}
}
