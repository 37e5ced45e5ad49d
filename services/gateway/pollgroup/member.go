package pollgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/msgmesh/msgmesh/platform/cursor"
)

// leaveTimeout bounds a LeaveGroup of a member closed in the background
// (expiry, CloseTopic). Past it the client is closed anyway and the group
// notices through the session timeout.
const leaveTimeout = 15 * time.Second

// canceledCtx is an already canceled context. PollRecords given it returns
// at once without taking records, but with BlockRebalanceOnPoll it first
// waits for any running rebalance callback and then blocks new ones until
// AllowRebalance: the documented "an error fetch is a non-empty poll" rule
// turned into a lock on the member's partition ownership.
var canceledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// member is one consumer-group member: one kgo.Client in Key.Group consuming
// Key.Topic.
//
// Locking: op serializes Poll, Commit, batch resolution and close (a
// non-empty Batch holds op until Delivered or Undelivered). mu guards the
// record state and is taken by franz-go's rebalance callbacks; it is never
// held across a franz-go call. Manager.mu guards inflight and lastUsed and
// is taken before mu when both are needed.
type member struct {
	key Key
	mgr *Manager
	// instanceID is the static group.instance.id, "" for a dynamic member.
	instanceID string
	log        *slog.Logger
	cl         *kgo.Client
	op         *opLock

	// ctx lives as long as the member; close cancels it, which ends a
	// parked long-poll.
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by Manager.mu.
	inflight int       // calls in progress plus an outstanding batch
	lastUsed time.Time // end of the last call or batch resolution

	mu       sync.Mutex
	closeErr error            // why the member closes; set before ctx is canceled
	closed   bool             // client closed or closing with op held
	owned    map[int32]bool   // partitions currently assigned
	gen      map[int32]uint64 // bumped when a partition is revoked or lost
	buf      []*kgo.Record    // fetched, not yet handed out; front first
	unacked  *Batch           // the outstanding batch: handed out, not acknowledged
	served   map[int32]int64  // highest offset handed out since the partition was assigned
	out      *Batch           // the batch not yet resolved, if any
	outSince time.Time        // when out was handed out

	batchPrefix string // random per member, so ids of another member never match
	batchSeq    uint64 // batches handed out; guarded by op
}

func newMember(mg *Manager, key Key) (*member, error) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{
		key:    key,
		mgr:    mg,
		log:    mg.log.With("group", key.Group, "topic", key.Topic, "consumer", key.Consumer),
		op:     newOpLock(),
		ctx:    ctx,
		cancel: cancel,
		owned:  make(map[int32]bool),
		gen:    make(map[int32]uint64),
		served: make(map[int32]int64),

		batchPrefix: newBatchPrefix(),
	}
	opts := []kgo.Opt{
		kgo.ClientID("msgmesh-gateway"),
		kgo.FetchMaxBytes(defaultFetchMaxBytes),
		kgo.WithLogger(kgoLogger{m.log}),
	}
	opts = append(opts, mg.cfg.ClientOpts...)
	if p := mg.cfg.InstanceIDPrefix; p != "" {
		m.instanceID = p + "-" + key.Consumer
		opts = append(opts, kgo.InstanceID(m.instanceID))
	}
	opts = append(opts,
		kgo.ConsumerGroup(key.Group),
		kgo.ConsumeTopics(key.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	)
	if st := mg.cfg.SessionTimeout; st > 0 {
		opts = append(opts, kgo.SessionTimeout(st), kgo.HeartbeatInterval(min(3*time.Second, st/3)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("pollgroup: new client for %s: %w", key, err)
	}
	m.cl = cl
	return m, nil
}

// errIfClosed returns why the member is closing, or nil while it is alive.
func (m *member) errIfClosed() error {
	if m.ctx.Err() == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closeErr
}

// holdRebalance blocks rebalances (and so revocations) until AllowRebalance.
// It first waits for a rebalance callback in progress to finish.
func (m *member) holdRebalance() { m.cl.PollRecords(canceledCtx, 1) }

// poll serves one Poll: it settles the outstanding batch (committed when
// req.Ack names it, else handed out again), then hands out buffered or
// newly fetched records, waiting up to req.Wait for the first. A non-empty
// batch leaves op held; the Batch releases it.
func (m *member) poll(ctx context.Context, req Request) (*Batch, error) {
	deadline := time.Now().Add(req.Wait)
	if err := m.op.lock(ctx, false); err != nil {
		return nil, err
	}
	held := true
	defer func() {
		if held {
			m.op.unlock()
		}
	}()
	settled := false
	var pending *ackCommit // the acknowledgement's commit in flight, if any
	defer func() {
		if pending != nil { // an error return with the commit still running
			if pending.wait() != nil {
				pending.failed(nil)
			}
		}
	}()
	for {
		if err := m.errIfClosed(); err != nil {
			return nil, err
		}
		m.holdRebalance()
		if !settled {
			again, ack, err := m.settle(ctx, req.Ack)
			if err != nil {
				m.cl.AllowRebalance()
				return nil, err
			}
			settled = true
			if again != nil {
				m.cl.AllowRebalance()
				held = false // the batch holds op until it is resolved
				return again, nil
			}
			pending = ack
		}
		m.drain(req)
		b := m.take(req)
		m.cl.AllowRebalance()
		if len(b.Records) > 0 {
			// The acknowledged batch's commit runs while the caller
			// writes this one (Batch.Acknowledged waits for it).
			b.ack, pending = pending, nil
			held = false // the batch holds op until it is resolved
			return b, nil
		}
		if pending != nil {
			// Nothing to hand out yet: finish the acknowledgement first,
			// so an empty answer also means "committed".
			a := pending
			pending = nil
			if err := a.wait(); err != nil {
				a.failed(nil)
				return nil, err
			}
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return b, nil
		}
		if err := m.waitForRecords(ctx, wait); err != nil {
			return nil, err
		}
		if m.op.yieldWanted() {
			// A Commit or close is waiting: let it run, then go on.
			m.op.unlock()
			held = false
			if err := m.op.lock(ctx, false); err != nil {
				return nil, err
			}
			held = true
		}
	}
}

// waitForRecords parks in PollRecords for up to wait, moving whatever
// arrives into the buffer. It returns early when ctx ends (with its error),
// the member closes, or an urgent op acquirer interrupts.
func (m *member) waitForRecords(ctx context.Context, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	if !m.op.park(cancel) {
		return nil
	}
	fs := m.cl.PollRecords(wctx, 0) // all that arrives: see drain
	m.op.unpark()
	m.absorb(fs)
	m.cl.AllowRebalance()
	return ctx.Err()
}

// drain moves records franz-go has already fetched into the buffer, without
// waiting. It takes all of them (franz-go starts its next fetch only once
// its buffered one is taken, so that fetch then runs while this answer is
// written: fetch-ahead), unless the buffer already holds two answers'
// worth, which bounds a member's memory to about two answers plus one
// fetch (defaultFetchMaxBytes).
func (m *member) drain(req Request) {
	m.mu.Lock()
	n, size := len(m.buf), 0
	for _, r := range m.buf {
		size += recordSize(r)
	}
	m.mu.Unlock()
	if n >= 2*req.Max || size >= 2*req.MaxBytes {
		return
	}
	//nolint:staticcheck // a nil context is franz-go's documented "return what is buffered, do not wait"
	m.absorb(m.cl.PollRecords(nil, 0))
}

// absorb appends the records of fs to the buffer and logs its errors. The
// caller holds the rebalance block (PollRecords returned), so no revoke can
// interleave.
func (m *member) absorb(fs kgo.Fetches) {
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
			errors.Is(err, kgo.ErrClientClosed):
			// our own wait or close
		default:
			m.log.Warn("pollgroup: fetch error", "fetch_topic", topic, "partition", partition, "err", err)
		}
	})
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	if len(recs) == 0 {
		return
	}
	m.mu.Lock()
	m.buf = append(m.buf, recs...)
	m.mu.Unlock()
}

// take removes the next response from the front of the buffer: at most
// req.Max records and req.MaxBytes bytes, but at least one record if any is
// buffered. A non-empty batch becomes the member's outstanding batch.
func (m *member) take(req Request) *Batch {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, size := 0, 0
	for n < len(m.buf) && n < req.Max {
		s := recordSize(m.buf[n])
		if n > 0 && size+s > req.MaxBytes {
			break
		}
		size += s
		n++
	}
	if n == 0 {
		return &Batch{}
	}
	recs := slices.Clone(m.buf[:n])
	clear(m.buf[:n]) // drop references held by the backing array
	m.buf = m.buf[n:]
	if len(m.buf) == 0 {
		m.buf = nil
	}
	m.batchSeq++
	b := &Batch{ID: m.batchPrefix + "-" + strconv.FormatUint(m.batchSeq, 10), Records: recs, m: m, gens: make(map[int32]uint64)}
	for _, r := range recs {
		b.gens[r.Partition] = m.gen[r.Partition]
		if s, ok := m.served[r.Partition]; !ok || r.Offset > s {
			m.served[r.Partition] = r.Offset
		}
	}
	m.out, m.outSince, m.unacked = b, time.Now(), b
	return b
}

// resolve finishes b, which stays the outstanding batch either way: it is
// committed when the member's next Poll acknowledges it by id (or Commit
// covers it) and handed out again otherwise.
func (m *member) resolve(b *Batch, delivered bool) {
	m.mu.Lock()
	if m.out == b {
		m.out = nil
	}
	m.mu.Unlock()
	if delivered {
		m.mgr.met.delivered.Add(float64(len(b.Records)))
	}
	m.log.Debug("pollgroup: batch resolved", "batch", b.ID, "records", len(b.Records), "delivered", delivered)
	m.op.unlock()
	m.mgr.release(m)
}

// settle deals with the outstanding batch before new records are handed
// out. Acknowledged (ack is its id), its offsets are committed and nil is
// returned with the commit in flight (ack: wait on it before the caller
// answers; nil when there was nothing to commit); otherwise it is returned
// to be delivered again, same id, same records. Records of partitions
// revoked or lost since it was taken are left out: the partition's new owner
// reads them from the committed offset. The caller holds op and the
// rebalance block.
func (m *member) settle(ctx context.Context, ack string) (again *Batch, commit *ackCommit, err error) {
	m.mu.Lock()
	u := m.unacked
	if u == nil {
		m.mu.Unlock()
		return nil, nil, nil
	}
	live := u.Records
	stale := func(r *kgo.Record) bool { return !m.owned[r.Partition] || m.gen[r.Partition] != u.gens[r.Partition] }
	if slices.ContainsFunc(live, stale) {
		live = slices.DeleteFunc(slices.Clone(live), stale)
	}
	if len(live) == 0 {
		m.unacked = nil
		m.mu.Unlock()
		return nil, nil, nil
	}
	if ack != u.ID {
		b := &Batch{ID: u.ID, Records: live, m: m, gens: u.gens}
		m.unacked, m.out, m.outSince = b, b, time.Now()
		m.mu.Unlock()
		m.mgr.met.redelivered.Add(float64(len(live)))
		m.log.Debug("pollgroup: outstanding batch not acknowledged; delivering it again", "batch", u.ID, "ack", ack, "records", len(live))
		return b, nil, nil
	}
	m.mu.Unlock()
	committed := m.cl.CommittedOffsets()[m.key.Topic]
	offs := make(map[int32]kgo.EpochOffset)
	for _, r := range live {
		if c, ok := committed[r.Partition]; ok && r.Offset+1 <= c.Offset {
			continue // never rewind
		}
		if eo, ok := offs[r.Partition]; !ok || r.Offset+1 > eo.Offset {
			offs[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		}
	}
	if len(offs) == 0 {
		m.mu.Lock()
		if m.unacked == u {
			m.unacked = nil
		}
		m.mu.Unlock()
		return nil, nil, nil
	}
	// The commit is sent now and waited for later: the next batch is
	// fetched and written meanwhile, and is answered only once the
	// commit succeeded (ackCommit.wait). Until then the acknowledged batch
	// is no longer outstanding; a failed commit makes it outstanding again.
	m.mu.Lock()
	if m.unacked == u {
		m.unacked = nil
	}
	m.mu.Unlock()
	return nil, m.commitAsync(ctx, "poll", u, offs), nil
}

// ackCommit is an acknowledgement's offset commit in flight.
type ackCommit struct {
	m     *member
	acked *Batch // the acknowledged batch, outstanding again if the commit fails
	done  chan struct{}
	err   error // set before done is closed
}

// commitAsync sends offs for the acknowledged batch u without waiting.
// Kafka orders the member's commits (franz-go never cancels one that is in
// flight, and a rebalance waits for it).
func (m *member) commitAsync(ctx context.Context, kind string, u *Batch, offs map[int32]kgo.EpochOffset) *ackCommit {
	a := &ackCommit{m: m, acked: u, done: make(chan struct{})}
	// Not the request's context: a client that hangs up must not cancel
	// a commit the broker may already have applied.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	m.cl.CommitOffsets(cctx, map[string]map[int32]kgo.EpochOffset{m.key.Topic: offs},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			defer cancel()
			a.err = commitRespErr(resp, err)
			m.committed(kind, offs, a.err)
			close(a.done)
		})
	return a
}

// commitTimeout bounds an acknowledgement's commit.
const commitTimeout = 30 * time.Second

// wait blocks until the commit is done and returns its error, wrapped.
func (a *ackCommit) wait() error {
	<-a.done
	if a.err != nil {
		return fmt.Errorf("pollgroup: acknowledge batch %s of %s: %w", a.acked.ID, a.m.key, a.err)
	}
	return nil
}

// failed makes the acknowledged batch outstanding again after its commit
// failed, as if the poll that carried the acknowledgement had never been
// served. given is the batch that poll took (nil if none): it was never
// seen, so its records go back to the front of the buffer (those of
// partitions still owned as when it was taken).
func (a *ackCommit) failed(given *Batch) {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if given != nil {
		if m.unacked == given {
			m.unacked = nil
		}
		if m.out == given {
			m.out = nil
		}
		back := slices.DeleteFunc(slices.Clone(given.Records), func(r *kgo.Record) bool {
			return !m.owned[r.Partition] || m.gen[r.Partition] != given.gens[r.Partition]
		})
		m.buf = append(back, m.buf...)
	}
	if m.unacked == nil {
		m.unacked = a.acked
	}
}

func commitRespErr(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// commitCursors serves Commit.
func (m *member) commitCursors(ctx context.Context, cursors []cursor.Cursor) error {
	if err := m.op.lock(ctx, true); err != nil {
		return err
	}
	defer m.op.unlock()
	if err := m.errIfClosed(); err != nil {
		return err
	}
	m.holdRebalance()
	defer m.cl.AllowRebalance()
	committed := m.cl.CommittedOffsets()[m.key.Topic]
	m.mu.Lock()
	offs := make(map[int32]kgo.EpochOffset)
	skipped := 0
	for _, c := range cursors {
		p, next := c.Partition, c.Offset+1
		s, served := m.served[p]
		switch {
		case !m.owned[p], !served, c.Offset > s, c.Offset < 0:
			skipped++ // not ours, or never handed out: committing it could skip records
			continue
		}
		if cm, ok := committed[p]; ok && next <= cm.Offset {
			continue // already committed; never rewind
		}
		if cur, ok := offs[p]; ok && cur.Offset >= next {
			continue
		}
		offs[p] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
	m.mu.Unlock()
	if skipped > 0 {
		m.log.Debug("pollgroup: commit skipped cursors of partitions not owned or not delivered", "skipped", skipped)
	}
	if len(offs) == 0 {
		return nil
	}
	if err := m.commit(ctx, "explicit", offs); err != nil {
		return fmt.Errorf("pollgroup: commit for %s: %w", m.key, err)
	}
	return nil
}

// commit sends offs synchronously and, on success, drops the records they
// cover from the outstanding batch (all of them: no outstanding batch). The
// caller holds op and the rebalance block.
func (m *member) commit(ctx context.Context, kind string, offs map[int32]kgo.EpochOffset) error {
	var rerr error
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.key.Topic: offs},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			rerr = commitRespErr(resp, err)
		})
	m.committed(kind, offs, rerr)
	return rerr
}

// committed counts a commit's result and, on success, drops the records
// offs cover from the outstanding batch.
func (m *member) committed(kind string, offs map[int32]kgo.EpochOffset, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.mgr.met.commits.WithLabelValues(kind, result).Inc()
	if err != nil {
		m.log.Debug("pollgroup: commit failed", "kind", kind, "offsets", offsetsAttr(offs), "err", err)
		return
	}
	m.mu.Lock()
	if u := m.unacked; u != nil {
		covered := func(r *kgo.Record) bool { eo, ok := offs[r.Partition]; return ok && r.Offset < eo.Offset }
		if slices.ContainsFunc(u.Records, covered) {
			rest := slices.DeleteFunc(slices.Clone(u.Records), covered)
			if len(rest) == 0 {
				m.unacked = nil
			} else {
				m.unacked = &Batch{ID: u.ID, Records: rest, m: m, gens: u.gens}
			}
		}
	}
	m.mu.Unlock()
	m.log.Debug("pollgroup: committed", "kind", kind, "offsets", offsetsAttr(offs))
}

func (m *member) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	ps := assigned[m.key.Topic]
	if len(ps) == 0 {
		return
	}
	m.mu.Lock()
	for _, p := range ps {
		m.owned[p] = true
	}
	m.mu.Unlock()
	m.log.Debug("pollgroup: partitions assigned", "partitions", ps)
}

func (m *member) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	m.drop(revoked[m.key.Topic], "revoked")
}

func (m *member) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.drop(lost[m.key.Topic], "lost")
}

// drop forgets everything about partitions that left this member: buffered
// records (the new owner fetches them from the committed offset) and pending
// offsets (committing them now could rewind the new owner's commit, which
// the classic protocol does not prevent). Records of the outstanding batch
// on these partitions are left out when it is settled.
func (m *member) drop(ps []int32, why string) {
	if len(ps) == 0 {
		return
	}
	m.mu.Lock()
	gone := make(map[int32]bool, len(ps))
	for _, p := range ps {
		gone[p] = true
		delete(m.owned, p)
		delete(m.served, p)
		m.gen[p]++
	}
	before := len(m.buf)
	m.buf = slices.DeleteFunc(m.buf, func(r *kgo.Record) bool { return gone[r.Partition] })
	dropped := before - len(m.buf)
	m.mu.Unlock()
	m.log.Debug("pollgroup: partitions "+why, "partitions", ps, "dropped_buffered", dropped)
}

// close makes the member leave its group. It interrupts a parked Poll, waits
// (bounded by ctx) for the running call or outstanding batch to finish, and
// closes the client without committing anything.
func (m *member) close(ctx context.Context, reason error) {
	m.mu.Lock()
	if m.closeErr == nil {
		m.closeErr = reason
	}
	m.mu.Unlock()
	m.cancel()
	lockErr := m.op.lock(ctx, true)
	m.mu.Lock()
	m.closed = true
	m.buf = nil
	m.unacked = nil
	m.mu.Unlock()
	m.cl.AllowRebalance()
	memberID, _ := m.cl.GroupMetadata()
	if err := m.cl.LeaveGroupContext(ctx); err != nil {
		m.log.Debug("pollgroup: leave group", "err", err)
	}
	if m.instanceID != "" {
		m.leaveStatic(ctx, memberID)
	}
	m.cl.Close()
	if lockErr == nil {
		m.op.unlock()
	}
}

// leaveStatic removes the static member from its group (franz-go sends no
// LeaveGroup for one), so its partitions move on at once. With memberID
// set, Kafka refuses (FENCED_INSTANCE_ID) if a successor with the same
// instance id has already taken the place, which is then left alone.
func (m *member) leaveStatic(ctx context.Context, memberID string) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.key.Group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = memberID
	lm.InstanceID = &m.instanceID
	req.Members = append(req.Members, lm)
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		for _, r := range resp.Members {
			if e := kerr.ErrorForCode(r.ErrorCode); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		m.log.Debug("pollgroup: leave group (static member)", "instance_id", m.instanceID, "err", err)
	}
}

// newBatchPrefix returns 12 random hex digits.
func newBatchPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func recordSize(r *kgo.Record) int { return len(r.Key) + len(r.Value) }

// offsetsAttr renders offsets for a log line as partition→offset.
func offsetsAttr(offs map[int32]kgo.EpochOffset) map[int32]int64 {
	out := make(map[int32]int64, len(offs))
	for p, eo := range offs {
		out[p] = eo.Offset
	}
	return out
}
