package webhookstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/message"
	"github.com/msgmesh/msgmesh/platform/names"
)

// InspectNote is said with every inspection (spec section 2).
const InspectNote = "Inspection is one-shot: dead letters returned here are not shown by later inspections " +
	"(replay is unaffected and can still replay them). An empty list does not mean there are no dead letters."

// MaxReplay caps the dead letters one replay call republishes; "more" in
// its answer says to call again.
const MaxReplay = 1000

// DeadLetters reads a tenant's dead-letter topic for the API: one-shot
// inspection (a group per webhook that commits what it returned) and
// replay into the tenant topic (a separate group per webhook for "replay
// all", or chosen DLQ cursors read by offset), which inspection never
// affects.
type DeadLetters struct {
	names      names.Mapper
	clientOpts []kgo.Opt
	prod       *kgo.Client
	adm        *kadm.Client
	timeout    time.Duration
	log        *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // one inspection or replay per webhook at a time
}

// NewDeadLetters connects with clientOpts; maxRecordBytes bounds a
// republished message, timeout each Kafka call.
func NewDeadLetters(prefix string, clientOpts []kgo.Opt, maxRecordBytes int, timeout time.Duration, log *slog.Logger) (*DeadLetters, error) {
	prod, err := kgo.NewClient(kafkaclient.With(clientOpts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(int32(maxRecordBytes)),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(timeout),
	)...)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &DeadLetters{names: names.Mapper{Prefix: prefix}, clientOpts: clientOpts, prod: prod, adm: kadm.NewClient(prod),
		timeout: timeout, log: log, locks: map[string]*sync.Mutex{}}, nil
}

// Close releases the client.
func (dl *DeadLetters) Close() { dl.prod.Close() }

func (dl *DeadLetters) lock(id string) func() {
	dl.mu.Lock()
	m, ok := dl.locks[id]
	if !ok {
		m = &sync.Mutex{}
		dl.locks[id] = m
	}
	dl.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// DeadLetter is a dead letter as the API shows it.
type DeadLetter struct {
	// Cursor is the dead letter's own position in the DLQ topic, for
	// replaying it alone.
	Cursor    string  `json:"cursor"`
	MessageID string  `json:"message_id"`
	Topic     string  `json:"topic"`
	Room      *string `json:"room"`
	// OriginalCursor is where the message was in its topic.
	OriginalCursor string           `json:"original_cursor"`
	Data           json.RawMessage  `json:"data,omitempty"`
	DataBase64     string           `json:"data_base64,omitempty"`
	Headers        []message.Header `json:"headers"`
	PublishedAt    string           `json:"published_at"`
	DeadLetteredAt string           `json:"dead_lettered_at"`
	// Attempts is how many POSTs were made: webhooks.max_attempts for a
	// message that only got temporary answers, one more for each attempt
	// made again because a dispatcher died before recording its outcome.
	Attempts int `json:"attempts"`
	// LastStatus is the last HTTP status (0 when the last attempt got no
	// answer); LastError what went wrong then.
	LastStatus int    `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func viewOf(r *kgo.Record, l Letter) DeadLetter {
	v := DeadLetter{Cursor: cursor.Cursor{Partition: r.Partition, Offset: r.Offset}.String(), MessageID: l.MessageID,
		Topic: l.Topic, OriginalCursor: l.Cursor, Headers: message.Headers(l.Headers), PublishedAt: l.PublishedAt.UTC().Format(timeFormat),
		DeadLetteredAt: r.Timestamp.UTC().Format(timeFormat), Attempts: l.PostsMade(), LastStatus: l.LastStatus, LastError: l.LastError}
	if l.Room != nil {
		s := string(l.Room)
		v.Room = &s
	}
	if message.IsJSONValue(l.Headers, l.Value) {
		v.Data = append(json.RawMessage(nil), l.Value...)
	} else {
		v.DataBase64 = base64.StdEncoding.EncodeToString(l.Value)
	}
	return v
}

// Inspect returns up to max dead letters of wh not shown before, and
// marks them shown (one-shot). It reads what is in the DLQ topic now; it
// does not wait for more.
func (dl *DeadLetters) Inspect(ctx context.Context, wh controlstate.Webhook, max int) ([]DeadLetter, error) {
	defer dl.lock(wh.ID)()
	topic := dl.names.DLQTopic(wh.Tenant)
	group := dl.names.InspectGroup(wh.Tenant, wh.ID)
	from, ends, err := dl.positions(ctx, topic, group)
	if err != nil || len(ends) == 0 {
		return []DeadLetter{}, err
	}
	out := []DeadLetter{}
	next := map[int32]int64{}
	err = dl.scan(ctx, topic, from, ends, func(r *kgo.Record) bool {
		if len(out) >= max {
			return false
		}
		next[r.Partition] = r.Offset + 1
		if l, err := ParseLetter(r); err == nil && l.Webhook == wh.ID {
			out = append(out, viewOf(r, l))
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if err := dl.commit(ctx, group, topic, next); err != nil {
		return nil, err
	}
	return out, nil
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	// Replayed counts the messages republished; Cursors are their new
	// cursors in the topic, in order.
	Replayed int      `json:"replayed"`
	Cursors  []string `json:"cursors"`
	// NotFound lists requested DLQ cursors that are not dead letters of
	// this webhook (or no longer retained).
	NotFound []string `json:"not_found,omitempty"`
	// More is true when "replay all" stopped at MaxReplay: call again.
	More bool `json:"more"`
}

// Replay republishes dead letters of wh into kafkaTopic (the webhook's
// tenant topic) as new messages, with a new cursor and so a new message
// id, each with header msgmesh-replay-of set to its DLQ cursor. With
// cursors nil it replays every dead letter not replayed by an earlier
// "replay all" (up to MaxReplay), and moves the replay watermark; with
// cursors it replays exactly those DLQ cursors and moves nothing.
// Inspection does not affect either.
func (dl *DeadLetters) Replay(ctx context.Context, wh controlstate.Webhook, kafkaTopic string, cursors []string) (ReplayResult, error) {
	defer dl.lock(wh.ID)()
	topic := dl.names.DLQTopic(wh.Tenant)
	res := ReplayResult{Cursors: []string{}}
	var recs []*kgo.Record
	next := map[int32]int64{}
	if cursors == nil {
		group := dl.names.ReplayGroup(wh.Tenant, wh.ID)
		from, ends, err := dl.positions(ctx, topic, group)
		if err != nil || len(ends) == 0 {
			return res, err
		}
		err = dl.scan(ctx, topic, from, ends, func(r *kgo.Record) bool {
			if len(recs) >= MaxReplay {
				res.More = true
				return false
			}
			next[r.Partition] = r.Offset + 1
			if l, err := ParseLetter(r); err == nil && l.Webhook == wh.ID {
				recs = append(recs, replayRecord(kafkaTopic, r, l))
			}
			return true
		})
		if err != nil {
			return res, err
		}
		if err := dl.republish(ctx, recs, &res); err != nil {
			return res, err
		}
		return res, dl.commit(ctx, group, topic, next)
	}
	want := map[int32]map[int64]string{}
	from := map[int32]int64{}
	ends := map[int32]int64{}
	for _, c := range cursors {
		cur, err := cursor.Parse(c)
		if err != nil {
			res.NotFound = append(res.NotFound, c)
			continue
		}
		if want[cur.Partition] == nil {
			want[cur.Partition] = map[int64]string{}
			from[cur.Partition] = cur.Offset
		}
		want[cur.Partition][cur.Offset] = c
		from[cur.Partition] = min(from[cur.Partition], cur.Offset)
		ends[cur.Partition] = max(ends[cur.Partition], cur.Offset+1)
	}
	starts, lasts, err := dl.bounds(ctx, topic)
	if err != nil {
		return res, err
	}
	for p := range want {
		if _, ok := lasts[p]; !ok {
			for _, c := range want[p] {
				res.NotFound = append(res.NotFound, c)
			}
			delete(want, p)
			delete(from, p)
			delete(ends, p)
			continue
		}
		from[p] = max(from[p], starts[p])
		ends[p] = min(ends[p], lasts[p])
		if from[p] >= ends[p] {
			delete(from, p)
			delete(ends, p)
		}
	}
	if len(ends) > 0 {
		err = dl.scan(ctx, topic, from, ends, func(r *kgo.Record) bool {
			c, ok := want[r.Partition][r.Offset]
			if !ok {
				return true
			}
			delete(want[r.Partition], r.Offset)
			if l, err := ParseLetter(r); err == nil && l.Webhook == wh.ID {
				recs = append(recs, replayRecord(kafkaTopic, r, l))
			} else {
				res.NotFound = append(res.NotFound, c)
			}
			return true
		})
		if err != nil {
			return res, err
		}
	}
	for _, m := range want {
		for _, c := range m {
			res.NotFound = append(res.NotFound, c)
		}
	}
	sort.Strings(res.NotFound)
	return res, dl.republish(ctx, recs, &res)
}

func replayRecord(kafkaTopic string, r *kgo.Record, l Letter) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(l.Headers)+1)
	for _, x := range l.Headers {
		if x.Key != HeaderReplayOf {
			h = append(h, x)
		}
	}
	h = append(h, kgo.RecordHeader{Key: HeaderReplayOf, Value: []byte(cursor.Cursor{Partition: r.Partition, Offset: r.Offset}.String())})
	var key []byte
	if l.Room != nil {
		key = append([]byte{}, l.Room...)
	}
	return &kgo.Record{Topic: kafkaTopic, Key: key, Value: l.Value, Headers: h}
}

func (dl *DeadLetters) republish(ctx context.Context, recs []*kgo.Record, res *ReplayResult) error {
	if len(recs) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, dl.timeout)
	defer cancel()
	if err := dl.prod.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("republish: %w", err)
	}
	for _, r := range recs {
		res.Cursors = append(res.Cursors, cursor.Cursor{Partition: r.Partition, Offset: r.Offset}.String())
	}
	res.Replayed = len(recs)
	return nil
}

// bounds returns the start and end offsets of topic's partitions (none
// when the topic does not exist).
func (dl *DeadLetters) bounds(ctx context.Context, topic string) (starts, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, dl.timeout)
	defer cancel()
	starts, ends = map[int32]int64{}, map[int32]int64{}
	so, err := dl.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = so.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return starts, ends, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dead letters: %w", err)
	}
	// Dead letters are written in transactions: read up to the last
	// stable offset (what read_committed consumers see).
	eo, err := dl.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = eo.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dead letters: %w", err)
	}
	so.Each(func(o kadm.ListedOffset) { starts[o.Partition] = o.Offset })
	eo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return starts, ends, nil
}

// positions returns, for each partition of topic with records group has
// not passed, where group is (committed, or the start) and the end.
func (dl *DeadLetters) positions(ctx context.Context, topic, group string) (from, ends map[int32]int64, err error) {
	starts, lasts, err := dl.bounds(ctx, topic)
	if err != nil || len(lasts) == 0 {
		return nil, nil, err
	}
	fctx, cancel := context.WithTimeout(ctx, dl.timeout)
	defer cancel()
	committed, err := dl.adm.FetchOffsets(fctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil, fmt.Errorf("dead letters: %w", err)
	}
	from, ends = map[int32]int64{}, map[int32]int64{}
	for p, end := range lasts {
		at := starts[p]
		if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At > at {
			at = o.At
		}
		if at < end {
			from[p], ends[p] = at, end
		}
	}
	return from, ends, nil
}

// scan reads each partition of from, from its offset up to (not
// including) its end, calling fn in offset order per partition; fn
// returning false stops that partition.
func (dl *DeadLetters) scan(ctx context.Context, topic string, from, ends map[int32]int64, fn func(*kgo.Record) bool) error {
	if len(from) == 0 {
		return nil
	}
	parts := map[int32]kgo.Offset{}
	for p, o := range from {
		parts[p] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(kafkaclient.With(dl.clientOpts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(200*time.Millisecond),
		// Dead letters of aborted transactions are never shown; the
		// transaction markers are kept (and skipped below) so that a
		// partition ending with one is seen to end.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*dl.timeout)
	defer cancel()
	open := len(from)
	done := map[int32]bool{}
	for open > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("dead letters: reading %s: %w", topic, ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("dead letters: reading %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] || r.Offset >= ends[r.Partition] {
				return
			}
			if (!r.Attrs.IsControl() && !fn(r)) || r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
				open--
			}
		})
	}
	return nil
}

// commit records group's position in topic (a group with no members:
// plain offset commits).
func (dl *DeadLetters) commit(ctx context.Context, group, topic string, next map[int32]int64) error {
	if len(next) == 0 {
		return nil
	}
	var offs kadm.Offsets
	for p, o := range next {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(ctx, dl.timeout)
	defer cancel()
	resp, err := dl.adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("dead letters: committing %s: %w", group, err)
	}
	return nil
}
