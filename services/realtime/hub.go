package realtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/message"
)

// A hub is the one Kafka reader of a topic on this process. It starts at
// the end of every partition (offsets it lists itself, so its position is
// known exactly) and hands each record to every live subscriber that
// wants it, without ever blocking: a subscriber whose buffer is full is
// dropped from the live feed and catches up from Kafka on its own.
type hub struct {
	s     *Service
	key   string
	topic string // Kafka topic
	parts int32

	ready chan struct{} // closed once started (or failed: err)
	err   error

	mu     sync.Mutex
	refs   int
	linger *time.Timer
	subs   map[*liveSub]struct{}
	// front[p] is the offset of the next record the hub will hand out
	// for partition p: everything before it was handed to the live
	// subscribers of the time.
	front  []int64
	closed error // set once the hub stopped: why
	// ctx ends when the hub closes (or the service shuts down): the
	// catch-ups of its subscribers stop with it.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// topicID is the Kafka topic's id as the hub's first fetch told it
	// (zero until then, or if the broker does not say): records of a
	// topic made again under the same name carry another id and are never
	// served under this epoch. Under mu.
	topicID [16]byte
	// misplacedLogged is when misplacedLocked last logged, misplaced how
	// many it counted since. Under mu.
	misplacedLogged time.Time
	misplaced       int
}

// item is one record as the hub hands it out, its message JSON encoded
// once for every subscriber.
type item struct {
	rec *kgo.Record
	msg []byte
	// front is the hub's position right after rec (the next offset of
	// every partition): a subscriber whose own position equals it after
	// rec, a whole-topic subscriber in step with the hub, can use the
	// encodings below, made once for all of them.
	front []int64
	// sse is the SSE event "id: <position>\ndata: <msg>\n\n", made by the
	// first subscriber that asks (sseOnce); sseID ends the position.
	sseOnce sync.Once
	sse     []byte
	sseID   int
}

// sseEvent is the item's SSE event for epoch (every subscriber of a hub
// has its epoch) and the end of its id.
func (it *item) sseEvent(epoch string) ([]byte, int) {
	it.sseOnce.Do(func() {
		b := make([]byte, 0, 4+len(epoch)+1+len(it.front)*8+len(it.msg)+16)
		b = append(b, "id: "...)
		b = Position{Epoch: epoch, Next: it.front}.Append(b)
		it.sseID = len(b)
		b = append(b, '\n')
		b = appendData(b, it.msg)
		it.sse = append(b, '\n')
	})
	return it.sse, it.sseID
}

// liveSub is a subscriber's place in a hub's live feed: a bounded queue
// the hub never waits on. The queue is a slice grown as records come and
// let go once the subscriber has taken them, so an idle subscriber holds
// no buffer (a channel of realtime.subscriber_buffer entries was a
// kilobyte per idle stream).
type liveSub struct {
	part  int32  // -1: every partition
	room  []byte // nil: every room
	limit int    // most items queued at once (realtime.subscriber_buffer)
	// wake holds at most one signal: the hub sends one, without waiting,
	// after queueing into an empty queue and when it ends the feed.
	wake chan struct{}
	// poke, if set, is called after a signal while reading is set: it
	// interrupts a stream that waits in a read of its connection rather
	// than on wake (stream.wait). The stream sets reading before it looks
	// at wake, the hub sends on wake before it looks at reading: one of
	// them sees the other.
	poke    func()
	reading atomic.Bool

	mu   sync.Mutex
	q    []*item // q[head:] wait for the subscriber
	head int
	// ended: the hub will queue nothing more (dropped, unsubscribed or
	// closed); why is then errLagged (queue full), the hub's closing
	// reason, or nil (unsubscribed).
	ended bool
	why   error
}

func newLiveSub(part int32, room []byte, limit int) *liveSub {
	return &liveSub{part: part, room: room, limit: limit, wake: make(chan struct{}, 1)}
}

func (l *liveSub) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
	if l.poke != nil && l.reading.Load() {
		l.poke()
	}
}

// push queues it; false if the queue is full (the hub drops l).
func (l *liveSub) push(it *item) bool {
	l.mu.Lock()
	if l.ended || len(l.q)-l.head >= l.limit {
		l.mu.Unlock()
		return false
	}
	if l.head > 0 && len(l.q) == cap(l.q) {
		// Full up to its capacity with taken items in front: move the
		// waiting ones down instead of growing.
		n := copy(l.q, l.q[l.head:])
		clear(l.q[n:])
		l.q, l.head = l.q[:n], 0
	}
	l.q = append(l.q, it)
	first := len(l.q)-l.head == 1
	l.mu.Unlock()
	if first {
		l.signal()
	}
	return true
}

// pop takes the oldest queued item; nil if none, with ended reporting
// whether none will ever come.
func (l *liveSub) pop() (it *item, ended bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == len(l.q) {
		return nil, l.ended
	}
	it = l.q[l.head]
	l.q[l.head] = nil
	l.head++
	if l.head == len(l.q) {
		// Empty: a small buffer is kept for the next records, one grown
		// by a burst is let go.
		if cap(l.q) > keptQueue {
			l.q = nil
		} else {
			l.q = l.q[:0]
		}
		l.head = 0
	}
	return it, false
}

// keptQueue is the largest queue capacity an emptied liveSub keeps.
const keptQueue = 8

// queued is how many items wait for the subscriber.
func (l *liveSub) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.q) - l.head
}

// end tells l that nothing more comes, and why; what is queued is still
// taken first.
func (l *liveSub) end(why error) {
	l.mu.Lock()
	l.ended, l.why = true, why
	l.mu.Unlock()
	l.signal()
}

// reason is why the feed ended (after pop reported ended).
func (l *liveSub) reason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.why
}

var (
	// errLagged: the subscriber's live buffer overflowed; it catches up.
	errLagged = errors.New("subscriber fell behind the live feed")
	// errTopicDeleted: the topic was deleted; streams end.
	errTopicDeleted = errors.New("topic deleted")
	// errShutdown: the process is stopping; streams end.
	errShutdown = errors.New("server shutting down")
)

func (l *liveSub) wants(r *kgo.Record) bool {
	if l.part >= 0 && r.Partition != l.part {
		return false
	}
	return l.room == nil || string(r.Key) == string(l.room)
}

// acquireHub returns the running hub of kafkaTopic (epoch-keyed), starting
// one if needed, and waits until it knows its position. Release it with
// releaseHub.
func (s *Service) acquireHub(ctx context.Context, kafkaTopic, epoch string, parts int32) (*hub, error) {
	key := kafkaTopic + "/" + epoch
	s.hubsMu.Lock()
	if s.stopping {
		s.hubsMu.Unlock()
		return nil, errShutdown
	}
	h := s.hubs[key]
	if h == nil {
		hctx, cancel := context.WithCancel(s.ctx)
		h = &hub{s: s, key: key, topic: kafkaTopic, parts: parts, ready: make(chan struct{}),
			subs: map[*liveSub]struct{}{}, done: make(chan struct{}), ctx: hctx, cancel: cancel}
		s.hubs[key] = h
		s.metrics.hubs.Inc()
		go h.start(hctx)
	}
	h.mu.Lock()
	h.refs++
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	h.mu.Unlock()
	s.hubsMu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
		s.releaseHub(h)
		return nil, ctx.Err()
	}
	if h.err != nil {
		s.releaseHub(h)
		return nil, h.err
	}
	return h, nil
}

// releaseHub drops a reference; the last one closes the hub after the
// linger (a reconnecting client finds it still running).
func (s *Service) releaseHub(h *hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs--
	if h.refs > 0 || h.closed != nil {
		return
	}
	if h.err != nil {
		go h.close(h.err)
		return
	}
	h.linger = time.AfterFunc(s.cfg.HubLinger, func() { h.closeIf(errShutdown, true) })
}

// start lists the end offsets, then consumes every partition from there.
func (h *hub) start(ctx context.Context) {
	s := h.s
	front, err := s.endOffsets(ctx, h.topic, h.parts)
	var cl *kgo.Client
	if err == nil {
		offs := make(map[int32]kgo.Offset, len(front))
		for p, o := range front {
			offs[int32(p)] = kgo.NewOffset().At(o)
		}
		cl, err = kgo.NewClient(kafkaclient.With(s.clientOpts,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{h.topic: offs}),
			kgo.FetchMaxWait(250*time.Millisecond),
			kgo.KeepControlRecords(),
		)...)
	}
	if err != nil {
		h.err = fmt.Errorf("starting the live reader of %s: %w", h.topic, err)
		s.log.Warn("realtime: hub start", "topic", h.topic, "err", err)
		close(h.ready)
		close(h.done)
		s.forgetHub(h)
		return
	}
	h.mu.Lock()
	h.front = front
	h.mu.Unlock()
	close(h.ready)
	defer close(h.done)
	defer cl.Close()
	watch := &topicWatch{s: s, topic: h.topic, what: "live", learned: func(id [16]byte) {
		h.mu.Lock()
		h.topicID = id
		h.mu.Unlock()
	}}
	for {
		fs := cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			return
		}
		if err := watch.check(ctx, fs); err != nil {
			// The topic is gone (or made again): end every stream so
			// that clients reconnect and get a 404 or a resync.
			s.log.Info("realtime: topic gone under its live reader", "topic", h.topic, "err", err)
			go h.close(errTopicDeleted)
			return
		}
		h.dispatch(fs)
	}
}

// id is the topic id the hub's reader learned (zero: not yet).
func (h *hub) id() [16]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.topicID
}

// reason is why the hub stopped: its closing reason, errShutdown if the
// service stopped, nil while it runs.
func (h *hub) reason() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return h.closed
	}
	if h.ctx.Err() != nil {
		return errShutdown
	}
	return nil
}

func (h *hub) dispatch(fs kgo.Fetches) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		if int(r.Partition) >= len(h.front) {
			return
		}
		h.front[r.Partition] = r.Offset + 1
		if r.Attrs.IsControl() {
			return
		}
		var it *item
		misplaced := false
		for l := range h.subs {
			if !l.wants(r) {
				if l.room != nil && l.part != r.Partition && string(r.Key) == string(l.room) {
					misplaced = true
				}
				continue
			}
			if it == nil {
				it = &item{rec: r, msg: message.Encode(r), front: slices.Clone(h.front)}
			}
			if !l.push(it) {
				h.dropLocked(l, errLagged)
			}
		}
		if misplaced {
			h.misplacedLocked(r)
		}
	})
}

// misplacedLogEvery rate-limits the warning about misplaced room records
// (one per hub and interval; the metric counts every one).
var misplacedLogEvery = time.Minute

// misplacedLocked counts (and now and then logs) a record keyed with a
// subscribed room but stored on another partition than the room's: it was
// produced with another partitioner than murmur2 (kcat's default is
// librdkafka's consistent_random), and room subscriptions, which read the
// room's partition only, never receive it. h.mu must be held.
func (h *hub) misplacedLocked(r *kgo.Record) {
	h.s.metrics.misplaced.Inc()
	h.misplaced++
	if now := time.Now(); now.Sub(h.misplacedLogged) >= misplacedLogEvery {
		h.s.log.Warn("realtime: a record keyed with a subscribed room is on another partition than the room's; room subscriptions do not receive it (produce with the murmur2 partitioner, e.g. kcat -X topic.partitioner=murmur2_random)",
			"topic", h.topic, "room", string(r.Key), "partition", r.Partition, "offset", r.Offset,
			"room_partition", roomPartition(r.Key, h.parts), "misplaced_since_last_log", h.misplaced)
		h.misplacedLogged, h.misplaced = now, 0
	}
}

// advance moves next (a live subscriber's position) to the hub's front
// when l has taken everything the hub handed it: records of other rooms,
// and control records, move a position without a message. Called from
// the subscriber's goroutine, the only reader of l's queue.
func (h *hub) advance(l *liveSub, next []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[l]; !ok || l.queued() > 0 {
		return
	}
	for p, o := range next {
		if o >= 0 && p < len(h.front) && h.front[p] > o {
			next[p] = h.front[p]
		}
	}
}

// subscribe joins the live feed and returns the hub's position at that
// instant: every record from it on reaches l (or l is dropped).
func (h *hub) subscribe(l *liveSub) ([]int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return nil, h.closed
	}
	h.subs[l] = struct{}{}
	return append([]int64(nil), h.front...), nil
}

// unsubscribe leaves the live feed (idempotent).
func (h *hub) unsubscribe(l *liveSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[l]; ok {
		delete(h.subs, l)
		l.end(nil)
	}
}

// dropLocked removes l, telling it why. h.mu must be held.
func (h *hub) dropLocked(l *liveSub, why error) {
	delete(h.subs, l)
	l.end(why)
}

// close stops the hub, ending every live subscriber with why, and waits
// for its reader to stop.
func (h *hub) close(why error) { h.closeIf(why, false) }

// closeIf closes the hub (only when no one holds it, if onlyIdle). The
// registry lock is held while deciding so that no acquire slips between
// the decision and the removal.
func (h *hub) closeIf(why error, onlyIdle bool) {
	s := h.s
	s.hubsMu.Lock()
	h.mu.Lock()
	if h.closed != nil || onlyIdle && h.refs > 0 {
		h.mu.Unlock()
		s.hubsMu.Unlock()
		return
	}
	h.closed = why
	for l := range h.subs {
		h.dropLocked(l, why)
	}
	if s.hubs[h.key] == h {
		delete(s.hubs, h.key)
		s.metrics.hubs.Dec()
	}
	h.mu.Unlock()
	s.hubsMu.Unlock()
	h.cancel()
	<-h.done
}

func (s *Service) forgetHub(h *hub) {
	s.hubsMu.Lock()
	if s.hubs[h.key] == h {
		delete(s.hubs, h.key)
		s.metrics.hubs.Dec()
	}
	s.hubsMu.Unlock()
}
