package panel

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Sealer seals and opens secrets under a key every node shares (the
// control log's key-encryption keyring): a session sealed on one node
// opens on any other.
type Sealer interface {
	Wrap(ctx context.Context, plaintext, aad []byte) (keyID string, ciphertext []byte, err error)
	Unwrap(ctx context.Context, keyID string, ciphertext, aad []byte) ([]byte, error)
}

// CookieName is the session cookie. Behind TLS it is the __Host- form
// (Secure, Path=/, no Domain).
const (
	CookieName       = "msgmesh_panel"
	secureCookieName = "__Host-msgmesh_panel"
)

// sessionAAD binds a sealed session to its purpose: a ciphertext sealed
// for anything else (a webhook secret, a signing seed) does not open here.
var sessionAAD = []byte("msgmesh panel session v1")

// session is what the sealed cookie holds. The key is only ever in there
// sealed (XChaCha20-Poly1305 under the shared keyring), never in a page,
// a URL or the browser's storage; the cookie is HttpOnly, so no script
// reads even the sealed form.
type session struct {
	ID       string `json:"sid"`
	Key      string `json:"key"`
	Tenant   string `json:"tenant"`
	CSRF     string `json:"csrf"`
	Expires  int64  `json:"exp"`
	Keys     bool   `json:"keys"`     // the key may manage keys (audit too)
	Webhooks bool   `json:"webhooks"` // the key may manage webhooks
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (p *Panel) seal(ctx context.Context, s session) (string, error) {
	pt, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	id, ct, err := p.cfg.Sealer.Wrap(ctx, pt, sessionAAD)
	if err != nil {
		return "", err
	}
	return id + "." + base64.RawURLEncoding.EncodeToString(ct), nil
}

var errNoSession = errors.New("no session")

func (p *Panel) open(ctx context.Context, v string) (session, error) {
	id, enc, ok := strings.Cut(v, ".")
	if !ok {
		return session{}, errNoSession
	}
	ct, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return session{}, errNoSession
	}
	pt, err := p.cfg.Sealer.Unwrap(ctx, id, ct, sessionAAD)
	if err != nil {
		return session{}, errNoSession
	}
	var s session
	if err := json.Unmarshal(pt, &s); err != nil || s.Key == "" {
		return session{}, errNoSession
	}
	if p.now().Unix() >= s.Expires {
		return session{}, errNoSession
	}
	if p.loggedOut.has(s.ID) || (p.cfg.Sessions != nil && p.cfg.Sessions.Ended(s.ID)) {
		return session{}, errNoSession
	}
	return s, nil
}

// secure reports whether the request came over TLS (directly or through
// a proxy that says so): the cookie is then Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func cookieName(r *http.Request) string {
	if secure(r) {
		return secureCookieName
	}
	return CookieName
}

func (p *Panel) setCookie(c *gin.Context, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: cookieName(c.Request), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure(c.Request), SameSite: http.SameSiteStrictMode,
	})
}

// current returns the request's session, or false.
func (p *Panel) current(c *gin.Context) (session, bool) {
	ck, err := c.Request.Cookie(cookieName(c.Request))
	if err != nil {
		return session{}, false
	}
	s, err := p.open(c.Request.Context(), ck.Value)
	return s, err == nil
}

// sameOrigin refuses a request another site made: Sec-Fetch-Site (every
// current browser sends it) must be same-origin or none (typed, bookmark);
// without it, an Origin header must name this host. A request with
// neither is not from a browser form and is let through (forms still need
// their CSRF token).
func sameOrigin(r *http.Request) bool {
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" {
		return sfs == "same-origin" || sfs == "none"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}

// checkCSRF: a state-changing request needs the session's CSRF token (form
// field csrf or header X-CSRF-Token) and must come from this origin.
func checkCSRF(c *gin.Context, s session) bool {
	if !sameOrigin(c.Request) {
		return false
	}
	tok := c.GetHeader("X-CSRF-Token")
	if tok == "" {
		tok = c.PostForm("csrf")
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.CSRF)) == 1
}

// logouts remembers the sessions logged out on this node until they
// expire (bounded): their cookie stops working here at once even if a
// copy of it was kept, and on the other nodes once they have read the
// control log's record of it (Config.Sessions). The browser's own copy is
// deleted by the answer.
type logouts struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxLogouts = 100000

func (l *logouts) add(id string, until time.Time, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]time.Time{}
	}
	if len(l.m) >= maxLogouts {
		for k, t := range l.m {
			if !t.After(now) {
				delete(l.m, k)
			}
		}
	}
	if len(l.m) < maxLogouts {
		l.m[id] = until
	}
}

func (l *logouts) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.m[id]
	return ok
}
