package realtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/cursor"
)

// A resync beyond the replay window starts the stream at the log's end
// offsets the resync was decided on, whatever the topic's live reader
// (the hub) has read by then: its position is where a client resumes
// without resyncing again. A hub behind the ends (a burst it has not read
// yet) handed out its own lagging position: resuming from it was beyond
// the window once more, a second resync (TestMCPWatchResync under load).
// A hub ahead of the ends does not skip the records in between: they are
// read from Kafka.
func TestResyncStartsAtTheEndsItWasDecidedOn(t *testing.T) {
	const topic = "resync"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	pcl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(n int) {
		for range n {
			if err := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte(`{"n":1}`)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(11) // offsets 0..10: a cursor at 0 is 10 behind, beyond 3

	rc := config.Defaults().Realtime
	rc.ReplayWindowRecords = 3
	s, err := New(Config{Realtime: rc, RequestTimeout: 5 * time.Second, State: controlstate.NewState(), ClientOpts: opts,
		Authenticate: func(string) (auth.Principal, error) { return auth.Principal{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	tp := controlstate.Topic{Name: topic, KafkaTopic: topic, Partitions: 1, Epoch: "0123456789abcdef0123"}
	// A running hub whose reader is at front (it reads nothing: its
	// position stays where the case puts it).
	hubAt := func(front int64) *hub {
		hctx, hcancel := context.WithCancel(s.ctx)
		ready, done := make(chan struct{}), make(chan struct{})
		close(ready)
		close(done)
		h := &hub{s: s, key: topic + "/" + shortEpoch(tp.Epoch), topic: topic, parts: 1, ready: ready, done: done,
			subs: map[*liveSub]struct{}{}, front: []int64{front}, ctx: hctx, cancel: hcancel}
		s.hubsMu.Lock()
		s.hubs[h.key] = h
		s.hubsMu.Unlock()
		s.metrics.hubs.Inc()
		return h
	}
	errEnough := errors.New("enough")
	// run opens a stream resuming after cursor 0-0 and returns its first
	// want events' positions (partition 0's next offset) and messages.
	run := func(want int, before func()) (resync string, next []int64, msgs int) {
		t.Helper()
		st, err := s.open(ctx, tp, nil, Start{Cursors: []cursor.Cursor{{Partition: 0, Offset: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.close()
		if before != nil {
			before()
		}
		err = st.run(ctx, func(ev event) error {
			if ev.resync != "" {
				resync = ev.resync
			}
			if ev.msg != nil {
				msgs++
			}
			next = append(next, ev.pos.Next[0])
			if len(next) == want {
				return errEnough
			}
			return nil
		}, nil)
		if !errors.Is(err, errEnough) {
			t.Fatalf("stream ended with %v after %d events, want %d", err, len(next), want)
		}
		return resync, next, msgs
	}

	// The hub lags at offset 1 while the log ends at 11.
	h := hubAt(1)
	resync, next, _ := run(1, nil)
	if resync != ReasonWindowRecords || next[0] != 11 {
		t.Fatalf("resync %q at next offset %d, want %s at 11 (the log's end; the hub was at 1)", resync, next[0], ReasonWindowRecords)
	}
	h.close(errShutdown)

	// The hub is ahead of the ends the resync was decided on (2 records
	// came in between): they are delivered, from Kafka.
	h = hubAt(0)
	resync, next, msgs := run(3, func() {
		produce(2)
		h.mu.Lock()
		h.front[0] = 13
		h.mu.Unlock()
	})
	if resync != ReasonWindowRecords || !slices.Equal(next, []int64{11, 12, 13}) || msgs != 2 {
		t.Fatalf("resync %q then positions %v with %d messages, want %s at 11 then the 2 records after it (12, 13)", resync, next, msgs, ReasonWindowRecords)
	}
	h.close(errShutdown)
}
