package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupCount counts the unique records a consumer group read, across its
// members. The clock starts (begin) once the group is stable with every
// member (waitStable): a group joins and rebalances as its members arrive,
// and that settling is what the group scenario leaves out (the
// one-consumer rows include a join). Records read before the clock are
// not counted in the rate; ones seen again (a partition that moved in a
// rebalance) are counted once.
type groupCount struct {
	mu      sync.Mutex
	last    map[int32]int64 // partition -> highest offset seen
	start   time.Time       // zero until begin
	msgs    int64           // unique records after start
	total   int64           // unique records in all
	dups    int64
	want    int64
	done    chan struct{}
	end     time.Time
	closeMu sync.Once
}

func newGroupCount(want int64) *groupCount {
	return &groupCount{last: map[int32]int64{}, want: want, done: make(chan struct{})}
}

// begin starts the clock.
func (g *groupCount) begin() {
	g.mu.Lock()
	g.start = time.Now()
	g.mu.Unlock()
}

// add records (partition, offset) pairs read by any member.
func (g *groupCount) add(recs [][2]int64) {
	if len(recs) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range recs {
		p, o := int32(r[0]), r[1]
		if l, ok := g.last[p]; ok && o <= l {
			g.dups++
			continue
		}
		g.last[p] = o
		g.total++
		if !g.start.IsZero() {
			g.msgs++
		}
	}
	if g.total >= g.want {
		g.closeMu.Do(func() { g.end = time.Now(); close(g.done) })
	}
}

// waitStable waits until Kafka reports group Stable with members members.
func waitStable(brokers []string, group string, members int, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		gs, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			if d, ok := gs[group]; ok {
				last = fmt.Sprintf("%s with %d members", d.State, len(d.Members))
				if d.Err == nil && d.State == "Stable" && len(d.Members) == members {
					return nil
				}
			}
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("group %s not stable with %d members within %v (last: %s)", group, members, timeout, last)
}

func (g *groupCount) result(r *result, members int, timeout time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.Msgs = g.msgs
	if !g.start.IsZero() && !g.end.IsZero() {
		r.Elapsed = g.end.Sub(g.start)
	}
	r.Note = appendNote(r.Note, fmt.Sprintf("clock from the moment the group was stable with all %d members; %d of %d records read before it", members, g.total-g.msgs, g.total))
	if g.dups > 0 {
		r.Note = appendNote(r.Note, fmt.Sprintf("%d duplicates not counted", g.dups))
	}
	if g.total < g.want {
		r.Note = appendNote(r.Note, fmt.Sprintf("INCOMPLETE: %d of %d within %v", g.total, g.want, timeout))
	}
}

// httpPollGroup reads n prefilled records with `members` HTTP consumers of
// one group, each a sequential poll loop acknowledging its previous batch.
// kafkaGroup is the group's Kafka name (<kafka topic>.<group>).
func (e *env) httpPollGroup(id, topic, group, kafkaGroup string, n, members, max, waitMs int, timeout time.Duration) result {
	r := result{ID: id, Name: fmt.Sprintf("HTTP poll, group of %d consumers", members), Shape: fmt.Sprintf("max=%d, wait_ms=%d, one loop each", max, waitMs),
		Lat: &hist{}, LatWhat: "request"}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	gc := newGroupCount(int64(n))
	path := "/v1/topics/" + topic + "/poll"
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	// Join: one poll each that takes at most one record and does not wait
	// (a member joins with its first poll), then wait for the group to
	// settle. A record taken here is delivered again to its member (no ack).
	for i := range members {
		body, _ := json.Marshal(map[string]any{"group": group, "consumer": fmt.Sprintf("c%d", i), "max": 1, "wait_ms": 0})
		if _, err := e.pollOnce(ctx, path, body); err != nil {
			r.Errors++
			r.Note = appendNote(r.Note, "join: "+err.Error())
			return r
		}
	}
	if err := waitStable(e.brokers, kafkaGroup, members, 60*time.Second); err != nil {
		r.Note = appendNote(r.Note, err.Error())
		return r
	}
	e.meter.start()
	gc.begin()
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ack := ""
			for ctx.Err() == nil {
				select {
				case <-gc.done:
					return
				default:
				}
				t0 := time.Now()
				body, _ := json.Marshal(map[string]any{"group": group, "consumer": fmt.Sprintf("c%d", i), "max": max, "wait_ms": waitMs, "ack": ack})
				b, err := e.pollOnce(ctx, path, body)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					if errs.Load() > 20 {
						cancel()
						return
					}
					time.Sleep(100 * time.Millisecond)
					continue
				}
				r.Lat.add(time.Since(t0))
				msgs, _ := scanPoll(b)
				if i := bytes.LastIndex(b, []byte(`,"batch":"`)); i >= 0 {
					if id, _, found := bytes.Cut(b[i+len(`,"batch":"`):], []byte(`"`)); found {
						ack = string(id)
					}
				}
				pos := make([][2]int64, len(msgs))
				for j, m := range msgs {
					pos[j] = [2]int64{m.partition, m.offset}
				}
				gc.add(pos)
			}
		}()
	}
	select {
	case <-gc.done:
	case <-ctx.Done():
	}
	r.CPU = e.meter.stop()
	cancel()
	wg.Wait()
	gc.result(&r, members, timeout)
	r.Errors += errs.Load()
	if v := firstErr.Load(); v != nil {
		r.Note = appendNote(r.Note, "first error: "+v.(string))
	}
	return r
}

// pollOnce sends one poll and returns the 200 answer's body.
func (e *env) pollOnce(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.srv.key)
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := readAll(resp)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// directConsumeGroup reads n records with `members` franz-go clients in one
// group (default autocommit), each calling PollRecords(max) in a loop.
func (e *env) directConsumeGroup(kafkaTopic, group string, n, members, max int, timeout time.Duration) (result, error) {
	r := result{ID: "direct-consume-group", Name: fmt.Sprintf("franz-go group of %d consumers", members), Shape: fmt.Sprintf("PollRecords(%d), autocommit, one client each", max)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cls := make([]*kgo.Client, members)
	for i := range cls {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(e.brokers...),
			kgo.ClientID("msgmesh-bench"),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(kafkaTopic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
		if err != nil {
			return r, err
		}
		cls[i] = cl
	}
	defer func() {
		lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer lcancel()
		for _, cl := range cls {
			_ = cl.LeaveGroupContext(lctx)
			cl.Close()
		}
	}()
	// The clients join at once (franz-go joins without a poll); let the
	// group settle first, as in the HTTP row.
	if err := waitStable(e.brokers, group, members, 60*time.Second); err != nil {
		return r, err
	}
	gc := newGroupCount(int64(n))
	var errs atomic.Int64
	var wg sync.WaitGroup
	e.meter.start()
	gc.begin()
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				select {
				case <-gc.done:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				fs := cl.PollRecords(pctx, max)
				pcancel()
				fs.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						errs.Add(1)
					}
				})
				pos := make([][2]int64, 0, fs.NumRecords())
				fs.EachRecord(func(rec *kgo.Record) { pos = append(pos, [2]int64{int64(rec.Partition), rec.Offset}) })
				gc.add(pos)
			}
		}()
	}
	select {
	case <-gc.done:
	case <-ctx.Done():
	}
	r.CPU = e.meter.stop()
	cancel()
	wg.Wait()
	gc.result(&r, members, timeout)
	r.Errors = errs.Load()
	return r, nil
}

// httpNDJSON publishes batches of size messages as NDJSON bodies
// (Content-Type: application/x-ndjson, one value per line).
func (e *env) httpNDJSON(id, topic string, conc, size int) result {
	r := result{ID: id, Name: fmt.Sprintf("HTTP publish, NDJSON batch of %d/request", size), Shape: fmt.Sprintf("%d concurrent requests", conc),
		Lat: &hist{}, LatWhat: "request"}
	var b bytes.Buffer
	for range size {
		b.Write(e.value())
		b.WriteByte('\n')
	}
	body := b.Bytes()
	path := "/v1/topics/" + topic + "/messages"
	e.workers(&r, conc, func(ctx context.Context) (int, error) {
		return size, e.postAs(ctx, path, "application/x-ndjson", body)
	})
	return r
}
