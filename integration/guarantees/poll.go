package guarantees

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// pollGroup is one consumer group whose members poll through the
// gateways in turn: a member stays on a node for a few polls, then moves
// on, acknowledging its outstanding batch first (commit) or abandoning it
// (the batch must then come again, to some member).
type pollGroup struct {
	group string
	mu    sync.Mutex
	dels  []pollDelivery
	acked map[string]bool // batch ids acknowledged by a 2xx answer
	polls int
	moves int
	errs  int
	wg    sync.WaitGroup
	stopf context.CancelFunc
}

type pollDelivery struct {
	cursor string
	part   int32
	off    int64
	member string
	node   string
	batch  string
	at     time.Time
}

func (r *run) newPollGroup(ctx context.Context, members int) *pollGroup {
	g := &pollGroup{group: "gg" + fmt.Sprint(r.seed%100000), acked: map[string]bool{}}
	cctx, cancel := context.WithCancel(ctx)
	g.stopf = cancel
	gws := r.role("gateway")
	clients := make([]*msgmesh.Client, len(gws))
	for i, n := range gws {
		clients[i] = r.client(n.url())
	}
	for m := 0; m < members; m++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.member(cctx, r, fmt.Sprintf("m%d", m), m, gws, clients)
		}()
	}
	return g
}

func (g *pollGroup) stop() { g.stopf(); g.wg.Wait() }

func (g *pollGroup) member(ctx context.Context, r *run, name string, idx int, gws []*node, clients []*msgmesh.Client) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(idx)+7))
	cur := idx % len(gws)
	left := 3 + rng.IntN(6)
	outstanding := ""
	var outCursors []string
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		res, err := clients[cur].Poll(pctx, topic, msgmesh.PollOptions{Group: g.group, Consumer: name, Max: 100, Wait: time.Second, Ack: outstanding})
		cancel()
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		g.polls++
		g.mu.Unlock()
		if err != nil {
			g.mu.Lock()
			g.errs++
			g.mu.Unlock()
			r.hist.add("poll %s via %s: %v (batch %s left unacknowledged)", name, gws[cur].name, err, short(outstanding))
			outstanding, outCursors = "", nil
			cur = (cur + 1) % len(gws)
			left = 3 + rng.IntN(6)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		now := time.Now()
		g.mu.Lock()
		if outstanding != "" {
			g.acked[outstanding] = true
		}
		for _, m := range res.Messages {
			p, o, _ := msgmesh.ParseCursor(m.Cursor)
			g.dels = append(g.dels, pollDelivery{cursor: m.Cursor, part: p, off: o, member: name, node: gws[cur].name, batch: res.Batch, at: now})
		}
		g.mu.Unlock()
		outstanding = res.Batch
		outCursors = outCursors[:0]
		for _, m := range res.Messages {
			outCursors = append(outCursors, m.Cursor)
		}
		left--
		if left > 0 {
			continue
		}
		// Move to the next gateway.
		how := "abandoning"
		if outstanding != "" && rng.IntN(10) < 7 {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := clients[cur].Commit(cctx, topic, msgmesh.CommitOptions{Group: g.group, Consumer: name, Cursors: outCursors})
			cancel()
			if err == nil {
				g.mu.Lock()
				g.acked[outstanding] = true
				g.mu.Unlock()
				how = "committing"
			} else {
				how = "commit failed: " + err.Error() + ";"
			}
		}
		next := (cur + 1) % len(gws)
		r.hist.add("poll %s moves %s -> %s %s batch %s", name, gws[cur].name, gws[next].name, how, short(outstanding))
		g.mu.Lock()
		g.moves++
		g.mu.Unlock()
		cur, outstanding, outCursors = next, "", nil
		left = 3 + rng.IntN(6)
	}
}

func short(b string) string {
	if len(b) > 10 {
		return b[:10]
	}
	if b == "" {
		return "(none)"
	}
	return b
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (g *pollGroup) caughtUp(all map[string]ackInfo) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := make(map[string]bool, len(g.dels))
	for _, d := range g.dels {
		seen[d.cursor] = true
	}
	for c := range all {
		if !seen[c] {
			return false
		}
	}
	return true
}

// check: every acknowledged message reached some member; a message
// delivered again had been in a batch nobody acknowledged (a redelivery
// boundary); within a batch each partition's offsets increase.
func (g *pollGroup) check(r *run, all map[string]ackInfo) Row {
	g.mu.Lock()
	defer g.mu.Unlock()
	row := Row{Mode: "poll group (2 members moving across gateways)", Acked: len(all), Reconnects: g.moves}
	last := map[string]pollDelivery{}
	moved := 0
	inBatch := map[[2]string]int64{}
	for _, d := range g.dels {
		k := [2]string{d.batch, fmt.Sprint(d.part)}
		if o, ok := inBatch[k]; ok && d.off <= o {
			row.OrderViol++
			r.hist.add("ANOMALY poll: batch %s has %s after offset %d", short(d.batch), d.cursor, o)
		}
		inBatch[k] = d.off
		if prev, ok := last[d.cursor]; ok {
			row.Dups++
			switch {
			case !g.acked[prev.batch]:
				// A batch nobody acknowledged: delivered again.
			case prev.member != d.member || prev.node != d.node:
				// Acknowledged (204 or an ack), but by a Kafka member that
				// no longer owned the partition: /commit and ack skip such
				// cursors as documented, and the new owner delivers them
				// again from the committed offset (a rebalance boundary).
				moved++
			default:
				row.DupsOff++
				r.hist.add("ANOMALY poll: %s delivered again to %s via %s in batch %s, though the same member acknowledged batch %s",
					d.cursor, d.member, d.node, short(d.batch), short(prev.batch))
			}
		}
		last[d.cursor] = d
	}
	for c := range all {
		if _, ok := last[c]; ok {
			row.Received++
		} else {
			row.Lost++
		}
	}
	if row.Lost > 0 {
		var ex []string
		for c := range all {
			if _, ok := last[c]; !ok && len(ex) < 5 {
				ex = append(ex, c)
			}
		}
		r.hist.add("ANOMALY poll: %d acknowledged never delivered, e.g. %s", row.Lost, strings.Join(ex, " "))
	}
	row.Extra = fmt.Sprintf("%d polls, %d failed, %d batches acknowledged; %d duplicates after an acknowledgement by a member that had lost the partition (skipped as documented)", g.polls, g.errs, len(g.acked), moved)
	return row
}
