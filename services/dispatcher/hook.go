package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// errRefused ends a webhook's member after the guard stopped a delivery
// and the webhook was disabled.
var errRefused = errors.New("delivery refused by the SSRF guard; webhook disabled")

// A webhook's member takes what its client has fetched (up to
// maxPollRecords records; fetches hold at most fetchPartitionBytes per
// partition), keeps of each partition what it can attempt in about
// pollBudget (the POST time measured so far; the rest is read again), and
// commits what it did (next steps and offsets, one Kafka transaction)
// once per window: at most commitEvery after the window's first poll,
// after maxWindowRecords records, or at once when a rebalance waits, a
// partition was rewound, or the member stops. A kill -9 therefore makes
// again the attempts of at most one window: about commitEvery's worth,
// at most maxWindowRecords plus a poll.
const (
	maxPollRecords      = 20000
	fetchPartitionBytes = 256 << 10
	commitEvery         = 500 * time.Millisecond
	maxWindowRecords    = 5000
	// pollBudget: a partition's run in one poll starts no new attempt
	// after this (its first one excepted); the rest is read again.
	pollBudget = commitEvery
	// firstTake and maxTake bound the records of a partition taken in
	// one poll: firstTake until POSTs were timed.
	firstTake = 64
	maxTake   = 2000
)

// partitionStep is how one partition's run of first attempts in a poll
// ended: the next steps to make durable (retry records and dead letters),
// and the first record not handled (nil when all were), which the
// partition is rewound to.
type partitionStep struct {
	out       []*kgo.Record
	unhandled *kgo.Record
	refused   *attemptResult
	// stopped: the webhook was disabled or deleted meanwhile.
	stopped bool
	// finished are the attempt log keys of messages done with (delivered
	// or dead-lettered), forgotten once the step is committed.
	finished []string
	// handled counts the records handled; notAttempted are the counted
	// letters (attemptLog.startAll) whose POST was not made.
	handled      int
	notAttempted []*letter
	// posts and took: the POSTs made and their time in all.
	posts int
	took  time.Duration
	// later: records the run did not get to before its deadline, for the
	// next round of the window (not rewound).
	later []*kgo.Record
}

// hookWindow is what a webhook's member did since its last commit.
type hookWindow struct {
	started  time.Time // zero: none open
	pos      map[string]map[int32]kgo.EpochOffset
	out      []*kgo.Record
	finished []string
	records  int
}

func (w *hookWindow) open() bool { return !w.started.IsZero() }

// add records a poll's outcome: each polled partition is done up to its
// last record, or up to its first record not handled.
func (w *hookWindow) add(polled map[int32][]*kgo.Record, steps []partitionStep) {
	if w.pos == nil {
		w.pos = map[string]map[int32]kgo.EpochOffset{}
	}
	set := func(r *kgo.Record, offset int64) {
		if w.pos[r.Topic] == nil {
			w.pos[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		w.pos[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: offset}
	}
	for _, recs := range polled {
		if len(recs) > 0 {
			last := recs[len(recs)-1]
			set(last, last.Offset+1)
		}
	}
	for _, s := range steps {
		if s.unhandled != nil {
			set(s.unhandled, s.unhandled.Offset)
		}
		w.out = append(w.out, s.out...)
		w.finished = append(w.finished, s.finished...)
		w.records += s.handled
	}
}

// runHook is one webhook's consumer group member on its tenant topic. Each
// poll takes what was fetched (see maxPollRecords); each partition's records are
// attempted in order, one in flight per partition, partitions in
// parallel (up to Concurrency in flight). Then, in one Kafka transaction
// per window of polls (hookWindow), the next steps of those attempts
// (retry records, dead letters) are written and the consumed offsets
// committed: both or neither, so a crash can repeat an attempt but never
// fork a retry sequence or write a second dead letter. Rebalances wait
// for the window's records and the transaction (BlockRebalanceOnPoll);
// a rebalance that waits ends the window at once.
//
// When the webhook is disabled or deleted meanwhile, or the guard refuses
// a delivery, the partitions are rewound to their first record not
// handled, what was handled is committed, and the member ends: a new one
// starts from the committed offsets once the webhook is enabled again.
func (d *Dispatcher) runHook(ctx context.Context, wh controlstate.Webhook) error {
	topic, ok := d.state.Topic(wh.Tenant, wh.Topic)
	if !ok {
		return nil
	}
	if err := d.restoreOffsets(ctx, wh, topic.KafkaTopic); err != nil {
		return fmt.Errorf("webhook %s: %w", wh.ID, err)
	}
	log := d.log.With("webhook", wh.ID, "tenant", wh.Tenant)
	for {
		aborted, err := d.hookSession(ctx, wh, topic, log)
		if !aborted || ctx.Err() != nil {
			return err
		}
		log.Info("webhook: transaction aborted after the member lost its partitions; starting a new session from the committed offsets, the poll's attempts will be made again")
	}
}

// hookSession runs one session of runHook's member until it ends (err,
// or nil when stopped) or a window's transaction was aborted after the
// session lost its partitions meanwhile (aborted): the caller then starts
// a new session. Such a session is not used again: its partitions may
// have been given back while their positions were being reloaded, which
// the client's reset to the committed offsets (and the next try's
// SetOffsets) leave out, so a fetch position could stay past the aborted
// window's records and a later commit would commit past records whose
// next step was never written. A new session starts from the offsets
// Kafka has committed. (Other aborts, CONCURRENT_TRANSACTIONS or a
// rebalance starting, keep the session: a new one per abort would itself
// start rebalances that abort the other members' transactions.)
func (d *Dispatcher) hookSession(ctx context.Context, wh controlstate.Webhook, topic controlstate.Topic, log *slog.Logger) (aborted bool, err error) {
	var assigned, lost, hurry atomic.Bool
	sess, err := d.session(wh.Group, topic.KafkaTopic,
		// A window: polls for commitEvery, the last one's runs stop
		// starting attempts after pollBudget, and its last attempt ends.
		commitEvery+pollBudget+d.cfg.Webhooks.AttemptTimeout, &assigned, &lost, &hurry)
	if err != nil {
		return false, fmt.Errorf("webhook %s: client: %w", wh.ID, err)
	}
	defer sess.CloseAllowingRebalance()
	var postAvg time.Duration // of this member's POSTs (moving average)
	// carry: records polled in this window and not yet taken (beyond a
	// poll's take), attempted before anything is polled again; at the
	// window's end their partitions are rewound to them.
	var carry map[int32][]*kgo.Record
	var win hookWindow
	// end commits the window (if one is open) and lets a rebalance go on.
	end := func() (committed bool, err error) {
		committed = true
		for _, recs := range carry {
			win.pos[recs[0].Topic][recs[0].Partition] = kgo.EpochOffset{Epoch: recs[0].LeaderEpoch, Offset: recs[0].Offset}
		}
		carry = nil
		if win.open() {
			committed, err = d.commitStep(ctx, sess, win.pos, win.out, 0)
			if err == nil && committed {
				d.attemptLog(wh.Tenant).forget(win.finished)
			}
			win = hookWindow{}
		}
		hurry.Store(false)
		sess.AllowRebalance()
		return committed, err
	}
	for {
		fs := kgo.Fetches{}
		byPart := carry // nil'ed once attempted, so that end rewinds to them until then
		if len(byPart) == 0 {
			pctx, cancel := ctx, context.CancelFunc(func() {})
			if win.open() {
				pctx, cancel = context.WithDeadline(ctx, win.started.Add(commitEvery))
			}
			fs = sess.PollRecords(pctx, maxPollRecords)
			cancel()
			byPart = map[int32][]*kgo.Record{}
			fs.EachRecord(func(r *kgo.Record) { byPart[r.Partition] = append(byPart[r.Partition], r) })
		}
		if ctx.Err() != nil {
			// Stopping: what was done is made durable first.
			if _, err := end(); err != nil {
				log.Warn("webhook: committing at stop; the window's attempts will be made again", "err", err)
			}
			return false, nil
		}
		var gone error
		fs.EachError(func(t string, p int32, err error) {
			if topicGone(err) {
				gone = fmt.Errorf("fetch %s: %w", t, err)
			} else if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				log.Warn("webhook: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		if gone != nil {
			// The tenant topic was deleted under us (by the API: this
			// member is stopped soon; by a Kafka tool: it restarts after a
			// backoff) rather than fetching in a tight loop.
			sess.AllowRebalance()
			return false, fmt.Errorf("webhook %s: %w", wh.ID, gone)
		}
		if len(byPart) == 0 {
			if !win.open() {
				sess.AllowRebalance()
				continue
			}
		} else {
			if !win.open() {
				win.started = time.Now()
			}
			if err := d.syncAttempts(ctx, wh.Tenant, &assigned); err != nil {
				sess.AllowRebalance()
				return false, fmt.Errorf("webhook %s: %w", wh.ID, err)
			}
		}
		take := firstTake
		if postAvg > 0 {
			take = min(max(int(pollBudget/postAvg), 8), maxTake)
		}
		steps, excess := d.firstAttemptsPoll(ctx, wh, topic.Epoch, byPart, take, &hurry, log)
		win.add(byPart, steps)
		carry = nil
		for _, st := range steps {
			if st.unhandled != nil {
				delete(excess, st.unhandled.Partition) // rewound to before them anyway
			}
		}
		if len(excess) > 0 {
			carry = excess
		}
		var refused *attemptResult
		var stopped, rewound bool
		var took time.Duration
		var posts int
		for _, s := range steps {
			if s.refused != nil && refused == nil {
				refused = s.refused
			}
			stopped = stopped || s.stopped
			rewound = rewound || s.unhandled != nil
			took += s.took
			posts += s.posts
		}
		if posts > 0 {
			if avg := took / time.Duration(posts); postAvg == 0 {
				postAvg = avg
			} else {
				postAvg = (3*postAvg + avg) / 4
			}
		}
		if len(byPart) > 0 && refused == nil && !stopped && !rewound && !hurry.Load() && ctx.Err() == nil &&
			time.Since(win.started) < commitEvery && win.records < maxWindowRecords {
			continue // the window stays open
		}
		committed, err := end()
		if err != nil {
			// Leave the group and start over from the committed offsets.
			return false, fmt.Errorf("webhook %s: %w", wh.ID, err)
		}
		wasLost := lost.Swap(false)
		if refused != nil {
			if err := d.disable(ctx, wh, *refused); err != nil {
				return false, fmt.Errorf("webhook %s: recording that it is disabled: %w", wh.ID, err)
			}
			return false, errRefused
		}
		if stopped || ctx.Err() != nil {
			return false, nil
		}
		if !committed && wasLost {
			return true, nil
		}
		if !committed {
			log.Info("webhook: transaction aborted (rebalance); the window's attempts will be made again")
		}
	}
}

// firstAttemptsPoll makes the first attempts of a poll's records: it
// counts them all in the attempt log at once (one produce), runs each
// partition's records in order (partitions in parallel) and gives back
// the counts of those not attempted. It writes nothing else to Kafka.
func (d *Dispatcher) firstAttemptsPoll(ctx context.Context, wh controlstate.Webhook, epoch string, byPart map[int32][]*kgo.Record, take int, hurry *atomic.Bool, log *slog.Logger) (steps []partitionStep, excess map[int32][]*kgo.Record) {
	if len(byPart) == 0 {
		return nil, nil
	}
	// Of each partition, the first take records; the rest (excess) is
	// for the next round.
	taken := make(map[int32][]*kgo.Record, len(byPart))
	excess = map[int32][]*kgo.Record{}
	for p, recs := range byPart {
		if len(recs) > take {
			recs, excess[p] = recs[:take], recs[take:]
		}
		taken[p] = recs
	}
	letters := make(map[int32][]*letter, len(byPart))
	var all []*letter
	for p, recs := range taken {
		ls := make([]*letter, len(recs))
		for i, r := range recs {
			if wh.Room != "" && (r.Key == nil || string(r.Key) != wh.Room) {
				continue // not this webhook's room: nothing to do
			}
			l := webhookstore.LetterOf(wh.Tenant, wh.ID, wh.Topic, epoch, r)
			ls[i] = &l
			all = append(all, &l)
		}
		letters[p] = ls
	}
	alog := d.attemptLog(wh.Tenant)
	if err := alog.startAll(ctx, all); err != nil {
		if ctx.Err() == nil {
			log.Warn("webhook: no attempt made", "err", err)
		}
		steps := make([]partitionStep, 0, len(byPart))
		for _, recs := range taken {
			steps = append(steps, partitionStep{unhandled: recs[0]})
		}
		return steps, nil
	}
	deadline := time.Now().Add(pollBudget)
	steps = make([]partitionStep, 0, len(byPart))
	var mu sync.Mutex
	var stop sync.Once
	halt := make(chan struct{})
	var wg sync.WaitGroup
	for p, recs := range taken {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := d.firstAttempts(ctx, wh, recs, letters[p], halt, deadline, hurry)
			if step.refused != nil || step.stopped {
				stop.Do(func() { close(halt) })
			}
			mu.Lock()
			steps = append(steps, step)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var back []*letter
	for _, s := range steps {
		back = append(back, s.notAttempted...)
		if len(s.later) > 0 { // before the records not taken
			p := s.later[0].Partition
			excess[p] = append(append([]*kgo.Record{}, s.later...), excess[p]...)
		}
	}
	alog.unstart(back)
	return steps, excess
}

// firstAttempts attempts recs (one partition, in order; ls[i] is recs[i]'s
// counted letter, nil when the record is not for this webhook) until
// done, halt closes, ctx ends, the deadline passes (after the first
// attempt) or a rebalance waits (hurry), the webhook is disabled or
// deleted, or the guard refuses. It writes nothing to Kafka: the caller
// makes the next steps it returns durable.
func (d *Dispatcher) firstAttempts(ctx context.Context, wh controlstate.Webhook, recs []*kgo.Record, ls []*letter, halt chan struct{}, deadline time.Time, hurry *atomic.Bool) partitionStep {
	var step partitionStep
	giveBack := func(from int) {
		for _, l := range ls[from:] {
			if l != nil {
				step.notAttempted = append(step.notAttempted, l)
			}
		}
	}
	rest := func(i int) {
		step.unhandled = recs[i]
		giveBack(i)
	}
	attempted := false
	for i, r := range recs {
		l := ls[i]
		if l == nil {
			step.handled++
			continue
		}
		select {
		case <-halt:
			rest(i)
			return step
		case <-ctx.Done():
			rest(i)
			return step
		default:
		}
		if hurry.Load() {
			rest(i)
			return step
		}
		if attempted && time.Now().After(deadline) {
			giveBack(i) // counted again when they come next round
			step.later = recs[i:]
			return step
		}
		cur, ok := d.state.Webhook(wh.Tenant, wh.ID)
		if !ok || !cur.Enabled {
			rest(i) // deleted or disabled meanwhile: stop here
			step.stopped = true
			return step
		}
		at := time.Now()
		res, err := d.attemptCounted(ctx, cur, l)
		if err != nil {
			rest(i)
			return step
		}
		attempted = true
		step.posts++
		step.took += time.Since(at)
		if res.Outcome == Refused {
			giveBack(i + 1) // its own count stays: the guard stopped a POST that was counted
			step.unhandled, step.refused = r, &res
			return step
		}
		step.handled++
		next := d.nextStep(*l, res)
		if next != nil {
			step.out = append(step.out, next)
		}
		if next == nil || next.Topic == d.names.DLQTopic(wh.Tenant) {
			step.finished = append(step.finished, attemptKey(*l))
		}
	}
	return step
}

// positions are the offsets to commit after a poll: for each partition of
// polled, after its last record, or at its record in unhandled (read
// again, its offset not committed).
func positions(polled map[int32][]*kgo.Record, unhandled []*kgo.Record) map[string]map[int32]kgo.EpochOffset {
	pos := map[string]map[int32]kgo.EpochOffset{}
	set := func(r *kgo.Record, offset int64) {
		if pos[r.Topic] == nil {
			pos[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		pos[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: offset}
	}
	for _, recs := range polled {
		if len(recs) > 0 {
			last := recs[len(recs)-1]
			set(last, last.Offset+1)
		}
	}
	for _, r := range unhandled {
		set(r, r.Offset)
	}
	return pos
}

// commitStep makes a window's (or a poll's) outcome durable in one
// transaction: out (the next steps) is written and the consumed offsets
// committed at pos (positions). committed false: the transaction was
// aborted every time (the member lost its partitions), the session is
// back at the committed offsets and the attempts will be made again.
//
// A transaction aborted by the session although no rebalance happened
// (Kafka answers CONCURRENT_TRANSACTIONS to an offset commit that follows
// the previous transaction's end too closely) is tried again with the
// same records and positions, without repeating the attempts.
func (d *Dispatcher) commitStep(ctx context.Context, sess *kgo.GroupTransactSession, pos map[string]map[int32]kgo.EpochOffset, out []*kgo.Record, hold time.Duration) (committed bool, err error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*d.cfg.RequestTimeout)
	defer cancel()
	for try := 0; ; try++ {
		sess.Client().SetOffsets(pos)
		if err := sess.Begin(); err != nil {
			return false, fmt.Errorf("begin transaction: %w", err)
		}
		if len(out) > 0 {
			for _, r := range out { // written again on a new try
				r.Partition, r.Offset = 0, 0
			}
			if err := sess.ProduceSync(tctx, out...).FirstErr(); err != nil {
				_, aerr := sess.End(tctx, kgo.TryAbort)
				return false, errors.Join(fmt.Errorf("produce: %w", err), aerr)
			}
			if hold > 0 { // webhooks.unsafe_test_hold_retry_commit (tests only)
				time.Sleep(hold)
			}
		}
		committed, err = sess.End(tctx, kgo.TryCommit)
		if err != nil {
			return false, fmt.Errorf("commit transaction: %w", err)
		}
		if committed || try == 4 || tctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
	}
	if committed {
		for _, r := range out {
			if strings.HasSuffix(r.Topic, ".dlq") {
				d.deadLetters.Inc()
			}
		}
	}
	return committed, nil
}

// session is a transactional consumer-group session on topic: read
// committed (retry and dead-letter records of aborted transactions are
// never seen), a transactional id unique to this process and group (a
// restarted member of this process fences the old one; members of other
// processes are fenced by the group generation, KIP-447), the webhooks
// session timeout, and a rebalance timeout covering work (one poll's
// attempts) plus the transaction.
//
// assigned is set whenever the session is given partitions: their previous
// owner may have died mid-attempt, so the attempt log is read up to its
// end before the next attempts (syncAttempts). lost is set whenever the
// session loses its partitions (its member was dropped from the group:
// a pause beyond the session timeout, say).
func (d *Dispatcher) session(group, topic string, work time.Duration, assigned, lost, hurry *atomic.Bool) (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(kafkaclient.With(d.cfg.ClientOpts,
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Store(true) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { lost.Store(true) }),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { hurry.Store(true) }),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.TransactionalID(group+"."+d.instance),
		kgo.TransactionTimeout(d.txnTimeout()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(int32(d.cfg.MaxRecordBytes)),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(d.cfg.RequestTimeout),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// The group's offsets were committed at registration (and are
		// restored from the control log if Kafka expired them); a
		// partition without one (added later) starts at its beginning.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(d.cfg.Webhooks.SessionTimeout),
		kgo.RebalanceTimeout(work+d.txnTimeout()+5*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		// A poll takes about a pollBudget's worth of each partition's
		// fetched records and reads the rest again: fetch little more.
		kgo.FetchMaxPartitionBytes(fetchPartitionBytes),
	)...)
}

// syncAttempts reads tenant's attempt log up to its end if the session was
// given partitions since the last time (assigned).
func (d *Dispatcher) syncAttempts(ctx context.Context, tenant string, assigned *atomic.Bool) error {
	if !assigned.Swap(false) {
		return nil
	}
	if err := d.attemptLog(tenant).sync(ctx); err != nil {
		assigned.Store(true)
		return err
	}
	return nil
}

// txnTimeout bounds a transaction: it opens at its first produce (after
// the attempts) and ends after the produce, the offset commit and a
// heartbeat. A transaction left open by a killed process blocks the
// retry topic's readers and the group's next member for that long.
func (d *Dispatcher) txnTimeout() time.Duration {
	return 2*d.cfg.RequestTimeout + 5*time.Second
}

// restoreOffsets commits, for each partition of kafkaTopic where wh's
// group has no committed offset, where the control log says delivery
// stopped (the offsets recorded when it was last disabled) or started
// (registration). Kafka drops an empty group's offsets after
// offsets.retention.minutes: without this a webhook re-enabled after a
// long disable would start over at the beginning of the retained topic.
func (d *Dispatcher) restoreOffsets(ctx context.Context, wh controlstate.Webhook, kafkaTopic string) error {
	if kafkaTopic != wh.KafkaTopic || (len(wh.StopOffsets) == 0 && len(wh.StartOffsets) == 0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	committed, err := d.adm.FetchOffsets(ctx, wh.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return fmt.Errorf("reading the group's offsets: %w", err)
	}
	starts, err := d.adm.ListStartOffsets(ctx, kafkaTopic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("reading the topic's offsets: %w", err)
	}
	ends, err := d.adm.ListEndOffsets(ctx, kafkaTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("reading the topic's offsets: %w", err)
	}
	var offs kadm.Offsets
	ends.Each(func(e kadm.ListedOffset) {
		if _, ok := committed.Lookup(kafkaTopic, e.Partition); ok {
			return
		}
		at, ok := wh.StopOffsets[e.Partition]
		if !ok {
			at, ok = wh.StartOffsets[e.Partition]
		}
		if !ok {
			return
		}
		if s, ok := starts.Lookup(kafkaTopic, e.Partition); ok && at < s.Offset {
			at = s.Offset
		}
		at = min(at, e.Offset)
		offs.Add(kadm.Offset{Topic: kafkaTopic, Partition: e.Partition, At: at, LeaderEpoch: -1})
	})
	if len(offs) == 0 {
		return nil
	}
	resp, err := d.adm.CommitOffsets(ctx, wh.Group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		// A member elsewhere owns the group (so its offsets are live).
		d.log.Warn("webhooks: restoring the group's offsets", "webhook", wh.ID, "err", err)
		return nil
	}
	d.log.Info("webhooks: restored the group's offsets from the control log (Kafka had none)", "webhook", wh.ID, "offsets", offs)
	return nil
}
