package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// result is one measured scenario.
type result struct {
	ID      string
	Name    string
	Shape   string
	Msgs    int64
	Reqs    int64
	Errors  int64
	Elapsed time.Duration
	Lat     *hist // per request (HTTP), per ProduceSync, per batch, per record (async)
	LatWhat string
	CPU     cpuUse
	Note    string
}

func (r result) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.Elapsed.Seconds()
}

// cpuUse is CPU seconds spent during the measured window.
type cpuUse struct{ Gateway, Broker, Bench float64 }

type cpuMeter struct {
	srv      *server
	kafkaPid int
	g, k, b  float64
}

func (m *cpuMeter) start() {
	m.g, m.k, m.b = m.srv.cpuSeconds(), kafkaCPU(m.kafkaPid), selfCPUSeconds()
}

func (m *cpuMeter) stop() cpuUse {
	return cpuUse{Gateway: m.srv.cpuSeconds() - m.g, Broker: kafkaCPU(m.kafkaPid) - m.k, Bench: selfCPUSeconds() - m.b}
}

func kafkaCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	return procCPUSeconds(pid)
}

// env is what every scenario needs.
type env struct {
	brokers []string
	srv     *server
	http    *http.Client
	payload []byte   // payloads[0]; every payload has its length
	pool    [][]byte // distinct JSON values, used in turn
	next    atomic.Uint64
	meter   *cpuMeter
	warmup  time.Duration
	dur     time.Duration
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}

// makePayloads returns n distinct JSON objects of exactly size bytes,
// {"body":"<random URL-safe characters>"}: random so that the producers'
// default compression (snappy) cannot shrink them to almost nothing, as it
// would a repeated character or the same value in every record.
func makePayloads(n, size int) [][]byte {
	const head, tail = `{"body":"`, `"}`
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	body := max(size-len(head)-len(tail), 0)
	out := make([][]byte, n)
	rnd := make([]byte, body)
	for i := range out {
		_, _ = rand.Read(rnd)
		b := make([]byte, 0, size)
		b = append(b, head...)
		for _, c := range rnd {
			b = append(b, alphabet[c&63])
		}
		out[i] = append(b, tail...)
	}
	return out
}

func (e *env) value() []byte { return e.pool[e.next.Add(1)%uint64(len(e.pool))] }

// producerOpts are the gateway's producer settings (services/gateway/gateway.go)
// except its larger ProducerBatchMaxBytes: acks=all, idempotent (franz-go's
// default), 100k buffered records, franz-go's default 10 ms linger and
// default batch size (1,000,012 bytes, under the broker's message.max.bytes).
func producerOpts(brokers []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("msgmesh-bench"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(100_000),
		kgo.RecordDeliveryTimeout(30 * time.Second),
	}
}

var jsonHeader = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}

func (e *env) record(topic string) *kgo.Record {
	return &kgo.Record{Topic: topic, Value: e.value(), Headers: jsonHeader}
}

// workers runs conc goroutines calling op in a loop: first for the warm-up
// (discarded), then for the measured duration. op returns the messages it
// sent. Any loop stops after maxErrors errors.
func (e *env) workers(r *result, conc int, op func(ctx context.Context) (int, error)) {
	const maxErrors = 200
	var firstErr atomic.Value
	phase := func(d time.Duration, measure bool) (msgs, reqs, errs int64, elapsed time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
		defer cancel()
		deadline := time.Now().Add(d)
		var m, q, x atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && x.Load() < maxErrors {
					t0 := time.Now()
					n, err := op(ctx)
					if err != nil {
						x.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					if measure {
						r.Lat.add(time.Since(t0))
					}
					m.Add(int64(n))
					q.Add(1)
				}
			}()
		}
		wg.Wait()
		return m.Load(), q.Load(), x.Load(), time.Since(start)
	}
	if e.warmup > 0 {
		phase(e.warmup, false)
	}
	e.meter.start()
	r.Msgs, r.Reqs, r.Errors, r.Elapsed = phase(e.dur, true)
	r.CPU = e.meter.stop()
	if v := firstErr.Load(); v != nil {
		r.Note = appendNote(r.Note, "first error: "+v.(string))
	}
}

func appendNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// post sends a JSON body to path and checks for 200.
func (e *env) post(ctx context.Context, path string, body []byte) error {
	return e.postAs(ctx, path, "application/json", body)
}

// postAs sends body with Content-Type ct to path and checks for 200.
func (e *env) postAs(ctx context.Context, path, ct string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+e.srv.key)
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

func (e *env) httpSingle(id, topic string, conc int) result {
	r := result{ID: id, Name: "HTTP publish, 1 message/request", Shape: fmt.Sprintf("%d concurrent requests", conc),
		Lat: &hist{}, LatWhat: "request"}
	bodies := make([][]byte, len(e.pool))
	for i, p := range e.pool {
		bodies[i] = append(append([]byte(`{"data":`), p...), '}')
	}
	var n atomic.Uint64
	path := "/v1/topics/" + topic + "/messages"
	e.workers(&r, conc, func(ctx context.Context) (int, error) {
		return 1, e.post(ctx, path, bodies[n.Add(1)%uint64(len(bodies))])
	})
	return r
}

func (e *env) httpBatch(id, topic string, conc, size int) result {
	r := result{ID: id, Name: fmt.Sprintf("HTTP publish, batch of %d/request", size), Shape: fmt.Sprintf("%d concurrent requests", conc),
		Lat: &hist{}, LatWhat: "request"}
	var b bytes.Buffer
	b.WriteString(`{"messages":[`)
	for i := range size {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"data":`)
		b.Write(e.value())
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	body := b.Bytes()
	path := "/v1/topics/" + topic + "/messages"
	e.workers(&r, conc, func(ctx context.Context) (int, error) { return size, e.post(ctx, path, body) })
	return r
}

func (e *env) directSync(kafkaTopic string, conc int) (result, error) {
	r := result{ID: "direct-sync", Name: "franz-go ProduceSync, 1 record/call", Shape: fmt.Sprintf("%d goroutines, one client", conc),
		Lat: &hist{}, LatWhat: "ProduceSync"}
	cl, err := kgo.NewClient(producerOpts(e.brokers)...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	e.workers(&r, conc, func(ctx context.Context) (int, error) {
		return 1, cl.ProduceSync(ctx, e.record(kafkaTopic)).FirstErr()
	})
	return r, nil
}

// directProduceWait is the gateway's produce pattern (Produce with a
// callback per record, then wait), without ProduceSync's un-linger: a
// diagnostic row (-diagnose) showing what that pattern costs on its own.
func (e *env) directProduceWait(kafkaTopic string, conc, size int) (result, error) {
	r := result{ID: fmt.Sprintf("direct-producewait-%d", size), Name: fmt.Sprintf("franz-go Produce+callback, wait (gateway pattern), %d/call", size),
		Shape: fmt.Sprintf("%d goroutines, one client", conc), Lat: &hist{}, LatWhat: "call"}
	cl, err := kgo.NewClient(producerOpts(e.brokers)...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	e.workers(&r, conc, func(ctx context.Context) (int, error) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		wg.Add(size)
		for range size {
			cl.Produce(ctx, e.record(kafkaTopic), func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		return size, first
	})
	return r, nil
}

// directBatchWait mirrors the HTTP batch shape: conc goroutines each
// produce size records and wait for all of them.
func (e *env) directBatchWait(kafkaTopic string, conc, size int) (result, error) {
	r := result{ID: "direct-batchwait", Name: fmt.Sprintf("franz-go Produce %d, wait for all", size), Shape: fmt.Sprintf("%d goroutines, one client", conc),
		Lat: &hist{}, LatWhat: "batch of " + fmt.Sprint(size)}
	cl, err := kgo.NewClient(producerOpts(e.brokers)...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	e.workers(&r, conc, func(ctx context.Context) (int, error) {
		recs := make([]*kgo.Record, size)
		for i := range recs {
			recs[i] = e.record(kafkaTopic)
		}
		return size, cl.ProduceSync(ctx, recs...).FirstErr()
	})
	return r, nil
}

// directAsync produces as fast as the client accepts (bounded by
// MaxBufferedRecords), then flushes; elapsed runs to the last ack.
func (e *env) directAsync(kafkaTopic string) (result, error) {
	r := result{ID: "direct-async", Name: "franz-go Produce, async pipelined", Shape: "1 goroutine, callbacks, up to 100k buffered",
		Lat: &hist{}, LatWhat: "record (produce to ack)"}
	cl, err := kgo.NewClient(producerOpts(e.brokers)...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	var firstErr atomic.Value
	phase := func(d time.Duration, measure bool) (acked, errs int64, elapsed time.Duration) {
		var a, x atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
		defer cancel()
		start := time.Now()
		deadline := start.Add(d)
		for i := 0; ; i++ {
			if i%256 == 0 && (time.Now().After(deadline) || x.Load() > 200) {
				break
			}
			t0 := time.Now()
			cl.Produce(ctx, e.record(kafkaTopic), func(_ *kgo.Record, err error) {
				if err != nil {
					x.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				if measure {
					r.Lat.add(time.Since(t0))
				}
				a.Add(1)
			})
		}
		if err := cl.Flush(ctx); err != nil {
			firstErr.CompareAndSwap(nil, "flush: "+err.Error())
		}
		return a.Load(), x.Load(), time.Since(start)
	}
	if e.warmup > 0 {
		phase(e.warmup, false)
	}
	e.meter.start()
	r.Msgs, r.Errors, r.Elapsed = phase(e.dur, true)
	r.CPU = e.meter.stop()
	if v := firstErr.Load(); v != nil {
		r.Note = appendNote(r.Note, "first error: "+v.(string))
	}
	return r, nil
}

// prefill writes n records into kafkaTopic with franz-go (records shaped
// exactly like the gateway's: JSON value, content-type header, no key).
func (e *env) prefill(kafkaTopic string, n int, timeout time.Duration) (time.Duration, error) {
	cl, err := kgo.NewClient(producerOpts(e.brokers)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		cl.Produce(ctx, e.record(kafkaTopic), func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("prefill flush: %w", err)
	}
	if errs.Load() > 0 {
		return 0, fmt.Errorf("prefill: %d records failed, first: %v", errs.Load(), firstErr.Load())
	}
	return time.Since(start), nil
}

type polled struct {
	partition, offset int64
	dataLen           int
}

// scanPoll splits a poll response into messages without a full JSON decode
// (the direct consumer does not parse values either; an application would
// parse payloads in both cases). It relies on the gateway's fixed field
// order: {"cursor":"p-o","room":...,"data":<value>,"headers":...}. ok is
// false when the body does not look like that.
func scanPoll(b []byte) (out []polled, ok bool) {
	const cur, data, hdr = `{"cursor":"`, `,"data":`, `,"headers":[`
	if !bytes.HasPrefix(b, []byte(`{"messages":[`)) {
		return nil, false
	}
	ok = true
	for {
		i := bytes.Index(b, []byte(cur))
		if i < 0 {
			return out, ok
		}
		b = b[i+len(cur):]
		j := bytes.IndexByte(b, '"')
		if j < 0 {
			return out, false
		}
		ps, ofs, found := strings.Cut(string(b[:j]), "-")
		p, err1 := strconv.ParseInt(ps, 10, 64)
		o, err2 := strconv.ParseInt(ofs, 10, 64)
		if !found || err1 != nil || err2 != nil {
			return out, false
		}
		m := polled{partition: p, offset: o, dataLen: -1}
		if d := bytes.Index(b, []byte(data)); d >= 0 {
			if h := bytes.Index(b[d:], []byte(hdr)); h >= 0 {
				m.dataLen = h - len(data)
			}
		}
		out = append(out, m)
	}
}

// httpPoll consumes n messages with one consumer of a new group: each
// poll acknowledges the previous batch by its id ("ack"), as the API
// documents.
func (e *env) httpPoll(id, topic, group string, n, max, waitMs int, timeout time.Duration) result {
	r := result{ID: id, Name: "HTTP poll, one consumer", Shape: fmt.Sprintf("max=%d, wait_ms=%d, sequential", max, waitMs),
		Lat: &hist{}, LatWhat: "request"}
	ack := ""
	path := "/v1/topics/" + topic + "/poll"
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := map[int64]int64{} // partition -> last offset seen, to count duplicates
	var dups, bad int64
	var firstRecord time.Duration
	e.meter.start()
	start := time.Now()
	for r.Msgs < int64(n) && ctx.Err() == nil {
		t0 := time.Now()
		body, _ := json.Marshal(map[string]any{"group": group, "consumer": "c1", "max": max, "wait_ms": waitMs, "ack": ack})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.srv.key)
		resp, err := e.http.Do(req)
		if err != nil {
			r.Errors++
			if r.Errors <= 3 {
				r.Note = appendNote(r.Note, "error: "+err.Error())
			}
			if r.Errors > 20 {
				break
			}
			continue
		}
		b, err := readAll(resp)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			r.Errors++
			if r.Errors <= 3 {
				r.Note = appendNote(r.Note, fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b)))
			}
			if r.Errors > 20 {
				break
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			r.Errors++
			continue
		}
		r.Lat.add(time.Since(t0))
		r.Reqs++
		msgs, ok := scanPoll(b)
		if !ok {
			bad++
		}
		if i := bytes.LastIndex(b, []byte(`,"batch":"`)); i >= 0 {
			if id, _, found := bytes.Cut(b[i+len(`,"batch":"`):], []byte(`"`)); found {
				ack = string(id)
			}
		}
		if len(msgs) > 0 && firstRecord == 0 {
			firstRecord = time.Since(start)
		}
		for _, m := range msgs {
			if m.dataLen != len(e.payload) {
				bad++
			}
			if prev, ok := last[m.partition]; ok && m.offset <= prev {
				dups++
				continue
			}
			last[m.partition] = m.offset
			r.Msgs++
		}
	}
	r.Elapsed = time.Since(start)
	r.CPU = e.meter.stop()
	r.Note = appendNote(r.Note, fmt.Sprintf("first records after %v (group join)", firstRecord.Round(time.Millisecond)))
	if dups > 0 {
		r.Note = appendNote(r.Note, fmt.Sprintf("%d duplicates not counted", dups))
	}
	if bad > 0 {
		r.Note = appendNote(r.Note, fmt.Sprintf("%d messages with unexpected payload size", bad))
	}
	if r.Msgs < int64(n) {
		r.Note = appendNote(r.Note, fmt.Sprintf("INCOMPLETE: %d of %d within %v", r.Msgs, n, timeout))
	}
	return r
}

// directConsume reads n records with a franz-go group consumer (defaults:
// autocommit every 5 s), PollRecords(1000) in a loop.
func (e *env) directConsume(kafkaTopic, group string, n, max int, timeout time.Duration) (result, error) {
	r := result{ID: "direct-consume", Name: "franz-go group consumer", Shape: fmt.Sprintf("PollRecords(%d), autocommit", max)}
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
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var firstRecord time.Duration
	var bad int64
	e.meter.start()
	start := time.Now()
	for r.Msgs < int64(n) && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, max)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				r.Errors++
				if r.Errors <= 3 {
					r.Note = appendNote(r.Note, fmt.Sprintf("fetch %s/%d: %v", t, p, err))
				}
			}
		})
		r.Reqs++
		got := int64(fs.NumRecords())
		if got > 0 && firstRecord == 0 {
			firstRecord = time.Since(start)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if len(rec.Value) != len(e.payload) {
				bad++
			}
		})
		r.Msgs += got
	}
	r.Elapsed = time.Since(start)
	r.CPU = e.meter.stop()
	r.Note = appendNote(r.Note, fmt.Sprintf("first records after %v (group join)", firstRecord.Round(time.Millisecond)))
	if bad > 0 {
		r.Note = appendNote(r.Note, fmt.Sprintf("%d records with unexpected size", bad))
	}
	if r.Msgs < int64(n) {
		r.Note = appendNote(r.Note, fmt.Sprintf("INCOMPLETE: %d of %d within %v", r.Msgs, n, timeout))
	}
	// Leave the group promptly.
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	if err := cl.LeaveGroupContext(lctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench: direct consumer leave:", err)
	}
	return r, nil
}

// readAll reads a response body into one buffer of its Content-Length when
// it has one (a poll answer of 1,000 messages is about 1.2 MB).
func readAll(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 256<<20 {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(resp.Body)
}
