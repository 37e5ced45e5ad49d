// Package pollgroup holds the Kafka consumer-group members behind the HTTP
// long-poll API (POST /v1/topics/{topic}/poll and /commit, DESIGN.md).
//
// A member is one kgo.Client in one consumer group consuming one topic,
// keyed by (Group, Topic, Consumer); the groups are real Kafka groups,
// visible to kadm and kafka-consumer-groups.sh with their lag. A member is
// created by its first Poll and lives until it is idle for
// Config.IdleTimeout, its topic is closed, or the Manager is closed; then it
// leaves the group so its partitions move to the other members.
//
// Delivery is at-least-once, acknowledged by batch id. Poll hands out a
// Batch with an ID; the HTTP handler reports it Delivered or Undelivered
// once the response is written (or failed), and it stays the member's
// outstanding batch either way. The member's next Poll settles it first:
// when Request.Ack is its ID its offsets (offset+1 per partition) are
// committed and new records follow; otherwise the same batch (same ID, same
// records) is returned again, so an answer the client never read is never
// skipped (the class of confluentinc/kafka-rest#1350). Commit commits
// cursors early and drops what it covers from the outstanding batch.
// Nothing is committed otherwise: not on a timer, not on revoke, not on
// close. So an unacknowledged batch is delivered again after the member
// expires or closes, after a rebalance moves its partition, or after a
// restart.
//
// With Config.InstanceIDPrefix the members are static (KIP-345): a process
// restarted after a crash takes its members' places at once instead of
// waiting out their sessions; members leave explicitly when closed.
//
// franz-go is used with DisableAutoCommit and BlockRebalanceOnPoll; every
// commit happens while rebalances are blocked and only for partitions the
// member owns, and the block is always lifted before a call returns, never
// held between two HTTP requests. A revoked or lost partition's buffered
// and pending records are dropped at once, so a stale commit can never
// rewind the new owner's.
//
// Within a member, calls are serialized: a second Poll waits for the first
// (bounded by its own context); a Commit interrupts a Poll that is waiting
// for records and goes first. A Poll never returns an offset twice in one
// response and never skips one: records fetched beyond Request.Max or
// Request.MaxBytes stay buffered in the member and come first next time.
package pollgroup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/msgmesh/msgmesh/platform/cursor"
)

// Manager holds the members of one process. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger
	met *metrics

	mu      sync.Mutex
	members map[Key]*member
	closed  bool
	bg      sync.WaitGroup // member closes running in the background
}

// New validates cfg and returns a Manager. It registers these collectors
// with cfg.Registerer (if set), failing if any is already registered:
//
//	msgmesh_pollgroup_members                 gauge    members held
//	msgmesh_pollgroup_records_delivered_total counter  records reported Delivered
//	msgmesh_pollgroup_records_redelivered_total counter  records handed out again for want of an ack
//	msgmesh_pollgroup_commits_total{kind,result} counter  offset commits (kind poll|explicit, result ok|error)
//	msgmesh_pollgroup_expirations_total       counter  members closed for idleness
//
// Run must be running for idle members to expire; Close releases them all.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("pollgroup: invalid config: %w", err)
	}
	cfg = cfg.withDefaults()
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("pollgroup: register metrics: %w", err)
	}
	return &Manager{cfg: cfg, log: cfg.Logger, met: met, members: make(map[Key]*member)}, nil
}

// Run expires idle members (see Config.IdleTimeout) until ctx is done. It
// checks every quarter of the idle timeout, at most every second. Run does
// not close the remaining members when it returns; Close does.
func (mg *Manager) Run(ctx context.Context) {
	every := min(max(mg.cfg.IdleTimeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			mg.expire(now)
		}
	}
}

// Poll answers one long-poll of req.Key's member, creating the member (which
// then joins its group) on first use. It first settles the member's
// outstanding batch: if req.Ack is its ID, its offsets are committed (only
// partitions the member still owns); if not, that batch is returned again
// at once (whatever req.Max). Then it returns up to req.Max records /
// req.MaxBytes bytes, waiting up to req.Wait for the first; a batch with
// no records means Wait passed. The acknowledgement's commit is sent
// before the new records are taken and runs while the caller prepares its
// answer: call Batch.Acknowledged before sending the records (an empty
// batch is returned only after the commit succeeded). The caller must
// resolve a batch with Delivered or Undelivered.
//
// If another call of the same member is running, Poll waits for it, bounded
// by ctx. When ctx ends, Poll returns ctx.Err(); records fetched meanwhile
// stay buffered for the next Poll. Other errors: ErrInvalidRequest (wrapped),
// ErrTooManyMembers, ErrUnknownMember (the member was closed under the call,
// e.g. by CloseTopic), ErrClosed, or a wrapped Kafka error when
// committing the acknowledged batch failed (it stays outstanding; retry).
func (mg *Manager) Poll(ctx context.Context, req Request) (*Batch, error) {
	req, err := req.normalize()
	if err != nil {
		return nil, err
	}
	m, err := mg.acquire(req.Key, true)
	if err != nil {
		return nil, err
	}
	b, err := m.poll(ctx, req)
	if err != nil || len(b.Records) == 0 {
		mg.release(m)
	}
	return b, err
}

// Commit acknowledges cursors of key's member: for each partition it
// commits the highest given offset + 1 and drops the covered records from
// the outstanding batch (the next Poll without Ack returns the rest). Cursors are skipped (without error) when their partition is not
// currently owned by the member, when their offset was never handed out by
// it (committing it could skip records) or is already committed (a commit
// never rewinds). A Poll of the member that is waiting for records is
// interrupted and resumes afterwards.
//
// Errors: ErrUnknownMember when the member does not exist here (HTTP 404;
// its records will be redelivered), ErrInvalidRequest (wrapped), ErrClosed,
// ctx.Err(), or a wrapped Kafka commit error (nothing was acknowledged).
func (mg *Manager) Commit(ctx context.Context, key Key, cursors []cursor.Cursor) error {
	if err := key.validate(); err != nil {
		return err
	}
	m, err := mg.acquire(key, false)
	if err != nil {
		return err
	}
	defer mg.release(m)
	return m.commitCursors(ctx, cursors)
}

// CloseTopic closes every member of topic (the topic was deleted) in the
// background and returns how many there were. Their calls in flight fail
// with ErrUnknownMember; nothing is committed.
func (mg *Manager) CloseTopic(topic string) int {
	mg.mu.Lock()
	if mg.closed {
		mg.mu.Unlock()
		return 0
	}
	var gone []*member
	for k, m := range mg.members {
		if k.Topic == topic {
			delete(mg.members, k)
			gone = append(gone, m)
		}
	}
	mg.met.members.Set(float64(len(mg.members)))
	mg.bg.Add(len(gone))
	mg.mu.Unlock()
	for _, m := range gone {
		go mg.closeInBackground(m, ErrUnknownMember, "topic closed")
	}
	return len(gone)
}

// Close closes every member: each leaves its group without committing
// anything that was not acknowledged, so unacknowledged records are
// delivered again to whoever consumes the group next. It waits, bounded by
// ctx, for calls in flight and unresolved batches to finish and for the
// members to leave; when ctx ends first it returns its error and the
// remaining clients are closed without waiting for LeaveGroup. Every later
// call returns ErrClosed; Close itself is idempotent.
func (mg *Manager) Close(ctx context.Context) error {
	mg.mu.Lock()
	var ms []*member
	if !mg.closed {
		mg.closed = true
		for _, m := range mg.members {
			ms = append(ms, m)
		}
		clear(mg.members)
		mg.met.members.Set(0)
	}
	mg.mu.Unlock()

	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.close(ctx, ErrClosed)
			m.log.Info("pollgroup: member left", "reason", "shutdown")
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		mg.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pollgroup: close: %w", ctx.Err())
	}
}

// acquire returns key's member with one more call in flight, creating it
// when create is set.
func (mg *Manager) acquire(key Key, create bool) (*member, error) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if mg.closed {
		return nil, ErrClosed
	}
	m := mg.members[key]
	if m == nil {
		if !create {
			return nil, ErrUnknownMember
		}
		if len(mg.members) >= mg.cfg.MaxMembers {
			return nil, ErrTooManyMembers
		}
		if max := mg.cfg.MaxMembersPerOwner; max > 0 && key.Owner != "" && mg.ownedBy(key.Owner) >= max {
			return nil, ErrTooManyMembers
		}
		var err error
		if m, err = newMember(mg, key); err != nil {
			return nil, err
		}
		mg.members[key] = m
		mg.met.members.Set(float64(len(mg.members)))
		m.log.Info("pollgroup: member joining")
	}
	m.inflight++
	return m, nil
}

// ownedBy counts the members of owner. Caller holds mg.mu. Linear: the
// member count is capped by Config.MaxMembers.
func (mg *Manager) ownedBy(owner string) int {
	n := 0
	for k := range mg.members {
		if k.Owner == owner {
			n++
		}
	}
	return n
}

// release ends one call (or batch) in flight of m.
func (mg *Manager) release(m *member) {
	mg.mu.Lock()
	m.inflight--
	m.lastUsed = time.Now()
	mg.mu.Unlock()
}

// expire closes members idle since before now-IdleTimeout and resolves
// batches outstanding that long as Undelivered.
func (mg *Manager) expire(now time.Time) {
	idle := mg.cfg.IdleTimeout
	var gone []*member
	var idleFor []time.Duration
	var abandoned []*Batch
	mg.mu.Lock()
	if mg.closed {
		mg.mu.Unlock()
		return
	}
	for k, m := range mg.members {
		if m.inflight == 0 {
			if now.Sub(m.lastUsed) >= idle {
				delete(mg.members, k)
				gone = append(gone, m)
				idleFor = append(idleFor, now.Sub(m.lastUsed))
			}
			continue
		}
		m.mu.Lock()
		if m.out != nil && now.Sub(m.outSince) >= idle {
			abandoned = append(abandoned, m.out)
		}
		m.mu.Unlock()
	}
	mg.met.members.Set(float64(len(mg.members)))
	mg.bg.Add(len(gone))
	mg.mu.Unlock()

	for _, b := range abandoned {
		b.m.log.Debug("pollgroup: batch not resolved within the idle timeout; treating it as undelivered", "records", len(b.Records))
		b.Undelivered()
	}
	for i, m := range gone {
		mg.met.expirations.Inc()
		m.log.Info("pollgroup: member expired", "idle", idleFor[i].Round(time.Millisecond).String())
		go mg.closeInBackground(m, ErrUnknownMember, "expired")
	}
}

// closeInBackground closes m within leaveTimeout; the caller did mg.bg.Add.
func (mg *Manager) closeInBackground(m *member, callErr error, reason string) {
	defer mg.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	m.close(ctx, callErr)
	m.log.Info("pollgroup: member left", "reason", reason)
}
