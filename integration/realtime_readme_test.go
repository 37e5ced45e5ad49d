package integration

// The README's curl loop for SSE, run as written with bash: it prints
// messages, stops on msgmesh-closed topic_deleted and on a 404, and backs
// off (with jitter) rather than loop when the server ends a stream; a
// suspended tenant's 403 is not terminal (spec section 6: it lifts).

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// readmeCurlLoop is the ```sh block after "From a shell (bash)" in README.md.
func readmeCurlLoop(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "From a shell (bash)")
	if i < 0 {
		t.Fatal(`README.md has no "From a shell (bash)" SSE loop`)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatal("README.md's curl loop has no ```sh block")
	}
	return m[1]
}

// lockedBuffer is a bytes.Buffer safe for a process writing while the
// test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestREADMECurlSSELoop(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl: %v", err)
	}
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	loop := readmeCurlLoop(t)
	start := func(key string) (*exec.Cmd, *lockedBuffer, *lockedBuffer, chan error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, bash, "-c", loop)
		cmd.Env = append(os.Environ(), "MM="+n.URL, "MSGMESH_KEY="+key)
		out, errOut := &lockedBuffer{}, &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, out, errOut, done
	}

	// An unknown topic: one 404, then it stops (no reconnect loop).
	_, _, errOut, done := start(key)
	select {
	case err := <-done:
		if err != nil || !strings.Contains(errOut.String(), "stopped: 404") {
			t.Fatalf("on an unknown topic the loop ended with %v, stderr %q; want stopped: 404", err, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the README loop kept reconnecting to an unknown topic")
	}

	// A live topic: its room's messages are printed; a deletion
	// (msgmesh-closed topic_deleted) stops the loop.
	h.CreateTopic(t, n.URL, key, "orders", 3)
	_, out, errOut, done := start(key)
	if ok, _ := h.PollUntil(15*time.Second, 100*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 1
	}); !ok {
		t.Fatalf("the README loop did not connect; stderr %q", errOut.String())
	}
	publishSeq(t, n.URL, key, "orders", 0, 4, "eu", "us")
	if ok, _ := h.PollUntil(15*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(out.String(), `"seq":2`)
	}); !ok {
		t.Fatalf("the README loop printed %q, want the eu messages", out.String())
	}
	if strings.Contains(out.String(), `"seq":1`) {
		t.Errorf("the README loop (room eu) printed a us message: %q", out.String())
	}
	h.Must(t, n.URL, "DELETE", "/v1/topics/orders", key, nil, 204)
	select {
	case err := <-done:
		if err != nil || !strings.Contains(errOut.String(), "stopped: deleted") {
			t.Fatalf("after DELETE the loop ended with %v, stderr %q; want stopped: deleted", err, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the README loop did not stop after the topic was deleted; stdout %q stderr %q", out.String(), errOut.String())
	}

	// A suspended tenant gets 403 tenant_suspended: the loop keeps backing
	// off and retrying (a top-up lifts it), and receives once reinstated.
	acme := h.CreateTenant(t, n.URL, c.OperatorKey, "acme", "free")
	h.CreateTopic(t, n.URL, acme, "orders", 3)
	h.Must(t, n.URL, "POST", "/v1/tenants/acme/suspend", c.OperatorKey, map[string]any{"reason": "card declined"}, 200)
	_, out, errOut, done = start(acme)
	select {
	case err := <-done:
		t.Fatalf("the README loop gave up on a suspended tenant (%v), stderr %q; want it to retry", err, errOut.String())
	case <-time.After(4 * time.Second): // the first two backoffs (1 s, 2 s, plus jitter)
	}
	h.Must(t, n.URL, "POST", "/v1/tenants/acme/reinstate", c.OperatorKey, nil, 200)
	if ok, _ := h.PollUntil(30*time.Second, 100*time.Millisecond, func() bool {
		return metricValue(t, n.URL, `msgmesh_realtime_subscribers{transport="sse"}`) == 1
	}); !ok {
		t.Fatalf("the README loop did not connect after the tenant was reinstated; stderr %q", errOut.String())
	}
	publishSeq(t, n.URL, acme, "orders", 0, 1, "eu")
	if ok, _ := h.PollUntil(15*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(out.String(), `"seq":0`)
	}); !ok {
		t.Fatalf("after the reinstatement the README loop printed %q, want the eu message", out.String())
	}
	h.Must(t, n.URL, "DELETE", "/v1/topics/orders", acme, nil, 204)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the README loop did not stop after acme's topic was deleted")
	}
}
