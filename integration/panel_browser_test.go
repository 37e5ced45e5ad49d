package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/services/panel"
)

// panelPage drives one tab for the panel tests.
type panelPage struct {
	t   *testing.T
	ctx context.Context
}

func (b panelPage) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b panelPage, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("browser: evaluate %.80s: %v", expr, err)
	}
	return v
}

func (b panelPage) text() string {
	return eval[string](b, `document.body ? document.body.innerText : ""`)
}

func (b panelPage) html() string {
	return eval[string](b, `document.documentElement.outerHTML`)
}

// waitText waits until the page's text holds every one of want.
func (b panelPage) waitText(timeout time.Duration, want ...string) string {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := b.text()
		ok := true
		for _, w := range want {
			if !strings.Contains(s, w) {
				ok = false
			}
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("page does not show %q within %s; it shows:\n%.3000s", want, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b panelPage) nav(url string) {
	b.t.Helper()
	b.run("open "+url, chromedp.Navigate(url))
}

// submit fills the form's fields (name → value) and clicks its button,
// then waits for the next page to load.
func (b panelPage) submit(form string, fields map[string]string) {
	b.t.Helper()
	var acts []chromedp.Action[chromedp.Void]
	for name, v := range fields {
		acts = append(acts, chromedp.SetValue(chromedp.CSS(form+` [name="`+name+`"]`), v))
	}
	eval[bool](b, `(window.confirm = () => true, true)`)
	acts = append(acts, chromedp.Click(chromedp.CSS(form+` button[type=submit]`)))
	b.run("submit "+form, acts...)
	b.run("wait for the answer", chromedp.WaitReady(chromedp.CSS("body")))
}

// screenshot writes docs/panel/<name>.png when MSGMESH_UPDATE_SCREENSHOTS=1
// (else into the test's temp dir), checking it stays small.
func (b panelPage) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := b.t.TempDir()
	if os.Getenv("MSGMESH_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "docs", "panel")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
	}
	if len(png) > 150<<10 {
		b.t.Errorf("screenshot %s is %d KB, want under 150 KB", name, len(png)>>10)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func newPanelPage(t *testing.T) panelPage {
	ctx := h.NewBrowser(t, 4*time.Minute)
	b := panelPage{t: t, ctx: ctx}
	b.run("viewport", chromedp.EmulateViewport(1000, 720))
	return b
}

// noSecretsInBrowser: document.cookie, localStorage and sessionStorage
// hold no key or session (the cookie is HttpOnly; nothing is stored).
func (b panelPage) noSecretsInBrowser(secrets ...string) {
	b.t.Helper()
	got := eval[string](b, `JSON.stringify([document.cookie, Object.entries(localStorage), Object.entries(sessionStorage)])`)
	if got != `["",[],[]]` {
		b.t.Errorf("document.cookie / localStorage / sessionStorage = %s, want all empty", got)
	}
	for _, s := range secrets {
		if strings.Contains(got, s) {
			b.t.Errorf("browser storage holds a secret %.12s…", s)
		}
	}
}

func (b panelPage) cookies() []*network.Cookie {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		b.t.Fatalf("cookies: %v", err)
	}
	return res.Cookies
}

// Issue 13 items 2, 3 and 5: log in, keys shown once and revoked, topics
// with their groups and live tail, a webhook refused by the SSRF guard
// re-enabled with a corrected URL, DLQ inspect/replay, audit; the session
// works on another node, nothing secret reaches the browser's storage, a
// cross-site form is refused, logout ends the session.
func TestPanelInBrowser(t *testing.T) {
	h.NeedChromium(t)
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	mut := h.WebhookConfig(t, rc, 2, 2*time.Second, 100*time.Millisecond)
	n := c.Start(t, mut)
	dns := h.NewFakeDNS()
	dns.Set("example.com", "127.0.0.1")
	dns.Set("hooks.example", "127.0.0.1")
	n.App.SetWebhookResolver(dns)
	b := newPanelPage(t)

	// Not signed in: the login page.
	b.nav(n.URL + "/panel/")
	b.waitText(30*time.Second, "Sign in to the panel")
	b.screenshot("login")
	b.submit(`form[action="/panel/login"]`, map[string]string{"key": "mm_" + strings.Repeat("x", 43)})
	b.waitText(10*time.Second, "That key was not accepted")

	b.submit(`form[action="/panel/login"]`, map[string]string{"key": c.AdminKey})
	b.waitText(30*time.Second, "Tenant default", "Plan", "Messages this month")
	b.screenshot("overview")
	if strings.Contains(b.html(), c.AdminKey) {
		t.Fatal("the overview page holds the key")
	}
	b.noSecretsInBrowser(c.AdminKey)
	var session *network.Cookie
	for _, ck := range b.cookies() {
		if ck.Name == panel.CookieName {
			session = ck
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Expires <= 0 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, expiring", session)
	}
	if strings.Contains(session.Value, c.AdminKey) || strings.Contains(session.Value, strings.TrimPrefix(c.AdminKey, "mm_")) {
		t.Fatal("the session cookie holds the key in plaintext")
	}

	// The same cookie works on another node (sealed under the shared keyring).
	n2 := c.Start(t, mut)
	req, _ := http.NewRequest("GET", n2.URL+"/panel/", nil)
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Tenant default") {
		t.Fatalf("node 2 /panel/ with node 1's session: %d %.300s", resp.StatusCode, body)
	}
	_ = n2.Stop()

	// Topics: create, then its page; a poll group shows with its lag.
	b.nav(n.URL + "/panel/topics")
	b.submit(`form[action="/panel/topics"]`, map[string]string{"name": "orders", "partitions": "2"})
	b.waitText(30*time.Second, "Topic orders", "Live tail")
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"n": 1})
	h.Poll(t, n.URL, c.AdminKey, "orders", h.PollReq{Group: "billing", Max: 1, WaitMs: 3000})
	b.nav(n.URL + "/panel/topics/orders")
	b.waitText(30*time.Second, "billing", "Committed", "live")
	// Live tail: a message published over HTTP appears.
	publishJSON(t, n, c.AdminKey, "orders", "room-7", map[string]any{"tail": "hello-from-http"})
	b.waitText(30*time.Second, "hello-from-http", "room-7")
	b.screenshot("topic")
	b.noSecretsInBrowser(c.AdminKey)
	// Resume from the copied position with a room filter: what came after
	// it in that room, nothing before it, nothing of another room.
	pos := eval[string](b, `document.getElementById("tail-position").value`)
	if pos == "" {
		t.Fatal("the live tail shows no position to copy")
	}
	b.nav(n.URL + "/panel/")
	publishJSON(t, n, c.AdminKey, "orders", "room-7", map[string]any{"tail": "after-the-position"})
	publishJSON(t, n, c.AdminKey, "orders", "room-9", map[string]any{"tail": "another-room"})
	b.nav(n.URL + "/panel/topics/orders?" + url.Values{"cursor": {pos}, "room": {"room-7"}}.Encode())
	b.waitText(30*time.Second, "after-the-position")
	if s := eval[string](b, `document.getElementById("tail-rows").innerText`); strings.Contains(s, "hello-from-http") || strings.Contains(s, "another-room") {
		t.Fatalf("resumed tail shows more than room-7 after the position:\n%s", s)
	}
	eval[bool](b, `(document.getElementById("tail").scrollIntoView(), true)`)
	b.screenshot("topic-tail")
	// The publish form.
	b.submit(`form[action="/panel/topics/orders/publish"]`, map[string]string{"data": `{"from":"panel-form"}`, "room": "r1"})
	b.waitText(30*time.Second, "Published at cursor")
	b.nav(n.URL + "/panel/topics")
	b.waitText(10*time.Second, "orders")
	b.screenshot("topics")

	// Keys: shown once, absent after reload, revoked.
	b.nav(n.URL + "/panel/keys")
	b.submit(`form[action="/panel/keys"]`, map[string]string{"name": "ci-key", "role": "consumer"})
	b.waitText(30*time.Second, "It is shown once")
	newKey := eval[string](b, `document.getElementById("new-key").value`)
	if !strings.HasPrefix(newKey, "mm_") {
		t.Fatalf("new key %q", newKey)
	}
	h.Must(t, n.URL, "GET", "/v1/topics", newKey, nil, 200)
	b.screenshot("keys")
	b.nav(n.URL + "/panel/keys")
	b.waitText(10*time.Second, "ci-key")
	if strings.Contains(b.html(), newKey) {
		t.Fatal("the key is shown again after a reload")
	}
	b.noSecretsInBrowser(newKey, c.AdminKey)
	keyID := eval[string](b, `[...document.querySelectorAll("tr.key")].find(r => r.innerText.includes("ci-key")).dataset.id`)
	b.submit(`form[action="/panel/keys/`+keyID+`/revoke"]`, nil)
	b.waitText(30*time.Second, "revoked")
	if ok, _ := h.PollUntil(10*time.Second, 50*time.Millisecond, func() bool {
		return h.Do(t, n.URL, "GET", "/v1/topics", newKey, nil).Status == 401
	}); !ok {
		t.Fatal("the revoked key still works")
	}

	// A webhook the SSRF guard disabled, re-enabled with a corrected URL.
	b.nav(n.URL + "/panel/webhooks")
	b.submit(`form[action="/panel/webhooks"]`, map[string]string{"topic": "orders", "url": rc.URLFor("hooks.example", "/old")})
	created := b.waitText(30*time.Second, "Copy its signing secret now")
	m := regexp.MustCompile(`Webhook (wh_[0-9a-f]+) created`).FindStringSubmatch(created)
	if m == nil || !strings.HasPrefix(eval[string](b, `document.getElementById("new-secret").value`), "whsec_") {
		t.Fatalf("the webhook's creation page shows no id or secret:\n%s", created)
	}
	wh := h.GetWebhook(t, n.URL, c.AdminKey, m[1])
	dns.Set("hooks.example", "169.254.169.254")
	rc.CloseClientConnections()
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"webhook": 1})
	if ok, _ := h.PollUntil(30*time.Second, 50*time.Millisecond, func() bool { return !h.GetWebhook(t, n.URL, c.AdminKey, wh.ID).Enabled }); !ok {
		t.Fatal("the webhook was not disabled by the guard")
	}
	b.nav(n.URL + "/panel/webhooks")
	b.waitText(10*time.Second, wh.ID, "disabled")
	b.screenshot("webhooks")
	b.nav(n.URL + "/panel/webhooks/" + wh.ID)
	b.waitText(10*time.Second, "Disabled because", "169.254.169.254", "Delivery attempts")
	if !eval[bool](b, `!!(document.getElementById("attempts") || document.getElementById("attempts-unavailable"))`) {
		t.Fatal("the webhook page shows neither the attempt history nor that it is unavailable")
	}
	b.screenshot("webhook")
	b.submit(`form[action="/panel/webhooks/`+wh.ID+`/enable"]`, map[string]string{"url": rc.URLFor("example.com", "/fixed")})
	b.waitText(30*time.Second, "Webhook re-enabled", "enabled", "/fixed")
	waitDeliveries(t, rc, "/fixed", 1, 30*time.Second)

	// Dead letters: inspect shows them once, then the warning; replay
	// delivers them again.
	rc.Answer("/dead", 500)
	dead := h.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("example.com", "/dead"), "")
	publishJSON(t, n, c.AdminKey, "orders", "", map[string]any{"letter": "dl-1"})
	if ok, _ := h.PollUntil(60*time.Second, 100*time.Millisecond, func() bool { return c.DLQRecords(t, "default", dead.ID) == 1 }); !ok {
		t.Fatal("no dead letter")
	}
	b.nav(n.URL + "/panel/webhooks/" + dead.ID + "/dlq")
	b.waitText(10*time.Second, "Inspection is one-shot")
	b.submit(`form[action="/panel/webhooks/`+dead.ID+`/dlq/inspect"]`, nil)
	b.waitText(30*time.Second, "dl-1", "Replay selected")
	b.screenshot("dlq")
	b.submit(`form[action="/panel/webhooks/`+dead.ID+`/dlq/inspect"]`, nil)
	b.waitText(30*time.Second, "This inspection returned no dead letters", "does not mean there are none")
	before := len(rc.Got("/dead"))
	rc.Answer("/dead", 200)
	b.run("replay all", chromedp.Click(chromedp.ID("replay-all")), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitText(30*time.Second, "will be published again into topic orders", "Every receiver of orders gets them again")
	b.screenshot("dlq-replay")
	b.submit(`#preview form`, nil)
	b.waitText(30*time.Second, "Replayed 1 message(s) into topic orders")
	got := waitDeliveries(t, rc, "/dead", before+1, 30*time.Second)
	if p := got[len(got)-1].Payload(t); !strings.Contains(fmt.Sprint(p["data"]), "dl-1") {
		t.Fatalf("replayed delivery %v", p)
	}

	// Delete: the webhook, then a topic (its name typed to confirm).
	b.nav(n.URL + "/panel/webhooks/" + dead.ID)
	b.submit(`form[action="/panel/webhooks/`+dead.ID+`/delete"]`, nil)
	b.waitText(30*time.Second, "Webhook "+dead.ID+" deleted.")
	h.Must(t, n.URL, "GET", "/v1/webhooks/"+dead.ID, c.AdminKey, nil, 404)
	b.nav(n.URL + "/panel/topics")
	b.submit(`form[action="/panel/topics"]`, map[string]string{"name": "scratch"})
	b.waitText(30*time.Second, "Topic scratch")
	b.submit(`form[action="/panel/topics/scratch/delete"]`, map[string]string{"confirm": "scratc"})
	b.waitText(10*time.Second, "Type the topic's name (scratch) to confirm")
	h.Must(t, n.URL, "GET", "/v1/topics/scratch", c.AdminKey, nil, 200)
	b.nav(n.URL + "/panel/topics/scratch")
	b.submit(`form[action="/panel/topics/scratch/delete"]`, map[string]string{"confirm": "scratch"})
	b.waitText(30*time.Second, "Topic scratch deleted.")
	h.Must(t, n.URL, "GET", "/v1/topics/scratch", c.AdminKey, nil, 404)

	// Audit log (or that it is unavailable on this build).
	b.nav(n.URL + "/panel/audit")
	b.waitText(10*time.Second, "Audit log")
	if !eval[bool](b, `!!(document.getElementById("audit") || document.getElementById("audit-unavailable"))`) {
		t.Fatal("the audit page shows neither events nor that the log is unavailable")
	}
	b.screenshot("audit")

	// A cross-site form POST (another origin, the session cookie present)
	// is refused and changes nothing.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/panel/topics"><input name="name" value="evil"></form><script>document.getElementById("f").submit()</script>`, n.URL)
	}))
	t.Cleanup(evil.Close)
	b.nav(evil.URL)
	b.waitText(30*time.Second, "Cross-site request refused")
	h.Must(t, n.URL, "GET", "/v1/topics/evil", c.AdminKey, nil, 404)

	// Logout: the page, and the old cookie no longer opens a page here.
	b.nav(n.URL + "/panel/")
	b.submit(`form[action="/panel/logout"]`, nil)
	b.waitText(10*time.Second, "Sign in to the panel")
	req, _ = http.NewRequest("GET", n.URL+"/panel/", nil)
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/panel/login" {
		t.Fatalf("a logged-out session: %d %s, want 303 to /panel/login", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// A consumer key's session offers no key or webhook management, and the
// API refuses it anyway.
func TestPanelConsumerKeySeesNoKeyManagement(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	k := h.Must(t, n.URL, "POST", "/v1/keys", c.AdminKey, map[string]any{"name": "c", "role": "consumer"}, 201).JSON(t)["key"].(string)
	jar := newJar(t)
	cl := &http.Client{Jar: jar}
	resp, err := cl.PostForm(n.URL+"/panel/login", map[string][]string{"key": {k}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Tenant default") {
		t.Fatalf("login: %d %.300s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), `href="/panel/keys"`) || strings.Contains(string(body), `href="/panel/webhooks"`) {
		t.Fatal("a consumer key's pages link to key or webhook management")
	}
	resp, err = cl.Get(n.URL + "/panel/keys")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), c.AdminKey) {
		t.Fatalf("/panel/keys with a consumer key: %d, want 403", resp.StatusCode)
	}

	// A suspended tenant: the overview says so with the operator's reason,
	// for the open session and for a new sign-in.
	h.Must(t, n.URL, "POST", "/v1/tenants/default/suspend", c.OperatorKey, map[string]any{"reason": "invoice 42 unpaid"}, 200)
	for _, get := range []func() (*http.Response, error){
		func() (*http.Response, error) { return cl.Get(n.URL + "/panel/") },
		func() (*http.Response, error) {
			return (&http.Client{Jar: newJar(t)}).PostForm(n.URL+"/panel/login", map[string][]string{"key": {c.AdminKey}})
		},
	} {
		resp, err := get()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "Suspended: invoice 42 unpaid") {
			t.Fatalf("overview of a suspended tenant: %d %.2000s", resp.StatusCode, body)
		}
	}
}

// Issue 13 item 4: /demo with no login shows events flowing in both panes
// (SSE and watch_topic) and publishes what the box says, all inside the
// demo tenant; demo.enabled=false turns it off.
func TestDemoInBrowser(t *testing.T) {
	h.NeedChromium(t)
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	b := newPanelPage(t)
	b.nav(n.URL + "/demo")
	b.waitText(30*time.Second, "MsgMesh live demo")
	count := func(id string) int {
		return eval[int](b, `document.querySelectorAll("#`+id+` li").length`)
	}
	if ok, _ := h.PollUntil(60*time.Second, 200*time.Millisecond, func() bool { return count("sse-pane") >= 3 && count("watch-pane") >= 3 }); !ok {
		t.Fatalf("the demo panes did not fill (sse %d, watch %d):\n%s", count("sse-pane"), count("watch-pane"), b.text())
	}
	b.run("publish", chromedp.SetValue(chromedp.CSS(`#demo-publish [name="text"]`), "hi-from-the-box"), chromedp.Click(chromedp.CSS(`#demo-publish button`)))
	if ok, _ := h.PollUntil(30*time.Second, 100*time.Millisecond, func() bool {
		return eval[bool](b, `document.getElementById("sse-pane").innerText.includes("hi-from-the-box") && document.getElementById("watch-pane").innerText.includes("hi-from-the-box")`)
	}); !ok {
		t.Fatalf("the published text is not in both panes:\n%s", b.text())
	}
	b.screenshot("demo")
	b.noSecretsInBrowser()
	// Everything stayed in the demo tenant: tenant default has no such topic.
	if r := h.Do(t, n.URL, "GET", "/v1/topics/live", c.AdminKey, nil); r.Status != 404 {
		t.Fatalf("tenant default sees the demo topic: %d", r.Status)
	}
	recs := c.ReadTopic(t, c.Prefix+".demo.live")
	found := false
	for _, r := range recs {
		found = found || strings.Contains(string(r.Value), "hi-from-the-box")
	}
	if !found {
		t.Fatalf("the box's message is not in the demo tenant's topic (%d records)", len(recs))
	}
	// The page's token may only subscribe to the demo topic.
	tok := h.Must(t, n.URL, "GET", "/demo/token", "", nil, 200).JSON(t)["token"].(string)
	if r := h.Do(t, n.URL, "POST", "/v1/topics/live/messages", tok, map[string]any{"data": 1}); r.Status != 403 {
		t.Fatalf("publish with the demo page's token: %d, want 403", r.Status)
	}

	off := c.Start(t, func(cfg *config.Config) { cfg.Demo.Enabled = false })
	h.Must(t, off.URL, "GET", "/demo", "", nil, 404)
}

func newJar(t *testing.T) *cookiejar.Jar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
