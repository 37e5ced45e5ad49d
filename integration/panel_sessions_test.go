package integration

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/services/panel"
)

// A panel session works on every node (its cookie is sealed under the
// shared keyring), and logging out on one node ends it on all of them: a
// kept copy of the cookie opens no page anywhere afterwards. The audit log
// says who logged out, without the session id.
func TestPanelLogoutEndsTheSessionOnEveryNode(t *testing.T) {
	c := h.NewCluster(t)
	a := c.Start(t, nil)
	b := c.Start(t, nil)
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	cl := &http.Client{Jar: newJar(t)}
	resp, err := cl.PostForm(a.URL+"/panel/login", url.Values{"key": {c.AdminKey}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "Tenant default") {
		t.Fatalf("login on A: %d %.300s", resp.StatusCode, page)
	}
	au, _ := url.Parse(a.URL)
	var cookie *http.Cookie
	for _, ck := range cl.Jar.Cookies(au) {
		if ck.Name == panel.CookieName {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie after login")
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the overview: %.2000s", page)
	}
	// openWith GETs base's overview with a copy of the session cookie.
	openWith := func(base string) (int, string) {
		req, _ := http.NewRequest("GET", base+"/panel/", nil)
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	if st, _ := openWith(b.URL); st != 200 {
		t.Fatalf("the session on node B before logout: %d, want 200", st)
	}

	// Log out on A.
	req, _ := http.NewRequest("POST", a.URL+"/panel/logout", strings.NewReader(url.Values{"csrf": {string(m[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	resp, err = (&http.Client{CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/panel/login" {
		t.Fatalf("logout on A: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if st, loc := openWith(a.URL); st != http.StatusSeeOther || loc != "/panel/login" {
		t.Fatalf("the kept cookie on A after logout: %d %s, want 303 to /panel/login", st, loc)
	}
	// B learns it from the control log.
	var st int
	var loc string
	ended, _ := h.PollUntil(10*time.Second, 50*time.Millisecond, func() bool {
		st, loc = openWith(b.URL)
		return st == http.StatusSeeOther && loc == "/panel/login"
	})
	if !ended {
		t.Fatalf("the kept cookie on B after logout on A: %d %s, want 303 to /panel/login", st, loc)
	}
	// A new login still works (on B).
	resp, err = (&http.Client{Jar: newJar(t)}).PostForm(b.URL+"/panel/login", url.Values{"key": {c.AdminKey}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a new login on B: %d", resp.StatusCode)
	}

	// The audit log (each node's memory window) records the logout.
	var audit h.Response
	found, _ := h.PollUntil(10*time.Second, 100*time.Millisecond, func() bool {
		audit = h.Do(t, b.URL, "GET", "/v1/audit?type=panel.session_ended", c.AdminKey, nil)
		return audit.Status == 200 && strings.Contains(string(audit.Body), `"panel.session_ended"`)
	})
	if !found {
		t.Fatalf("no panel.session_ended in B's audit log: %d %s", audit.Status, audit.Body)
	}
	if strings.Contains(string(audit.Body), "session_id") {
		t.Errorf("the audit log shows the session id: %s", audit.Body)
	}
	if !strings.Contains(string(audit.Body), `"key:`) {
		t.Errorf("the audit log does not name the key that logged out: %s", audit.Body)
	}
}
