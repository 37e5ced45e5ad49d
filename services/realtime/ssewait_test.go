package realtime

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tcpPair is a connected loopback TCP pair: the server's side (as a
// hijacked stream holds it) and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-acc
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

type waitResult struct {
	w   woke
	err error
	at  time.Duration
}

func waitAsync(ctx context.Context, o *sseOut, l *liveSub, beat time.Time) <-chan waitResult {
	ch := make(chan waitResult, 1)
	start := time.Now()
	go func() {
		l.reading.Store(true)
		w, err := o.wait(ctx, l.wake, beat)
		l.reading.Store(false)
		ch <- waitResult{w, err, time.Since(start)}
	}()
	return ch
}

func waitFor(t *testing.T, ch <-chan waitResult, what string) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the wait did not return within 10s", what)
		return waitResult{}
	}
}

// A hijacked stream's one goroutine waits in a read of its connection: a
// record queued for it (the hub's push pokes the read), its heartbeat
// time, the stream's end (ctx) and the client hanging up each end the
// wait at once, with what woke it.
func TestSSEWaitInRead(t *testing.T) {
	server, client := tcpPair(t)
	o := &sseOut{conn: server}
	l := newLiveSub(-1, nil, 8)
	l.poke = o.poke
	far := time.Now().Add(time.Hour)

	// A push while it reads: woken for items.
	ch := waitAsync(context.Background(), o, l, far)
	time.Sleep(50 * time.Millisecond) // let it block in the read; the result does not depend on it
	if !l.push(&item{rec: &kgo.Record{}}) {
		t.Fatal("push refused")
	}
	if r := waitFor(t, ch, "push"); r.err != nil || r.w != wokeItems {
		t.Fatalf("after a push: %v %v, want wokeItems", r.w, r.err)
	}
	if it, _ := l.pop(); it == nil {
		t.Fatal("the pushed item is not queued")
	}

	// Bytes from the client are ignored; the heartbeat time wakes it.
	if _, err := client.Write([]byte("ignored")); err != nil {
		t.Fatal(err)
	}
	r := waitFor(t, waitAsync(context.Background(), o, l, time.Now().Add(200*time.Millisecond)), "beat")
	if r.err != nil || r.w != wokeBeat {
		t.Fatalf("at the beat: %v %v, want wokeBeat", r.w, r.err)
	}
	if r.at < 150*time.Millisecond {
		t.Fatalf("woke for the beat after %v, before the beat (200ms)", r.at)
	}

	// The stream ends (shutdown, token expiry): ctx's error.
	ctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, o.poke)
	defer stop()
	ch = waitAsync(ctx, o, l, far)
	time.Sleep(50 * time.Millisecond)
	cancel()
	if r := waitFor(t, ch, "cancel"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("after the stream's ctx ended: %v %v, want context.Canceled", r.w, r.err)
	}

	// The feed ends (hub closed): woken, and pop says ended.
	ch = waitAsync(context.Background(), o, l, far)
	time.Sleep(50 * time.Millisecond)
	l.end(errTopicDeleted)
	if r := waitFor(t, ch, "end"); r.err != nil || r.w != wokeItems {
		t.Fatalf("after the feed ended: %v %v, want wokeItems", r.w, r.err)
	}
	if it, ended := l.pop(); it != nil || !ended {
		t.Fatalf("pop after the end: %v %v", it, ended)
	}

	// The client hangs up: errClientGone at once, not at the heartbeat.
	ch = waitAsync(context.Background(), o, l, far)
	time.Sleep(50 * time.Millisecond)
	_ = client.Close()
	if r := waitFor(t, ch, "hang-up"); !errors.Is(r.err, errClientGone) {
		t.Fatalf("after the client hung up: %v %v, want errClientGone", r.w, r.err)
	}
}

// A signal sent while the stream is not reading (it is writing, or waits
// on its channel) does not poke: the next wait finds it on wake.
func TestSSEWaitSignalBeforeRead(t *testing.T) {
	server, _ := tcpPair(t)
	o := &sseOut{conn: server}
	l := newLiveSub(-1, nil, 8)
	pokes := 0
	l.poke = func() { pokes++; o.poke() }
	l.push(&item{rec: &kgo.Record{}})
	if pokes != 0 {
		t.Fatalf("%d pokes while not reading", pokes)
	}
	r := waitFor(t, waitAsync(context.Background(), o, l, time.Now().Add(time.Hour)), "pending signal")
	if r.err != nil || r.w != wokeItems {
		t.Fatalf("with a signal pending: %v %v, want wokeItems", r.w, r.err)
	}
}
