// Package guarantees is the fault-injecting checker of spec section 3
// (issue 15): real msgmesh processes on a real Kafka broker, producers that
// record every acknowledged cursor, receivers in every mode, faults on a
// seeded schedule, and per-mode checks printed as a table.
//
// This file holds the machinery: the msgmesh processes (start, kill -9,
// SIGSTOP/SIGCONT, restart on the same address), a TCP proxy that cuts
// and stalls client connections, and the history kept for a failure.
package guarantees

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// history is the checker's log of what happened when: producers' acks are
// not in it (too many), every connect, resync, fault and anomaly is.
type history struct {
	mu    sync.Mutex
	start time.Time
	evs   []event
}

type event struct {
	at   time.Time
	what string
}

func newHistory() *history { return &history{start: time.Now()} }

func (hs *history) add(format string, a ...any) {
	hs.mu.Lock()
	hs.evs = append(hs.evs, event{time.Now(), fmt.Sprintf(format, a...)})
	hs.mu.Unlock()
}

// report is the history for a failure: everything when it is short,
// else the faults, resyncs and anomalies with the lines around each
// anomaly's subject (its cursor).
func (hs *history) report() string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var b strings.Builder
	line := func(e event) { fmt.Fprintf(&b, "  %8.3fs %s\n", e.at.Sub(hs.start).Seconds(), e.what) }
	if len(hs.evs) <= 1500 {
		for _, e := range hs.evs {
			line(e)
		}
		return b.String()
	}
	b.WriteString("  (long history: faults, restarts, resyncs and anomalies only)\n")
	shown := 0
	for _, e := range hs.evs {
		w := e.what
		if strings.HasPrefix(w, "FAULT ") || strings.HasPrefix(w, "restarted") || strings.HasPrefix(w, "resumed") || strings.Contains(w, "resync") || strings.HasPrefix(w, "(log of") {
			line(e)
		} else if strings.HasPrefix(w, "ANOMALY") && shown < 200 {
			line(e)
			shown++
		}
	}
	return b.String()
}

// faultsBetween reports whether a process fault (kill, pause) of a node
// running one of roles began in [from, to].
func (hs *history) faultsBetween(from, to time.Time, kinds ...string) bool {
	return hs.countFaults(from, to, kinds...) > 0
}

// countFaults is how many faults of kinds began between from and to.
func (hs *history) countFaults(from, to time.Time, kinds ...string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, e := range hs.evs {
		if e.at.Before(from) || e.at.After(to) || !strings.HasPrefix(e.what, "FAULT ") {
			continue
		}
		for _, k := range kinds {
			if strings.Contains(e.what, k) {
				n++
				break
			}
		}
	}
	return n
}

// countEvents counts the events between from and to whose text is one of
// whats exactly.
func (hs *history) countEvents(from, to time.Time, whats ...string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, e := range hs.evs {
		if !e.at.Before(from) && !e.at.After(to) && slices.Contains(whats, e.what) {
			n++
		}
	}
	return n
}

// node is one msgmesh process (restartable on the same address).
type node struct {
	name    string
	target  string // --target
	addr    string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

func (n *node) url() string { return "http://" + n.addr }

// serves reports whether the node serves role's API.
func (n *node) serves(role string) bool {
	return n.target == "all" || n.target == role
}

func (n *node) start(t testing.TB) {
	t.Helper()
	if err := n.startErr(h.Binary(t)); err != nil {
		t.Fatal(err)
	}
}

// startErr starts the process (bin serve --target=...) and waits until it
// is ready; safe off the test goroutine.
func (n *node) startErr(bin string) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, "serve", "--target="+n.target)
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()
	if err := n.waitReady(exited); err != nil {
		return fmt.Errorf("%s (%s): %v\n%s", n.name, n.target, err, n.tail(40))
	}
	return nil
}

// waitReady waits for /readyz (every target serves it, the dispatcher
// too).
func (n *node) waitReady(exited chan struct{}) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("exited early")
		default:
		}
		if r, err := quick.Get(n.url() + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready in 90s")
}

var quick = &http.Client{Timeout: 2 * time.Second}

// tail returns the last lines of the process log of this run (0 = all of
// this run).
func (n *node) tail(lines int) string {
	b, _ := os.ReadFile(n.logPath)
	s := string(b)
	if i := strings.LastIndex(s, "==== start "); i >= 0 {
		s = s[i:]
	}
	if lines > 0 {
		ls := strings.Split(s, "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		s = strings.Join(ls, "\n")
	}
	return s
}

func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(sig)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
}

func (n *node) kill() {
	n.signal(syscall.SIGCONT)
	n.signal(syscall.SIGKILL)
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// proxy is a TCP proxy in front of the realtime nodes: each new client
// connection goes to the next live backend in turn (so a resume lands on
// another node), and the checker can cut every connection or stall them
// (stop forwarding without closing).
type proxy struct {
	ln       net.Listener
	backends func() []string

	mu      sync.Mutex
	next    int
	conns   map[*pconn]struct{}
	stalled chan struct{} // closed when not stalled
}

type pconn struct{ a, b net.Conn }

func newProxy(t testing.TB, backends func() []string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, backends: backends, conns: map[*pconn]struct{}{}, stalled: closedChan()}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func closedChan() chan struct{} { c := make(chan struct{}); close(c); return c }

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	bs := p.backends()
	if len(bs) == 0 {
		c.Close()
		return
	}
	p.mu.Lock()
	addr := bs[p.next%len(bs)]
	p.next++
	p.mu.Unlock()
	b, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	pc := &pconn{c, b}
	p.mu.Lock()
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(b, c); done <- struct{}{} }()
	go func() { p.pipe(c, b); done <- struct{}{} }()
	<-done
	c.Close()
	b.Close()
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// pipe copies src to dst, holding every chunk while the proxy is stalled.
func (p *proxy) pipe(dst, src net.Conn) {
	r := bufio.NewReaderSize(src, 32<<10)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			st := p.stalled
			p.mu.Unlock()
			<-st
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every client connection (both sides).
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.a.Close()
		pc.b.Close()
	}
	return len(p.conns)
}

// stall stops forwarding on every connection for d (they stay open).
func (p *proxy) stall(ctx context.Context, d time.Duration) {
	p.mu.Lock()
	ch := make(chan struct{})
	p.stalled = ch
	p.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.stalled = closedChan()
	p.mu.Unlock()
	close(ch)
}

func writeFile(t testing.TB, dir, name, body string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
