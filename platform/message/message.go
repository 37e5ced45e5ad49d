// Package message encodes Kafka records as MsgMesh messages: the one JSON
// shape that poll, SSE, WebSocket and webhooks all send
// (proto/openapi.yaml, schema Message).
package message

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderContentType is the Kafka header holding a message's content type
// (the gateway writes it on every publish).
const HeaderContentType = "content-type"

// Append appends the JSON of one message, the same shape poll
// answers (proto/openapi.yaml Message):
//
//	{"cursor":"0-5","room":"r1","data":{...},"headers":[{"key":"k","value":"v"}],"published_at":"..."}
//
// A value goes out verbatim as "data" when its content-type header is JSON
// (or, with none, when it looks like JSON) and it is valid JSON in valid
// UTF-8 (RFC 8259 section 8.1; checked, because invalid bytes written by
// any Kafka tool would corrupt the whole response), else as "data_base64".
// A record without a key has "room": null. Headers keep the record's order
// and duplicates (see AppendHeaders). The output is always valid JSON:
// invalid UTF-8 in the room or a header key becomes U+FFFD.
func Append(b []byte, r *kgo.Record) []byte {
	b = append(b, `{"cursor":"`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `","room":`...)
	if r.Key == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, r.Key)
	}
	if IsJSONValue(r.Headers, r.Value) {
		b = append(b, `,"data":`...)
		b = append(b, r.Value...)
	} else {
		b = append(b, `,"data_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Value)
		b = append(b, '"')
	}
	b = append(b, `,"headers":`...)
	b = AppendHeaders(b, r.Headers)
	b = append(b, `,"published_at":"`...)
	b = r.Timestamp.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, `"}`...)
}

// IsJSONValue reports whether a record's value goes out as "data": its
// content-type header (the last one) is JSON or absent, and the value is
// valid JSON in valid UTF-8.
func IsJSONValue(headers []kgo.RecordHeader, value []byte) bool {
	var ct []byte
	hasCT := false
	for i := range headers {
		if headers[i].Key == HeaderContentType {
			ct, hasCT = headers[i].Value, true
		}
	}
	if hasCT && string(ct) != "application/json" && !IsJSON(string(ct)) {
		return false
	}
	return ValidJSON(value)
}

// ValidJSON reports whether b is one JSON text (RFC 8259) in valid UTF-8:
// exactly what utf8.Valid and encoding/json.Valid accept together (the
// rule publish and poll have always applied; escaped lone surrogates such as
// "\ud800" and duplicate object names are accepted, as encoding/json does),
// checked about four times faster with jsontext's validator, which is on
// the publish and poll paths for every message.
func ValidJSON(b []byte) bool {
	return utf8.Valid(b) && jsontext.Value(b).IsValid(validOpts...)
}

// validOpts make jsontext accept what encoding/json accepts. Raw invalid
// UTF-8 is refused by utf8.Valid first; what AllowInvalidUTF8 lets through
// beyond that is only the escaped surrogate halves encoding/json allows.
var validOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// AppendHeaders appends headers as the JSON list every message carries,
// in record order with duplicates kept:
//
//	[{"key":"k","value":"v"},{"key":"k","value_base64":"/w=="}]
//
// A value that is valid UTF-8 is "value"; any other is "value_base64"
// (standard encoding, padded), so bytes survive. A nil value (Kafka's null
// header value) is "value": "". Invalid UTF-8 in a key becomes U+FFFD (Kafka
// defines header keys as strings). No headers: [].
func AppendHeaders(b []byte, hs []kgo.RecordHeader) []byte {
	b = append(b, '[')
	for i := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, []byte(hs[i].Key))
		if v := hs[i].Value; utf8.Valid(v) {
			b = append(b, `,"value":`...)
			b = appendString(b, v)
		} else {
			b = append(b, `,"value_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, v)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// Header is one header as a JSON message shows it: Value for a value in
// valid UTF-8, ValueBase64 (standard encoding) for any other.
type Header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// Headers returns hs as AppendHeaders shows them, for encoders built on
// encoding/json; never nil.
func Headers(hs []kgo.RecordHeader) []Header {
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i].Key = strings.ToValidUTF8(h.Key, "\uFFFD")
		if utf8.Valid(h.Value) {
			v := string(h.Value)
			out[i].Value = &v
		} else {
			v := base64.StdEncoding.EncodeToString(h.Value)
			out[i].ValueBase64 = &v
		}
	}
	return out
}

// Encode is Append into a fresh slice.
func Encode(r *kgo.Record) []byte {
	return Append(make([]byte, 0, len(r.Value)*4/3+len(r.Key)+160), r)
}

// IsJSON reports whether a Content-Type is JSON (application/json or
// any +json type).
func IsJSON(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = ct
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// appendString appends s as a JSON string (invalid UTF-8 becomes U+FFFD).
func appendString(b, s []byte) []byte {
	if utf8.Valid(s) && plain(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	enc, _ := json.Marshal(string(s))
	return append(b, enc...)
}

func plain(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
