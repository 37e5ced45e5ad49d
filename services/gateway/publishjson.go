package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeOpts make jsontext accept the JSON encoding/json accepts (see
// message.ValidJSON): duplicate names (the last wins, as in
// encoding/json) and escaped lone surrogates. Raw invalid UTF-8 never
// reaches the decoder: parsePublish refuses it first.
var decodeOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// errTrailing is a JSON body with more after its object.
var errTrailing = errors.New("trailing data after the object")

// decodePublishBody reads a JSON publish body in one pass: jsontext checks
// the whole text as it goes (RFC 8259, as strictly as encoding/json.Valid),
// so each "data" is validated exactly once and copied out once. Unknown
// fields are refused, as are values of the wrong JSON kind.
func decodePublishBody(body []byte) (publishBody, error) {
	var pb publishBody
	// A bytes.Buffer is parsed in place (no copy into the decoder).
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), decodeOpts...)
	if err := decodeMessageObject(dec, &pb.publishMessage, &pb.Messages); err != nil {
		return pb, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return pb, errTrailing
	}
	return pb, nil
}

// decodeMessageObject reads one object {"data","room"?,"headers"?} into m.
// With msgs non-nil (the top level) it also takes "messages", a list of
// such objects.
func decodeMessageObject(dec *jsontext.Decoder, m *publishMessage, msgs *[]publishMessage) error {
	if err := expectKind(dec, '{', "an object"); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		switch {
		case name == "data":
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			m.Data = bytes.Clone(v)
		case name == "room":
			switch dec.PeekKind() {
			case 'n':
				_, _ = dec.ReadToken()
				m.Room = nil
			case '"':
				t, err := dec.ReadToken()
				if err != nil {
					return err
				}
				s := t.String()
				m.Room = &s
			default:
				return fmt.Errorf("\"room\" must be a string")
			}
		case name == "headers":
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			if string(v) == "null" {
				m.Headers = nil
				continue
			}
			m.Headers = &publishHeaders{}
			_ = m.Headers.UnmarshalJSON(v) // a malformed form is kept in its err
		case name == "messages" && msgs != nil:
			if err := decodeMessageList(dec, msgs); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown field %q", name)
		}
	}
	_, err := dec.ReadToken() // '}'
	return err
}

func decodeMessageList(dec *jsontext.Decoder, msgs *[]publishMessage) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		*msgs = nil
		return err
	}
	if err := expectKind(dec, '[', "a list"); err != nil {
		return fmt.Errorf("\"messages\": %w", err)
	}
	list := make([]publishMessage, 0, 16)
	for i := 0; dec.PeekKind() != ']'; i++ {
		var m publishMessage
		if dec.PeekKind() == 'n' { // a null element is a message without "data"
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
		} else if err := decodeMessageObject(dec, &m, nil); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		list = append(list, m)
	}
	if _, err := dec.ReadToken(); err != nil { // ']'
		return err
	}
	*msgs = list
	return nil
}

// expectKind reads the opening token of an object or list; what names it
// in the error. A syntax error is returned as the decoder's error.
func expectKind(dec *jsontext.Decoder, kind jsontext.Kind, what string) error {
	k := dec.PeekKind()
	if k == 0 {
		_, err := dec.ReadToken()
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if k != kind {
		return fmt.Errorf("expected %s, got %s", what, kindName(k))
	}
	_, err := dec.ReadToken()
	return err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "invalid JSON"
}
