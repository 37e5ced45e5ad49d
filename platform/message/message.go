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

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderContentType is the Kafka header holding a message's content type
// (the gateway writes it on every publish).
const HeaderContentType = "content-type"

// Append appends the JSON of one message, the same shape poll
// answers (proto/openapi.yaml Message):
//
//	{"cursor":"0-5","room":"r1","data":{...},"headers":{...},"published_at":"..."}
//
// A value goes out verbatim as "data" when its content-type header is JSON
// (or, with none, when it is valid JSON: checked, because invalid bytes
// would corrupt the whole response), else as "data_base64". A record
// without a key has "room": null.
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
	ct, hasCT := "", false
	for _, h := range r.Headers {
		if h.Key == HeaderContentType {
			ct, hasCT = string(h.Value), true
		}
	}
	if (hasCT && IsJSON(ct) || !hasCT) && json.Valid(r.Value) {
		b = append(b, `,"data":`...)
		b = append(b, r.Value...)
	} else {
		b = append(b, `,"data_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Value)
		b = append(b, '"')
	}
	b = append(b, `,"headers":{`...)
	for j, h := range r.Headers {
		if j > 0 {
			b = append(b, ',')
		}
		b = appendString(b, []byte(h.Key))
		b = append(b, ':')
		b = appendString(b, h.Value)
	}
	b = append(b, `},"published_at":"`...)
	b = r.Timestamp.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, `"}`...)
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
