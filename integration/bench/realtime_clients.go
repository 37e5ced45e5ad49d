package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// fleet is n subscribers of one transport: lean clients (raw HTTP/1.1 and
// bufio for SSE, gorilla/websocket for WebSocket), one goroutine each,
// counting into shared atomics.
type fleet struct {
	transport string
	n         int
	lat       *hist // measured messages' latency (nil: not recorded)

	mu      sync.Mutex
	closers []io.Closer
	subs    []*rtSub
	closing atomic.Bool

	delivered atomic.Int64 // measured messages received, all subscribers
	lastAt    atomic.Int64 // UnixNano of the last measured delivery
	drops     atomic.Int64 // connections that ended before close
	firstErr  atomic.Value
}

type rtSub struct{ warm atomic.Int64 }

func newFleet(transport string, n int) *fleet { return &fleet{transport: transport, n: n} }

func (f *fleet) connected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (f *fleet) allWarm() bool { return f.warmCount() >= f.connected() }

func (f *fleet) warmCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := 0
	for _, s := range f.subs {
		if s.warm.Load() > 0 {
			k++
		}
	}
	return k
}

// open connects f.n subscribers to tg, conc at a time (each attempt
// bounded by 15 s). It returns the first error, if any.
func (f *fleet) open(tg rtTarget, conc int) error {
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	var firstErr atomic.Value
	var failures atomic.Int64
	for range min(conc, f.n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				var err error
				if f.transport == "ws" {
					err = f.dialWS(tg)
				} else {
					err = f.dialSSE(tg)
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := 0; i < f.n; i++ {
		if failures.Load() > int64(f.n/10)+10 {
			break // give up early: the run reports the error
		}
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	if v := firstErr.Load(); v != nil {
		return fmt.Errorf("%d of %d %s connections failed; first: %w", f.n-f.connected(), f.n, f.transport, v.(error))
	}
	return nil
}

func (f *fleet) add(c io.Closer) *rtSub {
	s := &rtSub{}
	f.mu.Lock()
	f.closers = append(f.closers, c)
	f.subs = append(f.subs, s)
	f.mu.Unlock()
	return s
}

func (f *fleet) onPayloads(s *rtSub, b []byte) {
	countPayloads(b, func() { s.warm.Add(1) }, func(ts int64) {
		now := time.Now()
		if f.lat != nil {
			f.lat.add(now.Sub(time.Unix(0, ts)))
		}
		f.delivered.Add(1)
		f.lastAt.Store(now.UnixNano())
	})
}

func (f *fleet) ended(err error) {
	if f.closing.Load() {
		return
	}
	f.drops.Add(1)
	if err == nil {
		err = io.EOF
	}
	f.firstErr.CompareAndSwap(nil, err.Error())
}

// dialSSE opens one SSE stream with a hand-written request and reads its
// lines in a goroutine.
func (f *fleet) dialSSE(tg rtTarget) error {
	addr, req := tg.sse()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		_ = c.Close()
		return err
	}
	br := bufio.NewReaderSize(c, 2048)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = c.Close()
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = c.Close()
		return fmt.Errorf("SSE status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	_ = c.SetDeadline(time.Time{})
	s := f.add(c)
	go func() {
		lr := bufio.NewReaderSize(resp.Body, 2048)
		for {
			line, err := lr.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				f.ended(err)
				return
			}
			if bytes.HasPrefix(line, []byte("data:")) {
				f.onPayloads(s, line)
			}
		}
	}()
	return nil
}

var wsDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 2048, WriteBufferSize: 1024}

// dialWS opens one WebSocket, sends the target's hello frame and reads
// frames in a goroutine (answering Centrifugo's {} pings).
func (f *fleet) dialWS(tg rtTarget) error {
	u, bearer, hello := tg.ws()
	hdr := http.Header{}
	if bearer != "" {
		hdr.Set("Authorization", "Bearer "+bearer)
	}
	conn, resp, err := wsDialer.Dial(u, hdr)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("WebSocket handshake status %d: %w", resp.StatusCode, err)
		}
		return err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
		_ = conn.Close()
		return err
	}
	s := f.add(conn.NetConn())
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				f.ended(err)
				return
			}
			if bytes.Equal(bytes.TrimSpace(data), []byte("{}")) { // Centrifugo's ping
				_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_ = conn.WriteMessage(websocket.TextMessage, []byte("{}"))
				continue
			}
			f.onPayloads(s, data)
		}
	}()
	return nil
}

// close ends every subscriber's connection.
func (f *fleet) close() {
	f.closing.Store(true)
	f.mu.Lock()
	cs := f.closers
	f.closers = nil
	f.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}
