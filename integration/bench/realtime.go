package main

// The realtime benchmark: fan-out of one topic to many SSE and WebSocket
// subscribers at a steady publish rate, on a fresh msgmesh subprocess and,
// in the same run on the same machine, on Centrifugo v6 (built by
// scripts/centrifugo.sh). Per scenario: delivered msgs/s, publish-to-receive
// latency (the publish time travels in the payload), the server's CPU; per
// server: memory per idle SSE connection (VmRSS before/after opening N idle
// streams, divided by N).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rtOptions are the realtime scenario's flags.
type rtOptions struct {
	sse        string // subscriber counts, comma-separated
	ws         string
	idle       int
	rate       int
	dur        time.Duration
	payload    int
	dialConc   int
	centrifugo string
	partitions int
	rounds     int
	// oneCore (main's -one-core, not a flag of its own): after the rows
	// above, each fan-out once more on a fresh msgmesh and Centrifugo
	// both limited to one core (rtReport.OneCore).
	oneCore bool
}

// registerRealtimeFlags adds the realtime flags to the default flag set.
func registerRealtimeFlags(o *rtOptions) {
	flag.StringVar(&o.sse, "realtime-sse", "1000,5000", "realtime: SSE subscriber counts, one fan-out scenario each")
	flag.StringVar(&o.ws, "realtime-ws", "1000", "realtime: WebSocket subscriber counts, one fan-out scenario each")
	flag.IntVar(&o.idle, "realtime-idle", 5000, "realtime: idle SSE connections opened to measure memory per connection (0: skip)")
	flag.IntVar(&o.rate, "realtime-rate", 20, "realtime: messages published per second during each fan-out")
	flag.DurationVar(&o.dur, "realtime-duration", 10*time.Second, "realtime: publishing time of each fan-out")
	flag.IntVar(&o.payload, "realtime-payload", 128, "realtime: approximate bytes of each message's JSON value")
	flag.IntVar(&o.dialConc, "realtime-dial-concurrency", 64, "realtime: connections opened at once")
	flag.StringVar(&o.centrifugo, "centrifugo", "", "realtime: Centrifugo v6 binary to compare with (scripts/centrifugo.sh builds it); empty: msgmesh only")
	flag.IntVar(&o.partitions, "realtime-partitions", 3, "realtime: partitions of the fan-out topic")
	flag.IntVar(&o.rounds, "realtime-rounds", 1, "realtime: runs of each fan-out on each server, in turn (ABBA), each pair compared")
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 50000 {
			return nil, fmt.Errorf("subscriber count %q: want 1..50000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// rtTarget is a realtime server under test.
type rtTarget interface {
	name() string
	pid() int
	// sse returns the address and raw HTTP/1.1 request of one SSE stream.
	sse() (addr, request string)
	// ws returns the WebSocket URL, its handshake headers' Authorization
	// (or ""), and the first frame to send.
	ws() (url, bearer string, hello []byte)
	// publish publishes one message with the JSON value v.
	publish(ctx context.Context, v []byte) error
	// pinned says whether the process runs under taskset (-one-core).
	pinned() bool
	stop()
}

// rtResult is one fan-out scenario on one target.
type rtResult struct {
	Target    string
	Transport string
	Subs      int
	Connected int
	Published int64
	PubErrors int64
	Delivered int64
	Expected  int64
	Elapsed   time.Duration // first publish to last delivery
	Lat       *hist
	CPU       float64 // server CPU seconds during the window
	Dropped   int64   // subscriber connections that ended during the window
	Note      string
	Round     int // 0-based (-realtime-rounds)
}

// perCPU is deliveries (events written to subscribers and received) per
// server CPU-second; false when no CPU was measured.
func (r rtResult) perCPU() (float64, bool) {
	if r.CPU <= 0 {
		return 0, false
	}
	return float64(r.Delivered) / r.CPU, true
}

func (r rtResult) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Delivered) / r.Elapsed.Seconds()
}

// rtMem is the memory of idle SSE connections on one target.
type rtMem struct {
	Target        string
	Conns         int
	Before, After int64 // VmRSS bytes
	PerConn       float64
	// Next is VmRSS after as many idle connections again on top of the
	// first; NextPerConn is that second step per connection (0: not
	// measured). The first step starts from a fresh process's baseline,
	// which moves with its startup heap; the second does not.
	Next              int64
	NextConns         int
	NextPerConn       float64
	ConnectedIn       time.Duration
	Failed            int
	HeapNote, Skipped string
}

// rtReport is everything the realtime scenario measured.
type rtReport struct {
	Opts    rtOptions
	Results []rtResult
	Mem     []rtMem
	Notes   []string
	// OneCore are the -one-core rows: each fan-out once (round 1) on a
	// fresh msgmesh and Centrifugo with GOMAXPROCS=1, pinned to the same
	// CPU when OneCorePinned (taskset found for both).
	OneCore       []rtResult
	OneCorePinned bool
}

// runRealtime runs the realtime scenarios on a fresh msgmesh (and on
// Centrifugo when o.centrifugo is set).
func runRealtime(o rtOptions, msgmeshBin, brokers string) (*rtReport, error) {
	sseCounts, err := parseCounts(o.sse)
	if err != nil {
		return nil, err
	}
	wsCounts, err := parseCounts(o.ws)
	if err != nil {
		return nil, err
	}
	if o.rate < 1 || o.rate > 10000 || o.dur <= 0 || o.dur > 5*time.Minute || o.dialConc < 1 || o.payload < 16 || o.rounds < 1 || o.rounds > 20 {
		return nil, errors.New("realtime flags: rate 1..10000, duration up to 5m, dial concurrency >= 1, payload >= 16, rounds 1..20")
	}
	rep := &rtReport{Opts: o}
	if err := realtimeSet(rep, o, sseCounts, wsCounts, msgmeshBin, brokers, false); err != nil {
		return nil, err
	}
	if o.oneCore {
		logf("realtime again on one core: msgmesh and Centrifugo each with GOMAXPROCS=1, taskset -c %s where available", oneCoreCPU)
		one := o
		one.idle, one.rounds = 0, 1 // bounded: no memory rows, one round
		if err := realtimeSet(rep, one, sseCounts, wsCounts, msgmeshBin, brokers, true); err != nil {
			return nil, fmt.Errorf("one core: %w", err)
		}
	}
	return rep, nil
}

// realtimeSet starts the servers (on one core with oneCore), runs every
// fan-out on each and stops them; the rows go to rep.Results, or with
// oneCore to rep.OneCore.
func realtimeSet(rep *rtReport, o rtOptions, sseCounts, wsCounts []int, msgmeshBin, brokers string, oneCore bool) error {
	label := ""
	if oneCore {
		label = " [1 core]"
	}
	need := 2*o.idle + 16 // measureIdle's two steps
	for _, n := range append(append([]int{}, sseCounts...), wsCounts...) {
		need = max(need, n+16)
	}
	// Both servers run for the whole scenario, but only one is loaded at
	// a time: each fan-out runs on one right after the other (in turn
	// first, ABBA over rounds), so that a shared machine's load is about
	// the same for the two figures a ratio compares.
	var targets []rtTarget
	defer func() {
		for _, tg := range targets {
			tg.stop()
		}
	}()
	m, err := startMsgmeshRT(msgmeshBin, brokers, o.partitions, need, oneCore)
	if err != nil {
		return err
	}
	targets = append(targets, m)
	if o.centrifugo != "" {
		c, err := startCentrifugo(o.centrifugo, oneCore)
		if err != nil {
			return err
		}
		targets = append(targets, c)
	} else if !oneCore {
		rep.Notes = append(rep.Notes, "Centrifugo not run (no -centrifugo binary): no comparison.")
	}
	if oneCore {
		rep.OneCorePinned = true
		for _, tg := range targets {
			rep.OneCorePinned = rep.OneCorePinned && tg.pinned()
		}
		if !rep.OneCorePinned {
			logf("realtime [1 core]: taskset not found: only GOMAXPROCS=1")
		}
	}
	// An anchor stream per server keeps its topic's reader (msgmesh's hub)
	// running, so that what it costs is not counted as per-connection
	// memory.
	for _, tg := range targets {
		if oneCore {
			logf("realtime%s: %s (pid %d, CPUs %s)", label, tg.name(), tg.pid(), cpusAllowed(tg.pid()))
		} else {
			logf("realtime: %s (pid %d)", tg.name(), tg.pid())
		}
		anchor := newFleet("sse", 1)
		defer anchor.close()
		if err := anchor.open(tg, 1); err != nil {
			return fmt.Errorf("%s: anchor stream: %w", tg.name(), err)
		}
	}
	if o.idle > 0 {
		for _, tg := range targets {
			m, err := measureIdle(tg, o)
			if err != nil {
				return fmt.Errorf("%s: %w", tg.name(), err)
			}
			logf("  %s idle SSE: %d connections in %v, VmRSS %.1f → %.1f MiB: %.1f KiB per connection (%d failed); %d more: → %.1f MiB, %.1f KiB per further connection",
				tg.name(), m.Conns, m.ConnectedIn.Round(time.Millisecond), float64(m.Before)/(1<<20), float64(m.After)/(1<<20), m.PerConn/1024, m.Failed,
				m.NextConns, float64(m.Next)/(1<<20), m.NextPerConn/1024)
			rep.Mem = append(rep.Mem, m)
		}
	}
	run := func(tg rtTarget, transport string, n, round int) error {
		r, err := fanout(tg, o, transport, n)
		if err != nil {
			return fmt.Errorf("%s: %w", tg.name(), err)
		}
		r.Round = round
		logf("  %-10s %-4s x %5d (round %d): %8.0f delivered msgs/s (%d/%d, %.2f %%), p50 %v p99 %v, server CPU %.1f s, %d dropped%s%s",
			tg.name(), transport, n, round+1, r.rate(), r.Delivered, r.Expected, 100*float64(r.Delivered)/float64(max(r.Expected, 1)),
			r.Lat.quantile(0.5), r.Lat.quantile(0.99), r.CPU, r.Dropped, map[bool]string{true: " (" + r.Note + ")", false: ""}[r.Note != ""], label)
		if oneCore {
			rep.OneCore = append(rep.OneCore, r)
		} else {
			rep.Results = append(rep.Results, r)
		}
		return nil
	}
	type scenario struct {
		transport string
		n         int
	}
	var scenarios []scenario
	for _, n := range sseCounts {
		scenarios = append(scenarios, scenario{"sse", n})
	}
	for _, n := range wsCounts {
		scenarios = append(scenarios, scenario{"ws", n})
	}
	for _, sc := range scenarios {
		for round := range o.rounds {
			order := targets
			if round%2 == 1 {
				order = slices.Clone(targets)
				slices.Reverse(order)
			}
			for _, tg := range order {
				if err := run(tg, sc.transport, sc.n, round); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// measureIdle opens o.idle SSE streams that receive nothing and reads the
// server's VmRSS before and after.
func measureIdle(tg rtTarget, o rtOptions) (rtMem, error) {
	m := rtMem{Target: tg.name(), Conns: o.idle}
	time.Sleep(time.Second)
	m.Before = vmRSS(tg.pid())
	f := newFleet("sse", o.idle)
	defer func() {
		f.close()
		time.Sleep(time.Second) // let the server notice before the next scenario
	}()
	t0 := time.Now()
	err := f.open(tg, o.dialConc)
	m.ConnectedIn = time.Since(t0)
	m.Failed = o.idle - f.connected()
	if err != nil && f.connected() < o.idle*9/10 {
		return m, fmt.Errorf("idle SSE connections: %w", err)
	}
	time.Sleep(2 * time.Second) // settle: handlers started, buffers allocated
	m.After = vmRSS(tg.pid())
	if c := f.connected(); c > 0 {
		m.Conns = c
		m.PerConn = float64(m.After-m.Before) / float64(c)
	}
	// The same number again, on top: the cost of further connections,
	// apart from where the fresh process's RSS started.
	f2 := newFleet("sse", o.idle)
	defer f2.close()
	if err := f2.open(tg, o.dialConc); err != nil && f2.connected() < o.idle*9/10 {
		logf("  %s: second %d idle SSE connections: %v (only the first step is reported)", tg.name(), o.idle, err)
		return m, nil
	}
	time.Sleep(2 * time.Second)
	m.Next = vmRSS(tg.pid())
	if c := f2.connected(); c > 0 {
		m.NextConns = c
		m.NextPerConn = float64(m.Next-m.After) / float64(c)
	}
	return m, nil
}

// fanout opens n subscribers, checks every one receives, then publishes at
// o.rate for o.dur and counts what arrives.
func fanout(tg rtTarget, o rtOptions, transport string, n int) (rtResult, error) {
	r := rtResult{Target: tg.name(), Transport: transport, Subs: n, Lat: &hist{}}
	// Both servers are up: a kept-alive publish connection to the one
	// that sat idle through the other's fan-out may be closed by now (a
	// POST is not retried: "EOF").
	rtHTTP.CloseIdleConnections()
	f := newFleet(transport, n)
	f.lat = r.Lat
	defer func() {
		f.close()
		time.Sleep(time.Second)
	}()
	if err := f.open(tg, o.dialConc); err != nil && f.connected() < n*9/10 {
		return r, fmt.Errorf("%s subscribers: %w", transport, err)
	}
	r.Connected = f.connected()
	pad := strings.Repeat("x", max(o.payload-60, 1))
	value := func(warm bool, seq int) []byte {
		w := ""
		if warm {
			w = `"warm":1,`
		}
		return fmt.Appendf(nil, `{%s"seq":%d,"ts":%d,"pad":"%s"}`, w, seq, time.Now().UnixNano(), pad)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.dur+2*time.Minute)
	defer cancel()
	// Warm-up: publish until every connected subscriber received one
	// (they are all live), 30 s at most.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if err := tg.publish(ctx, value(true, i)); err != nil {
			return r, fmt.Errorf("warm-up publish: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
		if f.allWarm() {
			break
		}
		if time.Now().After(deadline) {
			r.Note = fmt.Sprintf("only %d of %d subscribers received the warm-up within 30s", f.warmCount(), r.Connected)
			break
		}
	}
	time.Sleep(500 * time.Millisecond) // the last warm-up messages drain
	drops0 := f.drops.Load()
	cpu0 := procCPUSeconds(tg.pid())
	// Measured: o.rate messages/s for o.dur, each publish in its own
	// goroutine so that a slow one does not shift the schedule.
	total := int(o.dur.Seconds() * float64(o.rate))
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	var wg sync.WaitGroup
	var pubOK, pubErr atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	f.lastAt.Store(start.UnixNano())
	for i := range total {
		<-tick.C
		wg.Add(1)
		go func(v []byte) {
			defer wg.Done()
			if err := tg.publish(ctx, v); err != nil {
				pubErr.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			pubOK.Add(1)
		}(value(false, i))
	}
	tick.Stop()
	wg.Wait()
	r.Published, r.PubErrors = pubOK.Load(), pubErr.Load()
	r.Expected = r.Published * int64(r.Connected)
	// Drain: until everything arrived, nothing arrived for 3 s, or 30 s.
	drainEnd := time.Now().Add(30 * time.Second)
	last, lastChange := f.delivered.Load(), time.Now()
	for f.delivered.Load() < r.Expected && time.Now().Before(drainEnd) {
		time.Sleep(50 * time.Millisecond)
		if d := f.delivered.Load(); d != last {
			last, lastChange = d, time.Now()
		} else if time.Since(lastChange) > 3*time.Second {
			break
		}
	}
	r.CPU = procCPUSeconds(tg.pid()) - cpu0
	r.Delivered = f.delivered.Load()
	r.Elapsed = time.Duration(f.lastAt.Load() - start.UnixNano())
	r.Dropped = f.drops.Load() - drops0
	if v := firstErr.Load(); v != nil {
		r.Note = joinNote(r.Note, "first publish error: "+v.(string))
	}
	if v := f.firstErr.Load(); v != nil && r.Dropped > 0 {
		r.Note = joinNote(r.Note, "first subscriber error: "+v.(string))
	}
	return r, nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// vmRSS is pid's resident set size in bytes (0 if unreadable).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// countPayloads finds the benchmark messages in b (an SSE data line or a
// WebSocket frame, which may carry several): for each, a warm-up mark or
// its publish time.
func countPayloads(b []byte, warm func(), measured func(ts int64)) {
	for {
		i := bytes.Index(b, []byte(`"ts":`))
		if i < 0 {
			return
		}
		j := i + 5
		var ts int64
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			ts = ts*10 + int64(b[j]-'0')
			j++
		}
		// "warm":1 comes right before "seq" in the same value.
		k := max(i-40, 0)
		if bytes.Contains(b[k:i], []byte(`"warm":1`)) {
			warm()
		} else {
			measured(ts)
		}
		b = b[j:]
	}
}

func reportRealtime(w io.Writer, rep *rtReport) {
	if rep == nil {
		return
	}
	o := rep.Opts
	_, _ = fmt.Fprintf(w, "\n### Realtime fan-out (SSE and WebSocket)\n\n")
	_, _ = fmt.Fprintf(w, "- One topic (%d partitions for msgmesh; one channel for Centrifugo), %d msgs/s published for %v over HTTP (msgmesh `POST /v1/topics/{t}/messages`, Centrifugo `POST /api/publish`), ~%d-byte JSON values carrying their publish time; subscribers are raw HTTP/1.1 SSE readers (msgmesh `GET /v1/topics/{t}/events?token=`, Centrifugo `uni_sse`) or gorilla/websocket clients (msgmesh `/v1/ws` subscribe frame, Centrifugo `/connection/websocket` JSON protocol), all in this process.\n",
		o.partitions, o.rate, o.dur, o.payload)
	_, _ = fmt.Fprintf(w, "- Delivered msgs/s = messages received by all subscribers / (first publish → last delivery). Latency: publish call start → line received by the subscriber. Every subscriber first receives a warm-up message, so all are live before the clock starts.\n\n")
	_, _ = fmt.Fprintln(w, "| Server | Transport | Subscribers | Round | Published | Delivered | Complete | Delivered msgs/s | p50 | p99 | Server CPU s | CPU µs per delivery | Dropped |")
	_, _ = fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	for _, r := range rep.Results {
		_, _ = fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %.2f %% | %.0f | %s | %s | %.1f | %.1f | %d |\n",
			r.Target, strings.ToUpper(r.Transport), r.Connected, r.Round+1, r.Published, r.Delivered, 100*float64(r.Delivered)/float64(max(r.Expected, 1)),
			r.rate(), ms(r.Lat.quantile(0.5)), ms(r.Lat.quantile(0.99)), r.CPU, 1e6*r.CPU/float64(max(r.Delivered, 1)), r.Dropped)
	}
	if len(rep.Mem) > 0 {
		_, _ = fmt.Fprintln(w)
		_, _ = fmt.Fprintln(w, "| Server | Idle SSE connections | VmRSS before | VmRSS after | Per connection | Connected in | The same number again: VmRSS after | Per further connection |")
		_, _ = fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
		for _, m := range rep.Mem {
			next, per := "—", "—"
			if m.NextConns > 0 {
				next, per = fmt.Sprintf("%.1f MiB", float64(m.Next)/(1<<20)), fmt.Sprintf("%.1f KiB", m.NextPerConn/1024)
			}
			_, _ = fmt.Fprintf(w, "| %s | %d | %.1f MiB | %.1f MiB | %.1f KiB | %.1f s | %s | %s |\n", m.Target, m.Conns,
				float64(m.Before)/(1<<20), float64(m.After)/(1<<20), m.PerConn/1024, m.ConnectedIn.Seconds(), next, per)
		}
	}
	// Ratios msgmesh / Centrifugo at equal subscribers.
	type key struct {
		tr    string
		n     int
		round int
	}
	by := map[string]map[key]rtResult{}
	for _, r := range rep.Results {
		if by[r.Target] == nil {
			by[r.Target] = map[key]rtResult{}
		}
		by[r.Target][key{r.Transport, r.Subs, r.Round}] = r
	}
	var lines []string
	for _, r := range rep.Results {
		if r.Target != "msgmesh" {
			continue
		}
		c, ok := by["centrifugo"][key{r.Transport, r.Subs, r.Round}]
		if !ok || c.rate() == 0 {
			continue
		}
		x := r.rate() / c.rate()
		p50, p99 := r.Lat.quantile(0.5), r.Lat.quantile(0.99)
		c50, c99 := c.Lat.quantile(0.5), c.Lat.quantile(0.99)
		// Issue 17's aims: latency at most Centrifugo's in the same run,
		// p50 and p99 for SSE, p99 for WebSocket.
		aim, met := "p50 and p99", p50 <= c50 && p99 <= c99
		if r.Transport == "ws" {
			aim, met = "p99", p99 <= c99
		}
		verdict := map[bool]string{true: "met", false: "NOT met"}[met]
		lines = append(lines, fmt.Sprintf("- Aim (round %d): %s × %d %s <= Centrifugo's: p50 %s vs %s (%.2f×), p99 %s vs %s (%.2f×), %s; delivered %.0f vs %.0f msgs/s = %.2f×.",
			r.Round+1, strings.ToUpper(r.Transport), r.Subs, aim, ms(p50), ms(c50), float64(p50)/float64(max(c50, 1)), ms(p99), ms(c99), float64(p99)/float64(max(c99, 1)), verdict, r.rate(), c.rate(), x))
	}
	var mm, cm *rtMem
	for i := range rep.Mem {
		switch rep.Mem[i].Target {
		case "msgmesh":
			mm = &rep.Mem[i]
		case "centrifugo":
			cm = &rep.Mem[i]
		}
	}
	if mm != nil {
		verdict := "met"
		if mm.PerConn > 16*1024 {
			verdict = "NOT met"
		}
		s := fmt.Sprintf("- Aim: <= 16 KiB per idle SSE connection: %.1f KiB, %s", mm.PerConn/1024, verdict)
		if cm != nil && cm.PerConn > 0 {
			s += fmt.Sprintf(" (Centrifugo uni_sse: %.1f KiB; ratio %.2f×)", cm.PerConn/1024, mm.PerConn/cm.PerConn)
		}
		lines = append(lines, s+".")
	}
	if len(lines) > 0 {
		_, _ = fmt.Fprintln(w)
		for _, l := range lines {
			_, _ = fmt.Fprintln(w, l)
		}
	}
	reportRealtimeOneCore(w, rep)
	notes := append([]string{}, rep.Notes...)
	for _, r := range rep.Results {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("%s %s × %d: %s", r.Target, r.Transport, r.Subs, r.Note))
		}
	}
	for _, r := range rep.OneCore {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("%s %s × %d [1 core]: %s", r.Target, r.Transport, r.Subs, r.Note))
		}
	}
	if len(notes) > 0 {
		_, _ = fmt.Fprintln(w, "\nRealtime notes:")
		for _, n := range notes {
			_, _ = fmt.Fprintln(w, "- "+n)
		}
	}
}

// reportRealtimeOneCore prints the -one-core rows: every fan-out on each
// server limited to one core, and per fan-out msgmesh next to Centrifugo.
func reportRealtimeOneCore(w io.Writer, rep *rtReport) {
	if len(rep.OneCore) == 0 {
		return
	}
	how := "GOMAXPROCS=1 and taskset -c " + oneCoreCPU
	if !rep.OneCorePinned {
		how = "GOMAXPROCS=1 (taskset not found)"
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	perCPU := func(r rtResult) string {
		if x, ok := r.perCPU(); ok {
			return fmt.Sprintf("%.0f", x)
		}
		return "—"
	}
	_, _ = fmt.Fprintf(w, "\n### Realtime fan-out [1 core] (%s)\n\n", how)
	_, _ = fmt.Fprintln(w, "The same fan-outs once more (one round, no idle-memory rows) on a fresh msgmesh and a fresh Centrifugo, each limited the same way, to the same CPU; only one of them is loaded at a time, and the broker and this process are not limited. Deliveries per CPU-s = events received by the subscribers / the server's CPU seconds (utime+stime from /proc/<pid>/stat, first publish → end of the drain).")
	_, _ = fmt.Fprintln(w)
	_, _ = fmt.Fprintln(w, "| Server | Transport | Subscribers | Published | Delivered | Complete | Delivered msgs/s | p50 | p99 | Server CPU s | Deliveries per CPU-s | Dropped |")
	_, _ = fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.OneCore {
		_, _ = fmt.Fprintf(w, "| %s [1 core] | %s | %d | %d | %d | %.2f %% | %.0f | %s | %s | %.1f | %s | %d |\n",
			r.Target, strings.ToUpper(r.Transport), r.Connected, r.Published, r.Delivered, 100*float64(r.Delivered)/float64(max(r.Expected, 1)),
			r.rate(), ms(r.Lat.quantile(0.5)), ms(r.Lat.quantile(0.99)), r.CPU, perCPU(r), r.Dropped)
	}
	type key struct {
		tr string
		n  int
	}
	cent := map[key]rtResult{}
	for _, r := range rep.OneCore {
		if r.Target == "centrifugo" {
			cent[key{r.Transport, r.Subs}] = r
		}
	}
	var rows []string
	for _, r := range rep.OneCore {
		c, ok := cent[key{r.Transport, r.Subs}]
		if r.Target != "msgmesh" || !ok {
			continue
		}
		p50, p99, c50, c99 := r.Lat.quantile(0.5), r.Lat.quantile(0.99), c.Lat.quantile(0.5), c.Lat.quantile(0.99)
		eff := "—"
		x, ok1 := r.perCPU()
		y, ok2 := c.perCPU()
		if ok1 && ok2 && y > 0 {
			eff = fmt.Sprintf("%.2f×", x/y)
		}
		rows = append(rows, fmt.Sprintf("| %s × %d [1 core] | %s / %s (%.2f×) | %s / %s (%.2f×) | %s / %s | %s |",
			strings.ToUpper(r.Transport), r.Subs, ms(p50), ms(c50), float64(p50)/float64(max(c50, 1)), ms(p99), ms(c99), float64(p99)/float64(max(c99, 1)),
			perCPU(r), perCPU(c), eff))
	}
	if len(rows) > 0 {
		_, _ = fmt.Fprintln(w)
		_, _ = fmt.Fprintln(w, "| Fan-out | p50 msgmesh / Centrifugo | p99 msgmesh / Centrifugo | Deliveries per CPU-s msgmesh / Centrifugo | msgmesh / Centrifugo per CPU-s |")
		_, _ = fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
		for _, l := range rows {
			_, _ = fmt.Fprintln(w, l)
		}
	}
}
