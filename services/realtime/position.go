package realtime

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/msgmesh/msgmesh/platform/cursor"
)

// Position is where a subscription stands in a topic: the topic's epoch
// and, for every partition, the offset of the next record to deliver
// (untracked for partitions the subscription does not read, e.g. the
// other partitions of a room subscription).
//
// Its text form is the SSE event id and the WebSocket "position":
//
//	<epoch>.<next0>-<next1>-...-<nextN-1>
//
// e.g. "3f9a1c0b7e2d4a51.120-97-0" for a 3-partition topic; an untracked
// partition is empty ("3f9a1c0b7e2d4a51.-97-"). It is URL-safe and exact:
// a resume from it re-reads no record of any partition but at most the
// boundary one.
type Position struct {
	Epoch string
	// Next[p] is partition p's next offset, or untracked (-1).
	Next []int64
}

const (
	// untracked marks a partition a subscription does not read.
	untracked int64 = -1
	// atLive marks a partition that starts at the live feed's position
	// when the subscription joins it.
	atLive int64 = -2
	// maxIDPartitions bounds a parsed id (topics have at most 10000).
	maxIDPartitions = 10000
	// epochLen is how much of a topic's epoch (its creating event's random
	// hex id) ids carry: 64 bits tell a re-made topic apart.
	epochLen = 16
)

// errMalformedID is wrapped by ParsePosition.
var errMalformedID = errors.New("malformed position")

// shortEpoch is the epoch as ids carry it.
func shortEpoch(e string) string {
	if len(e) > epochLen {
		return e[:epochLen]
	}
	return e
}

// String formats p as "<epoch>.<n0>-<n1>-...".
func (p Position) String() string {
	return string(p.Append(make([]byte, 0, len(p.Epoch)+1+len(p.Next)*6)))
}

// Append appends p's text form to b.
func (p Position) Append(b []byte) []byte {
	b = append(b, p.Epoch...)
	b = append(b, '.')
	for i, n := range p.Next {
		if i > 0 {
			b = append(b, '-')
		}
		if n >= 0 {
			b = strconv.AppendInt(b, n, 10)
		}
	}
	return b
}

// ParsePosition reads the text form of a Position. The error wraps
// errMalformedID and says what is wrong.
func ParsePosition(s string) (Position, error) {
	epoch, rest, ok := strings.Cut(s, ".")
	if !ok || epoch == "" || len(epoch) > 64 || !idChars(epoch) {
		return Position{}, fmt.Errorf("%w %.80q: want <epoch>.<offset>-<offset>-...", errMalformedID, s)
	}
	parts := strings.Split(rest, "-")
	if len(parts) > maxIDPartitions {
		return Position{}, fmt.Errorf("%w: %d partitions", errMalformedID, len(parts))
	}
	p := Position{Epoch: epoch, Next: make([]int64, len(parts))}
	for i, x := range parts {
		if x == "" {
			p.Next[i] = untracked
			continue
		}
		if len(x) > 19 || !digits(x) {
			return Position{}, fmt.Errorf("%w %.80q: partition %d offset %.24q is not a decimal number", errMalformedID, s, i, x)
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Position{}, fmt.Errorf("%w %.80q: partition %d offset out of range", errMalformedID, s, i)
		}
		p.Next[i] = n
	}
	return p, nil
}

func idChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Start is where a subscription asks to begin.
type Start struct {
	// From is "latest" (default) or "earliest" (the oldest record inside
	// the replay window), used when neither ID nor Cursors is set.
	From string
	// ID, when set, resumes every partition it tracks exactly (an SSE
	// Last-Event-ID or a previously received id / position).
	ID *Position
	// Cursors, when set, resume the named partitions after each message
	// cursor (the last message seen); other partitions start live.
	Cursors []cursor.Cursor
	// Epoch, optional with Cursors, is the topic's epoch the cursors
	// belong to (GET /v1/topics/{topic} "epoch", or the part before the
	// "." of any position): cursors of another epoch resync. Without it,
	// cursors on a topic that was deleted and made again resync too.
	Epoch string
}

// ParseStart reads a subscription's start: lastEventID (an SSE reconnect)
// wins over cur, which wins over from. cur is a position id, or one or
// more comma-separated message cursors "<partition>-<offset>". Errors are
// for a 400 invalid_cursor (or invalid_request for from).
func ParseStart(lastEventID, cur, from string) (Start, error) {
	switch from {
	case "", "latest", "earliest":
	default:
		return Start{}, fmt.Errorf("from must be latest or earliest, got %.40q", from)
	}
	st := Start{From: from}
	if st.From == "" {
		st.From = "latest"
	}
	s := strings.TrimSpace(lastEventID)
	if s == "" {
		s = strings.TrimSpace(cur)
	}
	if s == "" {
		return st, nil
	}
	if strings.Contains(s, ".") {
		p, err := ParsePosition(s)
		if err != nil {
			return Start{}, err
		}
		st.ID = &p
		return st, nil
	}
	seen := map[int32]bool{}
	for _, x := range strings.Split(s, ",") {
		c, err := cursor.Parse(strings.TrimSpace(x))
		if err != nil {
			return Start{}, fmt.Errorf("%w %.80q: want a position <epoch>.<offset>-<offset>-... (an event id) or message cursors <partition>-<offset>[,...]", cursor.ErrMalformed, s)
		}
		if seen[c.Partition] {
			return Start{}, fmt.Errorf("%w %.80q: partition %d named twice", cursor.ErrMalformed, s, c.Partition)
		}
		seen[c.Partition] = true
		st.Cursors = append(st.Cursors, c)
	}
	return st, nil
}

// ParseEpoch checks an epoch given beside message cursors (?epoch=, the
// WebSocket subscribe "epoch"): a topic's epoch or the part of a position
// before its ".". Empty is no epoch.
func ParseEpoch(e string) (string, error) {
	if e == "" {
		return "", nil
	}
	if len(e) > 64 || !idChars(e) {
		return "", fmt.Errorf("%w: epoch %.80q: want the topic's epoch (GET /v1/topics/{topic}) or the part of a position before its \".\"", cursor.ErrMalformed, e)
	}
	return e, nil
}
