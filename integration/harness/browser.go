package harness

// A real browser for the realtime tests: headless Debian Chromium driven
// over the DevTools protocol with chromedp, and a TCP proxy between the
// browser and msgmesh that the test can sever (to cut a stream from the
// server side) and that records every HTTP request head it forwards (to
// see the Last-Event-ID a reconnecting EventSource sends).

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is the Chromium the browser tests run: $MSGMESH_CHROMIUM,
// else /usr/bin/chromium (Debian's package, which scripts/test.sh installs
// through scripts/deps.sh), else chromium on $PATH. "" if none (also when
// $MSGMESH_CHROMIUM names a file that does not exist).
func ChromiumPath() string {
	if p := os.Getenv("MSGMESH_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// NeedChromium returns Chromium's path. Without one the test fails when
// MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 (CI: scripts/test.sh installs it), and
// is skipped otherwise.
func NeedChromium(t testing.TB) string {
	t.Helper()
	p := ChromiumPath()
	if p != "" {
		return p
	}
	const msg = "Chromium not found (want /usr/bin/chromium: `scripts/deps.sh chromium`, or set MSGMESH_CHROMIUM)"
	if os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1" {
		t.Fatal(msg + "; MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 requires the browser tests to run")
	}
	t.Skip(msg + "; skipping the real-browser test")
	return ""
}

// NewBrowser starts a fresh headless Chromium (its own empty profile) and
// returns a chromedp context for one tab, bounded by timeout. The browser's
// console output and uncaught exceptions go to the test log. It is closed
// when t ends.
func NewBrowser(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path := NeedChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("mute-audio", true),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf), chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				if len(a.Value) > 0 {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			if ev.Type != runtime.ConsoleAPICalledTypeLog { // the page logs every message
				t.Logf("browser console.%s: %v", ev.Type, args)
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			t.Logf("browser exception: %s (%s:%d)", msg, d.URL, d.LineNumber)
		}
	}))
	ctx, tcancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		tcancel()
		// Close the browser (bounded: chromedp waits for the process).
		done := make(chan struct{})
		go func() { cancel(); acancel(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Log("harness: chromium did not exit within 20s")
		}
	})
	// Start the browser now, so that a broken install fails here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("harness: start chromium %s: %v", path, err)
	}
	return ctx
}

// ProxiedRequest is the head of one HTTP request a Proxy forwarded.
type ProxiedRequest struct {
	Conn   int // the proxied connection it came on (1, 2, ...)
	Method string
	URI    string
	Header http.Header
	At     time.Time
}

// Proxy is a TCP proxy on 127.0.0.1 in front of one address. Cut severs
// every open connection (both ways, as a server that goes away would);
// Hold makes new connections wait, accepted but not forwarded, until
// Release; every HTTP/1.x request head that goes through is recorded.
type Proxy struct {
	Addr string // 127.0.0.1:port
	URL  string // http://Addr

	target string
	ln     net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	nconns  int
	reqs    []ProxiedRequest
	held    chan struct{} // nil: not holding; closed at Release
	closed  bool
	newReqs chan struct{}
}

// NewProxy listens on a free 127.0.0.1 port and forwards to target
// (host:port). It is closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, newReqs: make(chan struct{}, 1)}
	p.URL = "http://" + p.Addr
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(server) {
		if server != nil {
			_ = server.Close()
		}
		p.drop(client)
		return
	}
	p.mu.Lock()
	p.nconns++
	id := p.nconns
	p.mu.Unlock()
	// client → server, and a copy of it to the request-head parser.
	pr, pw := io.Pipe()
	go p.parse(id, pr)
	go func() {
		_, _ = io.Copy(server, io.TeeReader(client, pw))
		_ = pw.Close()
		p.drop(client)
		p.drop(server)
	}()
	_, _ = io.Copy(client, server)
	p.drop(client)
	p.drop(server)
}

// parse records the request heads of one connection's client stream; it
// always drains r, so the copy never blocks on it.
func (p *Proxy) parse(id int, r io.Reader) {
	br := bufio.NewReader(r)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			_, _ = io.Copy(io.Discard, br)
			return
		}
		p.mu.Lock()
		p.reqs = append(p.reqs, ProxiedRequest{Conn: id, Method: req.Method, URI: req.RequestURI, Header: req.Header, At: time.Now()})
		p.mu.Unlock()
		select {
		case p.newReqs <- struct{}{}:
		default:
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// Cut closes every open connection, both sides.
func (p *Proxy) Cut() {
	p.mu.Lock()
	cs := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		p.drop(c)
	}
}

// Hold makes connections accepted from now on wait until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release forwards the held connections and stops holding.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Requests returns the request heads forwarded so far, in order.
func (p *Proxy) Requests() []ProxiedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProxiedRequest(nil), p.reqs...)
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Release()
	_ = p.ln.Close()
	p.Cut()
}
