package integration

// The real-browser test of SSE: headless Chromium's native EventSource,
// running the README's snippet as written, receives, is cut off from the
// server side mid-stream, reconnects by itself with Last-Event-ID, and in
// the end holds every published message.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// readmeSSESnippet is the JavaScript of README.md's "Receive in the browser
// (SSE)" section, with its MsgMesh address (http://127.0.0.1:8080, `make
// run`'s) replaced by base.
func readmeSSESnippet(t *testing.T, base string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "### Receive in the browser (SSE)")
	if i < 0 {
		t.Fatal(`README.md has no "### Receive in the browser (SSE)" section`)
	}
	m := regexp.MustCompile("(?s)```js\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatal("README.md's SSE section has no ```js block")
	}
	js := m[1]
	const addr = `"http://127.0.0.1:8080"`
	if !strings.Contains(js, addr) {
		t.Fatalf("the README snippet does not name %s:\n%s", addr, js)
	}
	return strings.Replace(js, addr, fmt.Sprintf("%q", base), 1)
}

// browserPage is the test page: it records what every EventSource on it
// receives into window.received[label] (label "room" for a stream with
// room=, else "all") without touching the code under test, then runs the
// README snippet (room eu of topic orders) and, beside it, an EventSource
// on the whole 3-partition topic from the earliest record.
const browserPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>msgmesh SSE</title></head><body>
<script>
window.received = {}; window.opens = {}; window.errors = {}; window.made = {};
const NativeEventSource = window.EventSource;
window.EventSource = class extends NativeEventSource {
  constructor(url, init) {
    super(url, init);
    const label = new URL(url, location.href).searchParams.has("room") ? "room" : "all";
    const rec = (window.received[label] = window.received[label] || []);
    window.made[label] = (window.made[label] || 0) + 1;
    window.opens[label] = window.opens[label] || 0;
    this.addEventListener("open", () => { window.opens[label]++; });
    this.addEventListener("error", () => { window.errors[label] = (window.errors[label] || 0) + 1; });
    this.addEventListener("message", (e) => {
      const m = JSON.parse(e.data);
      rec.push({cursor: m.cursor, room: m.room, seq: m.data ? m.data.seq : null, id: e.lastEventId, conn: window.opens[label]});
    });
    this.addEventListener("msgmesh-resync", (e) => {
      rec.push({resync: e.data, id: e.lastEventId, conn: window.opens[label]});
    });
  }
};
</script>
<script>
/*README*/
</script>
<script>
new EventSource(/*BASE*/ + "/v1/topics/orders/events?from=earliest&token=" + encodeURIComponent(/*TOKEN*/));
</script>
</body></html>`

type pageEvent struct {
	Cursor string  `json:"cursor"`
	Room   *string `json:"room"`
	Seq    *int    `json:"seq"`
	ID     string  `json:"id"`
	Conn   int     `json:"conn"`
	Resync string  `json:"resync"`
}

type pageState struct {
	Received map[string][]pageEvent `json:"received"`
	Opens    map[string]int         `json:"opens"`
	Errors   map[string]int         `json:"errors"`
	Made     map[string]int         `json:"made"`
}

// The README's EventSource snippet, in headless Chromium, against a real
// broker: it receives; a TCP proxy between the browser and msgmesh severs
// the streams mid-stream and holds the reconnects while more is published;
// the native EventSource reconnects by itself with Last-Event-ID, and in
// the end both streams (the README's room stream and a whole-topic stream
// across 3 partitions) hold every published message exactly once.
func TestRealtimeBrowserEventSource(t *testing.T) {
	h.NeedChromium(t)
	start := time.Now()
	c := h.NewCluster(t)
	n := c.Start(t, h.Unlimited)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "orders", 3)
	// What the README's backend does: a token that may only subscribe.
	token, _ := h.MintToken(t, n.URL, key, 900, []h.Cap{{Ops: []string{"subscribe"}, Topics: []string{"orders"}}})

	proxy := h.NewProxy(t, strings.TrimPrefix(n.URL, "http://"))
	page := strings.NewReplacer(
		"/*README*/", readmeSSESnippet(t, proxy.URL),
		"/*BASE*/", fmt.Sprintf("%q", proxy.URL),
		"/*TOKEN*/", fmt.Sprintf("%q", token),
	).Replace(browserPage)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	})
	mux.HandleFunc("GET /my-backend/msgmesh-token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": token})
	})
	site := httptest.NewServer(mux) // 127.0.0.1, another origin than msgmesh's: CORS
	t.Cleanup(site.Close)

	ctx := h.NewBrowser(t, 3*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	state := func() pageState {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({received: window.received, opens: window.opens, errors: window.errors, made: window.made})`))
		if err != nil {
			t.Fatalf("read the page's state: %v", err)
		}
		var st pageState
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			t.Fatalf("page state %q: %v", raw, err)
		}
		return st
	}
	// eu is every 4th message; the others spread over the 3 partitions.
	rooms := []string{"eu", "us", "apac", ""}
	next := 0
	publish := func(k int) {
		t.Helper()
		publishSeq(t, n.URL, key, "orders", next, next+k, rooms...)
		next += k
	}
	waitFor := func(what string, timeout time.Duration, ok func(pageState) bool) pageState {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			st := state()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; page state: %+v", what, timeout, summary(st))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// 1. Both streams are live: the README's one starts at the live end
	// (its default), so publish until it has something.
	var st pageState
	deadline := time.Now().Add(30 * time.Second)
	for {
		publish(4)
		st = state()
		if len(st.Received["room"]) > 0 && len(st.Received["all"]) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the streams received nothing within 30s; page state: %+v", summary(st))
		}
		time.Sleep(250 * time.Millisecond)
	}
	firstRoomSeq := *st.Received["room"][0].Seq

	// 2. Mid-stream, while messages keep being published: cut every
	// connection from the server side and hold the reconnects.
	cutAt := -1
	for b := 0; b < 30; b++ {
		publish(4)
		if cutAt < 0 && b >= 10 {
			if s := state(); len(s.Received["all"]) >= 20 {
				proxy.Hold()
				proxy.Cut()
				cutAt = next
				t.Logf("cut both streams after seq %d (page had %d/%d messages)", next-1, len(s.Received["all"]), len(s.Received["room"]))
			}
		}
		time.Sleep(40 * time.Millisecond)
	}
	if cutAt < 0 {
		t.Fatalf("the page never had 20 messages to cut in the middle of: %+v", summary(state()))
	}
	// The EventSources noticed (error) and their reconnects are waiting at
	// the proxy (the server's retry hint is 2s).
	waitFor("both EventSources see the cut", 30*time.Second, func(s pageState) bool {
		return s.Errors["room"] >= 1 && s.Errors["all"] >= 1
	})
	time.Sleep(2500 * time.Millisecond) // past the retry: hint
	publish(20)                         // still cut off
	proxy.Release()
	waitFor("both EventSources reopen by themselves", 30*time.Second, func(s pageState) bool {
		return s.Opens["room"] >= 2 && s.Opens["all"] >= 2
	})
	publish(40) // live again
	total := next

	want := map[string]map[int]bool{"room": {}, "all": {}}
	for i := range total {
		want["all"][i] = true
		if rooms[i%len(rooms)] == "eu" && i >= firstRoomSeq {
			want["room"][i] = true
		}
	}
	st = waitFor("every message in both streams", 60*time.Second, func(s pageState) bool {
		for label, w := range want {
			got := map[int]bool{}
			for _, ev := range s.Received[label] {
				if ev.Seq != nil {
					got[*ev.Seq] = true
				}
			}
			for i := range w {
				if !got[i] {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // anything extra would show now
	st = state()

	reqs := proxy.Requests()
	for _, label := range []string{"room", "all"} {
		evs := st.Received[label]
		// The EventSource reconnected by itself: the page made it once.
		if st.Made[label] != 1 {
			t.Errorf("%s: %d EventSources were made; the native one should have reconnected by itself", label, st.Made[label])
		}
		// Exactly what was published, nothing else; duplicates (none
		// expected: resume is exact) only at the boundary.
		count := map[int]int{}
		lastOfConn := map[int]map[string]string{} // conn → partition → cursor of its last message
		lastID := map[int]string{}
		prevOffset := map[string]int{}
		for _, ev := range evs {
			if ev.Resync != "" {
				t.Errorf("%s: unexpected msgmesh-resync %s", label, ev.Resync)
				continue
			}
			if ev.Seq == nil {
				t.Errorf("%s: message %s without a seq", label, ev.Cursor)
				continue
			}
			if !want[label][*ev.Seq] {
				t.Errorf("%s: received seq %d (room %v), not one this stream should get", label, *ev.Seq, ev.Room)
			}
			count[*ev.Seq]++
			part, off := splitCursor(t, ev.Cursor)
			pk := fmt.Sprintf("%d/%s", ev.Conn, part)
			if o, ok := prevOffset[pk]; ok && off <= o {
				t.Errorf("%s: partition %s went from offset %d to %d on connection %d", label, part, o, off, ev.Conn)
			}
			prevOffset[pk] = off
			if lastOfConn[ev.Conn] == nil {
				lastOfConn[ev.Conn] = map[string]string{}
			}
			lastOfConn[ev.Conn][part] = ev.Cursor
			lastID[ev.Conn] = ev.ID
			if !strings.Contains(ev.ID, ".") {
				t.Errorf("%s: event id %q is not a position", label, ev.ID)
			}
		}
		dups := 0
		for _, ev := range evs {
			if ev.Seq == nil || count[*ev.Seq] < 2 || ev.Conn < 2 {
				continue
			}
			dups++
			part, _ := splitCursor(t, ev.Cursor)
			if lastOfConn[ev.Conn-1][part] != ev.Cursor {
				t.Errorf("%s: seq %d (%s) received again on connection %d, not at the boundary", label, *ev.Seq, ev.Cursor, ev.Conn)
			}
		}
		for seq, k := range count {
			if k > 2 {
				t.Errorf("%s: seq %d received %d times", label, seq, k)
			}
		}
		// The reconnect carried the id of the last event received before
		// the cut, as Last-Event-ID.
		var gets []h.ProxiedRequest
		for _, r := range reqs {
			if r.Method == "GET" && strings.HasPrefix(r.URI, "/v1/topics/orders/events") &&
				strings.Contains(r.URI, "room=") == (label == "room") {
				gets = append(gets, r)
			}
		}
		if len(gets) != 2 {
			t.Errorf("%s: %d stream requests went through the proxy, want 2 (the first and one reconnect)", label, len(gets))
		}
		if len(gets) >= 1 && gets[0].Header.Get("Last-Event-ID") != "" {
			t.Errorf("%s: the first request already had Last-Event-ID %q", label, gets[0].Header.Get("Last-Event-ID"))
		}
		if len(gets) >= 2 {
			// The id of the last message before the cut, or a later id-only
			// event's (the room stream's partition moved on with other
			// rooms' records).
			got := gets[1].Header.Get("Last-Event-ID")
			if got == "" || !samePositionOrLater(t, got, lastID[1]) {
				t.Errorf("%s: the reconnect sent Last-Event-ID %q, want %q (the id of the last event before the cut) or a later position", label, got, lastID[1])
			}
			if !strings.Contains(gets[1].URI, "token=") {
				t.Errorf("%s: the reconnect %s has no token", label, gets[1].URI)
			}
		}
		t.Logf("%s: %d messages (%d expected, %d boundary duplicates) on %d connections; reconnect Last-Event-ID %q",
			label, len(evs), len(want[label]), dups, st.Opens[label], lastID[1])
	}
	for _, r := range reqs {
		if r.Method == "OPTIONS" {
			t.Logf("preflight %s (Access-Control-Request-Headers %q)", r.URI, r.Header.Get("Access-Control-Request-Headers"))
		}
	}
	t.Logf("published %d messages (cut after seq %d); took %v", total, cutAt-1, time.Since(start).Round(time.Millisecond))
}

// samePositionOrLater reports whether position id got is of want's epoch
// and at or after it in every partition.
func samePositionOrLater(t *testing.T, got, want string) bool {
	ge, _, _ := strings.Cut(got, ".")
	we, rest, _ := strings.Cut(want, ".")
	if ge != we {
		return false
	}
	for p := range strings.Split(rest, "-") {
		if posNext(t, got, int32(p)) < posNext(t, want, int32(p)) {
			return false
		}
	}
	return true
}

func splitCursor(t *testing.T, c string) (string, int) {
	t.Helper()
	var p, o int
	if _, err := fmt.Sscanf(c, "%d-%d", &p, &o); err != nil {
		t.Fatalf("cursor %q: %v", c, err)
	}
	return fmt.Sprint(p), o
}

// summary is a page state short enough for a failure message.
func summary(st pageState) string {
	var b strings.Builder
	labels := make([]string, 0, len(st.Received))
	for l := range st.Received {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		evs := st.Received[l]
		var seqs []int
		for _, ev := range evs {
			if ev.Seq != nil {
				seqs = append(seqs, *ev.Seq)
			}
		}
		fmt.Fprintf(&b, "%s: %d events (opens %d, errors %d, made %d) seqs %v; ", l, len(evs), st.Opens[l], st.Errors[l], st.Made[l], seqs)
	}
	return b.String()
}
