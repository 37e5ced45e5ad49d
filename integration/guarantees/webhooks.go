package guarantees

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// hang is an answer that holds the request past the attempt timeout.
const hang = -1

// whReceiver is the local HTTPS endpoint of the webhook. Each message has
// a plan drawn from the seed (most answer 200 at once; some 503 or time
// out first; some get a permanent 404 at the first or second attempt;
// some 503 every time); on top, the endpoint goes down (503 or timeouts
// for every request) while the fault schedule says so.
type whReceiver struct {
	*httptest.Server
	r    *run
	mu   sync.Mutex
	got  map[string][]attempt // by cursor
	ids  map[string]string    // cursor -> webhook-id
	down int
	last time.Time
}

type attempt struct {
	at     time.Time
	answer int // status, or hang
	id     string
}

func newWHReceiver(t testing.TB, r *run) *whReceiver {
	w := &whReceiver{r: r, got: map[string][]attempt{}, ids: map[string]string{}}
	w.Server = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.Close)
	return w
}

func (w *whReceiver) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.Certificate().Raw}))
}

func (w *whReceiver) setDown(v int) {
	w.mu.Lock()
	w.down = v
	w.mu.Unlock()
}

// plan is the answer to attempt n (1-based) of cursor when the endpoint
// is up.
func (w *whReceiver) plan(cursor string, n int) int {
	f := fnv.New64a()
	fmt.Fprintf(f, "%d/%s", w.r.seed, cursor)
	switch v := f.Sum64() % 100; {
	case v < 3:
		return 404
	case v < 6:
		if n == 1 {
			return 503
		}
		return 404
	case v < 9:
		return 503
	case v < 13:
		if n == 1 {
			return hang
		}
		return 200
	case v < 22:
		if n == 1 {
			return 503
		}
		return 200
	}
	return 200
}

func (w *whReceiver) serve(rw http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var m struct {
		Cursor string `json:"cursor"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Cursor == "" {
		rw.WriteHeader(400)
		return
	}
	w.mu.Lock()
	n := len(w.got[m.Cursor]) + 1
	ans := w.down
	if ans == 0 {
		ans = w.plan(m.Cursor, n)
	}
	id := req.Header.Get("webhook-id")
	w.got[m.Cursor] = append(w.got[m.Cursor], attempt{at: time.Now(), answer: ans, id: id})
	w.last = time.Now()
	w.mu.Unlock()
	if ans == hang {
		select {
		case <-req.Context().Done():
		case <-time.After(attemptTO + time.Second):
		}
		// No answer at all, whatever the dispatcher's clock says: returning
		// from the handler would send an implicit 200, which a dispatcher
		// that was paused (SIGSTOP) past its attempt timeout may still read
		// as its answer (the response and its deadline are both ready when
		// it resumes, and Go's HTTP client can return either). It then
		// rightly counts the message delivered, while this receiver
		// recorded a timeout and waited for a retry that never came: the
		// "lost after a first timeout" of the earlier runs.
		panic(http.ErrAbortHandler) // closes the connection without a response
	}
	rw.WriteHeader(ans)
}

func permanent(a int) bool {
	switch a {
	case 400, 404, 405, 410, 413, 414, 415, 422, 501:
		return true
	}
	return false
}

// settled: every acknowledged message got a 200, a permanent answer or
// max_attempts temporary ones, and nothing arrived for 2 s.
func (w *whReceiver) settled(all map[string]ackInfo) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.last) < 2*time.Second {
		return false
	}
	for c := range all {
		if !final(w.got[c]) {
			return false
		}
	}
	return true
}

func final(as []attempt) bool {
	for _, a := range as {
		if a.answer == 200 || permanent(a.answer) {
			return true
		}
	}
	return len(as) >= maxAttempts
}

// dispatcherFault reports whether, between from and to, a node running
// the dispatcher was killed or paused, or one of its webhook consumers
// failed and restarted from the committed offsets (it logs "webhooks:
// consumer failed"): the redelivery boundaries, where an attempt whose
// outcome was not yet durable is made again.
func (r *run) dispatcherFault(from, to time.Time) bool {
	return r.dispatcherFaults(from, to) > 0
}

// dispatcherFaults counts the kills, restarts and pauses of dispatching
// nodes and the dispatchers' consumer restarts from 2 s before from until
// to. A kill -9 and the restart after it count apart: the killed process
// can take a counted POST with it, and the restarted one's joining the
// webhook's group rebalances it, which can stop the new owner's round
// after it counted a retried message's POST (unstart gives back only a
// first POST's count).
func (r *run) dispatcherFaults(from, to time.Time) int {
	var names, restarts []string
	for _, n := range r.nodes {
		if n.target == "all" || n.target == "dispatcher" {
			names = append(names, "kill9 "+n.name+" ", "pause "+n.name+" ")
			restarts = append(restarts, "restarted "+n.name)
		}
	}
	c := r.hist.countFaults(from.Add(-2*time.Second), to, names...)
	c += r.hist.countEvents(from.Add(-2*time.Second), to, restarts...)
	for _, at := range r.consumerRestarts() {
		if !at.Before(from.Add(-2*time.Second)) && !at.After(to) {
			c++
		}
	}
	return c
}

// consumerRestarts are the times the dispatchers logged a webhook
// consumer failure (read once from the process logs).
func (r *run) consumerRestarts() []time.Time {
	r.restartsOnce.Do(func() {
		for _, n := range r.nodes {
			if n.target != "all" && n.target != "dispatcher" {
				continue
			}
			b, _ := os.ReadFile(n.logPath)
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.Contains(line, "webhooks: consumer failed") || !strings.HasPrefix(line, "time=") {
					continue
				}
				ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
				if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
					r.restarts = append(r.restarts, at)
					r.hist.add("(log of %s at %s) %s", n.name, at.Format("15:04:05.000"), line)
				}
			}
		}
	})
	return r.restarts
}

// check compares each message's attempts with the spec: a 200 ends the
// sequence; a permanent answer ends it with one dead letter; temporary
// answers are retried up to max_attempts in all, then one dead letter;
// an attempt beyond those (an attempt after a final answer, or one more
// than max_attempts) only at a dispatcher crash; every dead letter
// matches such an end exactly (last status, number of attempts).
func (w *whReceiver) check(r *run, all map[string]ackInfo) Row {
	dls := map[string]h.DeadLetter{}
	cp := r.role("controlplane")[0]
	for {
		page := h.InspectDeadLetters(r.t, cp.url(), r.cluster.AdminKey, r.whID)
		if len(page) == 0 {
			break
		}
		for _, d := range page {
			if _, dup := dls[d.OriginalCursor]; dup {
				dls[d.OriginalCursor+"#dup"] = d
			}
			dls[d.OriginalCursor] = d
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	row := Row{Mode: "webhook (flapping 200/503/timeout/404)", Acked: len(all)}
	var posts, over, perm, exhausted, mismatch, idChanged, crashCounted int
	for c := range all {
		as := w.got[c]
		posts += len(as)
		end := -1 // index of the final answer
		for i, a := range as {
			if i > 0 && a.id != as[0].id {
				idChanged++
			}
			if end < 0 && (a.answer == 200 || permanent(a.answer)) {
				end = i
			}
		}
		dl, hasDL := dls[c]
		if _, two := dls[c+"#dup"]; two {
			mismatch++
			r.hist.add("ANOMALY webhook: %s dead-lettered twice", c)
		}
		limit := maxAttempts
		if end >= 0 {
			limit = end + 1
		}
		if len(as) > limit {
			extra := len(as) - limit
			// The attempt whose outcome was lost may be any of them.
			boundary := r.dispatcherFault(as[0].at, as[len(as)-1].at)
			if end >= 0 && as[end].answer == 200 {
				row.Dups += extra
			}
			over += extra
			if !boundary {
				row.DupsOff += extra
				r.hist.add("ANOMALY webhook: %s got %d attempts (answers %v at %s) with no dispatcher fault or consumer restart in between", c, len(as), answers(as), times(r, as))
			}
		}
		switch {
		case end >= 0 && as[end].answer == 200:
			row.Received++
			if hasDL {
				mismatch++
				r.hist.add("ANOMALY webhook: %s delivered (200) and dead-lettered (%d, %d attempts)", c, dl.LastStatus, dl.Attempts)
			}
		case end >= 0: // permanent
			perm++
			if !hasDL {
				row.Lost++
				r.hist.add("ANOMALY webhook: %s answered %d but has no dead letter", c, as[end].answer)
			} else {
				row.Received++
				if dl.LastStatus != as[end].answer || dl.Attempts != len(as) {
					// The documented crash bound (README, webhooks): attempts
					// are counted before their POSTs (a round's first attempts
					// in one write), so each kill or pause of a dispatcher, or
					// consumer restart, between the message's publish and its
					// last attempt can leave one counted POST that never went
					// out. Never fewer than the endpoint saw, never more than
					// one per such fault.
					if over := dl.Attempts - len(as); dl.LastStatus == as[end].answer && over > 0 &&
						over <= r.dispatcherFaults(all[c].at, as[len(as)-1].at) {
						crashCounted++
						break
					}
					mismatch++
					r.hist.add("ANOMALY webhook: %s (acknowledged at %.3fs) dead letter says %d after %d attempts; the endpoint saw %v at %s; %d dispatcher faults in between",
						c, all[c].at.Sub(r.hist.start).Seconds(), dl.LastStatus, dl.Attempts, answers(as), times(r, as), r.dispatcherFaults(all[c].at, as[len(as)-1].at))
				}
			}
		case len(as) >= maxAttempts:
			exhausted++
			if !hasDL {
				row.Lost++
				r.hist.add("ANOMALY webhook: %s failed %d times (%v) but has no dead letter", c, len(as), answers(as))
			} else {
				row.Received++
				if dl.Attempts < maxAttempts {
					mismatch++
					r.hist.add("ANOMALY webhook: %s dead letter says %d attempts; the endpoint saw %v", c, dl.Attempts, answers(as))
				}
			}
		default:
			row.Lost++
			r.hist.add("ANOMALY webhook: %s (acknowledged at %.3fs) never delivered nor dead-lettered (answers %v at %s)", c, all[c].at.Sub(r.hist.start).Seconds(), answers(as), times(r, as))
		}
	}
	for c := range dls {
		if _, ok := all[strings.TrimSuffix(c, "#dup")]; !ok {
			// A dead letter of a message whose publish was not
			// acknowledged is fine; one of a cursor never attempted is not.
			if len(w.got[c]) == 0 {
				mismatch++
				r.hist.add("ANOMALY webhook: dead letter for %s, which the endpoint never saw", c)
			}
		}
	}
	row.Mismatch = mismatch
	row.DupsOff += idChanged
	row.Extra = fmt.Sprintf("%d POSTs; dead letters %d (permanent %d, %d×temporary %d); attempts beyond the spec's count %d (at a dispatcher crash or consumer restart unless counted off boundary); dead letters counting a POST lost to a dispatcher fault %d (at most one per fault); dead letters not matching the answers %d; webhook-id changed %d",
		posts, len(dls), perm, maxAttempts, exhausted, over, crashCounted, mismatch, idChanged)
	return row
}

func answers(as []attempt) string {
	var s []string
	for _, a := range as {
		if a.answer == hang {
			s = append(s, "timeout")
		} else {
			s = append(s, fmt.Sprint(a.answer))
		}
	}
	return strings.Join(s, ",")
}

func times(r *run, as []attempt) string {
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("%.3fs", a.at.Sub(r.hist.start).Seconds()))
	}
	return strings.Join(s, ",")
}
