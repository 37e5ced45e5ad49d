package realtime

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func items(n int, from int64) []*item {
	out := make([]*item, n)
	for i := range out {
		out[i] = &item{rec: &kgo.Record{Offset: from + int64(i)}}
	}
	return out
}

// The live queue hands items out in order, refuses the one over its
// limit (the hub then drops the subscriber), and lets go of a buffer a
// burst grew once it is taken: an idle subscriber holds none.
func TestLiveSubQueue(t *testing.T) {
	l := newLiveSub(-1, nil, 5)
	if l.q != nil {
		t.Fatalf("a new subscriber holds a buffer of %d", cap(l.q))
	}
	for i, it := range items(5, 0) {
		if !l.push(it) {
			t.Fatalf("push %d refused under the limit", i)
		}
	}
	select {
	case <-l.wake:
	default:
		t.Fatal("no wake after the first push")
	}
	if l.push(&item{rec: &kgo.Record{Offset: 5}}) {
		t.Fatal("a sixth item was queued over the limit of 5")
	}
	// Take two, queue two more: never over five waiting, order kept
	// across the move of the waiting items to the front.
	var got []int64
	for range 2 {
		it, ended := l.pop()
		if it == nil || ended {
			t.Fatalf("pop: %v %v", it, ended)
		}
		got = append(got, it.rec.Offset)
	}
	for i, it := range items(2, 5) {
		if !l.push(it) {
			t.Fatalf("push %d refused with %d waiting", i, l.queued())
		}
	}
	if n := l.queued(); n != 5 {
		t.Fatalf("queued %d, want 5", n)
	}
	for {
		it, ended := l.pop()
		if it == nil {
			if ended {
				t.Fatal("ended without end()")
			}
			break
		}
		got = append(got, it.rec.Offset)
	}
	for i, o := range got {
		if o != int64(i) {
			t.Fatalf("order: got %v", got)
		}
	}
	if len(got) != 7 {
		t.Fatalf("took %d items, want 7: %v", len(got), got)
	}
	if cap(l.q) > keptQueue {
		t.Fatalf("an emptied queue keeps a buffer of %d (at most %d)", cap(l.q), keptQueue)
	}

	// A burst larger than keptQueue: emptied, it holds nothing.
	big := newLiveSub(-1, nil, 100)
	for _, it := range items(40, 0) {
		big.push(it)
	}
	for it, _ := big.pop(); it != nil; it, _ = big.pop() {
	}
	if big.q != nil {
		t.Fatalf("after a burst of 40 the emptied queue keeps a buffer of %d", cap(big.q))
	}
}

// What was queued before the feed ended is still taken; then pop says it
// ended, and reason says why.
func TestLiveSubEndAfterQueued(t *testing.T) {
	l := newLiveSub(-1, nil, 4)
	for _, it := range items(2, 10) {
		l.push(it)
	}
	<-l.wake
	l.end(errLagged)
	select {
	case <-l.wake:
	default:
		t.Fatal("end did not wake the subscriber")
	}
	if l.push(&item{rec: &kgo.Record{Offset: 12}}) {
		t.Fatal("queued after the end")
	}
	for want := int64(10); want < 12; want++ {
		it, ended := l.pop()
		if it == nil || ended || it.rec.Offset != want {
			t.Fatalf("pop: %v %v, want offset %d", it, ended, want)
		}
	}
	if it, ended := l.pop(); it != nil || !ended {
		t.Fatalf("after the queued items: %v %v, want nil and ended", it, ended)
	}
	if !errors.Is(l.reason(), errLagged) {
		t.Fatalf("reason %v", l.reason())
	}
}

// A long backlog that never empties keeps the queue's capacity bounded by
// the limit (taken items are not kept in front of the waiting ones).
func TestLiveSubSteadyBacklogBounded(t *testing.T) {
	l := newLiveSub(-1, nil, 16)
	next := int64(0)
	for _, it := range items(10, 0) {
		l.push(it)
	}
	off := int64(10)
	for range 10_000 {
		it, _ := l.pop()
		if it == nil || it.rec.Offset != next {
			t.Fatalf("pop %v, want offset %d", it, next)
		}
		next++
		if !l.push(&item{rec: &kgo.Record{Offset: off}}) {
			t.Fatalf("push refused with %d waiting", l.queued())
		}
		off++
	}
	if cap(l.q) > 2*16 {
		t.Fatalf("capacity %d after a steady backlog of 10 under a limit of 16", cap(l.q))
	}
}
