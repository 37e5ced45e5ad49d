package integration

// Real-Chromium EventSource tests of the stream's start and end: a stream
// cut before its first message resumes exactly (the id-only start event),
// and the README snippet stops on a terminal answer instead of looping.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// browserRig is the page of browserPage (the README snippet on room eu of
// orders, plus a whole-topic EventSource) served beside a proxied msgmesh.
type browserRig struct {
	t      *testing.T
	ctx    context.Context
	proxy  *h.Proxy
	site   string
	tokens *atomic.Int64 // token fetches by the page
}

func newBrowserRig(t *testing.T, n *h.Node, token string, wholeQuery string) *browserRig {
	t.Helper()
	proxy := h.NewProxy(t, strings.TrimPrefix(n.URL, "http://"))
	page := strings.NewReplacer(
		"/*README*/", readmeSSESnippet(t, proxy.URL),
		"/*BASE*/", fmt.Sprintf("%q", proxy.URL),
		"/*TOKEN*/", fmt.Sprintf("%q", token),
		"?from=earliest&token=", "?"+wholeQuery+"token=",
		"<script>\nwindow.received = {};", "<script>\nwindow.logs = []; { const ce = console.error; console.error = (...a) => { window.logs.push(a.join(\" \")); ce(...a); }; }\nwindow.received = {};",
	).Replace(browserPage)
	var tokens atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})
	mux.HandleFunc("GET /my-backend/msgmesh-token", func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": token})
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	ctx := h.NewBrowser(t, 3*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	return &browserRig{t: t, ctx: ctx, proxy: proxy, site: site.URL, tokens: &tokens}
}

type rigState struct {
	pageState
	Logs []string `json:"logs"`
}

func (b *browserRig) state() rigState {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`JSON.stringify({received: window.received, opens: window.opens, errors: window.errors, made: window.made, logs: window.logs})`))
	if err != nil {
		b.t.Fatalf("read the page's state: %v", err)
	}
	var st rigState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		b.t.Fatalf("page state %q: %v", raw, err)
	}
	return st
}

func (b *browserRig) waitFor(what string, timeout time.Duration, ok func(rigState) bool) rigState {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := b.state()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: not within %v; page state: %s logs %q", what, timeout, summary(st.pageState), st.Logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gets lists the stream requests of the room stream (room) or the whole
// topic's that went through the proxy.
func (b *browserRig) gets(room bool) []h.ProxiedRequest {
	var out []h.ProxiedRequest
	for _, r := range b.proxy.Requests() {
		if r.Method == "GET" && strings.HasPrefix(r.URI, "/v1/topics/orders/events") && strings.Contains(r.URI, "room=") == room {
			out = append(out, r)
		}
	}
	return out
}

// Both streams start live (from=latest, the default) and are cut before
// any message; while they are away 20 messages are published. Chromium's
// EventSource reconnects by itself with the Last-Event-ID of the id-only
// start event and receives every one of them.
func TestRealtimeBrowserCutBeforeFirstMessage(t *testing.T) {
	h.NeedChromium(t)
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "orders", 3)
	token, _ := h.MintToken(t, n.URL, key, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"orders"}}})
	b := newBrowserRig(t, n, token, "")
	b.waitFor("both streams open", 30*time.Second, func(s rigState) bool {
		return s.Opens["room"] >= 1 && s.Opens["all"] >= 1
	})
	b.proxy.Hold()
	b.proxy.Cut()
	b.waitFor("both EventSources see the cut", 30*time.Second, func(s rigState) bool {
		return s.Errors["room"] >= 1 && s.Errors["all"] >= 1
	})
	rooms := []string{"eu", "us", "apac", ""}
	publishSeq(t, n.URL, key, "orders", 0, 20, rooms...)
	time.Sleep(2500 * time.Millisecond) // past the retry: hint, the reconnects wait at the proxy
	b.proxy.Release()
	b.waitFor("both EventSources reopen by themselves", 30*time.Second, func(s rigState) bool {
		return s.Opens["room"] >= 2 && s.Opens["all"] >= 2
	})
	publishSeq(t, n.URL, key, "orders", 20, 24, rooms...)
	want := map[string]map[int]bool{"room": {}, "all": {}}
	for i := range 24 {
		want["all"][i] = true
		if rooms[i%len(rooms)] == "eu" {
			want["room"][i] = true
		}
	}
	got := func(s rigState, label string) map[int]int {
		g := map[int]int{}
		for _, ev := range s.Received[label] {
			if ev.Seq != nil {
				g[*ev.Seq]++
			}
		}
		return g
	}
	st := b.waitFor("every message, those published while cut off included", 60*time.Second, func(s rigState) bool {
		for label, w := range want {
			g := got(s, label)
			for i := range w {
				if g[i] == 0 {
					return false
				}
			}
		}
		return true
	})
	for label, w := range want {
		for seq, k := range got(st, label) {
			if !w[seq] || k != 1 {
				t.Errorf("%s: seq %d received %d times (wanted: %v)", label, seq, k, w[seq])
			}
		}
		gets := b.gets(label == "room")
		if len(gets) != 2 {
			t.Fatalf("%s: %d stream requests, want the first and one reconnect", label, len(gets))
		}
		if id := gets[1].Header.Get("Last-Event-ID"); !strings.Contains(id, ".") {
			t.Errorf("%s: the reconnect sent Last-Event-ID %q, want the starting position", label, id)
		}
		if st.Made[label] != 1 {
			t.Errorf("%s: %d EventSources made, want 1 (the native one reconnects)", label, st.Made[label])
		}
	}
}

// The README snippet stops on a terminal answer: on an unknown topic (404)
// it asks once why and stops, without fetching tokens in a loop; on a
// deleted topic (msgmesh-closed topic_deleted) it stops.
func TestRealtimeBrowserSnippetStops(t *testing.T) {
	h.NeedChromium(t)
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "other", 1)
	token, _ := h.MintToken(t, n.URL, key, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"orders"}}})
	b := newBrowserRig(t, n, token, "")
	b.waitFor("the snippet gives up on the unknown topic", 30*time.Second, func(s rigState) bool {
		return strings.Contains(strings.Join(s.Logs, "\n"), "stopped: 404")
	})
	time.Sleep(5 * time.Second) // twice the retry hint, and more than the first backoff
	if k := b.tokens.Load(); k != 1 {
		t.Errorf("the snippet fetched %d tokens for an unknown topic, want 1", k)
	}
	if k := len(b.gets(true)); k != 2 {
		t.Errorf("%d requests for the unknown topic, want 2 (the EventSource and the one fetch asking why)", k)
	}

	h.CreateTopic(t, n.URL, key, "orders", 3)
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.site+"/")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the stream opens", 30*time.Second, func(s rigState) bool { return s.Opens["room"] >= 1 })
	before := len(b.gets(true))
	h.Must(t, n.URL, "DELETE", "/v1/topics/orders", key, nil, http.StatusNoContent)
	b.waitFor("the snippet stops on topic_deleted", 30*time.Second, func(s rigState) bool {
		return strings.Contains(strings.Join(s.Logs, "\n"), `topic "orders" was deleted`)
	})
	time.Sleep(5 * time.Second)
	if k := len(b.gets(true)) - before; k != 0 {
		t.Errorf("%d requests after topic_deleted, want none", k)
	}
	if k := b.tokens.Load(); k != 2 {
		t.Errorf("%d token fetches, want 2 (one per page load)", k)
	}
}

// The README snippet treats a suspension (403 tenant_suspended) as
// temporary, as spec section 6 says (a top-up lifts it): it backs off and
// tries again with a fresh token, and the stream opens once the tenant is
// reinstated. Any other 403 stays terminal.
func TestRealtimeBrowserSnippetRetriesSuspension(t *testing.T) {
	h.NeedChromium(t)
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	acme := h.CreateTenant(t, n.URL, c.OperatorKey, "acme", "free")
	h.CreateTopic(t, n.URL, acme, "orders", 3)
	token, _ := h.MintToken(t, n.URL, acme, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"orders"}}})
	h.Must(t, n.URL, "POST", "/v1/tenants/acme/suspend", c.OperatorKey, map[string]any{"reason": "card declined"}, http.StatusOK)

	b := newBrowserRig(t, n, token, "")
	if ok, _ := h.PollUntil(30*time.Second, 100*time.Millisecond, func() bool { return b.tokens.Load() >= 3 }); !ok {
		t.Fatalf("the snippet fetched %d tokens while the tenant was suspended, want it to retry (logs %q)", b.tokens.Load(), b.state().Logs)
	}
	if logs := strings.Join(b.state().Logs, "\n"); strings.Contains(logs, "stopped:") {
		t.Fatalf("the snippet gave up on a suspended tenant: %q", logs)
	}
	h.Must(t, n.URL, "POST", "/v1/tenants/acme/reinstate", c.OperatorKey, nil, http.StatusOK)
	b.waitFor("the stream opens once the tenant is reinstated", 45*time.Second, func(s rigState) bool { return s.Opens["room"] >= 1 })
}
