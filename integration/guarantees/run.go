package guarantees

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// Settings of the nodes the checker runs: short timeouts so that faults
// play out within seconds, a small replay window so a long stall really
// goes beyond it.
const (
	topic         = "g"
	partitions    = 3
	rooms         = 6
	replayWindow  = 200
	awayDuration  = 14 * time.Second // beyond the replay window at the producers' rate
	maxAttempts   = 4
	attemptTO     = time.Second
	pollSession   = 6 * time.Second
	pauseDuration = 8 * time.Second // beyond poll and webhook session timeouts (6 s)
)

// Mode is how long and hard one run is.
type Mode struct {
	Name     string
	Duration time.Duration // of traffic, per configuration
	Rate     int           // messages per second, all producers
	Faults   int           // per configuration
	Broker   bool          // also restart a broker the checker starts itself
}

// Short runs inside go test ./... (about two minutes for both configurations).
var Short = Mode{Name: "short", Duration: 35 * time.Second, Rate: 60, Faults: 7}

// Long is make guarantees: at least 100,000 acknowledged messages and 50
// faults over both configurations.
var Long = Mode{Name: "long", Duration: 9 * time.Minute, Rate: 110, Faults: 28, Broker: true}

// Medium is between (MSGMESH_GUARANTEES=medium).
var Medium = Mode{Name: "medium", Duration: 3 * time.Minute, Rate: 90, Faults: 14}

// layout is one configuration: which targets run in which processes.
type layout struct {
	name    string
	targets []string
}

var (
	allInOne = layout{"all-in-one x3", []string{"all", "all", "all"}}
	split    = layout{"split", []string{"controlplane", "gateway", "gateway", "realtime", "realtime", "dispatcher", "dispatcher"}}
)

// run is one configuration's run.
type run struct {
	t       testing.TB
	mode    Mode
	lay     layout
	seed    uint64
	rng     *rand.Rand
	hist    *history
	cluster *h.Cluster
	brokers []string
	nodes   []*node
	rooms   []string // spread evenly over the partitions
	proxy   *proxy
	wh      *whReceiver
	whID    string

	mu    sync.Mutex
	acked map[string]ackInfo // cursor -> what was published

	restartsOnce sync.Once
	restarts     []time.Time

	recvs []*streamRecv
	poll  *pollGroup
	slow  *streamRecv
	away  *streamRecv
}

type ackInfo struct {
	room string
	at   time.Time
}

func roomName(i int) string { return "r" + strconv.Itoa(i) }

// pickRooms publishes a probe in candidate rooms (never counted) until it
// has rooms/partitions rooms on each partition, so that the load (and the
// webhook's sequential work per partition) is spread evenly.
func (r *run) pickRooms() {
	gw := r.role("gateway")[0]
	per := map[int32]int{}
	for i := 0; len(r.rooms) < rooms && i < 200; i++ {
		name := roomName(i)
		resp := h.Do(r.t, gw.url(), "POST", "/v1/topics/"+topic+"/messages", r.cluster.AdminKey, map[string]any{"data": "probe", "room": name})
		if resp.Status != 200 {
			r.t.Fatalf("probe publish: %d %s", resp.Status, resp.Body)
		}
		p, _, err := msgmesh.ParseCursor(resp.JSON(r.t)["cursor"].(string))
		if err != nil {
			r.t.Fatal(err)
		}
		if per[p] < rooms/partitions {
			per[p]++
			r.rooms = append(r.rooms, name)
		}
	}
	if len(r.rooms) < rooms {
		r.t.Fatalf("could not find %d rooms spread over %d partitions: %v", rooms, partitions, r.rooms)
	}
	r.hist.add("rooms %v", r.rooms)
}

func (r *run) role(role string) []*node {
	var out []*node
	for _, n := range r.nodes {
		if n.serves(role) {
			out = append(out, n)
		}
	}
	return out
}

// liveAddrs are the addresses of the nodes serving role that are not
// paused (a new connection to a paused node would hang).
func (r *run) liveAddrs(role string) []string {
	var out []string
	for _, n := range r.role(role) {
		n.mu.Lock()
		if !n.paused {
			out = append(out, n.addr)
		}
		n.mu.Unlock()
	}
	return out
}

func (r *run) client(url string) *msgmesh.Client {
	c, err := msgmesh.New(msgmesh.Options{URL: url, APIKey: r.cluster.AdminKey,
		Reconnect: msgmesh.Backoff{Min: 50 * time.Millisecond, Max: time.Second}})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// setup starts the nodes of the layout on brokers, the topic, the webhook
// and its receiver.
func (r *run) setup() {
	t := r.t
	dir := t.TempDir()
	r.wh = newWHReceiver(t, r)
	ca := writeFile(t, dir, "ca.pem", r.wh.caPEM())
	for i, tg := range r.lay.targets {
		addr := h.FreeAddr(t)
		n := &node{name: fmt.Sprintf("n%d", i), target: tg, addr: addr, logPath: filepath.Join(dir, fmt.Sprintf("n%d.log", i))}
		n.env = append(r.cluster.EnvFor(addr),
			"MSGMESH_KAFKA_BROKERS="+strings.Join(r.brokers, ","),
			"MSGMESH_DATA_DIR="+filepath.Join(dir, n.name),
			"MSGMESH_POLL_SESSION_TIMEOUT="+pollSession.String(),
			"MSGMESH_POLL_CONSUMER_IDLE_TIMEOUT=5s",
			"MSGMESH_REALTIME_REPLAY_WINDOW_RECORDS="+strconv.Itoa(replayWindow),
			"MSGMESH_REALTIME_HEARTBEAT=1s",
			"MSGMESH_REALTIME_WRITE_TIMEOUT=3s",
			"MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS=true",
			"MSGMESH_WEBHOOKS_UNSAFE_CA_FILE="+ca,
			"MSGMESH_WEBHOOKS_MAX_ATTEMPTS="+strconv.Itoa(maxAttempts),
			"MSGMESH_WEBHOOKS_ATTEMPT_TIMEOUT="+attemptTO.String(),
			"MSGMESH_WEBHOOKS_BACKOFF_BASE=200ms",
			"MSGMESH_WEBHOOKS_BACKOFF_MAX=800ms",
			"MSGMESH_WEBHOOKS_SESSION_TIMEOUT=6s",
			"MSGMESH_LIMITS_FREE_REQUESTS_PER_SECOND=100000",
			"MSGMESH_LIMITS_FREE_MESSAGES_PER_SECOND=1000000",
			"MSGMESH_LIMITS_FREE_MONTHLY_MESSAGES=1000000000",
			"MSGMESH_LOG_LEVEL=info",
		)
		r.nodes = append(r.nodes, n)
	}
	bin := h.Binary(t)
	errs := make([]error, len(r.nodes))
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.startErr(bin) }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range r.nodes {
			n.kill()
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cp := r.role("controlplane")[0]
	h.CreateTopic(t, cp.url(), r.cluster.AdminKey, topic, partitions)
	r.whID = h.CreateWebhook(t, cp.url(), r.cluster.AdminKey, topic, r.wh.URL+"/hook", "").ID
	r.proxy = newProxy(t, func() []string { return r.liveAddrs("realtime") })
	// Every node must know the topic (its control log has caught up)
	// before traffic starts: a gateway takes a probe message (room
	// "probe", never counted), a realtime node opens a stream.
	for _, n := range r.nodes {
		var check func() bool
		switch {
		case n.serves("gateway"):
			check = func() bool {
				return h.Do(t, n.url(), "POST", "/v1/topics/"+topic+"/messages", r.cluster.AdminKey,
					map[string]any{"data": "probe", "room": "probe"}).Status == 200
			}
		case n.serves("realtime"):
			check = func() bool { return streamOpens(n.url(), r.cluster.AdminKey) }
		default:
			continue
		}
		if ok, _ := h.PollUntil(30*time.Second, 200*time.Millisecond, check); !ok {
			t.Fatalf("%s (%s) does not serve topic %s after 30s\n%s", n.name, n.target, topic, n.tail(30))
		}
	}
	r.pickRooms()
	r.hist.add("setup done: %s", r.describe())
}

func (r *run) describe() string {
	var b []string
	for _, n := range r.nodes {
		b = append(b, n.name+"="+n.target+"@"+n.addr)
	}
	return strings.Join(b, " ")
}

// produce publishes batches through the gateways in turn until ctx ends,
// recording every cursor a 200 answer acknowledged. A failed publish is
// not retried with the same messages: what it may have written is simply
// not acknowledged (receivers may see it; it is never counted as lost).
func (r *run) produce(ctx context.Context, id int, rate int) {
	gws := r.role("gateway")
	clients := make([]*msgmesh.Client, len(gws))
	for i, n := range gws {
		clients[i] = r.client(n.url())
	}
	rng := rand.New(rand.NewPCG(r.seed, uint64(id)+100))
	seq := map[string]int{}
	const batch = 10
	tick := time.NewTicker(time.Duration(float64(time.Second) * batch / float64(rate)))
	defer tick.Stop()
	k := id
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msgs := make([]msgmesh.OutgoingMessage, batch)
		for i := range msgs {
			room := r.rooms[rng.IntN(len(r.rooms))]
			seq[room]++
			msgs[i] = msgmesh.OutgoingMessage{Data: map[string]any{"p": id, "room": room, "seq": seq[room]}, Room: room}
		}
		k++
		c := clients[k%len(clients)]
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		curs, err := c.PublishBatch(pctx, topic, msgs)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.hist.add("producer %d: publish via %s failed: %v", id, gws[k%len(gws)].name, err)
			}
			continue
		}
		now := time.Now()
		r.mu.Lock()
		for i, cur := range curs {
			r.acked[cur] = ackInfo{room: msgs[i].Room, at: now}
		}
		r.mu.Unlock()
	}
}

// ackedIn returns the acknowledged cursors of room ("" = every room).
func (r *run) ackedIn(room string) map[string]ackInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]ackInfo{}
	for c, a := range r.acked {
		if room == "" || a.room == room {
			out[c] = a
		}
	}
	return out
}

// faultKinds are the faults, drawn from the seed; every run makes each
// at least once (when it has that many faults).
var faultKinds = []string{"kill9", "pause", "cut", "stall", "slow", "away", "webhook_down"}

// faults runs n faults, one every d/(n+1) plus the time each takes, each
// kind once first (in an order drawn from the seed), then drawn at random.
func (r *run) faults(ctx context.Context, n int, d time.Duration, brokerRestart func()) int {
	kinds := append([]string(nil), faultKinds...)
	if brokerRestart != nil {
		kinds = append(kinds, "broker")
	}
	first := append([]string(nil), kinds...)
	r.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	gap := d / time.Duration(n+1)
	done := 0
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			return done
		case <-time.After(gap):
		}
		kind := kinds[r.rng.IntN(len(kinds))]
		if i < len(first) {
			kind = first[i]
		}
		r.fault(ctx, kind, brokerRestart)
		done++
	}
	return done
}

func (r *run) fault(ctx context.Context, kind string, brokerRestart func()) {
	switch kind {
	case "kill9":
		n := r.nodes[r.rng.IntN(len(r.nodes))]
		r.hist.add("FAULT kill9 %s (%s)", n.name, n.target)
		n.kill()
		time.Sleep(time.Duration(500+r.rng.IntN(2500)) * time.Millisecond)
		n.start(r.t)
		r.hist.add("restarted %s", n.name)
	case "pause":
		n := r.nodes[r.rng.IntN(len(r.nodes))]
		r.hist.add("FAULT pause %s (%s) for %v", n.name, n.target, pauseDuration)
		n.signal(syscall.SIGSTOP)
		time.Sleep(pauseDuration)
		n.signal(syscall.SIGCONT)
		// A paused dispatcher's work after it resumes is part of the fault.
		r.hist.add("FAULT end of pause %s (%s): resumed", n.name, n.target)
	case "cut":
		r.hist.add("FAULT cut %d client connections", r.proxy.cut())
	case "stall":
		d := time.Duration(4000+r.rng.IntN(4000)) * time.Millisecond
		r.hist.add("FAULT stall client connections for %v", d)
		r.proxy.stall(ctx, d)
		r.hist.add("stall over")
	case "slow":
		d := time.Duration(3000+r.rng.IntN(4000)) * time.Millisecond
		r.hist.add("FAULT slow subscriber for %v", d)
		r.slow.setSlow(true)
		time.Sleep(d)
		r.slow.setSlow(false)
		r.hist.add("slow subscriber fast again")
	case "away":
		r.hist.add("FAULT %s goes away for %v", r.away.name, awayDuration)
		r.away.goAway(awayDuration)
	case "webhook_down":
		d := time.Duration(1500+r.rng.IntN(3000)) * time.Millisecond
		mode := []int{503, hang}[r.rng.IntN(2)]
		r.hist.add("FAULT webhook endpoint answers %d for %v", mode, d)
		r.wh.setDown(mode)
		time.Sleep(d)
		r.wh.setDown(0)
		r.hist.add("webhook endpoint healthy")
	case "broker":
		r.hist.add("FAULT broker restart")
		brokerRestart()
		r.hist.add("broker back")
	}
}

// Result is one configuration's outcome.
type Result struct {
	Layout string
	Seed   uint64
	Faults int
	Acked  int
	Rows   []Row
	Fail   []string
}

// Row is one line of the table.
type Row struct {
	Mode       string
	Acked      int
	Received   int
	Lost       int
	OrderViol  int
	Dups       int
	DupsOff    int // duplicates not at a reconnect/redelivery boundary
	Resyncs    int
	ResyncsBad int // not warranted
	Excused    int // acknowledged but inside a warranted resync's gap
	Reconnects int
	Mismatch   int // webhook: dead letters or attempt counts that do not match the answers
	Extra      string
}

func runLayout(t *testing.T, mode Mode, lay layout, seed uint64, brokers []string, brokerRestart func()) Result {
	r := &run{
		t: t, mode: mode, lay: lay, seed: seed, rng: rand.New(rand.NewPCG(seed, 1)),
		hist: newHistory(), brokers: brokers, acked: map[string]ackInfo{},
		// The cluster on the broker chosen by the caller (h.NewCluster
		// would pick one itself).
		cluster: &h.Cluster{Brokers: brokers, Kind: kafkatest.KindReal, Prefix: strings.ReplaceAll(kafkatest.Name("gt"), "-", ""),
			AdminKey: h.NewKey(), OperatorKey: "op_" + h.NewKey(), SecretsKey: h.NewSecretsKey()},
	}
	r.setup()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Receivers first: they start at the beginning of the (empty) topic.
	r.recvs = []*streamRecv{
		r.newSSE(ctx, "sse topic", ""),
		r.newSSE(ctx, "sse room "+r.rooms[1], r.rooms[1]),
		r.newWS(ctx, "ws topic", ""),
		r.newWS(ctx, "ws room "+r.rooms[2], r.rooms[2]),
	}
	r.slow = r.newWS(ctx, "ws slow", "")
	r.away = r.newWS(ctx, "ws away", "")
	r.recvs = append(r.recvs, r.slow, r.away)
	r.poll = r.newPollGroup(ctx, 2)
	for _, s := range r.recvs {
		s.waitLive(t)
	}
	pctx, pcancel := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	for p := 0; p < 2; p++ {
		pwg.Add(1)
		go func() { defer pwg.Done(); r.produce(pctx, p, mode.Rate/2) }()
	}
	began := time.Now()
	if mode.Name != Short.Name {
		go func() { // progress, for the long runs
			for {
				select {
				case <-pctx.Done():
					return
				case <-time.After(time.Minute):
					t.Logf("%s: %v: %d acknowledged", lay.name, time.Since(began).Round(time.Second), len(r.ackedIn("")))
				}
			}
		}()
	}
	nf := r.faults(ctx, mode.Faults, mode.Duration, brokerRestart)
	sleepCtx(ctx, time.Until(began.Add(mode.Duration)))
	pcancel()
	pwg.Wait()
	r.hist.add("producers stopped: %d acknowledged", len(r.ackedIn("")))
	for _, n := range r.nodes {
		n.signal(syscall.SIGCONT)
	}
	r.wh.setDown(0)
	r.slow.setSlow(false)

	// Quiescence: every receiver has everything it can get, webhooks are
	// settled, then the checks.
	all := r.ackedIn("")
	// Wait while the receivers make progress (a webhook backlog drains at
	// the dispatcher's pace), until 60 s pass without any or everything
	// is there; what is still missing then is lost.
	lastProgress, lastCount := time.Now(), -1
	for time.Since(lastProgress) < 60*time.Second {
		if r.complete(all) {
			break
		}
		if n := r.progress(); n != lastCount {
			lastProgress, lastCount = time.Now(), n
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.hist.add("quiescence: complete %v", r.complete(all))
	time.Sleep(3 * time.Second) // late duplicates and attempts
	cancel()
	r.poll.stop()
	for _, s := range r.recvs {
		s.stop()
	}
	res := Result{Layout: lay.name, Seed: seed, Faults: nf, Acked: len(all)}
	for _, s := range r.recvs {
		res.Rows = append(res.Rows, s.check(r))
	}
	res.Rows = append(res.Rows, r.poll.check(r, all))
	res.Rows = append(res.Rows, r.wh.check(r, all))
	for _, row := range res.Rows {
		if row.Lost > 0 || row.OrderViol > 0 || row.DupsOff > 0 || row.ResyncsBad > 0 || row.Mismatch > 0 {
			res.Fail = append(res.Fail, fmt.Sprintf("%s: lost %d, order violations %d, duplicates off a boundary %d, unwarranted resyncs %d, webhook mismatches %d (%s)",
				row.Mode, row.Lost, row.OrderViol, row.DupsOff, row.ResyncsBad, row.Mismatch, row.Extra))
		}
	}
	if len(res.Fail) > 0 {
		t.Logf("history of %s (seed %d):\n%s", lay.name, seed, r.hist.report())
		for _, n := range r.nodes {
			t.Logf("%s (%s) last log lines:\n%s", n.name, n.target, n.tail(30))
		}
	}
	return res
}

// progress counts what every receiver got so far.
func (r *run) progress() int {
	n := 0
	for _, s := range r.recvs {
		s.mu.Lock()
		n += len(s.dels)
		s.mu.Unlock()
	}
	r.poll.mu.Lock()
	n += len(r.poll.dels)
	r.poll.mu.Unlock()
	r.wh.mu.Lock()
	for _, as := range r.wh.got {
		n += len(as)
	}
	r.wh.mu.Unlock()
	return n
}

// complete reports whether every receiver has every acknowledged message
// in its scope it may still get and the webhook is settled.
func (r *run) complete(all map[string]ackInfo) bool {
	for _, s := range r.recvs {
		if !s.caughtUp(r) {
			return false
		}
	}
	return r.poll.caughtUp(all) && r.wh.settled(all)
}

// Table formats results as the Markdown table docs/guarantees.md keeps.
func Table(mode Mode, results []Result) string {
	var b strings.Builder
	for _, res := range results {
		fmt.Fprintf(&b, "\n%s mode, %s, seed %d: %d acknowledged messages, %d faults\n\n", mode.Name, res.Layout, res.Seed, res.Acked, res.Faults)
		b.WriteString("| mode | acknowledged | received | lost | order violations | duplicates (off boundary) | resyncs (unwarranted) | excused by resync | reconnects | notes |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, w := range res.Rows {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d (%d) | %d (%d) | %d | %d | %s |\n",
				w.Mode, w.Acked, w.Received, w.Lost, w.OrderViol, w.Dups, w.DupsOff, w.Resyncs, w.ResyncsBad, w.Excused, w.Reconnects, w.Extra)
		}
	}
	return b.String()
}

// ModeFromEnv picks the mode from MSGMESH_GUARANTEES (short by default).
func ModeFromEnv() (Mode, error) {
	switch v := os.Getenv("MSGMESH_GUARANTEES"); v {
	case "", "short":
		return Short, nil
	case "medium":
		return Medium, nil
	case "long":
		return Long, nil
	default:
		return Mode{}, fmt.Errorf("MSGMESH_GUARANTEES=%q: want short, medium or long", v)
	}
}

// streamOpens reports whether an SSE stream of the topic opens on base.
func streamOpens(base, key string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/topics/"+topic+"/events", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}
