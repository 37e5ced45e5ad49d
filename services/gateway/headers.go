package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// publishHeaders is the "headers" of a published message, in either form
// (proto/openapi.yaml PublishHeaders):
//
//	[{"key":"k","value":"v"},{"key":"k","value_base64":"AAE="}]  order and duplicates kept
//	{"k":"v","other":"w"}                                         string values, document order
//
// A body that fits neither is not refused by the decoder (whose error would
// name Go types) but remembered in err, which record turns into a 400.
type publishHeaders struct {
	list []kgo.RecordHeader
	err  string
}

func (h *publishHeaders) len() int {
	if h == nil {
		return 0
	}
	return len(h.list)
}

// UnmarshalJSON implements json.Unmarshaler (decodePublishBody calls it
// with the raw "headers" value).
func (h *publishHeaders) UnmarshalJSON(b []byte) error {
	h.list, h.err = nil, ""
	b = bytes.TrimLeft(b, " \t\r\n")
	switch {
	case len(b) > 0 && b[0] == '[':
		h.err = h.fromList(b)
	case len(b) > 0 && b[0] == '{':
		h.err = h.fromObject(b)
	case bytes.Equal(b, []byte("null")):
	default:
		h.err = `"headers" must be a list of {"key","value"} or {"key","value_base64"}, or an object of string values`
	}
	return nil
}

type headerItem struct {
	Key         *string `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

func (h *publishHeaders) fromList(b []byte) string {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Sprintf(`"headers": %v`, err)
	}
	h.list = make([]kgo.RecordHeader, 0, len(raw))
	for i, it := range raw {
		var item headerItem
		dec := json.NewDecoder(bytes.NewReader(it))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&item); err != nil {
			return fmt.Sprintf(`headers[%d] must be {"key","value"} or {"key","value_base64"}: %v`, i, err)
		}
		if item.Key == nil {
			return fmt.Sprintf(`headers[%d] has no "key"`, i)
		}
		var v []byte
		switch {
		case item.Value != nil && item.ValueBase64 != nil:
			return fmt.Sprintf(`headers[%d] has both "value" and "value_base64"`, i)
		case item.Value != nil:
			v = []byte(*item.Value)
		case item.ValueBase64 != nil:
			d, err := base64.StdEncoding.DecodeString(*item.ValueBase64)
			if err != nil {
				return fmt.Sprintf(`headers[%d].value_base64 is not standard base64: %v`, i, err)
			}
			v = d
		default:
			return fmt.Sprintf(`headers[%d] has neither "value" nor "value_base64"`, i)
		}
		h.list = append(h.list, kgo.RecordHeader{Key: *item.Key, Value: v})
	}
	return ""
}

// fromObject reads an object of string values in document order; a key
// given twice is kept twice, as in the list form.
func (h *publishHeaders) fromObject(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return fmt.Sprintf(`"headers": %v`, err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Sprintf(`"headers": %v`, err)
		}
		k, _ := t.(string)
		t, err = dec.Token()
		if err != nil {
			return fmt.Sprintf(`"headers": %v`, err)
		}
		v, ok := t.(string)
		if !ok {
			return fmt.Sprintf(`header %q: the value must be a string (use the list form with "value_base64" for bytes)`, k)
		}
		h.list = append(h.list, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return ""
}
