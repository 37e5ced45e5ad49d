package panel

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/keyring"
)

func testKeyring(t *testing.T) *keyring.Keyring {
	t.Helper()
	k := make([]byte, keyring.KeySize)
	_, _ = rand.Read(k)
	kr, err := keyring.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// fakeAPI answers GET /v1/tenant for key "mm_good" only.
func fakeAPI(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer mm_good" {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":"invalid key","code":"invalid_key"}`))
			return
		}
		switch r.URL.Path {
		case "/v1/tenant":
			_, _ = w.Write([]byte(`{"id":"acme","plan":"free"}`))
		case "/v1/topics":
			_, _ = w.Write([]byte(`{"topics":[]}`))
		case "/v1/keys", "/v1/webhooks":
			_, _ = w.Write([]byte(`{"keys":[],"webhooks":[]}`))
		case "/v1/webhooks/wh_1", "/v1/webhooks/wh_2":
			_, _ = w.Write([]byte(`{"id":"` + strings.TrimPrefix(r.URL.Path, "/v1/webhooks/") + `","topic":"orders","url":"https://example.com/h","room":null,"enabled":true,"group":"g"}`))
		case "/v1/webhooks/wh_1/attempts":
			// The read model's shape (CONTRACT.md, wave 2).
			if r.URL.Query().Get("outcome") != "permanent" {
				t.Errorf("attempts query %q: want the page's outcome filter", r.URL.RawQuery)
			}
			_, _ = w.Write([]byte(`{"attempts":[{"webhook_id":"wh_1","cursor":"0-7","message_id":"m","attempt":3,"outcome":"permanent","status":410,"error":"gone <b>","duration_ms":12,"time":"2026-12-01T10:00:00Z"}],"next":"abc","source":"memory"}`))
		case "/v1/webhooks/wh_1/dead-letters/replay":
			b, _ := io.ReadAll(r.Body)
			if string(b) != `{"cursors":["0-1","0-2"]}` {
				t.Errorf("replay body %s", b)
			}
			_, _ = w.Write([]byte(`{"replayed":2,"cursors":["1-8","1-9"],"more":false}`))
		case "/v1/audit":
			_, _ = w.Write([]byte(`{"events":[{"id":"0-5","time":"2026-12-01T10:00:00Z","type":"key.created","actor":"key_1","summary":"key ci created","details":{"name":"ci"}}],"next":null,"source":"postgres"}`))
		default:
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error":"no route GET ` + r.URL.Path + `","code":"not_found"}`))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func newTestPanel(t *testing.T, kr Sealer, now func() time.Time, demo bool) (*Panel, *gin.Engine) {
	t.Helper()
	api := fakeAPI(t)
	p, err := New(Config{APIURL: api.URL, Sealer: kr, SessionTTL: time.Hour, Now: now,
		Demo: Demo{Demo: config.Demo{Enabled: demo, Tenant: "demo", MessagesPerSecond: 1}, Topic: "live",
			Key: func(context.Context) (string, error) { return "mm_demo", nil }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	p.Routes(e)
	return p, e
}

func login(t *testing.T, e *gin.Engine, key string) *http.Cookie {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/panel/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	e.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatal("no session cookie")
	return nil
}

func get(e *gin.Engine, path string, c *http.Cookie) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", path, nil)
	if c != nil {
		r.AddCookie(c)
	}
	e.ServeHTTP(w, r)
	return w
}

func TestSessionCookieSealedAndExpiring(t *testing.T) {
	kr := testKeyring(t)
	now := time.Now()
	clock := func() time.Time { return now }
	_, e := newTestPanel(t, kr, clock, false)
	c := login(t, e, "mm_good")
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.MaxAge != 3600 || c.Secure {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Max-Age 3600, not Secure over plain HTTP", c)
	}
	if strings.Contains(c.Value, "mm_good") || strings.Contains(c.Value, "acme") {
		t.Fatal("the cookie shows the key or tenant in plaintext")
	}
	if w := get(e, "/panel/", c); w.Code != 200 || !strings.Contains(w.Body.String(), "Tenant acme") {
		t.Fatalf("overview: %d", w.Code)
	}
	// Another panel with the same keyring (another node) opens it; one
	// with another keyring does not.
	_, e2 := newTestPanel(t, kr, clock, false)
	if w := get(e2, "/panel/", c); w.Code != 200 {
		t.Fatalf("same keyring, other panel: %d", w.Code)
	}
	_, e3 := newTestPanel(t, testKeyring(t), clock, false)
	if w := get(e3, "/panel/", c); w.Code != http.StatusSeeOther {
		t.Fatalf("other keyring: %d, want a redirect to login", w.Code)
	}
	// Tampered: refused.
	bad := *c
	bad.Value = c.Value[:len(c.Value)-2] + "AA"
	if w := get(e, "/panel/", &bad); w.Code != http.StatusSeeOther {
		t.Fatalf("tampered cookie: %d", w.Code)
	}
	// Expired: refused.
	now = now.Add(time.Hour + time.Second)
	if w := get(e, "/panel/", c); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/panel/login" {
		t.Fatalf("expired session: %d %s", w.Code, w.Header().Get("Location"))
	}
}

func TestBehindTLSTheCookieIsSecureHostPrefixed(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/panel/login", strings.NewReader("key=mm_good"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Forwarded-Proto", "https")
	e.ServeHTTP(w, r)
	cs := w.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != "__Host-msgmesh_panel" || !cs[0].Secure || cs[0].Path != "/" {
		t.Fatalf("cookies %+v", cs)
	}
}

func TestBadKeyIsNotLoggedIn(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/panel/login", strings.NewReader("key=mm_bad"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	e.ServeHTTP(w, r)
	if w.Code != 401 || len(w.Result().Cookies()) != 0 || strings.Contains(w.Body.String(), "mm_bad") {
		t.Fatalf("bad key: %d cookies %v (the page must not echo the key)", w.Code, w.Result().Cookies())
	}
}

func TestStateChangingFormsNeedCSRFAndSameOrigin(t *testing.T) {
	p, e := newTestPanel(t, testKeyring(t), nil, false)
	c := login(t, e, "mm_good")
	s, err := p.open(context.Background(), c.Value)
	if err != nil {
		t.Fatal(err)
	}
	post := func(form url.Values, hdr map[string]string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/panel/logout", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		r.AddCookie(c)
		e.ServeHTTP(w, r)
		return w.Code
	}
	if got := post(url.Values{}, nil); got != 403 {
		t.Fatalf("no token: %d", got)
	}
	if got := post(url.Values{"csrf": {"wrong"}}, nil); got != 403 {
		t.Fatalf("wrong token: %d", got)
	}
	if got := post(url.Values{"csrf": {s.CSRF}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); got != 403 {
		t.Fatalf("cross-site with the token: %d", got)
	}
	if got := post(url.Values{"csrf": {s.CSRF}}, map[string]string{"Origin": "https://evil.example"}); got != 403 {
		t.Fatalf("foreign Origin with the token: %d", got)
	}
	if got := post(url.Values{"csrf": {s.CSRF}}, map[string]string{"Sec-Fetch-Site": "same-origin"}); got != http.StatusSeeOther {
		t.Fatalf("logout: %d", got)
	}
	// Logged out: this node no longer takes that cookie.
	if w := get(e, "/panel/", c); w.Code != http.StatusSeeOther {
		t.Fatalf("after logout: %d", w.Code)
	}
}

func TestPagesSendSecurityHeaders(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	w := get(e, "/panel/login", nil)
	h := w.Header()
	if h.Get("Cache-Control") != "no-store" || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("headers %v", h)
	}
}

func TestDemoOff(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	w := get(e, "/demo", nil)
	var body map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != 404 || body["code"] != "not_found" {
		t.Fatalf("/demo with demo.enabled=false: %d %s", w.Code, w.Body)
	}
}

func TestDemoPublishLimits(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, true)
	send := func(text string, hdr map[string]string) int {
		b, _ := json.Marshal(map[string]string{"text": text})
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/demo/publish", strings.NewReader(string(b)))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		e.ServeHTTP(w, r)
		return w.Code
	}
	if got := send(strings.Repeat("x", demoMaxBytes+1), nil); got != 413 {
		t.Fatalf("too long: %d", got)
	}
	if got := send("hi", map[string]string{"Sec-Fetch-Site": "cross-site"}); got != 403 {
		t.Fatalf("cross-site: %d", got)
	}
	// The fake API refuses mm_demo (401): what matters is that after the
	// burst the limiter answers 429 before any call.
	codes := map[int]int{}
	for range demoBurst + 3 {
		codes[send("hi", nil)]++
	}
	if codes[429] < 3 {
		t.Fatalf("no 429 after the burst: %v", codes)
	}
}

func TestSignInAttemptsAreLimited(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	codes := map[int]int{}
	for range loginBurst + 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/panel/login", strings.NewReader("key=mm_bad"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		e.ServeHTTP(w, r)
		codes[w.Code]++
	}
	if codes[401] != loginBurst || codes[429] != 3 {
		t.Fatalf("answers %v: want %d refusals, then 429", codes, loginBurst)
	}
}

// The read model's shapes (attempts, audit) render; a build without the
// routes (404 not_found) says the history is unavailable.
func TestReadModelPages(t *testing.T) {
	_, e := newTestPanel(t, testKeyring(t), nil, false)
	c := login(t, e, "mm_good")
	w := get(e, "/panel/webhooks/wh_1?outcome=permanent", c)
	body := w.Body.String()
	for _, want := range []string{"0-7", "permanent", "410", "gone &lt;b&gt;", "12 ms", "Source: memory", "after=abc"} {
		if !strings.Contains(body, want) {
			t.Errorf("attempts page lacks %q", want)
		}
	}
	w = get(e, "/panel/webhooks/wh_2", c)
	if !strings.Contains(w.Body.String(), "Delivery-attempt history is unavailable") {
		t.Errorf("a webhook without the attempts route: %.500s", w.Body)
	}
	w = get(e, "/panel/audit", c)
	for _, want := range []string{"key.created", "key ci created", "key_1", `{&#34;name&#34;:&#34;ci&#34;}`, "Source: postgres"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("audit page lacks %q", want)
		}
	}
}

// Replaying selected dead letters previews how many go back and to whom,
// then replays exactly those cursors.
func TestReplaySelectedPreviewsThenReplays(t *testing.T) {
	p, e := newTestPanel(t, testKeyring(t), nil, false)
	c := login(t, e, "mm_good")
	s, _ := p.open(context.Background(), c.Value)
	post := func(form url.Values) string {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/panel/webhooks/wh_1/dlq/replay", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(c)
		e.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("replay %v: %d %s", form, w.Code, w.Body)
		}
		return w.Body.String()
	}
	body := post(url.Values{"csrf": {s.CSRF}, "cursor": {"0-1", "0-2"}})
	if !strings.Contains(body, "2 message(s) will be published again into topic orders") {
		t.Errorf("preview does not say how many: %.3000s", body)
	}
	if !strings.Contains(body, "Every receiver of orders gets them again") || !strings.Contains(body, `name="confirm" value="1"`) {
		t.Errorf("preview lacks the warning or the confirm step")
	}
	body = post(url.Values{"csrf": {s.CSRF}, "cursor": {"0-1", "0-2"}, "confirm": {"1"}})
	if !strings.Contains(body, "Replayed 2 message(s) into topic orders: new cursors 1-8, 1-9") {
		t.Errorf("replay result: %.3000s", body)
	}
}
