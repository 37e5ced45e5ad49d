package message

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
		{"valid JSON bytes with invalid UTF-8 inside a string is base64", &kgo.Record{Value: []byte("{\"a\":\"\xff\xfe\"}"), Timestamp: at, Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("application/json")}}},
			map[string]any{"data_base64": base64.StdEncoding.EncodeToString([]byte("{\"a\":\"\xff\xfe\"}"))}, ""},
		{"same without a content type", &kgo.Record{Value: []byte("\"\xc3\""), Timestamp: at},
			map[string]any{"data_base64": base64.StdEncoding.EncodeToString([]byte("\"\xc3\""))}, ""},
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

// Headers keep the record's order and duplicates; a value that is not
// UTF-8 is value_base64; a key that is not UTF-8 still gives valid JSON.
func TestEncodeHeaders(t *testing.T) {
	rec := &kgo.Record{Value: []byte("1"), Headers: []kgo.RecordHeader{
		{Key: "b", Value: []byte("2")},
		{Key: "a", Value: []byte("1")},
		{Key: "b", Value: []byte("\xff\x00bin")},
		{Key: "b", Value: nil},
		{Key: "k\xff", Value: []byte("é \"q\"")},
	}}
	out := Encode(rec)
	if !json.Valid(out) || !utf8.Valid(out) {
		t.Fatalf("not valid JSON in UTF-8: %q", out)
	}
	var got struct {
		Headers []map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"key": "b", "value": "2"},
		{"key": "a", "value": "1"},
		{"key": "b", "value_base64": base64.StdEncoding.EncodeToString([]byte("\xff\x00bin"))},
		{"key": "b", "value": ""},
		{"key": "k\ufffd", "value": "é \"q\""},
	}
	if !reflect.DeepEqual(got.Headers, want) {
		t.Errorf("headers %v, want %v (%s)", got.Headers, want, out)
	}
	// The struct form (dead letters) says the same.
	viaStruct, _ := json.Marshal(Headers(rec.Headers))
	var again []map[string]string
	if err := json.Unmarshal(viaStruct, &again); err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("Headers() %s, want %v", viaStruct, want)
	}
	if out := Encode(&kgo.Record{Value: []byte("1")}); !strings.Contains(string(out), `"headers":[]`) {
		t.Errorf("no headers: %s, want \"headers\":[]", out)
	}
}

// BenchmarkAppend measures one typical poll record (JSON value, the
// content-type header and one more).
func BenchmarkAppend(b *testing.B) {
	rec := &kgo.Record{Partition: 3, Offset: 123456, Key: []byte("room-7"), Value: []byte(`{"order":42,"items":["a","b"],"note":"héllo"}`),
		Timestamp: time.Now(), Headers: []kgo.RecordHeader{{Key: HeaderContentType, Value: []byte("application/json")}, {Key: "trace", Value: []byte("abc123")}}}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], rec)
	}
}

// validJSONCases are edge cases where JSON validators tend to differ.
var validJSONCases = []string{
	`1e999`, `{"a":1,"a":2}`, ` 1 `, "\t{}\n", `"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`,
	"\"\x01\"", "\"\x7f\"", `-0`, `01`, `1.`, `.5`, `1e`, `[1,]`, `{"a":1,}`, `nul`, `null`,
	`"\u00e9"`, `"\/"`, `"\a"`, "\"\xff\"", "\xff", ``, ` `, `[]`, `{}`, `1 2`, `"a"x`,
	"\"\u2028\"", `1E+2`, `-`, `[[[[]]]]`, "\xef\xbb\xbf{}", `{"a" : 1 }`, "\r\n[ 1 , 2 ]\r\n",
	`{"a":"b"`, `{1:2}`, `[1 2]`, `"\u12"`, `"\uZZZZ"`, "\"a\x00b\"", `true`, `tru`, `{"a":[1,{"b":null}]}`,
}

// ValidJSON accepts exactly what utf8.Valid and encoding/json.Valid accept
// together (the rule it replaces on the publish and poll paths).
func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	cases := validJSONCases
	for _, depth := range []int{10000, 10001} { // encoding/json's nesting limit
		cases = append(cases, strings.Repeat("[", depth)+strings.Repeat("]", depth))
	}
	for _, s := range cases {
		b := []byte(s)
		if got, want := ValidJSON(b), utf8.Valid(b) && json.Valid(b); got != want {
			t.Errorf("ValidJSON(%.40q) = %v, encoding/json says %v", s, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidJSON(b), utf8.Valid(b) && json.Valid(b); got != want {
			t.Fatalf("ValidJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON checks a 1 KiB value (the benchmark's message).
func BenchmarkValidJSON(b *testing.B) {
	v := []byte(`{"body":"` + strings.Repeat("aZ09-_", 169) + `"}`)
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if !ValidJSON(v) {
			b.Fatal("invalid")
		}
	}
}
