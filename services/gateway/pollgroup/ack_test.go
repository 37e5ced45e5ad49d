package pollgroup

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A failed acknowledgement commit puts the member back as if the poll that
// carried it had never been served: the acknowledged batch is outstanding
// again and the records that poll took go back to the front of the buffer,
// except those of partitions that moved meanwhile (their new owner reads
// them from the committed offset).
func TestFailedAcknowledgementGivesTheBatchBack(t *testing.T) {
	rec := func(p int32, o int64) *kgo.Record { return &kgo.Record{Partition: p, Offset: o} }
	m := &member{owned: map[int32]bool{0: true, 1: true}, gen: map[int32]uint64{0: 1, 1: 1}}
	acked := &Batch{ID: "b-1", Records: []*kgo.Record{rec(0, 0), rec(1, 0)}, m: m, gens: map[int32]uint64{0: 1, 1: 1}}
	given := &Batch{ID: "b-2", Records: []*kgo.Record{rec(0, 1), rec(1, 1), rec(0, 2)}, m: m, gens: map[int32]uint64{0: 1, 1: 1}}
	m.buf = []*kgo.Record{rec(0, 3)}
	m.unacked, m.out = given, given
	// Partition 1 moved after the batch was taken.
	delete(m.owned, 1)
	m.gen[1]++

	a := &ackCommit{m: m, acked: acked, done: make(chan struct{}), err: errors.New("NOT_COORDINATOR")}
	close(a.done)
	if err := a.wait(); err == nil {
		t.Fatal("wait: nil error for a failed commit")
	}
	a.failed(given)
	if m.unacked != acked {
		t.Errorf("outstanding batch %v, want the acknowledged one again", m.unacked)
	}
	if m.out != nil {
		t.Errorf("batch still handed out: %v", m.out)
	}
	var got [][2]int64
	for _, r := range m.buf {
		got = append(got, [2]int64{int64(r.Partition), r.Offset})
	}
	want := [][2]int64{{0, 1}, {0, 2}, {0, 3}}
	if len(got) != len(want) {
		t.Fatalf("buffer %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("buffer %v, want %v", got, want)
		}
	}
}
