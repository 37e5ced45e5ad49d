package realtime

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// sseOut writes one SSE stream. Where net/http lets the connection be taken
// over (HTTP/1.1: always behind msgmesh serve), the stream hijacks it once
// its answer is decided and frames the chunked body itself: each batch of
// events leaves in one write from a pooled buffer, with the write deadline
// moved at most every sseDeadlineSlack, and an idle stream holds no buffer,
// no request state, no handler goroutine and no ticker: its one goroutine
// waits for the live feed in a read of the connection (wait), which sees a
// hang-up at once, with the heartbeat as the read deadline
// (docs/benchmarks.md, realtime findings). Elsewhere (HTTP/2, HTTP/1.0,
// test recorders) it writes through net/http's ResponseWriter and flushes
// once per batch. Only the stream's goroutine uses it, but for poke.
type sseOut struct {
	conn    net.Conn // hijacked; nil: through w
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// head is written before the first batch (hijacked: the status line
	// and headers), in the same write.
	head []byte
	// buf is the batch not written yet (from sseBufs; nil: empty); when
	// hijacked its first chunkRoom bytes are kept for the chunk size.
	buf *[]byte
	// deadline is the connection's write deadline (hijacked).
	deadline time.Time
	failed   bool
	closed   bool
}

const (
	// chunkRoom is kept before a batch for its chunk size line (at most
	// 8 hex digits and CRLF: batches stay far below 4 GiB).
	chunkRoom = 10
	// sseDeadlineSlack: a batch's write deadline is moved only when it
	// is closer than write_timeout, to write_timeout plus this; a write
	// that makes no progress fails after write_timeout to
	// write_timeout+sseDeadlineSlack, without a timer reset per write.
	sseDeadlineSlack = 250 * time.Millisecond
	// sseBufKeep: larger batch buffers are not pooled.
	sseBufKeep = 64 << 10
)

var sseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// errClientGone: the client closed a hijacked stream's connection.
var errClientGone = errors.New("the client closed the connection")

// hijackSSE takes r's connection over for a 200 event stream whose headers
// are set in w.Header(); nil where net/http cannot hand it over (then the
// stream writes through w).
func hijackSSE(w http.ResponseWriter, r *http.Request, timeout time.Duration) *sseOut {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return nil
	}
	h := w.Header().Clone()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	// What net/http would have sent: the status line, the handler's and
	// the middleware's headers (X-Request-Id, CORS), Date, chunked.
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Transfer-Encoding", "chunked")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return &sseOut{conn: conn, head: b.Bytes(), timeout: timeout}
}

// wait is how a hijacked stream's one goroutine waits for its live feed:
// in a read of the connection, so that a hang-up is seen at once without a
// second goroutine per stream. It returns wokeItems once wake has a signal,
// wokeBeat once beat has passed, ctx's error once ctx ends, or
// errClientGone when the read fails (the client went away). A client
// sends nothing after its request; whatever it sends is ignored. poke
// (from the hub, or ctx ending) makes the read return at once; the
// deadline is set again before wake is looked at, so a signal sent
// after that look pokes a read that has not started or is waiting.
func (o *sseOut) wait(ctx context.Context, wake <-chan struct{}, beat time.Time) (woke, error) {
	var b [16]byte
	for {
		if err := o.conn.SetReadDeadline(beat); err != nil {
			return 0, errClientGone
		}
		select {
		case <-wake:
			return wokeItems, nil
		default:
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if !time.Now().Before(beat) {
			return wokeBeat, nil
		}
		if _, err := o.conn.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, errClientGone
		}
	}
}

// aLongTimeAgo is a read deadline in the past: a read waiting returns.
var aLongTimeAgo = time.Unix(1, 0)

// poke makes a wait's read return now (any goroutine).
func (o *sseOut) poke() { _ = o.conn.SetReadDeadline(aLongTimeAgo) }

// add appends b to the batch.
func (o *sseOut) add(b []byte) {
	if o.buf == nil {
		o.buf = sseBufs.Get().(*[]byte)
		if o.conn != nil {
			*o.buf = append((*o.buf)[:0], make([]byte, chunkRoom)...)
		} else {
			*o.buf = (*o.buf)[:0]
		}
	}
	*o.buf = append(*o.buf, b...)
}

// flush writes the head (once) and the batch.
func (o *sseOut) flush() error {
	if o.failed || o.closed {
		return errors.New("sse stream already ended")
	}
	if o.buf == nil && o.head == nil {
		return nil
	}
	var err error
	if o.conn != nil {
		err = o.writeConn(false)
	} else {
		err = o.writeW()
	}
	o.release()
	if err != nil {
		o.failed = true
	}
	return err
}

func (o *sseOut) release() {
	if o.buf != nil {
		if cap(*o.buf) <= sseBufKeep {
			sseBufs.Put(o.buf)
		}
		o.buf = nil
	}
}

// writeConn frames the batch as one chunk (and, last, the final chunk)
// and writes it with the head, in one write.
func (o *sseOut) writeConn(last bool) error {
	var body []byte
	if o.buf != nil && len(*o.buf) > chunkRoom {
		b := *o.buf
		var size [chunkRoom]byte
		hdr := append(strconv.AppendUint(size[:0], uint64(len(b)-chunkRoom), 16), '\r', '\n')
		start := chunkRoom - len(hdr)
		copy(b[start:], hdr)
		b = append(b, '\r', '\n')
		*o.buf = b
		body = b[start:]
	}
	if last {
		body = append(body, "0\r\n\r\n"...)
	}
	now := time.Now()
	if o.deadline.Sub(now) < o.timeout {
		o.deadline = now.Add(o.timeout + sseDeadlineSlack)
		_ = o.conn.SetWriteDeadline(o.deadline)
	}
	var err error
	if o.head != nil {
		bufs := net.Buffers{o.head, body}
		_, err = bufs.WriteTo(o.conn)
		o.head = nil
	} else if len(body) > 0 {
		_, err = o.conn.Write(body)
	}
	return err
}

func (o *sseOut) writeW() error {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if o.buf != nil {
		if _, err := o.w.Write(*o.buf); err != nil {
			return err
		}
	}
	o.head = nil
	return o.rc.Flush()
}

// finish ends the stream: a hijacked connection gets what is pending and
// the final chunk, then is closed. Idempotent; a failed stream is just
// closed.
func (o *sseOut) finish() {
	if o.closed {
		return
	}
	if o.conn != nil {
		if !o.failed {
			_ = o.writeConn(true)
		}
		_ = o.conn.Close()
	}
	o.release()
	o.closed = true
}
