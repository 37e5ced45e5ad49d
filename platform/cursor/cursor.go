// Package cursor parses and formats MsgMesh cursors.
//
// A cursor names one Kafka record by its partition and offset, written
// "<partition>-<offset>" in decimal (spec section 3), for example "2-1041".
// The pair is verbatim Kafka: the same numbers kcat and kadm show.
package cursor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is returned (wrapped) by Parse when the text is not
// "<partition>-<offset>" with a partition in [0, 2^31) and an offset in
// [0, 2^63).
var ErrMalformed = errors.New("malformed cursor")

// Cursor is the position of one record: its Kafka partition and offset.
type Cursor struct {
	Partition int32
	Offset    int64
}

// String formats c as "<partition>-<offset>".
func (c Cursor) String() string {
	return strconv.FormatInt(int64(c.Partition), 10) + "-" + strconv.FormatInt(c.Offset, 10)
}

// Parse reads "<partition>-<offset>". Signs, spaces and leading '+' are
// refused; the error wraps ErrMalformed and quotes the input.
func Parse(s string) (Cursor, error) {
	p, o, ok := strings.Cut(s, "-")
	if !ok || !digits(p) || !digits(o) {
		return Cursor{}, fmt.Errorf("%w %q: want <partition>-<offset>", ErrMalformed, s)
	}
	part, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: partition out of range", ErrMalformed, s)
	}
	off, err := strconv.ParseInt(o, 10, 64)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: offset out of range", ErrMalformed, s)
	}
	return Cursor{Partition: int32(part), Offset: off}, nil
}

func digits(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
