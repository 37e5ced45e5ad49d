package realtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/message"
)

// Resync reasons (the "reason" of msgmesh-resync and of resync frames).
const (
	// ReasonEpoch: the position is of another incarnation of the topic
	// (deleted and made again).
	ReasonEpoch = "epoch"
	// ReasonRetention: records after the position were already deleted by
	// Kafka's retention.
	ReasonRetention = "retention"
	// ReasonWindowRecords: more records were missed than the replay window
	// holds (realtime.replay_window_records).
	ReasonWindowRecords = "window_records"
	// ReasonWindowAge: the first missed record is older than the replay
	// window (realtime.replay_window_age).
	ReasonWindowAge = "window_age"
)

// event is what a stream hands its transport, in order.
type event struct {
	// msg is a message's JSON (nil for a resync).
	msg []byte
	rec *kgo.Record
	// resync is the reason of a resync, "" for a message.
	resync string
	// pos is the position after this event (resume from it).
	pos Position
}

// stream is one subscription: a topic (or one room of it) from a start
// position. It delivers every record of its partitions from its position
// on, catching up from Kafka directly when it is behind the live feed.
type stream struct {
	s     *Service
	topic controlstate.Topic
	room  []byte // nil: every room
	part  int32  // the room's partition, or -1
	epoch string
	// next[p] is partition p's next offset (untracked, atLive).
	next   []int64
	resync string // to announce when joining (beyond the window)
	hub    *hub
	closed bool
}

// open resolves a subscription: the start against Kafka (400
// invalid_cursor, 503 kafka_unavailable), the subscriber limit (429), and
// the topic's live feed. Close the stream when done.
func (s *Service) open(ctx context.Context, topic controlstate.Topic, room *string, start Start) (*stream, error) {
	st := &stream{s: s, topic: topic, part: -1, epoch: shortEpoch(topic.Epoch)}
	n := topic.Partitions
	if n <= 0 {
		return nil, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q has no partitions", topic.Name)
	}
	if room != nil {
		st.room = []byte(*room)
		st.part = roomPartition(st.room, n)
	}
	st.next = make([]int64, n)
	for p := range st.next {
		if st.part < 0 || int32(p) == st.part {
			st.next[p] = atLive
		} else {
			st.next[p] = untracked
		}
	}
	if err := st.resolve(ctx, start); err != nil {
		return nil, err
	}
	if !s.addSubscriber() {
		return nil, &httpapi.Error{Code: httpapi.CodeTooManySubs, RetryAfter: 5,
			Message: fmt.Sprintf("this node serves its maximum of %d realtime subscribers", s.cfg.MaxSubscribers)}
	}
	h, err := s.acquireHub(ctx, topic.KafkaTopic, st.epoch, n)
	if err != nil {
		s.removeSubscriber()
		if errors.Is(err, errShutdown) {
			return nil, httpapi.Wrap(httpapi.CodeShuttingDown, err, "the node is shutting down; reconnect (to another node)")
		}
		return nil, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not start reading the topic from Kafka; retry")
	}
	st.hub = h
	return st, nil
}

// close releases the stream's hub and subscriber slot (idempotent).
func (st *stream) close() {
	if st.closed {
		return
	}
	st.closed = true
	st.s.releaseHub(st.hub)
	st.s.removeSubscriber()
}

// tracked reports whether the stream reads partition p.
func (st *stream) tracked(p int) bool { return st.part < 0 || int32(p) == st.part }

// resolve turns start into next offsets: exact where the position can be
// served from Kafka within the replay window, else a resync and the live
// feed. A malformed or impossible position is a 400.
func (st *stream) resolve(ctx context.Context, start Start) error {
	n := len(st.next)
	want := make([]int64, n)
	for p := range want {
		want[p] = untracked
	}
	switch {
	case start.ID != nil:
		id := start.ID
		if id.Epoch != st.epoch {
			st.resync = ReasonEpoch
			return nil
		}
		if len(id.Next) != n {
			return httpapi.Errorf(httpapi.CodeInvalidCursor, "the position names %d partitions but topic %q has %d", len(id.Next), st.topic.Name, n)
		}
		for p, o := range id.Next {
			if st.tracked(p) && o >= 0 {
				want[p] = o
			}
		}
	case len(start.Cursors) > 0:
		for _, c := range start.Cursors {
			if c.Partition >= int32(n) {
				return httpapi.Errorf(httpapi.CodeInvalidCursor, "cursor %s names partition %d but topic %q has partitions 0-%d", c, c.Partition, st.topic.Name, n-1)
			}
			if !st.tracked(int(c.Partition)) {
				return httpapi.Errorf(httpapi.CodeInvalidCursor, "cursor %s is not in partition %d, the room's partition", c, st.part)
			}
			if c.Offset == 1<<63-1 {
				return httpapi.Errorf(httpapi.CodeInvalidCursor, "cursor %s is beyond the end of partition %d", c, c.Partition)
			}
			want[c.Partition] = c.Offset + 1 // resume after the last message seen
		}
	case start.From == "earliest":
		for p := range want {
			if st.tracked(p) {
				want[p] = 0 // clamped to the window below, without a resync
			}
		}
	default:
		return nil // latest
	}
	any := false
	for _, o := range want {
		any = any || o >= 0
	}
	if !any {
		return nil
	}
	s := st.s
	lctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	starts, err := s.listOffsets(lctx, st.topic.KafkaTopic, n, s.adm.ListStartOffsets)
	if err != nil {
		return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the topic's offsets from Kafka; retry")
	}
	ends, err := s.listOffsets(lctx, st.topic.KafkaTopic, n, s.adm.ListEndOffsets)
	if err != nil {
		return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the topic's offsets from Kafka; retry")
	}
	var ages []int64 // first offset inside the age window, per partition
	agesOf := func() ([]int64, error) {
		if ages != nil {
			return ages, nil
		}
		since := s.now().Add(-s.cfg.ReplayWindowAge).UnixMilli()
		ages, err = s.listOffsets(lctx, st.topic.KafkaTopic, n, func(ctx context.Context, t ...string) (kadm.ListedOffsets, error) {
			return s.adm.ListOffsetsAfterMilli(ctx, since, t...)
		})
		return ages, err
	}
	for p, o := range want {
		if o < 0 {
			continue
		}
		if o > ends[p] {
			return httpapi.Errorf(httpapi.CodeInvalidCursor, "partition %d has no offset %d: its log ends at %d", p, o-1, ends[p])
		}
	}
	if start.ID == nil && len(start.Cursors) == 0 { // earliest: the window's start
		for p, o := range want {
			if o < 0 {
				continue
			}
			w := max(starts[p], ends[p]-s.cfg.ReplayWindowRecords)
			if ends[p] > w {
				a, err := agesOf()
				if err != nil {
					return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the topic's offsets from Kafka; retry")
				}
				w = max(w, a[p])
			}
			st.next[p] = w
		}
		return nil
	}
	for p, o := range want {
		if o < 0 || o >= ends[p] {
			continue // nothing missed: no resync, even if o's record aged out
		}
		switch {
		case o < starts[p]:
			st.resync = ReasonRetention
		case ends[p]-o > s.cfg.ReplayWindowRecords:
			st.resync = ReasonWindowRecords
		default:
			a, err := agesOf()
			if err != nil {
				return httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the topic's offsets from Kafka; retry")
			}
			if o < a[p] {
				st.resync = ReasonWindowAge
			}
		}
		if st.resync != "" {
			return nil // every partition starts live
		}
	}
	for p, o := range want {
		if o >= 0 {
			st.next[p] = o
		}
	}
	return nil
}

// position is the stream's position now.
func (st *stream) position() Position {
	next := make([]int64, len(st.next))
	for p, o := range st.next {
		if o < 0 {
			o = untracked
		}
		next[p] = o
	}
	return Position{Epoch: st.epoch, Next: next}
}

// run delivers events to emit until ctx ends, emit fails, or the topic's
// feed ends (topic deleted: errTopicDeleted; shutdown: errShutdown).
// joined, if set, is called once with the start position (after any
// resync), before the first message.
func (st *stream) run(ctx context.Context, emit func(event) error, joined func(Position) error) error {
	s := st.s
	first := true
	for {
		l := &liveSub{part: st.part, room: st.room, ch: make(chan *item, s.cfg.SubscriberBuffer)}
		front, err := st.hub.subscribe(l)
		if err != nil {
			return err
		}
		if first {
			first = false
			for p, o := range st.next {
				if o == atLive {
					st.next[p] = front[p]
				}
			}
			if st.resync != "" {
				s.metrics.resyncs.WithLabelValues(st.resync).Inc()
				if err := emit(event{resync: st.resync, pos: st.position()}); err != nil {
					st.hub.unsubscribe(l)
					return err
				}
			}
			if joined != nil {
				if err := joined(st.position()); err != nil {
					st.hub.unsubscribe(l)
					return err
				}
			}
		}
		if err := st.catchUp(ctx, front, emit); err != nil {
			st.hub.unsubscribe(l)
			return err
		}
		err = st.live(ctx, l, emit)
		if !errors.Is(err, errLagged) {
			st.hub.unsubscribe(l)
			return err
		}
		s.metrics.slow.WithLabelValues("catchup").Inc()
	}
}

// live delivers the live feed until it ends (errLagged: catch up again).
func (st *stream) live(ctx context.Context, l *liveSub, emit func(event) error) error {
	for {
		select {
		case it, ok := <-l.ch:
			if !ok {
				if l.why == nil {
					return context.Canceled
				}
				return l.why
			}
			p := it.rec.Partition
			if it.rec.Offset < st.next[p] {
				continue // a boundary duplicate of the catch-up
			}
			st.next[p] = it.rec.Offset + 1
			if err := emit(event{msg: it.msg, rec: it.rec, pos: st.position()}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// catchUp reads Kafka directly from the stream's position up to front (the
// live feed's position when it joined), streaming: at most one fetch
// (about 1 MiB) is held at a time, whatever the backlog.
func (st *stream) catchUp(ctx context.Context, front []int64, emit func(event) error) error {
	offs := map[int32]kgo.Offset{}
	for p, o := range st.next {
		if o >= 0 && o < front[p] {
			offs[int32(p)] = kgo.NewOffset().At(o)
		}
	}
	if len(offs) == 0 {
		return nil
	}
	s := st.s
	release, err := s.acquireCatchup(ctx)
	if err != nil {
		return err
	}
	defer release()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, s.clientOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{st.topic.KafkaTopic: offs}),
		kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("catch-up reader: %w", err)
	}
	defer cl.Close()
	left := len(offs)
	for left > 0 {
		fs := cl.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(t string, p int32, err error) {
			s.log.Warn("realtime: catch-up fetch", "topic", t, "partition", p, "err", err)
		})
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			if ferr != nil || int(p) >= len(st.next) || st.next[p] >= front[p] || r.Offset < st.next[p] {
				return
			}
			if r.Offset > st.next[p] {
				// Records vanished between the check and the read
				// (retention): say so rather than skip silently.
				s.metrics.resyncs.WithLabelValues(ReasonRetention).Inc()
				st.next[p] = r.Offset
				if ferr = emit(event{resync: ReasonRetention, pos: st.position()}); ferr != nil {
					return
				}
			}
			st.next[p] = r.Offset + 1
			if !r.Attrs.IsControl() && (st.room == nil || string(r.Key) == string(st.room)) {
				s.metrics.catchup.Inc()
				ferr = emit(event{msg: message.Encode(r), rec: r, pos: st.position()})
			}
			if st.next[p] >= front[p] {
				left--
				cl.PauseFetchPartitions(map[string][]int32{st.topic.KafkaTopic: {p}})
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// roomPartition is the partition of a room: Kafka's default partitioner
// (murmur2 of the key, as franz-go's producer and the Java client pick).
func roomPartition(room []byte, n int32) int32 {
	return int32(roomPartitioner.ForTopic("").Partition(&kgo.Record{Key: room}, int(n)))
}

var roomPartitioner = kgo.StickyKeyPartitioner(nil)
