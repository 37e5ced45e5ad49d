// Command bench measures MsgMesh's HTTP publish and poll against a real
// Kafka broker, next to the franz-go client doing the same work directly,
// and prints a markdown report (see docs/benchmarks.md; `make bench` runs it
// through scripts/bench.sh).
//
//	go run ./integration/bench -brokers 127.0.0.1:19092 -msgmesh bin/msgmesh
//
// It starts `msgmesh serve` as a subprocess with a fresh topic prefix (so
// every run is isolated), creates one 6-partition topic per scenario, runs
// every scenario once, stops the server and deletes the run's topics and
// groups. Progress goes to stderr, the report to stdout (and -out).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	brokers      string
	msgmesh      string
	inprocess    bool
	dur          time.Duration
	warmup       time.Duration
	partitions   int
	payload      int
	singleConc   int
	batchConc    int
	batchSize    int
	prefill      int
	pollMax      int
	pollWait     int
	pollTimeout  time.Duration
	scenarios    string
	out          string
	cpuprofile   string
	kafkaVersion string
	keep         bool
	diagnose     bool
	groupSize    int
	oneCore      bool
	rt           rtOptions // realtime.go
	wh           whOptions // webhooks.go
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap brokers (comma-separated)")
	flag.StringVar(&o.msgmesh, "msgmesh", "bin/msgmesh", "msgmesh binary to run as `msgmesh serve`")
	flag.BoolVar(&o.inprocess, "inprocess", false, "run msgmesh inside this process instead (for -cpuprofile of the gateway)")
	flag.DurationVar(&o.dur, "duration", 10*time.Second, "measured time of each publish scenario")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up before each publish scenario")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of each benchmark topic")
	flag.IntVar(&o.payload, "payload", 1024, "bytes of each message's JSON value")
	flag.IntVar(&o.singleConc, "single-concurrency", 64, "concurrent single-message publishers (and ProduceSync goroutines)")
	flag.IntVar(&o.batchConc, "batch-concurrency", 8, "concurrent batch publishers")
	flag.IntVar(&o.batchSize, "batch-size", 100, "messages per batch request")
	flag.IntVar(&o.prefill, "prefill", 200_000, "messages pre-filled for the consume scenarios")
	flag.IntVar(&o.pollMax, "poll-max", 1000, "poll max (messages per response)")
	flag.IntVar(&o.pollWait, "poll-wait-ms", 1000, "poll wait_ms")
	flag.DurationVar(&o.pollTimeout, "poll-timeout", 5*time.Minute, "upper bound of each consume scenario")
	flag.StringVar(&o.scenarios, "scenarios", "single,batch,ndjson,poll,pollgroup,realtime,webhooks", "which comparisons to run: single, batch, ndjson, poll, pollgroup, realtime, webhooks")
	flag.IntVar(&o.groupSize, "poll-group", 6, "consumers of the pollgroup scenario (HTTP and direct), reading one topic of -partitions partitions")
	flag.BoolVar(&o.oneCore, "one-core", false, "then run the HTTP publish and poll scenarios again with msgmesh limited to 1 core (GOMAXPROCS=1, taskset -c 0 where available): a second row set, with msgs per msgmesh CPU-second; likewise the realtime fan-outs (msgmesh and Centrifugo both on that core, deliveries per server CPU-second) and the webhook dispatch (POSTs per msgmesh CPU-second)")
	flag.StringVar(&o.out, "out", "", "also write the report to this file")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write this process's CPU profile here (with -inprocess it covers the gateway)")
	flag.StringVar(&o.kafkaVersion, "kafka-version", "4.4.0", "broker version, for the report")
	flag.BoolVar(&o.diagnose, "diagnose", false, "add diagnostic rows: franz-go with the gateway's Produce-then-wait pattern")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's topics and groups on the broker")
	registerRealtimeFlags(&o.rt)
	registerWebhookFlags(&o.wh)
	flag.Parse()
	o.rt.oneCore, o.wh.oneCore = o.oneCore, o.oneCore
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench: error:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(o options) error {
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		switch s = strings.TrimSpace(s); s {
		case "single", "batch", "ndjson", "poll", "pollgroup", "realtime", "webhooks":
			want[s] = true
		case "":
		default:
			return fmt.Errorf("unknown scenario %q (want single, batch, ndjson, poll, pollgroup, realtime, webhooks)", s)
		}
	}
	if o.payload < 16 || o.dur <= 0 || o.singleConc < 1 || o.batchConc < 1 || o.batchSize < 1 || o.prefill < 1 || o.partitions < 1 || o.groupSize < 1 {
		return fmt.Errorf("invalid flags: payload >= 16, duration > 0 and positive counts required")
	}
	brokers := strings.Split(o.brokers, ",")
	_, port, _ := net.SplitHostPort(brokers[0])
	m := describeMachine(o.kafkaVersion, o.msgmesh)

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close(); logf("CPU profile written to %s", o.cpuprofile) }()
	}

	logf("starting msgmesh (%s) against %s", map[bool]string{true: "in-process", false: o.msgmesh}[o.inprocess], o.brokers)
	srv, err := startServer(o.msgmesh, o.brokers, o.inprocess, 90*time.Second)
	if err != nil {
		return err
	}
	logf("msgmesh ready at %s (topic prefix %s)", srv.base, srv.prefix)
	defer func() {
		srv.stop()
		if !o.keep {
			cleanup(brokers, srv.prefix)
		}
	}()

	e := &env{
		brokers: brokers, srv: srv, http: newHTTPClient(max(o.singleConc, o.batchConc, o.groupSize)),
		pool: makePayloads(1024, o.payload), warmup: o.warmup, dur: o.dur,
		meter: &cpuMeter{srv: srv, kafkaPid: findKafkaPid(port)},
	}
	e.payload = e.pool[0]
	if e.meter.kafkaPid == 0 {
		logf("broker process not found; its CPU is not reported")
	}
	topics := map[string]string{}
	for _, t := range []string{"single", "directsync", "batch", "ndjson", "directasync", "directbatch", "fill", "diag"} {
		kt, err := srv.createTopic(t, o.partitions)
		if err != nil {
			return err
		}
		topics[t] = kt
	}

	var results, oneCore []result
	add := func(r result, err error) error {
		if err != nil {
			return err
		}
		logf("  %-42s %10.0f msgs/s  (%d msgs in %v, %d errors)", r.Name, r.rate(), r.Msgs, r.Elapsed.Round(time.Millisecond), r.Errors)
		results = append(results, r)
		return nil
	}
	if want["single"] {
		logf("single-message publish: %v each (after %v warm-up)", o.dur, o.warmup)
		if err := add(e.directSync(topics["directsync"], o.singleConc)); err != nil {
			return err
		}
		_ = add(e.httpSingle("http-single", "single", o.singleConc), nil)
		if o.diagnose {
			if err := add(e.directProduceWait(topics["diag"], o.singleConc, 1)); err != nil {
				return err
			}
		}
	}
	if want["batch"] || want["ndjson"] {
		logf("batch publish: %v each (after %v warm-up)", o.dur, o.warmup)
		if err := add(e.directAsync(topics["directasync"])); err != nil {
			return err
		}
		if want["batch"] {
			_ = add(e.httpBatch("http-batch", "batch", o.batchConc, o.batchSize), nil)
		}
		if want["ndjson"] {
			_ = add(e.httpNDJSON("http-ndjson", "ndjson", o.batchConc, o.batchSize), nil)
		}
		if err := add(e.directBatchWait(topics["directbatch"], o.batchConc, o.batchSize)); err != nil {
			return err
		}
		if o.diagnose {
			if err := add(e.directProduceWait(topics["diag"], o.batchConc, o.batchSize)); err != nil {
				return err
			}
		}
	}
	var prefillTook time.Duration
	if want["poll"] || want["pollgroup"] {
		logf("pre-filling %d messages", o.prefill)
		prefillTook, err = e.prefill(topics["fill"], o.prefill, 5*time.Minute)
		if err != nil {
			return err
		}
		logf("pre-filled in %v; consuming them", prefillTook.Round(time.Millisecond))
	}
	if want["poll"] {
		_ = add(e.httpPoll("http-poll", "fill", "benchpoll", o.prefill, o.pollMax, o.pollWait, o.pollTimeout), nil)
		if err := add(e.directConsume(topics["fill"], topics["fill"]+".benchdirect", o.prefill, o.pollMax, o.pollTimeout)); err != nil {
			return err
		}
	}
	if want["pollgroup"] {
		_ = add(e.httpPollGroup("http-poll-group", "fill", "benchgroup", topics["fill"]+".benchgroup", o.prefill, o.groupSize, o.pollMax, o.pollWait, o.pollTimeout), nil)
		if err := add(e.directConsumeGroup(topics["fill"], topics["fill"]+".benchdirectgroup", o.prefill, o.groupSize, o.pollMax, o.pollTimeout)); err != nil {
			return err
		}
	}

	// The realtime and webhooks scenarios start their own servers (and
	// their own one-core ones): restart this one only for publish and poll.
	httpOneCore := o.oneCore && (want["single"] || want["batch"] || want["ndjson"] || want["poll"] || want["pollgroup"])
	if httpOneCore && o.inprocess {
		logf("-one-core needs a msgmesh subprocess: the publish and poll rows on one core are skipped with -inprocess")
	}
	if httpOneCore && !o.inprocess {
		// The same HTTP scenarios with msgmesh on one core: a new server on
		// the same prefix (the topics and the pre-filled records are there).
		logf("restarting msgmesh on one core (GOMAXPROCS=1, taskset -c 0 where available)")
		srv.stop()
		srv1, err := startServerWith(o.msgmesh, o.brokers, o.inprocess, 90*time.Second, serverOpts{oneCore: true, prefix: srv.prefix, key: srv.key})
		if err != nil {
			return err
		}
		srv = srv1 // stopped by the deferred cleanup
		e.srv, e.meter.srv = srv1, srv1
		if !srv1.pinned {
			logf("taskset not found: only GOMAXPROCS=1")
		}
		add1 := func(r result) {
			logf("  %-42s %10.0f msgs/s  (%d msgs in %v, %d errors) [1 core]", r.Name, r.rate(), r.Msgs, r.Elapsed.Round(time.Millisecond), r.Errors)
			oneCore = append(oneCore, r)
		}
		if want["single"] {
			add1(e.httpSingle("http-single", "single", o.singleConc))
		}
		if want["batch"] {
			add1(e.httpBatch("http-batch", "batch", o.batchConc, o.batchSize))
		}
		if want["ndjson"] {
			add1(e.httpNDJSON("http-ndjson", "ndjson", o.batchConc, o.batchSize))
		}
		if want["poll"] {
			add1(e.httpPoll("http-poll", "fill", "benchpoll1", o.prefill, o.pollMax, o.pollWait, o.pollTimeout))
		}
		if want["pollgroup"] {
			add1(e.httpPollGroup("http-poll-group", "fill", "benchgroup1", topics["fill"]+".benchgroup1", o.prefill, o.groupSize, o.pollMax, o.pollWait, o.pollTimeout))
		}
	}

	var rt *rtReport
	if want["realtime"] {
		logf("realtime fan-out: %s SSE, %s WebSocket subscribers, %d msgs/s for %v", o.rt.sse, o.rt.ws, o.rt.rate, o.rt.dur)
		if rt, err = runRealtime(o.rt, o.msgmesh, o.brokers); err != nil {
			return err
		}
	}

	var wh *whReport
	if want["webhooks"] {
		logf("webhooks dispatch: %s webhooks on one topic, %d POSTs/s offered for %v", o.wh.counts, o.wh.postRate, o.wh.dur)
		if wh, err = runWebhooks(o.wh, o.msgmesh, o.brokers); err != nil {
			return err
		}
	}

	var w io.Writer = os.Stdout
	var f *os.File
	if o.out != "" {
		if f, err = os.Create(o.out); err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w = io.MultiWriter(os.Stdout, f)
	}
	report(w, o, m, results, oneCore, srv.pinned, prefillTook, e.meter.kafkaPid != 0)
	reportRealtime(w, rt)
	reportWebhooks(w, wh)
	return nil
}

// cleanup deletes the run's topics and consumer groups (bounded).
func cleanup(brokers []string, prefix string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if groups, err := adm.ListGroups(ctx); err == nil {
		var gs []string
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, prefix+".") {
				gs = append(gs, g)
			}
		}
		if len(gs) > 0 {
			if _, err := adm.DeleteGroups(ctx, gs...); err != nil {
				logf("cleanup: delete groups: %v", err)
			}
		}
	}
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		logf("cleanup: list topics: %v", err)
		return
	}
	var names []string
	for _, t := range ts.Names() {
		if strings.HasPrefix(t, prefix+".") {
			names = append(names, t)
		}
	}
	if len(names) > 0 {
		if _, err := adm.DeleteTopics(ctx, names...); err != nil {
			logf("cleanup: delete topics: %v", err)
			return
		}
	}
	logf("cleanup: deleted %d topics with prefix %s", len(names), prefix)
}

func report(w io.Writer, o options, m machine, rs, oneCore []result, pinned bool, prefillTook time.Duration, haveBroker bool) {
	by := map[string]result{}
	for _, r := range rs {
		by[r.ID] = r
	}
	by1 := map[string]result{}
	for _, r := range oneCore {
		by1[r.ID] = r
	}
	mb := func(r result) float64 { return r.rate() * float64(o.payload) / 1e6 }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	ratioIn := func(set map[string]result, a, b string) (float64, bool) {
		x, ok1 := set[a]
		y, ok2 := by[b]
		if !ok1 || !ok2 || y.rate() == 0 {
			return 0, false
		}
		return x.rate() / y.rate(), true
	}
	ratio := func(a, b string) (float64, bool) { return ratioIn(by, a, b) }
	// The first baseline of each row is its "vs direct" column; the aims
	// below name theirs.
	baseline := map[string]string{"http-single": "direct-sync", "http-batch": "direct-batchwait", "http-ndjson": "direct-batchwait",
		"http-poll": "direct-consume", "http-poll-group": "direct-consume-group", "direct-batchwait": "direct-async"}
	if o.diagnose {
		// the gateway-pattern rows compare with ProduceSync of the same shape
		baseline["direct-producewait-1"] = "direct-sync"
		baseline[fmt.Sprintf("direct-producewait-%d", o.batchSize)] = "direct-batchwait"
	}
	// perCPU is msgs per CPU-second of the side that does the work: msgmesh
	// for HTTP rows, this process (the franz-go client) for direct ones.
	perCPU := func(r result) (float64, bool) {
		c := r.CPU.Bench
		if strings.HasPrefix(r.ID, "http-") {
			c = r.CPU.Gateway
		}
		if o.inprocess || c <= 0 {
			return 0, false
		}
		return float64(r.Msgs) / c, true
	}

	_, _ = fmt.Fprintf(w, "## MsgMesh benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	_, _ = fmt.Fprintf(w, "- Machine: %d CPUs (nproc), %s, %.1f GiB RAM, %s; load average at the end %s\n", m.CPUs, m.CPUModel, m.MemGiB, m.Kernel, loadAvg())
	_, _ = fmt.Fprintf(w, "- Go %s; Apache Kafka %s, single node (scripts/kafka.sh), %s; %s\n", strings.TrimPrefix(m.Go, "go"), m.Kafka, o.brokers, orDash(m.MsgMesh))
	_, _ = fmt.Fprintf(w, "- Everything on 127.0.0.1 on the same machine: broker, msgmesh (%s) and this load generator share the CPUs.\n",
		map[bool]string{true: "in-process", false: "subprocess"}[o.inprocess])
	_, _ = fmt.Fprintf(w, "- %d-byte JSON value per message (random characters, 1024 distinct values, so snappy, franz-go's default compression, has little to gain), %d partitions per topic, acks=all + idempotent producer everywhere; publish rows: %v measured after %v warm-up; consume rows: %d messages pre-filled (in %v) and read once from the start.\n\n",
		o.payload, o.partitions, o.dur, o.warmup, o.prefill, prefillTook.Round(time.Millisecond))
	table := func(rows []result, set map[string]result) {
		_, _ = fmt.Fprintln(w, "| Scenario | Shape | Messages | Time | msgs/s | MB/s | p50 | p99 | Errors | CPU s: msgmesh / broker / bench | msgs per CPU-s | vs direct |")
		_, _ = fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, r := range rows {
			p50, p99 := "—", "—"
			if r.Lat != nil && r.Lat.n.Load() > 0 {
				p50, p99 = ms(r.Lat.quantile(0.50)), ms(r.Lat.quantile(0.99))
			}
			vs := "(baseline)"
			if b, ok := baseline[r.ID]; ok {
				if x, ok := ratioIn(set, r.ID, b); ok {
					vs = fmt.Sprintf("%.0f %% of %s", 100*x, b)
				} else {
					vs = "—"
				}
			}
			cpu := fmt.Sprintf("%.1f / %s / %.1f", r.CPU.Gateway, map[bool]string{true: fmt.Sprintf("%.1f", r.CPU.Broker), false: "?"}[haveBroker], r.CPU.Bench)
			if o.inprocess {
				cpu = fmt.Sprintf("(in bench) / %.1f / %.1f", r.CPU.Broker, r.CPU.Bench)
			}
			eff := "—"
			if x, ok := perCPU(r); ok {
				eff = fmt.Sprintf("%.0f", x)
			}
			_, _ = fmt.Fprintf(w, "| %s | %s | %d | %.1f s | %.0f | %.1f | %s | %s | %d | %s | %s | %s |\n",
				r.Name, r.Shape, r.Msgs, r.Elapsed.Seconds(), r.rate(), mb(r), p50, p99, r.Errors, cpu, eff, vs)
		}
		_, _ = fmt.Fprintln(w)
	}
	table(rs, by)
	_, _ = fmt.Fprintln(w, "Latency is per request (HTTP), per ProduceSync call, per batch (produce-and-wait) or per record from Produce to its ack (async). MB/s counts message values only (10^6 bytes). CPU is user+system seconds during the measured window. msgs per CPU-s: messages per CPU-second of msgmesh for HTTP rows, of this process (the franz-go client) for direct rows.")
	_, _ = fmt.Fprintln(w)
	aims := []struct {
		name, a, b string
		min        float64
	}{
		{"Batch publish (JSON) >= 90 % of the same-shape direct producer", "http-batch", "direct-batchwait", 0.90},
		{"Batch publish (JSON) >= 60 % of direct async produce", "http-batch", "direct-async", 0.60},
		{"Batch publish (NDJSON) >= 90 % of the same-shape direct producer", "http-ndjson", "direct-batchwait", 0.90},
		{"Batch publish (NDJSON) >= 60 % of direct async produce", "http-ndjson", "direct-async", 0.60},
		{"Single-message publish >= 50 % of ProduceSync at the same concurrency", "http-single", "direct-sync", 0.50},
		{"Poll, one consumer >= 50 % of the direct group consumer", "http-poll", "direct-consume", 0.50},
		{fmt.Sprintf("Poll, group of %d >= 90 %% of %d direct consumers", o.groupSize, o.groupSize), "http-poll-group", "direct-consume-group", 0.90},
	}
	for _, a := range aims {
		if x, ok := ratio(a.a, a.b); ok {
			verdict := "met"
			if x < a.min {
				verdict = "NOT met"
			}
			_, _ = fmt.Fprintf(w, "- Aim: %s: %.0f %%, %s.\n", a.name, 100*x, verdict)
		}
	}
	var notes []string
	for _, r := range append(append([]result{}, rs...), oneCore...) {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Name, r.Note))
		}
	}
	if len(oneCore) > 0 {
		how := "GOMAXPROCS=1 and taskset -c 0"
		if !pinned {
			how = "GOMAXPROCS=1 (taskset not found)"
		}
		_, _ = fmt.Fprintf(w, "\n### msgmesh on one core (%s)\n\n", how)
		_, _ = fmt.Fprintln(w, "The same HTTP scenarios against a msgmesh restarted on one core (the broker and this process are not limited). \"vs direct\" compares with the direct rows above; msgs per CPU-s is the cost per message apart from the machine's contention.")
		_, _ = fmt.Fprintln(w)
		table(oneCore, by1)
		for _, r := range oneCore {
			b := baseline[r.ID]
			x, ok1 := perCPU(r)
			y, ok2 := perCPU(by[b])
			if ok1 && ok2 && y > 0 {
				_, _ = fmt.Fprintf(w, "- %s on one core: %.0f msgs per msgmesh CPU-second; %s: %.0f per client CPU-second (%.2f×).\n", r.Name, x, by[b].Name, y, x/y)
			}
		}
	}
	if len(notes) > 0 {
		_, _ = fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			_, _ = fmt.Fprintln(w, n)
		}
	}
}

// loadAvg is /proc/loadavg's three load averages ("?" if unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func orDash(s string) string {
	if s == "" {
		return "msgmesh version unknown"
	}
	return s
}
