package guarantees

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	msgmesh "github.com/msgmesh/msgmesh/sdks/go"
)

// streamRecv is one SSE or WebSocket subscriber (whole topic or one
// room) connected through the cutting proxy. It records every message in
// arrival order with the connection it came on, every connection with
// the position it resumed from, and every resync.
type streamRecv struct {
	name string
	room string
	kind string // "sse" (the Go client, deduplicating) or "ws" (raw frames)

	mu      sync.Mutex
	dels    []delivery
	conns   []connInfo
	resyncs []resyncInfo
	lastPos string
	live    chan struct{}
	liveOne sync.Once
	slow    atomic.Bool
	away    atomic.Int64 // stay disconnected until this UnixNano
	conn    *websocket.Conn
	done    chan struct{}
	cancel  context.CancelFunc
}

type delivery struct {
	cursor string
	part   int32
	off    int64
	room   string
	conn   int
	at     time.Time
}

type connInfo struct {
	at   time.Time
	from string // position resumed from ("" = the start)
}

type resyncInfo struct {
	conn     int
	reason   string
	from     string
	position string
	at       time.Time
}

func newStream(name, room, kind string) *streamRecv {
	return &streamRecv{name: name, room: room, kind: kind, live: make(chan struct{}), done: make(chan struct{})}
}

func (s *streamRecv) setSlow(v bool) { s.slow.Store(v) }

// goAway disconnects a WebSocket subscriber and keeps it away for d: it
// then resumes from its position, which may be beyond the replay window.
func (s *streamRecv) goAway(d time.Duration) {
	s.away.Store(time.Now().Add(d).UnixNano())
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
}

func (s *streamRecv) waitLive(t testing.TB) {
	select {
	case <-s.live:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not live after 30s", s.name)
	}
}

func (s *streamRecv) stop() {
	s.cancel()
	<-s.done
}

func (s *streamRecv) connected(r *run) {
	s.mu.Lock()
	s.conns = append(s.conns, connInfo{at: time.Now(), from: s.lastPos})
	n := len(s.conns)
	from := s.lastPos
	s.mu.Unlock()
	if n > 1 {
		r.hist.add("%s: connection %d resumes from %q", s.name, n, from)
	}
	s.liveOne.Do(func() { close(s.live) })
}

func (s *streamRecv) got(cur, room string) {
	p, o, err := msgmesh.ParseCursor(cur)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.dels = append(s.dels, delivery{cursor: cur, part: p, off: o, room: room, conn: len(s.conns), at: time.Now()})
	s.mu.Unlock()
}

func (s *streamRecv) resync(r *run, reason, position string) {
	s.mu.Lock()
	from := ""
	if n := len(s.conns); n > 0 {
		from = s.conns[n-1].from
	}
	s.resyncs = append(s.resyncs, resyncInfo{conn: len(s.conns), reason: reason, from: from, position: position, at: time.Now()})
	s.mu.Unlock()
	r.hist.add("%s: resync %s from %q to %q", s.name, reason, from, position)
}

// newSSE subscribes with the Go client (which resumes from its position
// and deduplicates by cursor, as the spec says the SDKs do).
func (r *run) newSSE(ctx context.Context, name, room string) *streamRecv {
	s := newStream(name, room, "sse")
	cctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	c := r.client(r.proxy.url())
	sub, err := c.Subscribe(cctx, topic, msgmesh.SubscribeOptions{
		Room: room, From: "earliest", IdleTimeout: 4 * time.Second,
		OnMessage: func(m msgmesh.Message) { s.got(m.Cursor, m.RoomName()) },
		OnResync:  func(rs msgmesh.Resync) { s.resync(r, rs.Reason, rs.Position) },
		OnPosition: func(p string) {
			s.mu.Lock()
			s.lastPos = p
			s.mu.Unlock()
		},
		OnStateChange: func(st msgmesh.State) {
			if st == msgmesh.StateLive {
				s.connected(r)
			}
		},
		OnError: func(err error) {
			if cctx.Err() == nil {
				r.hist.add("%s: %v", name, err)
			}
		},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	go func() { <-cctx.Done(); sub.Close(); <-sub.Done(); close(s.done) }()
	return s
}

// wsFrame is any server frame of /v1/ws.
type wsFrame struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Position string          `json:"position"`
	Reason   string          `json:"reason"`
	Error    string          `json:"error"`
	Message  json.RawMessage `json:"message"`
}

// newWS is a raw WebSocket subscriber: it keeps duplicates, so the
// checker sees exactly what the server sent at each reconnect.
func (r *run) newWS(ctx context.Context, name, room string) *streamRecv {
	s := newStream(name, room, "ws")
	cctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() {
		defer close(s.done)
		for cctx.Err() == nil {
			err := s.wsOnce(cctx, r)
			if cctx.Err() != nil {
				return
			}
			r.hist.add("%s: connection ended: %v", name, err)
			wait := 100 * time.Millisecond
			if d := time.Until(time.Unix(0, s.away.Load())); d > wait {
				wait = d
			}
			select {
			case <-cctx.Done():
			case <-time.After(wait):
			}
		}
	}()
	return s
}

func (s *streamRecv) wsOnce(ctx context.Context, r *run) error {
	u := "ws" + strings.TrimPrefix(r.proxy.url(), "http") + "/v1/ws"
	d := websocket.Dialer{HandshakeTimeout: 3 * time.Second}
	hdr := http.Header{"Authorization": {"Bearer " + r.cluster.AdminKey}}
	conn, resp, err := d.DialContext(ctx, u, hdr)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("dial: %v (HTTP %d)", err, resp.StatusCode)
		}
		return fmt.Errorf("dial: %v", err)
	}
	defer conn.Close()
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	s.mu.Lock()
	from := s.lastPos
	s.mu.Unlock()
	sub := map[string]any{"type": "subscribe", "id": "s", "topic": topic}
	if s.room != "" {
		sub["room"] = s.room
	}
	if from != "" {
		sub["cursor"] = from
	} else {
		sub["from"] = "earliest"
	}
	if err := conn.WriteJSON(sub); err != nil {
		return err
	}
	subscribed := false
	for {
		_ = conn.SetReadDeadline(time.Now().Add(4 * time.Second))
		var f wsFrame
		if err := conn.ReadJSON(&f); err != nil {
			return err
		}
		switch f.Type {
		case "subscribed":
			if !subscribed {
				subscribed = true
				s.connected(r)
			}
			s.setPos(f.Position)
		case "resync":
			if !subscribed {
				// The resync comes before "subscribed": count it on the
				// connection it belongs to.
				subscribed = true
				s.connected(r)
			}
			s.resync(r, f.Reason, f.Position)
			s.setPos(f.Position)
		case "message":
			var m struct {
				Cursor string  `json:"cursor"`
				Room   *string `json:"room"`
			}
			if err := json.Unmarshal(f.Message, &m); err != nil {
				return fmt.Errorf("message frame %s: %v", f.Message, err)
			}
			room := ""
			if m.Room != nil {
				room = *m.Room
			}
			s.got(m.Cursor, room)
			s.setPos(f.Position)
			if s.slow.Load() {
				time.Sleep(40 * time.Millisecond)
			}
		case "closed":
			s.setPos(f.Position)
			return fmt.Errorf("closed %s: %s", f.Reason, f.Error)
		}
	}
}

func (s *streamRecv) setPos(p string) {
	if p == "" {
		return
	}
	s.mu.Lock()
	s.lastPos = p
	s.mu.Unlock()
}

// parsePosition reads "<epoch>.<n0>-<n1>-..." into next offsets (-1 for
// an untracked partition); nil when p is not a position.
func parsePosition(p string) []int64 {
	i := strings.IndexByte(p, '.')
	if i < 0 {
		return nil
	}
	parts := strings.Split(p[i+1:], "-")
	out := make([]int64, len(parts))
	for k, s := range parts {
		if s == "" {
			out[k] = -1
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil
		}
		out[k] = v
	}
	return out
}

// warranted reports whether a resync from from to position was due: some
// partition's gap exceeds the replay window (the checker's nodes keep the
// age window at its default of a day and lose nothing to retention). It
// also returns the gap [from, to) per partition that the resync excuses.
func warranted(from, position string) (bool, [][2]int64) {
	f, p := parsePosition(from), parsePosition(position)
	if f == nil || p == nil || len(f) != len(p) {
		return false, nil
	}
	gaps := make([][2]int64, len(p))
	ok := false
	for i := range p {
		gaps[i] = [2]int64{-1, -1}
		if f[i] < 0 || p[i] < 0 {
			continue
		}
		gaps[i] = [2]int64{f[i], p[i]}
		if p[i]-f[i] > replayWindow {
			ok = true
		}
	}
	return ok, gaps
}

// excused returns the acknowledged cursors of scope that lie in the gap
// of a warranted resync.
func (s *streamRecv) excusedSet(scope map[string]ackInfo) map[string]bool {
	s.mu.Lock()
	rs := append([]resyncInfo(nil), s.resyncs...)
	s.mu.Unlock()
	out := map[string]bool{}
	for _, x := range rs {
		ok, gaps := warranted(x.from, x.position)
		if !ok {
			continue
		}
		for c := range scope {
			p, o, _ := msgmesh.ParseCursor(c)
			if int(p) < len(gaps) && o >= gaps[p][0] && o < gaps[p][1] {
				out[c] = true
			}
		}
	}
	return out
}

func (s *streamRecv) caughtUp(r *run) bool {
	scope := r.ackedIn(s.room)
	ex := s.excusedSet(scope)
	s.mu.Lock()
	seen := make(map[string]bool, len(s.dels))
	for _, d := range s.dels {
		seen[d.cursor] = true
	}
	s.mu.Unlock()
	for c := range scope {
		if !seen[c] && !ex[c] {
			return false
		}
	}
	return true
}

// check computes the row of this receiver.
func (s *streamRecv) check(r *run) Row {
	scope := r.ackedIn(s.room)
	ex := s.excusedSet(scope)
	s.mu.Lock()
	defer s.mu.Unlock()
	row := Row{Mode: s.name, Acked: len(scope), Reconnects: len(s.conns) - 1}
	seen := map[string]bool{}
	maxOff := map[int32]int64{}
	freshOnConn := map[[2]int64]bool{} // (conn, partition) -> a fresh message came
	misrouted := 0
	for _, d := range s.dels {
		if s.room != "" && d.room != s.room {
			misrouted++
		}
		mo, any := maxOff[d.part]
		switch {
		case seen[d.cursor]:
			row.Dups++
			if d.conn <= 1 || freshOnConn[[2]int64{int64(d.conn), int64(d.part)}] {
				row.DupsOff++
				r.hist.add("ANOMALY %s: duplicate %s on connection %d not at its start", s.name, d.cursor, d.conn)
			}
		case any && d.off <= mo:
			row.OrderViol++
			r.hist.add("ANOMALY %s: %s after offset %d of its partition", s.name, d.cursor, mo)
		default:
			freshOnConn[[2]int64{int64(d.conn), int64(d.part)}] = true
		}
		seen[d.cursor] = true
		if !any || d.off > mo {
			maxOff[d.part] = d.off
		}
	}
	var firstLost time.Time
	for c, a := range scope {
		switch {
		case seen[c]:
			row.Received++
		case ex[c]:
			row.Excused++
		default:
			row.Lost++
			if firstLost.IsZero() || a.at.Before(firstLost) {
				firstLost = a.at
			}
		}
	}
	for _, x := range s.resyncs {
		row.Resyncs++
		if ok, _ := warranted(x.from, x.position); !ok {
			row.ResyncsBad++
			r.hist.add("ANOMALY %s: resync %s from %q to %q is not beyond the window", s.name, x.reason, x.from, x.position)
		}
	}
	var notes []string
	if s.kind == "sse" {
		notes = append(notes, "Go client (dedupes)")
	} else {
		notes = append(notes, "raw frames")
	}
	if misrouted > 0 {
		row.OrderViol += misrouted
		notes = append(notes, fmt.Sprintf("%d from another room", misrouted))
	}
	if row.Lost > 0 {
		notes = append(notes, "first lost acknowledged at "+firstLost.Format("15:04:05.000"))
		r.hist.add("ANOMALY %s: %d acknowledged messages never received (first acknowledged %s)", s.name, row.Lost, firstLost.Format("15:04:05.000"))
	}
	row.Extra = strings.Join(notes, "; ")
	return row
}
