package realtime

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, s := range []string{"3f9a1c0b7e2d4a51.120-97-0", "e.-97-", "e.5", "e."} {
		p, err := ParsePosition(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := p.String(); got != s {
			t.Errorf("%q → %q", s, got)
		}
	}
	for _, s := range []string{"", ".1-2", "e", "e.1-x", "e.1.2", "a b.1", "e.99999999999999999999"} {
		if _, err := ParsePosition(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestParseStartPrecedence(t *testing.T) {
	st, err := ParseStart("e.1-2", "0-5", "earliest")
	if err != nil || st.ID == nil || st.ID.Next[1] != 2 {
		t.Fatalf("Last-Event-ID must win: %+v %v", st, err)
	}
	st, err = ParseStart("", "0-5,2-7", "")
	if err != nil || len(st.Cursors) != 2 || st.From != "latest" {
		t.Fatalf("cursors: %+v %v", st, err)
	}
	for _, bad := range [][3]string{{"", "0-5,0-6", ""}, {"", "x", ""}, {"", "", "soon"}} {
		if _, err := ParseStart(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A room's partition is the one franz-go's default producer picks.
func TestRoomPartitionMatchesProducer(t *testing.T) {
	// The gateway's producer uses franz-go's default partitioner.
	prod := kgo.UniformBytesPartitioner(64<<10, true, true, nil).ForTopic("t").(kgo.TopicBackupPartitioner)
	for _, room := range []string{"room-42", "a", "", "über", "chat/7"} {
		for _, n := range []int{1, 3, 7, 64} {
			if got, want := roomPartition([]byte(room), int32(n)), prod.PartitionByBackup(&kgo.Record{Key: []byte(room)}, n, nil); int(got) != want {
				t.Errorf("room %q of %d partitions: %d, producer picks %d", room, n, got, want)
			}
		}
	}
}

func TestAppendDataSplitsLines(t *testing.T) {
	got := string(appendData(nil, []byte("{\r\n \"a\": 1\n}")))
	if want := "data: {\ndata:  \"a\": 1\ndata: }\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A start that is neither a position nor message cursors says what an SSE
// id or cursor looks like (positions, not only <partition>-<offset>).
func TestParseStartErrorNamesPositions(t *testing.T) {
	_, err := ParseStart("", "garbage", "")
	if err == nil || !strings.Contains(err.Error(), "<epoch>.<offset>-<offset>-...") || !strings.Contains(err.Error(), "<partition>-<offset>") {
		t.Fatalf("error %v, want it to name both the position and the message cursor forms", err)
	}
	for _, e := range []string{"", "3f9a1c0b7e2d4a51", "e_1"} {
		if _, err := ParseEpoch(e); err != nil {
			t.Errorf("epoch %q: %v", e, err)
		}
	}
	for _, e := range []string{"a.b", "a/b", strings.Repeat("a", 65)} {
		if _, err := ParseEpoch(e); err == nil {
			t.Errorf("epoch %q accepted", e)
		}
	}
}

// closedData is plain JSON: no HTML escapes of <...> or quotes lost.
func TestClosedData(t *testing.T) {
	if got, want := string(closedData(ReasonTopicDeleted, `topic "a<b>" was deleted`)), `{"reason":"topic_deleted","error":"topic \"a<b>\" was deleted"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
