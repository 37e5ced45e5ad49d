package realtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
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
	// shared, if set, is the hub's item of this live message when pos is
	// the hub's own position after it (a whole-topic subscriber in step
	// with the live feed): its pre-encoded forms fit this event.
	shared *item
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
	// liveFrom, set with a resync decided on the topic's end offsets, is
	// where each partition starts instead of the live feed's position:
	// those ends. The hub may lag behind them (a burst it has not read
	// yet); a resync position behind the ends would be beyond the window
	// again when the client resumes from it, and resync it once more.
	liveFrom []int64
	hub      *hub
	closed   bool
	// connSlots, if set, caps the concurrent catch-ups of the stream's
	// connection (a WebSocket's subscriptions).
	connSlots chan struct{}
	// beat, if set, fires onBeat from the stream's own goroutine (SSE
	// heartbeats and credential re-checks); an error ends the stream.
	beat   <-chan time.Time
	onBeat func() error
	// wait, if set, is how the live feed waits instead of selecting on
	// the subscriber's wake, beat and ctx (a hijacked SSE stream waits in
	// its connection's read): wokeItems once the subscriber is signalled,
	// wokeBeat when onBeat is due (beatDue tells it between catch-up
	// polls), or why the stream ends. poke, set on every liveSub of the
	// stream, interrupts it.
	wait    func(ctx context.Context, l *liveSub) (woke, error)
	beatDue func() bool
	poke    func()
	// flush, if set, writes what emit buffered: the stream calls it after
	// each batch of live events (all the hub had handed it, at most
	// liveBatch), after each catch-up event and after the start events,
	// so that a transport writes (and flushes) once per batch instead of
	// once per event.
	flush func() error
}

// woke says why a stream's wait returned.
type woke int

const (
	wokeItems woke = iota // the live queue was signalled
	wokeBeat              // the heartbeat is due
)

// liveBatch bounds the live events written in one batch (one write).
const liveBatch = 64

// flushed runs flush, if set.
func (st *stream) flushed() error {
	if st.flush == nil {
		return nil
	}
	return st.flush()
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
		// Message cursors carry no epoch, and a topic deleted and made
		// again restarts its offsets at 0: "0-4" may be a message of the
		// earlier topic. With ?epoch= (the topic's epoch, as in every
		// position id) the stream knows; without it, on a topic that was
		// made again, it cannot, and says so rather than stream the new
		// topic's data as if it followed.
		switch {
		case start.Epoch != "" && shortEpoch(start.Epoch) != st.epoch:
			st.resync = ReasonEpoch
			return nil
		case start.Epoch == "" && st.topic.Recreated:
			st.resync = ReasonEpoch
			return nil
		}
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
			st.liveFrom = ends // every partition starts at its end
			return nil
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
		l := newLiveSub(st.part, st.room, s.cfg.SubscriberBuffer)
		l.poke = st.poke
		front, err := st.hub.subscribe(l)
		if err != nil {
			return err
		}
		if first {
			first = false
			for p, o := range st.next {
				switch {
				case o != atLive:
				case st.liveFrom != nil:
					// From the ends: records between them and the hub's
					// front are read from Kafka (catchUp), live ones
					// before them skipped (live).
					st.next[p] = st.liveFrom[p]
				default:
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
			if err := st.flushed(); err != nil {
				st.hub.unsubscribe(l)
				return err
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
// It takes every item the hub has handed it (at most liveBatch) before it
// flushes: a subscriber that fell a little behind catches up in one write.
// The events' pos shares st.next (emit formats it at once, never keeps it).
func (st *stream) live(ctx context.Context, l *liveSub, emit func(event) error) error {
	pos := Position{Epoch: st.epoch, Next: st.next}
	// deliver emits one item; ok false: the feed ended.
	deliver := func(it *item) error {
		p := it.rec.Partition
		if it.rec.Offset < st.next[p] {
			return nil // a boundary duplicate of the catch-up
		}
		st.next[p] = it.rec.Offset + 1
		ev := event{msg: it.msg, rec: it.rec, pos: pos}
		if slices.Equal(st.next, it.front) {
			ev.shared = it // in step with the hub: its encoding fits
		}
		return emit(ev)
	}
	ended := func() error {
		if why := l.reason(); why != nil {
			return why
		}
		return context.Canceled
	}
	for {
		w := wokeItems
		if st.wait != nil {
			var err error
			if w, err = st.wait(ctx, l); err != nil {
				return err
			}
		} else {
			select {
			case <-l.wake:
			case <-st.beat:
				w = wokeBeat
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		switch w {
		case wokeItems:
			n := 0
			for ; n < liveBatch; n++ {
				it, over := l.pop()
				if it == nil {
					if !over {
						break // a wake for items an earlier batch took
					}
					if n > 0 {
						if err := st.flushed(); err != nil {
							return err
						}
					}
					return ended()
				}
				if err := deliver(it); err != nil {
					return err
				}
			}
			if n == 0 {
				continue
			}
			if err := st.flushed(); err != nil {
				return err
			}
			if n == liveBatch {
				l.signal() // more may wait: take them after this write
			}
		case wokeBeat:
			st.hub.advance(l, st.next)
			if err := st.onBeat(); err != nil {
				return err
			}
		}
	}
}

// catchUp reads Kafka directly from the stream's position up to front (the
// live feed's position when it joined), streaming: at most one fetch
// (about 1 MiB) is held at a time, whatever the backlog.
//
// It holds one of the realtime.max_catchups slots (and, on a WebSocket,
// one of its connection's) only while it reads: when the client makes it
// wait more than catchupPark for one event, the reader is closed and the
// slots are given back until the client has taken the fetch already read;
// a slot not free within catchupWait ends the stream resumably
// (errCatchupBusy). It ends with the hub (topic deleted, shutdown) and
// when the topic is gone under it.
func (st *stream) catchUp(ctx context.Context, front []int64, emit func(event) error) error {
	if !st.behind(front) {
		return nil
	}
	s := st.s
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(st.hub.ctx, cancel)
	defer stop()
	err := st.catchUpLoop(ctx, front, emit)
	if err != nil && st.hub.ctx.Err() != nil {
		if why := st.hub.reason(); why != nil {
			return why
		}
	}
	if errors.Is(err, errCatchupBusy) {
		s.metrics.slow.WithLabelValues("catchup_busy").Inc()
	}
	return err
}

// behind reports whether a tracked partition is before front.
func (st *stream) behind(front []int64) bool {
	for p, o := range st.next {
		if o >= 0 && o < front[p] {
			return true
		}
	}
	return false
}

// catchupReader is a catch-up's Kafka client and slots, which a timer may
// give back (park) while the stream waits for a slow client.
type catchupReader struct {
	mu      sync.Mutex
	armed   bool
	cl      *kgo.Client
	release func()
}

// park closes the reader and frees its slots, if an emit is in progress.
func (r *catchupReader) park() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed {
		r.closeLocked()
	}
}

func (r *catchupReader) arm(on bool) {
	r.mu.Lock()
	r.armed = on
	r.mu.Unlock()
}

func (r *catchupReader) closeLocked() {
	if r.cl != nil {
		r.cl.Close()
		r.cl = nil
		r.release()
		r.release = nil
	}
}

func (st *stream) catchUpLoop(ctx context.Context, front []int64, emit func(event) error) error {
	s := st.s
	r := &catchupReader{}
	defer func() {
		r.mu.Lock()
		r.closeLocked()
		r.mu.Unlock()
	}()
	parkTimer := time.AfterFunc(time.Hour, r.park)
	parkTimer.Stop()
	defer parkTimer.Stop()
	// send emits with the park timer armed.
	send := func(ev event) error {
		r.arm(true)
		parkTimer.Reset(s.catchupPark)
		err := emit(ev)
		if err == nil {
			err = st.flushed()
		}
		parkTimer.Stop()
		r.arm(false)
		return err
	}
	watch := &topicWatch{s: s, topic: st.topic.KafkaTopic, id: st.hub.id(), what: "catch-up"}
	for {
		if r.cl == nil {
			offs := map[int32]kgo.Offset{}
			for p, o := range st.next {
				if o >= 0 && o < front[p] {
					offs[int32(p)] = kgo.NewOffset().At(o)
				}
			}
			if len(offs) == 0 {
				return nil
			}
			release, err := s.acquireCatchup(ctx, st.connSlots)
			if err != nil {
				return err
			}
			cl, err := kgo.NewClient(kafkaclient.With(s.clientOpts,
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{st.topic.KafkaTopic: offs}),
				kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20),
				kgo.FetchMaxWait(250*time.Millisecond),
				kgo.KeepControlRecords(),
			)...)
			if err != nil {
				release()
				return fmt.Errorf("catch-up reader: %w", err)
			}
			r.cl, r.release = cl, release
		} else if !st.behind(front) {
			return nil
		}
		// A stream that waits for records is silent: beat meanwhile,
		// and look whether the topic is still there.
		if err := st.maybeBeat(); err != nil {
			return err
		}
		pctx, pcancel := context.WithTimeout(ctx, catchupPollWait)
		fs := r.cl.PollRecords(pctx, 500)
		pcancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := watch.check(ctx, fs); err != nil {
			return err
		}
		var ferr error
		fs.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			if ferr != nil || int(p) >= len(st.next) || st.next[p] >= front[p] || rec.Offset < st.next[p] {
				return
			}
			if rec.Offset > st.next[p] {
				// Records vanished between the check and the read
				// (retention): say so rather than skip silently.
				s.metrics.resyncs.WithLabelValues(ReasonRetention).Inc()
				st.next[p] = rec.Offset
				if ferr = send(event{resync: ReasonRetention, pos: st.position()}); ferr != nil {
					return
				}
			}
			st.next[p] = rec.Offset + 1
			if !rec.Attrs.IsControl() && (st.room == nil || string(rec.Key) == string(st.room)) {
				s.metrics.catchup.Inc()
				ferr = send(event{msg: message.Encode(rec), rec: rec, pos: st.position()})
			}
			if st.next[p] >= front[p] && r.cl != nil {
				r.cl.PauseFetchPartitions(map[string][]int32{st.topic.KafkaTopic: {p}})
			}
		})
		if ferr != nil {
			return ferr
		}
	}
}

// catchupPollWait bounds one catch-up poll: a poll that brings nothing
// for this long makes the catch-up check that its topic still exists.
var catchupPollWait = 2 * time.Second

// maybeBeat runs the stream's heartbeat if it is due (SSE).
func (st *stream) maybeBeat() error {
	if st.beatDue != nil {
		if st.beatDue() {
			return st.onBeat()
		}
		return nil
	}
	if st.beat == nil {
		return nil
	}
	select {
	case <-st.beat:
		return st.onBeat()
	default:
		return nil
	}
}

// roomPartition is the partition of a room: Kafka's default partitioner
// (murmur2 of the key, as franz-go's producer and the Java client pick).
func roomPartition(room []byte, n int32) int32 {
	return int32(roomPartitioner.ForTopic("").Partition(&kgo.Record{Key: room}, int(n)))
}

var roomPartitioner = kgo.StickyKeyPartitioner(nil)
